"""The local transport: the probe as a child process.

On the app's own interpreter it is this installation's probe, started from its cached bytecode
(`python -c LOCAL gputui-probe ...`); with another interpreter, sudo or a wrapper, the same bootstrap
as over SSH sends it. No shell is involved: an argv list (`[sudo -n] [wrap...] python -c STAGE1`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import subprocess
import sys

from gputui.config.file import HostSpec
from gputui.transport import headstart
from gputui.transport.base import TransportError
from gputui.transport.bootstrap import Pipes, ProbeLink, boot_argv, build_payload
from gputui.transport.headstart import probe_argv


class _ProcessPipes(Pipes):
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        assert process.stdin and process.stdout and process.stderr
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._stderr = process.stderr

    async def read(self, size: int) -> bytes:
        return await self._stdout.read(size)

    async def read_err(self, size: int) -> bytes:
        return await self._stderr.read(size)

    async def write(self, data: bytes) -> None:
        self._stdin.write(data)
        await self._stdin.drain()

    def write_eof(self) -> None:
        if not self._stdin.is_closing():
            self._stdin.close()

    async def wait(self, timeout: float) -> int | None:
        try:
            return await asyncio.wait_for(asyncio.shield(self.process.wait()), timeout)
        except asyncio.TimeoutError:
            # asyncio's wait() also waits for the pipes to close, which a process that inherited
            # them can delay forever; the return code is set as soon as the probe itself is reaped.
            return self.process.returncode

    def abort(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()  # SIGKILL to this PID only; asyncio's child watcher reaps it

    def release(self) -> None:
        # A process that inherited the probe's pipes keeps them open, and asyncio then keeps the
        # transport (and our pipe ends) until it exits; Process has no public close.
        transport = getattr(self.process, "_transport", None)
        if transport is not None:
            transport.close()


class _PopenPipes(Pipes):
    """The pipes of a probe started before the event loop ran (transport/headstart.py)."""

    def __init__(
        self, process: subprocess.Popen[bytes], out: asyncio.StreamReader, err: asyncio.StreamReader
    ) -> None:
        self.process = process
        self._stdout = out
        self._stderr = err
        self._transports: list[asyncio.BaseTransport] = []
        self._stdin: asyncio.WriteTransport | None = None

    @classmethod
    async def adopt(cls, process: subprocess.Popen[bytes]) -> _PopenPipes:
        assert process.stdin and process.stdout and process.stderr
        loop = asyncio.get_running_loop()
        out, err = asyncio.StreamReader(), asyncio.StreamReader()
        pipes = cls(process, out, err)
        for reader, pipe in ((out, process.stdout), (err, process.stderr)):
            protocol = functools.partial(asyncio.StreamReaderProtocol, reader)
            transport, _ = await loop.connect_read_pipe(protocol, pipe)
            pipes._transports.append(transport)
        stdin, _ = await loop.connect_write_pipe(asyncio.Protocol, process.stdin)
        pipes._stdin = stdin
        pipes._transports.append(stdin)
        return pipes

    async def read(self, size: int) -> bytes:
        return await self._stdout.read(size)

    async def read_err(self, size: int) -> bytes:
        return await self._stderr.read(size)

    async def write(self, data: bytes) -> None:
        assert self._stdin is not None
        if self._stdin.is_closing():
            raise BrokenPipeError("the probe's stdin is closed")
        self._stdin.write(data)
        # A probe reads every line it is sent; the pipe's buffer is far larger than what we send.

    def write_eof(self) -> None:
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()

    async def wait(self, timeout: float) -> int | None:
        deadline = asyncio.get_running_loop().time() + timeout
        while self.process.poll() is None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        return self.process.returncode

    def abort(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()  # SIGKILL to this PID only; `wait` (or exit) reaps it

    def release(self) -> None:
        for transport in self._transports:
            transport.close()


class LocalLink(ProbeLink):
    """A probe on this machine.

    `python`: the interpreter (default: the spec's, else the app's own `sys.executable`).
    `payload`: the bootstrap payload to send instead of the installed probe's (tests)."""

    def __init__(
        self,
        spec: HostSpec | None = None,
        *,
        interval: float | None = None,
        python: str | None = None,
        payload: bytes | None = None,
        hello_timeout: float = 30.0,
        close_timeout: float = 2.0,
    ) -> None:
        self.spec = spec or HostSpec(name="local")
        self.python = python or self.spec.python or sys.executable
        self.label = self.spec.name
        # On the app's own interpreter, as the app's own user and outside any wrapper, the probe is
        # this installation's, started from its cached bytecode; anywhere else, the bootstrap sends
        # it, as over SSH (another python may lack gputui, or have another version of it).
        self.direct = payload is None and headstart.direct(self.python, self.spec.sudo, self.spec.wrap_argv())
        self._argv = probe_argv(self.spec, interval)
        if payload is None:
            payload = b"" if self.direct else build_payload(self._argv)
        super().__init__(payload, hello_timeout, close_timeout)
        self.pid: int | None = None

    def direct_argv(self) -> list[str] | None:
        """The probe's command line when it is this installation's (see `direct`), else None."""
        return headstart.local_argv(self.python, self._argv) if self.direct else None

    async def _start(self) -> Pipes:
        argv = self.direct_argv()
        if argv is not None:
            started = headstart.take(argv)
            if started is not None:  # the CLI started it while importing the rest (headstart.py)
                self.pid = started.pid
                return await _PopenPipes.adopt(started)
        else:
            argv = boot_argv(self.python, sudo=self.spec.sudo, wrap=self.spec.wrap_argv())
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                # Its own session: a signal meant for the terminal's foreground group (Ctrl-C
                # outside the TUI) does not reach the probe; it ends on EOF when the app goes.
                start_new_session=True,
            )
        except OSError as exc:
            raise self._spawn_error(argv[0], exc) from None
        self.pid = process.pid
        return _ProcessPipes(process)

    def _spawn_error(self, program: str, exc: OSError) -> TransportError:
        if program == self.python:
            return TransportError(
                "no-python",
                f"{self.label}: cannot run {self.python!r} ({exc.strerror or exc}); "
                "set python = '/path/to/python3' for this host",
            )
        return TransportError("probe-crashed", f"{self.label}: cannot run {program!r}: {exc.strerror or exc}")
