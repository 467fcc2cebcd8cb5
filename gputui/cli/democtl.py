"""The live demo's control side: its private directory (lock, state, who used it last), starting
the daemon (gputui/cli/demod.py) or attaching to the one running, stopping it, and `gputui demo`
(start, stop, status). Every `--demo` command comes through here (gputui/cli/demo.py demo_hosts).


    gputui demo start [--name NAME] [--idle-timeout S] [--refill-after S] [--bench-run S] [--bench-gap S]
    gputui demo stop [--name NAME]
    gputui demo status [--name NAME] [--json]

A daemon (gputui/cli/demod.py, `daemon_main`) runs the two demo hosts' sims (gputui/cli/demo.py
DEMO_HOSTS): it owns their sessions and jobs, and every `--demo` command's probes attach to their
directories (the sim reader's attach mode), so what `clean` does is what the next `snapshot` or
`wait` sees.

Which demo: each has a name, so that two people working as one Unix user (root on a GPU box), or
two installations of gputui, run demos apart: `--name` of `gputui demo`, else GPUTUI_DEMO_NAME (for
every `--demo` command), else this installation's (`default_name`: a hash of the interpreter's
prefix and the package's directory, after the login name of whoever logged in when that is not this
user, as /proc/self/loginuid says: two operators who `sudo -i` get two demos). Not one per terminal:
the demo outlives commands so that a dashboard in one terminal sees what a clean in another did. The
daemon records the installation that started it; a command of another installation that attaches
to it (one name given to both) says so on stderr, and `demo status` shows it.

Where it lives: `$XDG_RUNTIME_DIR/gputui-demo/<name>`, or without XDG_RUNTIME_DIR
`gputui-demo-<uid>/<name>` in the temporary directory ($TMPDIR, else /tmp). Both must be real
directories (not links) of this user that nobody else can open (mode 700), and XDG_RUNTIME_DIR one
that only this user can write; anything else is refused with one line saying why (exit 4), never
used or repaired. In it: `lock` (flock, held by the daemon for its life: one daemon per directory,
so one per name), `demo.json` (its PID, start time, name, installation, sims; written by the
daemon), `used` (touched by each client when it attaches), `daemon.log` (the last daemon's log) and
one `gputui-sim-*` directory per host.

When it ends: on `gputui demo stop`, SIGTERM, SIGHUP or SIGINT, or after `--idle-timeout` (30 min)
with no client: no probe attached (each attached sim reader holds flock(LOCK_SH) on its sim's
sim.json, sim.watched) and no command attaching (`used`). Ending, it closes both sims: every job is
stopped and reaped and the sim directories are removed, then demo.json. Killed outright (SIGKILL),
its sims' sessions see their lifeline close and do the same.

Its jobs come and go (`--refill-after`, `--bench-run`, `--bench-gap`: gputui/cli/demod.py says how),
so that `wait` has something to wait for and a clean is not forever.

Tests and screenshots want a fresh, deterministic demo each time: with GPUTUI_DEMO=fresh every
`--demo` command runs its own sims, as before (gputui/cli/demo.py).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import pwd
import re
import select
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config.file import HostSpec
from ..model.textsafe import printable
from ..probe.readers.sim import start_time
from . import argtypes
from .demo import DEMO_FRESH, DEMO_HOSTS, DemoError, check_demo_names, demo_mode
from .exits import Exit

DIR_NAME = "gputui-demo"
ENV_NAME = "GPUTUI_DEMO_NAME"  # which demo every command of this environment means
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")  # a demo's name: one plain directory name
NAME_RULE = "1 to 40 letters, digits, '.', '_' or '-', the first a letter or a digit"
NO_LOGIN_UID = 4294967295  # /proc/self/loginuid when no login set it ((uid_t) -1)
LOCK_FILE, STATE_FILE, USED_FILE, LOG_FILE = "lock", "demo.json", "used", "daemon.log"
IDLE_TIMEOUT = 30 * 60.0  # seconds with no client before the daemon ends by itself
REFILL_AFTER = 60.0  # a freed GPU gets its jobs back after this long free
BENCH_RUN, BENCH_GAP = 20.0, 20.0  # demo-b's benchmark: runs this long, then the GPU is free this long
START_TIMEOUT = 180.0  # for a daemon to start both sims (each job may take SPAWN_TIMEOUT on a busy box)
STOP_TIMEOUT = 60.0  # for a daemon to end after SIGTERM, before SIGKILL
LOCK_TRIES = 100  # 10 ms apart: a client's test of the lock holds it for an instant
MAX_STATE_BYTES = 65536
_OPEN = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
# The daemon's program: this installation's gputui, whatever the directory it is started from.
BOOT = "import sys;sys.path.insert(0,%r);from gputui.cli.demod import daemon_main;sys.exit(daemon_main(sys.argv[2:]))"
MARKER = "gputui.cli.demod"  # argv[1] of the daemon: names it in `ps`


@dataclass(frozen=True)
class Options:
    idle_timeout: float = IDLE_TIMEOUT
    refill_after: float = REFILL_AFTER
    bench_run: float = BENCH_RUN
    bench_gap: float = BENCH_GAP

    def argv(self) -> list[str]:
        return [
            "--idle-timeout", repr(self.idle_timeout), "--refill-after", repr(self.refill_after),
            "--bench-run", repr(self.bench_run), "--bench-gap", repr(self.bench_gap),
        ]  # fmt: skip


# -- the directory ---------------------------------------------------------------------------------


def private_problem(path: Path, what: str, mode_mask: int = 0o077) -> str | None:
    """Why `path` is not a real directory of this user that nobody else can open (or, with
    mode_mask 0o022, write); None when it is. lstat: a link is refused, not followed."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"{what} {path}: {exc.strerror}"
    if stat.S_ISLNK(info.st_mode):
        return f"{what} {path} is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{what} {path} is not a directory"
    if info.st_uid != os.geteuid():
        return f"{what} {path} is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    if info.st_mode & mode_mask:
        others = "open" if mode_mask & 0o055 else "write in"
        return f"others can {others} {what} {path} (mode {stat.S_IMODE(info.st_mode):o})"
    return None


# -- which demo -------------------------------------------------------------------------------------


def installation() -> str:
    """This installation of gputui, as a demo records it: the interpreter's prefix (a venv) and the
    package's directory (a checkout)."""
    return f"{os.path.realpath(sys.prefix)} {Path(__file__).resolve().parent.parent}"


def _login_uid() -> int | None:
    """Who logged in (the audit login uid, kept across sudo and su), where a login set it."""
    try:
        with open("/proc/self/loginuid", "rb") as f:
            uid = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return None if uid == NO_LOGIN_UID else uid


def default_name() -> str:
    """This installation's demo (module docstring): a short hash of `installation()`, after the login
    name of whoever logged in when that is not this user."""
    digest = hashlib.sha256(installation().encode()).hexdigest()[:8]
    uid = _login_uid()
    if uid is None or uid == os.geteuid():
        return digest
    try:
        who = re.sub(r"[^A-Za-z0-9_.-]", "_", pwd.getpwuid(uid).pw_name)[:24]
    except KeyError:
        who = ""
    return f"{who if NAME.fullmatch(who) else f'uid{uid}'}-{digest}"


def demo_name(option: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """The demo a command means: `option` (--name), else GPUTUI_DEMO_NAME, else `default_name()`.
    A name that is not one is a DemoError (exit 2)."""
    name, source = (option, "--name") if option is not None else (environ.get(ENV_NAME), ENV_NAME)
    if name is None or (option is None and not name.strip()):
        return default_name()
    if not NAME.fullmatch(name):
        raise DemoError(f"{source}: '{printable(name)}' is not a demo name ({NAME_RULE})", Exit.USAGE)
    return name


# -- the directory ---------------------------------------------------------------------------------


def demo_directory(name: str, environ: Mapping[str, str] = os.environ, create: bool = True) -> Path:
    """The directory of the demo `name` (module docstring), in the user's demo root; both made if
    missing (with `create`), checked always. Raises DemoError (exit 4) when either, or
    XDG_RUNTIME_DIR, is not private."""
    return _private_dir(demo_root(environ, create) / name, create, "remove it")


def _private_dir(path: Path, create: bool, fix: str) -> Path:
    """`path`, made private if missing (with `create`), checked whenever it is there: DemoError
    (exit 4) saying `fix` when it is not the user's own private directory."""
    if create:
        _make_private(path)
    elif not os.path.lexists(path):
        return path
    problem = private_problem(path, "the demo's directory")
    if problem:
        raise DemoError(f"{problem}: refusing to use it ({fix})", Exit.REFUSED)
    return path


def _make_private(path: Path) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise DemoError(f"cannot make the demo's directory {path}: {exc.strerror}", Exit.REFUSED) from None


def demo_root(environ: Mapping[str, str] = os.environ, create: bool = True) -> Path:
    """The user's directory of demos (module docstring), made if missing (with `create`), checked
    always. Raises DemoError (exit 4) when it, or XDG_RUNTIME_DIR, is not private."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):  # the spec: a relative path is ignored
        problem = private_problem(Path(runtime), "XDG_RUNTIME_DIR", 0o022)
        if problem:
            raise DemoError(
                f"{problem}: refusing to keep the demo there (unset it, or make it a private directory "
                "of yours)",
                Exit.REFUSED,
            )
        path = Path(runtime) / DIR_NAME
    else:
        # A shared, sticky directory: the name may be taken by someone else, which is refused below.
        tmp = environ.get("TMPDIR", "")
        base = tmp if os.path.isabs(tmp) else tempfile.gettempdir()
        path = Path(base) / f"{DIR_NAME}-{os.geteuid()}"
    fix = "remove it" if runtime else "remove it, or set XDG_RUNTIME_DIR to a private directory of yours"
    return _private_dir(path, create, fix)


def open_private(path: Path, flags: int) -> int:
    """A regular file of this user in the demo directory, never through a link."""
    fd = os.open(path, flags | _OPEN, 0o600)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        raise DemoError(f"{path} is not a regular file of yours: refusing it", Exit.REFUSED)
    return fd


def take_lock(directory: Path, tries: int = LOCK_TRIES) -> int | None:
    """The demo's lock, taken (its fd: held for the daemon's life), or None when a daemon holds it."""
    fd = open_private(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT)
    for attempt in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if attempt + 1 < tries:
                time.sleep(0.01)
    os.close(fd)
    return None


def lock_held(directory: Path) -> bool:
    """Whether a daemon holds the demo's lock (taken and let go at once when nobody does)."""
    if not (directory / LOCK_FILE).exists():
        return False
    fd = take_lock(directory, tries=3)
    if fd is None:
        return True
    os.close(fd)
    return False


def read_state(directory: Path) -> dict[str, Any] | None:
    """demo.json, or None when there is none (or it is not one)."""
    try:
        fd = open_private(directory / STATE_FILE, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    try:
        raw = os.read(fd, MAX_STATE_BYTES + 1)
    finally:
        os.close(fd)
    try:
        state = json.loads(raw) if len(raw) <= MAX_STATE_BYTES else None
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def write_state(directory: Path, state: dict[str, Any]) -> None:
    tmp = directory / (STATE_FILE + ".tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, directory / STATE_FILE)


def running(directory: Path) -> dict[str, Any] | None:
    """The running daemon's state (it holds the lock, its process is the one demo.json names), else None."""
    state = read_state(directory)
    if state is None or not lock_held(directory):
        return None
    pid, started = state.get("pid"), state.get("start_time")
    if not isinstance(pid, int) or start_time(pid) != started:
        return None
    return state


def touch_used(directory: Path) -> None:
    """A client attaches now: the idle timeout counts from here."""
    try:
        fd = open_private(directory / USED_FILE, os.O_WRONLY | os.O_CREAT)
    except OSError:
        return
    try:
        os.utime(fd)
    finally:
        os.close(fd)


# -- starting, attaching, stopping (the client side) ---------------------------------------------


def ensure_running(
    directory: Path, options: Options = Options(), say: Callable[[str], None] | None = None
) -> tuple[dict[str, Any], bool]:
    """The running demo's state, starting a daemon when none runs; and whether this call started it.
    Two at once start one: the daemon that does not get the lock says so and ends."""
    deadline = time.monotonic() + START_TIMEOUT
    started_here = False
    while True:
        state = running(directory)
        if state is not None and state.get("state") == "ready":
            return state, started_here
        if state is None and not lock_held(directory):
            reply = _spawn_daemon(directory, options, deadline)
            if reply.startswith("error "):
                raise DemoError(f"the demo did not start: {reply[6:]}")
            if reply == "ready":
                started_here = True
                if say is not None:
                    say(_started_words(directory))
            elif reply != "running":
                raise DemoError(f"the demo did not start: {reply} (its log: {directory / LOG_FILE})")
            continue
        if time.monotonic() > deadline:
            raise DemoError(f"the demo did not start in time (its log: {directory / LOG_FILE})")
        time.sleep(0.1)


def _started_words(directory: Path) -> str:
    state = read_state(directory) or {}
    minutes = float(state.get("idle_timeout_s") or IDLE_TIMEOUT) / 60
    return (
        f"gputui: started the demo cluster '{directory.name}' (PID {state.get('pid')}, in {directory}); it "
        f"runs until `gputui demo stop`, or {minutes:g} min with no client"
    )


def foreign(state: Mapping[str, Any]) -> str | None:
    """The installation that started the demo `state` says of itself, where that is not this one."""
    theirs = state.get("installation")
    return theirs if isinstance(theirs, str) and theirs != installation() else None


def foreign_words(directory: Path, state: Mapping[str, Any]) -> str | None:
    """What a command of this installation says before it uses a demo another one started."""
    theirs = foreign(state)
    if theirs is None:
        return None
    return (
        f"gputui: the demo '{directory.name}' was started by another installation ({printable(theirs)}; "
        f"this one: {printable(installation())}), PID {state.get('pid')}: attaching to it; another "
        f"{ENV_NAME} runs one of this installation's own"
    )


def _spawn_daemon(directory: Path, options: Options, deadline: float) -> str:
    """Start a daemon for `directory`; its first line: "ready", "running" (another has the lock) or
    "error <why>"; what went wrong otherwise."""
    ready_r, ready_w = os.pipe()
    package_root = str(Path(__file__).resolve().parent.parent)
    argv = [sys.executable, "-c", BOOT % package_root, MARKER, "--dir", str(directory)]
    argv += ["--ready-fd", str(ready_w), *options.argv()]
    try:
        # The first process forks the daemon and exits at once (waited for here): the daemon is
        # nobody's child here, so a dashboard that started it never keeps it as a zombie. It
        # inherits no stdout (a pipe that a script reads to its end), only the ready pipe.
        first = subprocess.Popen(
            argv,
            pass_fds=(ready_w,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
        )
    except OSError as exc:
        os.close(ready_r)
        return f"error cannot run {sys.executable}: {exc.strerror}"
    finally:
        os.close(ready_w)
    try:
        first.wait(30.0)
    except subprocess.TimeoutExpired:
        first.kill()  # our own child, by its PID
        first.wait()
    data = b""
    try:
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([ready_r], [], [], left)[0]:
                return "no word from the daemon in time"
            chunk = os.read(ready_r, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(ready_r)
    line = data.decode("utf-8", "replace").partition("\n")[0].strip()
    return line or f"the daemon ended at start-up ({_log_tail(directory)})"


def _log_tail(directory: Path) -> str:
    try:
        fd = open_private(directory / LOG_FILE, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return "no log"
    with os.fdopen(fd, "rb") as f:
        lines = f.read()[-4000:].decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "an empty log"


def stop(directory: Path) -> tuple[bool, str]:
    """End the running daemon (SIGTERM, then SIGKILL after STOP_TIMEOUT) and wait until it and its
    sims are gone. (whether it ran, what happened)."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if not lock_held(directory):
            return False, f"the demo '{directory.name}' is not running (in {directory})"
        state = running(directory)
        if state is not None:
            break
        if time.monotonic() > deadline:
            raise DemoError(f"a demo holds {directory / LOCK_FILE} but says nothing of itself")
        time.sleep(0.1)  # a daemon that is starting: it writes demo.json first thing
    pid, started = int(state["pid"]), state.get("start_time")
    sims = [Path(h["directory"]) for h in (state.get("hosts") or {}).values() if "directory" in h]
    if _end(pid, started, signal.SIGTERM) is False:
        _end(pid, started, signal.SIGKILL)
    # Its exit let the lock go. Killed outright, its sims' sessions end their jobs and remove
    # their directories themselves: wait for that too.
    end = time.monotonic() + STOP_TIMEOUT
    while (lock_held(directory) or any(s.exists() for s in sims)) and time.monotonic() < end:
        time.sleep(0.05)
    if lock_held(directory) or any(s.exists() for s in sims):
        raise DemoError(f"the demo (PID {pid}) did not end in time")
    return True, f"stopped the demo '{directory.name}' (PID {pid}, in {directory})"


def _exited(pid: int, started: Any) -> bool:
    """Gone, or a zombie (exited; whoever adopted it has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return True
    return start_time(pid) != started or raw[raw.rindex(b")") + 2 :].split()[0] == b"Z"


def _end(pid: int, started: Any, sig: int) -> bool | None:
    """Send `sig` to the daemon `pid` (started at `started`, this user's) and wait up to STOP_TIMEOUT
    for it to exit: whether it did (None: it was gone already). Through a pidfd opened before the
    checks, so they and the signal are about one process; without pidfds (kernels before 5.3) the
    checks come just before kill, and its exit is polled."""
    try:
        fd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    except OSError:
        fd = None
    try:
        try:
            if start_time(pid) != started or os.stat(f"/proc/{pid}").st_uid != os.geteuid():
                return None
            if fd is not None:
                signal.pidfd_send_signal(fd, sig)
                return bool(select.select([fd], [], [], STOP_TIMEOUT)[0])
            os.kill(pid, sig)
        except (ProcessLookupError, FileNotFoundError):
            return None
        end = time.monotonic() + STOP_TIMEOUT
        while not _exited(pid, started) and time.monotonic() < end:
            time.sleep(0.02)
        return _exited(pid, started)
    finally:
        if fd is not None:
            os.close(fd)


def name_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--name",
        metavar="NAME",
        help=f"which demo (default: ${ENV_NAME}, else this installation's: `demo status` says its name)",
    )


def schedule_arguments(p: argparse.ArgumentParser) -> None:
    seconds = argtypes.seconds
    p.add_argument(
        "--idle-timeout",
        type=seconds,
        default=IDLE_TIMEOUT,
        metavar="S",
        help=f"end after S with no client (default {IDLE_TIMEOUT:g})",
    )
    p.add_argument(
        "--refill-after",
        type=seconds,
        default=REFILL_AFTER,
        metavar="S",
        help=f"a freed GPU gets its jobs back after S free (default {REFILL_AFTER:g})",
    )
    p.add_argument(
        "--bench-run",
        type=seconds,
        default=BENCH_RUN,
        metavar="S",
        help=f"demo-b's benchmark on GPU 3 runs S, then ends (default {BENCH_RUN:g})",
    )
    p.add_argument("--bench-gap", type=seconds, default=BENCH_GAP, metavar="S",
                   help=f"then GPU 3 is free S before the next (default {BENCH_GAP:g})")  # fmt: skip


def options_of(args: argparse.Namespace) -> Options:
    return Options(args.idle_timeout, args.refill_after, args.bench_run, args.bench_gap)


# -- the demo's hosts, attached to it ------------------------------------------------------------


def demo_hosts(names: Sequence[str]) -> list[HostSpec]:
    """The demo hosts `names` (all of them when none), attached to the live demo (started if it
    is not running) unless GPUTUI_DEMO=fresh. An unknown name is a ConfigError; a demo that cannot
    run is a DemoError."""
    by_name = {s.name: s for s in DEMO_HOSTS}
    check_demo_names(names)
    specs = [by_name[n] for n in names] if names else list(DEMO_HOSTS)
    if demo_mode() == DEMO_FRESH:
        return specs
    directory = demo_directory(demo_name())
    state, _ = ensure_running(directory, say=lambda line: print(line, file=sys.stderr))
    words = foreign_words(directory, state)
    if words is not None:
        print(words, file=sys.stderr)
    touch_used(directory)
    sims = state.get("hosts") or {}
    out = []
    for spec in specs:
        sim = sims.get(spec.name) or {}
        where = sim.get("directory")
        if not isinstance(where, str) or os.path.dirname(where) != os.path.realpath(directory):
            raise DemoError(f"the demo in {directory} runs no sim for {spec.name}")
        out.append(replace(spec, sim_dir=where))
    return out
