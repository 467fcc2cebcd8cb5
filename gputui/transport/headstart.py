"""This machine's probe, started as early as a command knows it needs one.

`gputui clean`, `wait` and `snapshot` are whole processes that scripts run between two benchmark
runs, so their start-up is part of the gap they exist to shorten. The probe's own start (an
interpreter, pynvml, NVML's init) is the longest part, and it needs nothing from the app: as soon as
the command line and the config say that this machine is a host, the CLI starts its probe here
(`begin`), then imports what it needs itself (asyncio, the model, the fleet) while the probe starts,
and the local transport takes that process instead of starting one (`take`). A probe nobody took
(the command failed before it got there) gets EOF on stdin, which ends it, at exit (`abandon`).

This module imports nothing heavy: it runs before the rest of the app is imported.
"""

from __future__ import annotations

import atexit
import importlib.util
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

# argv[1] of the probe's interpreter: names the process in `ps` (and another gputui's probe in ours).
from gputui.probe.peers import MARKER

# The probe of this very installation, from its modules (compiled once installed): nothing to send,
# decompress and compile first. `-S`: no site-packages processing (their .pth files cost tens of ms
# on hosts with big Python environments); the probe needs only the stdlib, its own package and
# pynvml, whose directories are put on sys.path by name, the package's root first, so a `gputui`
# directory where the operator happens to stand (sys.path[0] of `-c`) is never what runs as root.
LOCAL = "import sys;sys.path[0:1]=%r;del sys.argv[1];import gputui.probe.__main__"

_started: dict[tuple[str, ...], subprocess.Popen[bytes]] = {}


def _module_dir(name: str) -> str | None:
    """The sys.path entry `name` is imported from, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin)
    return str(origin.parent.parent if origin.name == "__init__.py" else origin.parent)


def probe_argv(spec: Any, interval: float | None = None) -> list[str]:
    """The probe's options for one host (a config.HostSpec)."""
    argv = ["--reader", spec.reader, "--name", spec.name]
    if spec.read_only:
        argv.append("--read-only")
    if interval is not None:
        argv += ["--interval", repr(float(interval))]
    if spec.reader == "sim":
        for option, value in (
            ("--sim-scenario", spec.sim_scenario),
            ("--sim-variant", spec.sim_variant),
            ("--sim-seed", spec.sim_seed),
            ("--sim-dir", spec.sim_dir),
        ):
            if value is not None:
                argv += [option, str(value)]
    return argv


def default_local_argv(read_only: bool, interval: float) -> list[str]:
    """The probe of this machine as a command names it without a config (`HostSpec(name="local")`,
    read-only for `wait`), for the guess made before the config module is imported (cli/entry.py).
    tests/cli/test_headstart.py holds it equal to `local_argv(probe_argv(HostSpec(...)))`."""
    args = ["--reader", "nvml", "--name", "local", *(["--read-only"] if read_only else [])]
    return local_argv(sys.executable, [*args, "--interval", repr(float(interval))])


def local_argv(python: str, args: Iterable[str]) -> list[str]:
    """The probe of this installation on `python` (the app's own), with the probe's options `args`."""
    paths = [p for p in (_module_dir("gputui"), _module_dir("pynvml")) if p is not None]
    return [python, "-S", "-c", LOCAL % list(dict.fromkeys(paths)), MARKER, *args]


def direct(python: str, sudo: bool, wrap: Sequence[str]) -> bool:
    """Whether this machine's probe can be this installation's: on the app's own interpreter, as the
    app's own user, outside any wrapper (anywhere else the bootstrap sends it, as over SSH)."""
    return python == sys.executable and not sudo and not wrap


def begin(argv: Sequence[str]) -> None:
    """Start the probe `argv` now, for a local link to `take` later. Best effort: a probe that cannot
    start here is started (and its failure explained) by the transport, as without a head start."""
    key = tuple(argv)
    if key in _started:
        return
    try:
        _started[key] = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # as the transport starts it: Ctrl-C in the terminal is not for it
        )
    except OSError:
        return
    if len(_started) == 1:
        atexit.register(abandon)


def keep_only(argv: Sequence[str] | None) -> None:
    """Tell every probe started ahead but `argv` to end now (EOF on its stdin), without waiting: a
    guess that started one the command turned out not to need (cli/entry.py). Each is reaped at exit."""
    for key, process in _started.items():
        if key != tuple(argv or ()) and process.stdin is not None and not process.stdin.closed:
            process.stdin.close()


def take(argv: Sequence[str]) -> subprocess.Popen[bytes] | None:
    """The probe started by `begin` with exactly `argv`, still running, now the caller's; else None."""
    process = _started.pop(tuple(argv), None)
    if process is not None and process.poll() is not None:
        _close(process)
        return None
    return process


def abandon() -> None:
    """End every probe started and not taken: EOF on its stdin ends it; it is reaped here."""
    while _started:
        _close(_started.popitem()[1])


def _close(process: subprocess.Popen[bytes]) -> None:
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
    try:
        process.wait(2.0)
    except subprocess.TimeoutExpired:
        process.kill()  # our own child, by its PID
        process.wait()
