"""The hub's tokens: a file of `NAME ROLE SHA256HEX` lines (docs/SERVE.md "Tokens").

Only the SHA-256 of each token is kept (the file can be read by the service's user without giving a
token away); a request's bearer token is hashed and compared with every digest in constant time
(hmac.compare_digest), each one, so the time taken says nothing of which came close. Roles: `viewer`
(the page, the API, the stream, /metrics) and `operator` (those, and actions where the hub allows them).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..config.userfile import FileRefused, read_regular
from ..model.textsafe import cut, printable

VIEWER, OPERATOR = "viewer", "operator"
ROLES = (VIEWER, OPERATOR)
TOKEN_BYTES = 32  # a new token's randomness: 256 bits, as URL-safe base64 (43 characters)
_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
MAX_FILE = 1 << 20  # bytes of a tokens file read: a file past that is not a list of tokens


class TokenError(ValueError):
    """A tokens file that cannot be used: one line says why (its path and line number)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who a token belongs to."""

    name: str
    role: str

    @property
    def operator(self) -> bool:
        return self.role == OPERATOR


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_line(name: str, role: str, token: str) -> str:
    """The line of the tokens file that lets `token` in as `name`, in `role`."""
    return f"{name} {role} {digest(token)}"


def check_name(name: str) -> str | None:
    """What is wrong with a token's name, in words; None when nothing."""
    if not _NAME.match(name):
        return f"{cut(name, 80)!r} is not a token name (letters, digits, . _ @ -; at most 64)"
    return None


class Tokens:
    """The holders by their token's digest."""

    def __init__(self, holders: dict[str, Holder]) -> None:
        self.holders = holders

    def __len__(self) -> int:
        return len(self.holders)

    def holder(self, token: str) -> Holder | None:
        """Whose `token` is; None when no one's. Every digest is compared, in constant time."""
        try:
            wanted = digest(token).encode("ascii")
        except UnicodeEncodeError:
            # A header's bytes that are no UTF-8 (aiohttp keeps them as surrogates): no token made
            # (`new_token`: URL-safe base64) or hashed into the file is one.
            return None
        found = None
        for known, holder in self.holders.items():
            if hmac.compare_digest(wanted, known.encode("ascii")):
                found = holder
        return found


def parse(text: str, where: str) -> Tokens:
    """The tokens of a file's text (`where`: its path, for the messages). Raises TokenError."""
    holders: dict[str, Holder] = {}
    names: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 3:
            raise TokenError(f"{where}:{number}: expected NAME ROLE SHA256HEX, got {len(words)} words")
        name, role, hexdigest = words
        problem = check_name(name)
        if problem is not None:
            raise TokenError(f"{where}:{number}: {problem}")
        if role not in ROLES:
            raise TokenError(f"{where}:{number}: role {cut(role, 40)!r} is not viewer or operator")
        hexdigest = hexdigest.lower()
        if not _DIGEST.match(hexdigest):
            raise TokenError(f"{where}:{number}: not a SHA-256 in hex (64 hex digits): the token's hash")
        if hexdigest in holders:
            raise TokenError(f"{where}:{number}: the same token as {holders[hexdigest].name}")
        if name in names:
            raise TokenError(f"{where}:{number}: {name} is named twice")
        holders[hexdigest] = Holder(name, role)
        names.add(name)
    if not holders:
        raise TokenError(f"{where}: no tokens in it (lines NAME ROLE SHA256HEX)")
    return Tokens(holders)


def load(path: Path) -> Tokens:
    """The tokens file at `path`. Raises TokenError (unreadable, too large, malformed)."""
    where = printable(str(path))
    try:
        data = read_regular(path, MAX_FILE)  # a FIFO is refused, never waited on
    except FileRefused as exc:
        if exc.kind == "size":
            raise TokenError(f"{where}: over {MAX_FILE} bytes: not a tokens file") from None
        raise TokenError(f"{where}: {exc.reason}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TokenError(f"{where}: not UTF-8 text") from exc
    return parse(text, where)
