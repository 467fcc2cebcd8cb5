"""The agentless launcher: start the probe from a one-line `python3 -c STAGE1 gputui-probe`.

`python3 -` would read its program until EOF and leave no stdin for plans, so the interpreter is
started with STAGE1, a one-line program that reads BOOT from stdin (six digits of length, then BOOT)
and runs it. Only STAGE1 is on the command line, so `ps` and htop on a monitored host show a short
line that says what it is, not a 3 KB program. BOOT reads one length-prefixed payload from stdin (the
probe's modules, pynvml's source, the probe's argv), serves those modules from memory through a
meta-path finder, and calls `gputui.probe.main.main(argv)`. The same stdin then carries protocol lines
to the probe. Local and SSH links start the probe the same way; this module also holds what both
links share once it runs: splitting the byte stream into checked records and explaining an early exit.

Stdin, in order: `%06d` BOOT's length and BOOT; the line `gputui-boot 1 <n>` and then n bytes: one
JSON line (argv, entry module, optional modules) followed by a zlib-compressed JSON object {module
name: [is_package, source]}; then protocol lines. The module blob is cached: only the argv line
differs between hosts. Both stages read with os.read on fd 0, never past what is theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import re
import shlex
import zlib
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from gputui.probe import wire
from gputui.probe.peers import MARKER
from gputui.transport.base import TransportError

BOOT_FORMAT = 1
ENTRY = "gputui.probe.main"
EXIT_OLD_PYTHON = 96
EXIT_BAD_PAYLOAD = 97

# The program on the monitored host's command line. It reads exactly n bytes (os.read may return
# fewer) and parses under any Python from 2.6 on, so that BOOT can say an old one is too old. No
# quote, backslash, "!" or newline: it reads the same in every login shell's single quotes.
STAGE1 = (
    'import os;r=lambda n,b=b"":b if len(b)>=n else r(n,b+(os.read(0,n-len(b)) or os._exit(97)));'
    "exec(r(int(r(6))))  # gputui: the probe comes on stdin"
)

# Runs on the monitored host, so: Python 3.8 semantics, and parseable by any Python (even 2.7) so that
# an old interpreter says so instead of failing on syntax. It contains no quote ('), no backslash and
# no "!", so that `exec(<its repr>)` survives every login shell's single quotes (sh, bash, zsh, fish
# and csh) unchanged. It reads with os.read on fd 0 and never over-reads: whatever follows the payload
# is left for the probe's own reader of sys.stdin.
BOOT = """
import os, sys

def _gputui_boot():
    if sys.version_info < (3, 8):
        sys.stderr.write("gputui: the probe needs Python 3.8 or newer; %s is Python %s" % (
            sys.executable, sys.version.split()[0]) + chr(10))
        return 96
    import importlib.abc, importlib.util, json, traceback, zlib

    def fail(why):
        sys.stderr.write("gputui: bad bootstrap payload: " + why + chr(10))
        return 97

    def read_exact(count):
        chunks = []
        while count > 0:
            chunk = os.read(0, min(count, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    newline = chr(10).encode("ascii")
    header = b""
    while len(header) < 64 and not header.endswith(newline):
        byte = os.read(0, 1)
        if not byte:
            return fail("stdin ended in the header")
        header += byte
    fields = header.split()
    if len(fields) == 3 and fields[0] == b"gputui-boot" and fields[1] == b"@FORMAT@" and fields[2].isdigit():
        data = read_exact(int(fields[2]))
    else:
        return fail("unexpected header %r" % header[:64])
    if data is None:
        return fail("stdin ended in the payload")
    meta, blob = data.split(newline, 1)
    meta = json.loads(meta.decode("utf-8"))
    modules = json.loads(zlib.decompress(blob).decode("utf-8"))
    for name in meta["optional"]:
        # A module this host already has (pynvml matching its driver) wins over the shipped copy.
        try:
            present = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            present = False
        if present:
            for key in [k for k in modules if k.split(".")[0] == name]:
                del modules[key]

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name not in modules:
                return None
            spec = importlib.util.spec_from_loader(name, self, is_package=modules[name][0])
            spec.origin = self.filename(name)
            spec.has_location = True
            return spec

        def filename(self, name):
            tail = "/__init__.py" if modules[name][0] else ".py"
            return "<gputui-boot>/" + name.replace(".", "/") + tail

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            # The import system put the module in sys.modules before this runs (pynvml needs that).
            code = compile(modules[module.__name__][1], self.filename(module.__name__), "exec")
            exec(code, module.__dict__)

        def get_source(self, name):
            return modules[name][1]

    sys.meta_path.insert(0, Finder())
    sys.argv = [meta["marker"]] + meta["argv"]
    try:
        code = importlib.import_module(meta["entry"]).main(meta["argv"])
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()
        code = 1
    if code is not None and not isinstance(code, int):
        sys.stderr.write(str(code) + chr(10))
        code = 1
    return code or 0

_code = _gputui_boot()
for _stream in (sys.stdout, sys.stderr, sys.__stdout__):
    try:
        _stream.flush()
    except Exception:
        pass
# The probe reads stdin in a daemon thread; a normal interpreter exit could block on its lock.
os._exit(_code)
""".replace("@FORMAT@", str(BOOT_FORMAT))


def boot_argv(python: str, *, sudo: bool = False, wrap: Iterable[str] = ()) -> list[str]:
    """The command that starts the bootstrap: `[sudo -n] [wrap...] python -c STAGE1 gputui-probe`."""
    return [*(["sudo", "-n"] if sudo else []), *wrap, python, "-c", STAGE1, MARKER]


def boot_stdin() -> bytes:
    """What STAGE1 reads first: BOOT, after its length in six digits."""
    code = BOOT.encode("ascii")
    return b"%06d" % len(code) + code


def shell_command(argv: Iterable[str]) -> str:
    """argv as one command line for a remote shell; every word quoted, nothing interpreted."""
    return " ".join(shlex.quote(word) for word in argv)


# --------------------------------------------------------------------------- the payload


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cannot find the {package} package")
    return Path(next(iter(spec.submodule_search_locations)))


def probe_modules() -> dict[str, tuple[bool, str]]:
    """The installed probe's sources: `gputui` (its __init__ only) and everything under gputui/probe."""
    root = _package_dir("gputui")
    modules = {"gputui": (True, (root / "__init__.py").read_text(encoding="utf-8"))}
    probe_dir = root / "probe"
    for path in sorted(probe_dir.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules[name] = (is_package, path.read_text(encoding="utf-8"))
    return modules


def pynvml_source() -> str | None:
    """This machine's pynvml (nvidia-ml-py), to ship to hosts that have none; None if absent."""
    spec = importlib.util.find_spec("pynvml")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).read_text(encoding="utf-8")


@lru_cache(maxsize=8)
def _module_blob(with_pynvml: bool) -> tuple[bytes, tuple[str, ...]]:
    modules = probe_modules()
    optional: tuple[str, ...] = ()
    source = pynvml_source() if with_pynvml else None
    if source is not None:
        modules["pynvml"] = (False, source)
        optional = ("pynvml",)
    return zlib.compress(json.dumps(modules).encode("utf-8"), 6), optional


def build_payload(
    argv: list[str],
    *,
    with_pynvml: bool = True,
    modules: dict[str, tuple[bool, str]] | None = None,
    optional: Iterable[str] = (),
    entry: str = ENTRY,
) -> bytes:
    """The bytes to write to the bootstrap's stdin before any protocol line (BOOT first).

    By default the installed probe (and pynvml, used only where the host has none); tests pass their
    own `modules` (a fake probe) instead."""
    if modules is None:
        blob, optional = _module_blob(with_pynvml)
    else:
        blob = zlib.compress(json.dumps(modules).encode("utf-8"))
    meta = {"argv": list(argv), "entry": entry, "optional": list(optional), "marker": MARKER}
    body = json.dumps(meta).encode("utf-8") + b"\n" + blob
    return boot_stdin() + b"gputui-boot %d %d\n" % (BOOT_FORMAT, len(body)) + body


# --------------------------------------------------------------------------- the stream, once started


class RecordStream:
    """Probe records from a byte stream: splits lines, refuses over-long ones without buffering them
    whole, decodes and checks each with gputui.probe.wire. Never raises on what the probe sends."""

    CHUNK = 1 << 16

    def __init__(self, read: Callable[[int], Awaitable[bytes]]) -> None:
        self._read = read
        self._buffer = bytearray()
        self._pending: deque[dict[str, Any]] = deque()
        self._skipping = False  # inside an over-long line, dropping until its newline
        self.eof = False

    async def next_line(self) -> bytes | dict[str, Any] | None:
        """The next raw line, an error record for a dropped one, or None at the end."""
        while True:
            if self._pending:
                return self._pending.popleft()
            line = self._take_line()
            if line is not None:
                return line
            if self.eof:
                return self._take_rest()
            chunk = await self._read(self.CHUNK)
            if not chunk:
                self.eof = True
            else:
                self._buffer += chunk

    async def next_record(self) -> dict[str, Any] | None:
        while True:
            line = await self.next_line()
            if line is None or isinstance(line, dict):
                return line
            if not line.strip():
                continue
            record, problem = wire.decode(line, wire.PROBE_TYPES)
            return record if record is not None else problem

    def _take_line(self) -> bytes | None:
        end = self._buffer.find(b"\n")
        if self._skipping:
            if end < 0:
                self._buffer.clear()
                return None
            del self._buffer[: end + 1]
            self._skipping = False
            end = self._buffer.find(b"\n")
        if end < 0:
            if len(self._buffer) > wire.MAX_LINE:
                self._buffer.clear()
                self._skipping = True
                self._pending.append(_too_long())
            return None
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        if len(line) > wire.MAX_LINE:
            self._pending.append(_too_long())
            return None
        return line

    def _take_rest(self) -> bytes | None:
        if self._skipping or not self._buffer:
            return None
        line = bytes(self._buffer)
        self._buffer.clear()
        return line


def _too_long() -> dict[str, Any]:
    return wire.error("too-long", f"a probe line over {wire.MAX_LINE} bytes was dropped")


class StderrTail:
    """The last lines a probe wrote on stderr, for 'probe crashed' messages. Bounded."""

    def __init__(self, max_bytes: int = 16384) -> None:
        self._data = bytearray()
        self._max = max_bytes

    def feed(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > self._max:
            del self._data[: len(self._data) - self._max]

    async def drain(self, read: Callable[[int], Awaitable[bytes]]) -> None:
        """Read until EOF: a full, unread stderr pipe or channel would stall the probe."""
        while True:
            chunk = await read(4096)
            if not chunk:
                return
            self.feed(chunk)

    def lines(self) -> list[str]:
        text = self._data.decode("utf-8", "replace")
        return [line.strip() for line in text.splitlines() if line.strip()]

    def last(self) -> str:
        lines = self.lines()
        return lines[-1] if lines else ""


_NOT_FOUND = re.compile(r"not found|no such file or directory|cannot execute|permission denied", re.I)
_SUDO_PASSWORD = re.compile(r"sudo: .*(password is required|terminal is required|askpass)", re.I)


def explain_exit(
    host: str,
    python: str,
    status: int | None,
    stderr: StderrTail,
    junk: str | None = None,
) -> TransportError:
    """Why the probe ended before its hello, as a TransportError the UI can word."""
    last = stderr.last()
    text = "\n".join(stderr.lines()[-5:])
    if status == EXIT_OLD_PYTHON:
        return TransportError("no-python", f"{host}: {last or 'the probe needs Python 3.8 or newer'}")
    if _SUDO_PASSWORD.search(text):
        return TransportError(
            "auth-failed",
            f"{host}: sudo -n needs a password ({last}); allow it without one (NOPASSWD) or set sudo = false",
        )
    if status == 127 and text and python not in text:
        # The shell could not find sudo or the wrap command, not the interpreter.
        return TransportError("probe-crashed", f"{host}: cannot start the probe: {last}")
    if status == 127 or (status not in (0, None) and python in text and _NOT_FOUND.search(text)):
        return TransportError(
            "no-python",
            f"{host}: cannot run {python!r}"
            + (f" ({last})" if last else "")
            + "; install Python >= 3.8 there or set python = '/path/to/python3' for this host",
        )
    if status == EXIT_BAD_PAYLOAD and not last:
        last = "the bootstrap's input ended early (the link broke while starting)"
    detail = last or (f"unexpected output {junk!r}" if junk else "no output")
    code = "no exit status" if status is None else f"exit status {status}"
    return TransportError("probe-crashed", f"{host}: the probe ended before its hello ({code}): {detail}")


# --------------------------------------------------------------------------- a link over a started bootstrap

MAX_JUNK_LINES = 200  # lines before the hello that are not protocol (a chatty login shell), skipped


class Pipes:
    """What a transport gives ProbeLink once the bootstrap runs: the probe's three streams and a way
    to learn its exit status. Subclasses wrap an asyncio subprocess or an SSH channel."""

    async def read(self, size: int) -> bytes:
        raise NotImplementedError

    async def read_err(self, size: int) -> bytes:
        raise NotImplementedError

    async def write(self, data: bytes) -> None:
        raise NotImplementedError

    def write_eof(self) -> None:
        raise NotImplementedError

    async def wait(self, timeout: float) -> int | None:
        """The exit status once the probe ended within `timeout` seconds, else None."""
        raise NotImplementedError

    def abort(self) -> None:
        """End the probe at once (SIGKILL by PID, or closing the channel), without waiting: what
        `kill` does first, and all a link's close can still do once it is itself cancelled."""
        raise NotImplementedError

    async def kill(self) -> None:
        """End the probe now and wait (a little) until it is reaped."""
        self.abort()
        await self.wait(2.0)

    def release(self) -> None:
        """Close this side of the streams once the probe is gone."""


class ProbeLink:
    """The Link protocol (transport/base.py) over a probe started with BOOT.

    open() starts it (subclasses' `_start`), sends the payload and waits for the hello, which is then
    in `self.hello` (recv() returns the records after it). When the stream ends abnormally, recv()
    returns None and `self.failure` says why."""

    label = "probe"  # host name in messages
    python = "python3"

    def __init__(self, payload: bytes, hello_timeout: float = 30.0, close_timeout: float = 2.0) -> None:
        self._payload = payload
        self.hello_timeout = hello_timeout
        self.close_timeout = close_timeout
        self.hello: dict[str, Any] | None = None
        self.failure: TransportError | None = None
        self._pipes: Pipes | None = None
        self._stream: RecordStream | None = None
        self._stderr = StderrTail()
        self._stderr_task: asyncio.Task[None] | None = None
        self._closed = False

    async def _start(self) -> Pipes:
        raise NotImplementedError

    async def _release(self) -> None:
        """Free what _start acquired besides the probe (an SSH connection)."""

    @property
    def stderr_lines(self) -> list[str]:
        return self._stderr.lines()

    async def open(self) -> None:
        if self._pipes is not None or self._closed:
            raise RuntimeError("a link is opened once; make a new one to reconnect")
        try:
            self._pipes = await self._start()
            self._stream = RecordStream(self._pipes.read)
            self._stderr_task = asyncio.ensure_future(self._stderr.drain(self._pipes.read_err))
            try:
                self.hello = await asyncio.wait_for(self._boot(), self.hello_timeout)
            except asyncio.TimeoutError:
                raise TransportError(
                    "timeout", f"{self.label}: no hello from the probe within {self.hello_timeout:g} s"
                ) from None
        except BaseException:
            await self.close()
            raise

    async def _boot(self) -> dict[str, Any]:
        assert self._pipes is not None
        try:
            await self._pipes.write(self._payload)
        except (OSError, TransportError):
            pass  # it ended early (an old python): its exit status and stderr say why, next
        return await self._read_hello()

    async def _read_hello(self) -> dict[str, Any]:
        assert self._stream is not None
        junk: str | None = None
        for _ in range(MAX_JUNK_LINES):
            line = await self._stream.next_line()
            if line is None:
                raise await self._ended_early(junk)
            if isinstance(line, dict):
                continue
            record, _problem = wire.decode(line, wire.PROBE_TYPES)
            if record is not None and record["type"] == "hello":
                return record
            if line.strip():
                junk = line[:200].decode("utf-8", "replace")
        raise TransportError(
            "probe-crashed", f"{self.label}: no hello from the probe, only other output (last: {junk!r})"
        )

    async def _ended_early(self, junk: str | None) -> TransportError:
        status = await self._final_status()
        return explain_exit(self.label, self.python, status, self._stderr, junk)

    async def _final_status(self) -> int | None:
        assert self._pipes is not None
        status = await self._pipes.wait(self.close_timeout)
        if self._stderr_task is not None:
            # The last stderr line is the useful one: let it arrive.
            await asyncio.wait([self._stderr_task], timeout=self.close_timeout)
        return status

    async def recv(self) -> dict[str, Any] | None:
        if self._stream is None or self._closed:
            return None
        record = await self._stream.next_record()
        if record is None and not self._closed and self.failure is None:
            self.failure = await self._ended_late()
        return record

    async def _ended_late(self) -> TransportError:
        status = await self._final_status()
        last = self._stderr.last()
        if status == 0 and not last:
            return TransportError("closed", f"{self.label}: the probe exited")
        code = "no exit status" if status is None else f"exit status {status}"
        detail = last or "no output"
        return TransportError("probe-crashed", f"{self.label}: the probe ended ({code}): {detail}")

    async def send(self, message: dict[str, Any]) -> None:
        if self._pipes is None or self._closed:
            raise TransportError("closed", f"{self.label}: the link is closed")
        try:
            await self._pipes.write(wire.encode(message))
        except (OSError, TransportError) as exc:
            raise TransportError("closed", f"{self.label}: cannot send to the probe: {exc}") from None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        pipes = self._pipes
        try:
            if pipes is not None:
                await self._stop(pipes)
        except (Exception, asyncio.CancelledError):
            # Cancelled while asking nicely (the fleet stopping a host that floods it): the probe
            # must not outlive the link, nor our ends of its pipes the event loop. It is reaped
            # before the cancellation goes on (a SIGKILL takes milliseconds), even if cancelled again.
            if pipes is not None:
                pipes.abort()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await pipes.wait(1.0)
            raise
        finally:
            if pipes is not None:
                pipes.release()
            if self._stderr_task is not None:
                self._stderr_task.cancel()
                await asyncio.gather(self._stderr_task, return_exceptions=True)
            await self._release()

    async def _stop(self, pipes: Pipes) -> None:
        # Ask nicely (quit, then EOF), so a sim's processes and NVML are released; then force.
        try:
            await asyncio.wait_for(pipes.write(wire.encode({"type": "quit"})), self.close_timeout)
            pipes.write_eof()
        except (OSError, TransportError, asyncio.TimeoutError):
            pass
        except Exception:  # a transport's own "already closed" errors
            pass
        if await pipes.wait(self.close_timeout) is None:
            await pipes.kill()
