"""How a source runs the tool that knows its hosts (scontrol, sinfo, squeue, ansible-inventory) and
reads its answer, within bounds: an argv list, never a shell; at most TOOL_TIMEOUT seconds; at most
MAX_OUTPUT bytes of stdout (the tool, which gputui started, is killed past it) and the last MAX_ERROR
bytes of stderr; JSON no deeper than Python's parser takes. Each value a tool gives is checked here
before it becomes a host (`word`, `port`): the tool's text is untrusted, and shown escaped."""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..config.hostlist import MAX_WORD, word_problem
from ..model.textsafe import printable
from .base import InventoryError

TOOL_TIMEOUT = 30.0  # seconds for scontrol, sinfo, squeue or ansible-inventory to answer
MAX_OUTPUT = 64 << 20  # bytes of stdout: 100,000 hosts with their vars fit many times over
MAX_ERROR = 64 << 10  # the tail of stderr kept: its last line says why a tool failed
MAX_LABEL = 200  # characters of a spec as an error message quotes it
_CHUNK = 1 << 16
_PIPE_CHUNKS = 64  # reads of a pipe's rest once its tool has exited: 4 MiB, more than a pipe holds
_EXITED_TICK = 0.2  # seconds without output after which the tool is asked whether it has exited
_LONG_INT = 20  # digits: a JSON number longer than this stays text (Python refuses 4,300 and more)
_PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits only: '²' and '٢' are digits to str.isdigit
_LINE = re.compile(r"\S[^\n]*")  # a line that is not blank, found without splitting the whole text


def run_tool(
    argv: Sequence[str],
    where: str,
    *,
    install: str,
    env: Mapping[str, str] | None = None,
    timeout: float = TOOL_TIMEOUT,
    not_found: Sequence[str] = (),
    limit: int = MAX_OUTPUT,
) -> str:
    """The stdout of `argv`. InventoryError when the tool is absent (usage, 2), prints more than
    `limit` bytes (usage, 2: not an answer gputui takes), fails or does not answer within `timeout`
    (unavailable, 1: its last stderr line says why). `install`: what to install, for the message;
    `not_found`: words of the tool's error output (lower case) that mean the spec names nothing
    there (usage, 2: "not found")."""
    tool = argv[0]
    if shutil.which(tool, path=(env or os.environ).get("PATH")) is None:
        raise InventoryError(f"{where}: {tool} is not installed or not on PATH ({install})")
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
        )
    except OSError as exc:
        raise InventoryError(f"{where}: cannot run {tool}: {exc.strerror or exc}", unavailable=True) from None
    try:
        out, err, problem = _collect(proc, time.monotonic() + timeout, limit)
    finally:
        _end(proc)
    if problem == "timeout":
        raise InventoryError(f"{where}: {tool} did not answer within {timeout:g} s", unavailable=True)
    if problem == "limit":
        raise InventoryError(f"{where}: {tool} printed more than {_size(limit)}, more than gputui reads")
    if proc.returncode != 0:
        why = last_line(err) or last_line(out[-MAX_ERROR:]) or f"exit status {proc.returncode}"
        if any(words in why.lower() for words in not_found):
            raise InventoryError(f"{where}: {why}")
        raise InventoryError(f"{where}: {tool} failed: {why}", unavailable=True)
    return out.decode("utf-8", "replace")


def _collect(proc: subprocess.Popen[bytes], deadline: float, limit: int) -> tuple[bytes, bytes, str | None]:
    """stdout (up to `limit` bytes) and the tail of stderr, read until both end, or until the tool
    has exited and what it wrote is read (a child it left holding its pipes, such as a credential
    plugin's refresher or a wrapper's `logger &`, is not waited for); or what stopped it: "limit" or
    "timeout"."""
    read = _Read(limit)
    with selectors.DefaultSelector() as selector:
        for stream in (proc.stdout, proc.stderr):
            assert stream is not None  # both are pipes
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return b"", bytes(read.err), "timeout"
            ready = selector.select(min(left, _EXITED_TICK))
            for key, _ in ready:
                if not read.chunk(key.fd, key.fileobj is proc.stdout):
                    selector.unregister(key.fileobj)
            if read.over:
                return b"", bytes(read.err), "limit"
            if not ready and proc.poll() is not None:
                for key in list(selector.get_map().values()):
                    read.rest(key.fd, key.fileobj is proc.stdout)
                break
    if read.over:
        return b"", bytes(read.err), "limit"
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # its output closed, yet it does not exit
        return b"", bytes(read.err), "timeout"
    return b"".join(read.out), bytes(read.err), None


class _Read:
    """What a tool has written so far: stdout up to `limit` bytes (`over` past it), stderr's tail."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.out: list[bytes] = []
        self.size = 0
        self.err = bytearray()
        self.over = False

    def chunk(self, fd: int, is_out: bool) -> bool:
        """One read of `fd`; False at its end."""
        data = os.read(fd, _CHUNK)
        self._keep(data, is_out)
        return bool(data)

    def rest(self, fd: int, is_out: bool) -> None:
        """What is left in the pipe of a tool that has exited (a pipe holds at most 1 MiB), without
        waiting for more: a child that holds the pipe may write later, or never, or without end."""
        os.set_blocking(fd, False)
        for _ in range(_PIPE_CHUNKS):
            if self.over:
                return
            try:
                data = os.read(fd, _CHUNK)
            except BlockingIOError:
                return
            if not data:
                return
            self._keep(data, is_out)

    def _keep(self, data: bytes, is_out: bool) -> None:
        if not is_out:
            self.err += data
            del self.err[:-MAX_ERROR]
            return
        self.size += len(data)
        if self.size > self.limit:
            self.over = True
        else:
            self.out.append(data)


def _end(proc: subprocess.Popen[bytes]) -> None:
    """The tool gone and reaped: killed (by its handle: only the process gputui started) if it has
    not exited; the pipes closed, so that a child it left holding them cannot keep us reading."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit:,} bytes"


def last_line(data: bytes) -> str:
    """The last non-empty line of a tool's output, escaped, at most 300 characters."""
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return shown(lines[-1].strip(), 300, quote=False) if lines else ""


def lines(text: str) -> Iterator[str]:
    """The lines of `text` that are not blank, stripped, one at a time: a tool's answer of millions
    of lines is never a list of millions of strings."""
    for match in _LINE.finditer(text):
        yield match.group().rstrip()


def parse_json(text: str, where: str, tool: str) -> Any:
    """A tool's JSON answer. A number too long for an int stays text (a value checked later refuses
    it); JSON nested deeper than Python's parser takes (about 1,000) is refused (usage, 2); text
    that is no JSON is a tool that could not answer (unavailable, 1)."""
    try:
        return json.loads(text, parse_int=_int)
    except RecursionError:
        raise InventoryError(f"{where}: {tool} printed JSON nested too deeply to read") from None
    except ValueError:
        why = last_line(text[-MAX_ERROR:].encode())
        said = f" ({why})" if why else ""
        raise InventoryError(f"{where}: {tool} did not print JSON{said}", unavailable=True) from None


def _int(text: str) -> int | str:
    return int(text) if len(text) <= _LONG_INT else text


def label(spec: str) -> str:
    """The spec a message names its source by (the user's own text): escaped, cut if long."""
    return shown(spec, MAX_LABEL, quote=False)


def shown(value: str, most: int = 60, quote: bool = True) -> str:
    """Untrusted text for a message: escaped, cut to `most` characters (saying how long it was)."""
    cut = printable(value[:most])
    more = f"… ({len(value):,} characters)" if len(value) > most else ""
    return f"'{cut}'{more}" if quote else f"{cut}{more}"


def described(value: object) -> str:
    """A JSON value for a message: a scalar shown, an array or object named (never turned into text:
    one nested hundreds deep would be as deep again in str())."""
    if isinstance(value, list | dict):
        return f"(a JSON {'array' if isinstance(value, list) else 'object'})"
    return shown(str(value))


def word(value: object, what: str, where: str) -> str:
    """A host name, address or user from a tool: text of at most MAX_WORD characters that reads as
    one word (gputui.config.hostlist.word_problem: the rule every source's names follow)."""
    if not isinstance(value, str):
        raise InventoryError(f"{where}: {what} {described(value)} is not text")
    if len(value) > MAX_WORD:
        raise InventoryError(f"{where}: {what} {shown(value)} is longer than {MAX_WORD} characters")
    problem = word_problem(value)
    if problem:
        raise InventoryError(f"{where}: {what} {shown(value)} {problem}")
    return value


def port(value: object, what: str, where: str) -> int:
    """A port from a tool: an int, or text of ASCII digits, from 1 to 65535."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _PORT.fullmatch(value.strip()):
        number = int(value.strip())
    else:
        raise InventoryError(f"{where}: {what} {described(value)} is not a port number")
    if not 1 <= number <= 65535:
        raise InventoryError(f"{where}: {what} {number} is not from 1 to 65535")
    return number
