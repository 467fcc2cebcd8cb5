"""The filter language of the fleet and process tables: `user:alice state:idle-held`,
`host:gpu0* -group:rack3 mem>40G`. Pure: a parser and a matcher, no UI.

    query  = term { " " term }          every term must match (AND)
    term   = [ "-" ] ( field ":" value  |  field op amount  |  word )
    op     = ">" | ">=" | "<" | "<=" | "="
    word   = any other text: a piece of a host or GPU name, a command, a user, a PID, a container
             or a job id (what the filter box searched before the language)

A leading `-` negates a term. A name may be a list, any of which matches (`user:alice,bob`,
`pid:4121,4122`, `gpu:2,3`); `gpu:` takes the GPU SPECs `clean` and `wait` take (an index,
HOST:INDEX, HOST:all, a UUID or a prefix of one), so the command line's filters (--user, --pid,
--gpu, --compute) are this language too (gputui/cli/options.py). Values are case-insensitive; `*` and `?` are wildcards (`host:gpu0*`),
and a value without them is the whole value (`host:gpu017`, `user:alice`) for names and a piece of
it (`model:H200`, `cmd:train`) for longer texts. Double quotes keep spaces and the characters above
in one value or word (`cmd:"--model llama"`, `"http://x:8000"`). The fields and what they compare
are FIELDS; the states STATES. docs/FLEET_VIEW.md has the grammar and examples.

What a table row is, the caller says as a `Subject` (gputui/views/problems.py builds them from a GPU row,
a process, a group): a GPU matches `user:alice` when one of its processes is alice's, `mem>40G`
when 40 GiB of it are used; a process, when it is alice's, or holds more than 40 GiB. A value the
row does not have (no temperature from the driver) matches no comparison, and so every negated one.

Errors are `FilterError`: one sentence for the filter box, with what was expected and, for a
misspelt field or state, the closest name.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..model import KINDS

# The states a `state:` term may name (and the words the tables use for them).
STATES: dict[str, str] = {
    "live": "the host's probe sends samples",
    "down": "the host is down (its last sample, dimmed)",
    "stale": "the host's samples stopped coming (its last one, dimmed)",
    "connecting": "the host is connecting (for the first time: one that went down is down while it tries again)",
    "no-gpu": "no NVIDIA driver or GPU on the host",
    "free": "nothing holds the GPU, its memory is back at idle, and it has no error or ECC trouble",
    "busy": "a process uses or holds the GPU",
    "problem": "any of the problems below (what the fleet table shows first)",
    "healthy": "none of them",
    "ghost": "memory NVML lists for a dead PID",
    "orphaned": "memory nothing holds (only a reset frees it)",
    "outside": "memory of another container or the host (seen from inside a container)",
    "unaccounted": "memory no listed process holds (ghost, orphaned, outside, hidden, unknown)",
    "idle-held": "an idle holder: memory held at 0 % SM for the idle minutes",
    "throttle": "clocks held down: thermal, hardware slowdown, power brake",
    "ecc": "uncorrected ECC errors, a row remap pending or failed, a page retirement pending",
    "mismatch": "a GPU that differs from its siblings (model, memory, settings), a host whose driver "
    "differs from its group",
    "error": "the GPU reports an error",
}
STATE_ALIASES = {"idle": "idle-held", "idle-holder": "idle-held", "throttling": "throttle", "up": "live"}
# Fields: how each is written and what it compares (the help and the errors say it).
FIELDS: dict[str, str] = {
    "host": "host name: host:gpu017, host:gpu0*",
    "group": "host group (the config's [groups], else the name without its number): group:rack3",
    "user": "a process's user, a name or a uid: user:alice, user:alice,bob (either), user:1000",
    "state": "a state of the host, GPU or process: state:idle-held (see STATES)",
    "kind": "a process kind: kind:ghost (user, ghost, hidden, monitor, zombie)",
    "gpu": "a GPU as clean --gpu takes it: gpu:3, gpu:2,3, gpu:gpu017:3, gpu:gpu017:all, gpu:GPU-5a1b (a UUID)",
    "model": "the GPU's name: model:H200",
    "cmd": "a piece of a command line: cmd:train.py",
    "pid": "a process ID: pid:4121",
    "job": "a job id (its root's PID): job:4100",
    "container": "a process's container: container:lxc/129",
    "mem": "GPU memory used (a GPU) or held (a process), GiB unless a unit says: mem>40G, mem<=512M, mem>90%",
    "util": "utilization in percent (a GPU's, a process's SM): util<5",
    "temp": "temperature in °C: temp>80",
    "idle": "how long at 0 % SM (s, m, h; a bare number is minutes): idle>30m",
}
FIELD_ALIASES = {"command": "cmd", "name": "model", "hosts": "host", "users": "user", "memory": "mem"}
NUMERIC = ("mem", "util", "temp", "idle")
# uid_t's (uid_t)-1 means "no user" (setreuid's "unchanged"): every uid is below it.
NO_UID = 2**32 - 1
EXACT = ("host", "group", "user", "job")  # a name: the whole of it, unless it has wildcards
PIECE = ("model", "cmd", "container")  # a longer text: a piece of it, unless it has wildcards
# Fields whose value may be a list, any of which matches (`user:alice,bob`): names, which hold no
# comma; not the longer texts, where a comma is part of the text (`cmd:--gpus=0,1`).
LISTED = ("host", "group", "user", "job", "state", "kind", "gpu", "pid")
OPS = (">=", "<=", ">", "<", "=")
# What a table's title says beside a filter that matches none of its rows (not an empty table alone).
NOTHING_MATCHES = "nothing matches"
MAX_QUERY = 1000  # characters: a filter is typed, not pasted from a file
_TERM = re.compile(r"([A-Za-z][A-Za-z_-]*)(>=|<=|>|<|=|:)(.*)", re.DOTALL)
_AMOUNT = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z%°]*)")
_SIZES = {"": 1 << 30, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SPANS = {"": 60.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class FilterError(ValueError):
    """A filter that cannot be read: `message` says what to fix; `at` is where (a character offset)."""

    def __init__(self, message: str, at: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.at = at


@dataclass(frozen=True, slots=True)
class Subject:
    """What one table row is, for the matcher. Texts are as shown (the matcher folds case)."""

    host: str = ""
    group: str = ""
    states: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    uids: frozenset[int] = frozenset()  # the users' uids: `user:1000` matches them as well as a name
    kinds: frozenset[str] = frozenset()
    gpus: frozenset[int] = frozenset()
    uuids: frozenset[str] = frozenset()  # the UUIDs of those GPUs
    models: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    pids: frozenset[int] = frozenset()
    jobs: frozenset[str] = frozenset()
    containers: tuple[str, ...] = ()
    memory: int | None = None  # bytes used (a GPU) or held (a process)
    memory_total: int | None = None  # what `mem>90%` is a share of
    util: float | None = None
    temp: float | None = None
    idle: float | None = None  # seconds at 0 % SM (the longest idle holder of a GPU)
    words: tuple[str, ...] = ()  # more texts a bare word searches (a process's name)


@dataclass(frozen=True, slots=True)
class Term:
    """One term: a field and how to compare it, or a bare word (`field` None)."""

    field: str | None
    op: str
    value: str  # as written (the words of a bare term, a state's canonical name)
    negated: bool = False
    number: float | None = None  # a comparison's amount, in bytes, percent, °C or seconds
    percent: bool = False  # `mem>90%`: a share of the total
    test: Callable[[Subject], bool] = dataclasses.field(default=lambda s: True, compare=False, repr=False)

    def matches(self, subject: Subject) -> bool:
        return self.test(subject) != self.negated


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed filter: every term must match. The empty query matches everything."""

    text: str
    terms: tuple[Term, ...] = ()

    def matches(self, subject: Subject) -> bool:
        return all(t.matches(subject) for t in self.terms)

    def __bool__(self) -> bool:
        return bool(self.terms)

    def fields(self) -> frozenset[str]:
        """The fields it uses ("" for bare words)."""
        return frozenset(t.field or "" for t in self.terms)


EVERYTHING = Query("")


def parse(text: str) -> Query:
    """`text` as a Query; raises FilterError (a message for the filter box) when it cannot be read."""
    if len(text) > MAX_QUERY:
        raise FilterError(f"a filter of at most {MAX_QUERY} characters, please", MAX_QUERY)
    return Query(text, tuple(_term(raw, at) for raw, at in _split(text)))


def _split(text: str) -> list[tuple[str, int]]:
    """The terms of `text`, split at spaces outside double quotes, quotes removed, with offsets."""
    out: list[tuple[str, int]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        start, chars, quoted = i, [], False
        while i < n and (quoted or not text[i].isspace()):
            if text[i] == '"':
                quoted = not quoted
                chars.append("\x00")  # a quote: what follows is a value or a word, not an operator
            else:
                chars.append(text[i])
            i += 1
        if quoted:
            raise FilterError(f'the quote at character {start + 1} is never closed: add a closing "', start)
        out.append(("".join(chars), start))
    return out


def _term(raw: str, at: int) -> Term:
    negated = raw.startswith("-")
    body = raw[1:] if negated else raw
    match = _TERM.fullmatch(body)
    if match is None:  # a bare word (quoted text included)
        word = body.replace("\x00", "")
        if not word:
            raise FilterError("an empty word: write something after the -", at)
        folded = word.casefold()
        return Term(None, "", word, negated, test=lambda s: _has_word(s, folded))
    name, op, value = match.group(1).casefold(), match.group(2), match.group(3).replace("\x00", "")
    name = FIELD_ALIASES.get(name, name)
    if name not in FIELDS:
        close = difflib.get_close_matches(name, list(FIELDS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}{op}? " if close else ""
        raise FilterError(
            f"unknown field {match.group(1)!r}: {hint}fields are {', '.join(FIELDS)} "
            f'(to search for the text itself, quote it: "{body.replace(chr(0), "")}")',
            at,
        )
    if not value:
        raise FilterError(f"{name}{op} needs a value: {FIELDS[name].split(': ', 1)[-1]}", at)
    if name in NUMERIC:
        return _comparison(name, op, value, negated, at)
    if op != ":":
        raise FilterError(f"{name} is compared with ':' ({FIELDS[name].split(': ', 1)[-1]}), not {op!r}", at)
    return _match(name, value, negated, at)


def _match(name: str, value: str, negated: bool, at: int) -> Term:
    if name not in LISTED:
        return Term(name, ":", value, negated, test=_one(name, value, at))
    # A list of names: any of them (`user:alice,bob`, `gpu:2,3`).
    tests = []
    for item in value.split(","):
        if not item:
            raise FilterError(f"an empty name in {name}:{value}: write {name}:a,b", at)
        tests.append(_one(name, item, at))
    if len(tests) == 1:
        return Term(name, ":", _canonical(name, value), negated, test=tests[0])
    return Term(name, ":", value, negated, test=lambda s: any(t(s) for t in tests))


def _canonical(name: str, value: str) -> str:
    """How a single value is kept: a state by its canonical name, a kind folded."""
    folded = value.casefold()
    if name == "state":
        return STATE_ALIASES.get(folded, folded)
    return folded if name in ("kind", "gpu", "pid") else value


def _one(name: str, value: str, at: int) -> Callable[[Subject], bool]:
    """The test of one value of field `name`."""
    folded = value.casefold()
    if name == "state":
        state = STATE_ALIASES.get(folded, folded)
        if state not in STATES:
            close = difflib.get_close_matches(state, [*STATES, *STATE_ALIASES], n=1, cutoff=0.6)
            hint = f"did you mean state:{STATE_ALIASES.get(close[0], close[0])}? " if close else ""
            raise FilterError(f"unknown state {value!r}: {hint}states are {', '.join(STATES)}", at)
        return lambda s: state in s.states
    if name == "kind":
        if folded not in KINDS:
            raise FilterError(f"unknown kind {value!r}: kinds are {', '.join(KINDS)}", at)
        return lambda s: folded in s.kinds
    if name == "gpu":
        return _gpu(value, at)
    if name == "user":
        return _user(value, at)
    if name == "pid":
        number = _number(folded)
        if number is None:
            raise FilterError(f"pid:{value} is no PID: pid:4121", at)
        return lambda s: number in s.pids
    wild = any(c in value for c in "*?[")
    if name in EXACT:
        texts: Callable[[Subject], tuple[str, ...] | frozenset[str]] = {
            "host": lambda s: (s.host,),
            "group": lambda s: (s.group,),
            "job": lambda s: s.jobs,
        }[name]
        return lambda s: any(_named(t, folded, wild) for t in texts(s))
    pieces: Callable[[Subject], tuple[str, ...]] = {
        "model": lambda s: s.models,
        "cmd": lambda s: s.commands,
        "container": lambda s: s.containers,
    }[name]
    if wild:
        return lambda s: any(_glob(t, folded) for t in pieces(s))
    return lambda s: any(folded in t.casefold() for t in pieces(s))


def _user(value: str, at: int) -> Callable[[Subject], bool]:
    """A user name (the whole name, or a wildcard pattern), or a uid: a number, which matches that
    uid and the name a uid without a passwd entry is shown by (its number)."""
    folded = value.casefold()
    if folded.startswith("-"):  # POSIX names never start with one; `user:-1` is no uid either
        raise FilterError(f"user:{value} is no user name or uid: user:alice, user:1000", at)
    if folded.isascii() and folded.isdigit():
        uid = int(folded) if len(folded) <= len(str(NO_UID)) else NO_UID
        if uid >= NO_UID:
            raise FilterError(f"user:{value[:20]} is no uid: a uid is below {NO_UID}", at)
        return lambda s: uid in s.uids or folded in s.users
    wild = any(c in value for c in "*?[")
    return lambda s: any(_named(t, folded, wild) for t in s.users)


def _number(text: str) -> int | None:
    """An index or a PID: ASCII digits, at most 9 of them."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def _gpu(value: str, at: int) -> Callable[[Subject], bool]:
    """One GPU SPEC, as `clean --gpu` reads it (gputui/cli/gpuspec.py): an index, `all`, a GPU UUID
    or a prefix of one, HOST:INDEX or HOST:all (the host as `host:` matches it)."""
    folded = value.casefold()
    if folded.startswith(("gpu-", "mig-")) and ":" not in folded:
        return lambda s: any(u.casefold().startswith(folded) for u in s.uuids)
    host, sep, index = folded.rpartition(":")
    number = _number(index)
    if (sep and not host) or (index != "all" and number is None):
        raise FilterError(
            f"gpu:{value} is no GPU index, HOST:INDEX, HOST:all or UUID (gpu:3, gpu:gpu017:3, gpu:GPU-5a1b)",
            at,
        )

    def on(s: Subject) -> bool:
        return bool(s.gpus) if number is None else number in s.gpus

    if not sep:
        return on
    wild = any(c in host for c in "*?[")
    return lambda s: _named(s.host, host, wild) and on(s)


def exact_value(name: str) -> str:
    """`name` as a value that matches it whole and no other (a user picked from a list): `*`, `?`
    and `[` written as sets (`[*]`, fnmatch's escape), in double quotes where it has a space. A
    double quote cannot be written: it is `?`, which matches it (and any other one character)."""
    value = "".join(f"[{c}]" if c in "*?[" else c for c in name).replace('"', "?")
    return f'"{value}"' if any(c.isspace() for c in name) else value


def _named(text: str, folded: str, wild: bool) -> bool:
    """A name against a folded value: the whole of it, or as a wildcard pattern."""
    return _glob(text, folded) if wild else text.casefold() == folded


def _comparison(name: str, op: str, value: str, negated: bool, at: int) -> Term:
    if op == ":":
        raise FilterError(f"{name} compares: {FIELDS[name].split(': ', 1)[-1]}", at)
    amount = _AMOUNT.fullmatch(value.strip())
    if amount is None:
        raise FilterError(f"{name}{op}{value}: not an amount ({FIELDS[name].split(': ', 1)[-1]})", at)
    number, unit = float(amount.group(1)), amount.group(2).casefold()
    percent = False
    if name == "mem":
        if unit == "%":
            percent = True
        else:
            prefix = (
                unit
                if unit == "b"
                else unit.removesuffix("ib")
                if unit.endswith("ib")
                else unit.removesuffix("b")
            )
            scale = _SIZES.get(prefix)
            if scale is None:
                raise FilterError(f"{name}{op}{value}: a size is 40G, 40GiB, 512M, 1.5T or 90%", at)
            number *= scale
    elif name == "idle":
        scale_s = _SPANS.get(unit[:1] if unit in ("s", "m", "h", "d", "min", "sec") else unit)
        if scale_s is None:
            raise FilterError(f"{name}{op}{value}: a time is 30s, 10m, 2h or 1d (a bare number: minutes)", at)
        number *= scale_s
    elif unit not in ("", "%", "c", "°c", "°"):
        raise FilterError(f"{name}{op}{value}: a plain number ({FIELDS[name].split(': ', 1)[-1]})", at)
    compare = _COMPARE[op]

    def test(s: Subject) -> bool:
        if name == "mem":
            if s.memory is None:
                return False
            if percent:
                return bool(s.memory_total) and compare(100.0 * s.memory / (s.memory_total or 1), number)
            return compare(float(s.memory), number)
        got = {"util": s.util, "temp": s.temp, "idle": s.idle}[name]
        return got is not None and compare(float(got), number)

    return Term(name, op, value, negated, number, percent, test)


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "=": lambda a, b: a == b,
}


def _glob(text: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(text.casefold(), pattern)


def _has_word(s: Subject, folded: str) -> bool:
    """A bare word: a piece of the host, group, a GPU's name, a command, a user, a container, a
    word of the row's own; or exactly one of its PIDs, GPU indexes or job ids."""
    texts = (s.host, *s.models, *s.commands, *s.users, *s.containers, *s.words)
    if any(folded in t.casefold() for t in texts):
        return True
    if folded.isdigit():
        return any(folded in str(p) for p in s.pids) or folded in s.jobs
    return folded in (j.casefold() for j in s.jobs)


def help_lines() -> list[tuple[str, str]]:
    """(how to write it, what it matches): the help screen's lines for the filter language."""
    lines = [
        ("word", "a piece of a host, GPU name, command, user, PID or container (as before)"),
        ("a b", "both (terms are ANDed); -term: not"),
    ]
    lines += [(f"{name}:" if name not in NUMERIC else f"{name}>", words) for name, words in FIELDS.items()]
    lines.append(("state:", ", ".join(STATES)))
    return lines
