"""A dashboard whose terminal goes away ends, at any moment from start-up to exit, within a second.

docs/RELIABILITY.md, "A terminal that goes away". The terminal goes in one of these ways:
- SIGHUP: the session leader hears its terminal hang up (an SSH session dropped, `tmux
  kill-session`, a window closed);
- SIGTERM: someone ends the app;
- its input ends (EOF, EIO or POLLHUP on stdin: the pty is gone but no SIGHUP came, as when the app
  is not the terminal's session leader) or its output fails (EIO).

`Lifeline` hears all of them. Its signal handlers only write one byte to a pipe (no lock, nothing
that can wait, so a signal that lands anywhere, even inside another handler, is safe); its own
thread does the rest, so a main thread that is stuck (in Textual's writer queue, in
`threading._shutdown` waiting for a thread) cannot stop it:
1. it asks the running app to exit, as `q` does: the fleet ends the probes, the terminal is restored;
2. if the process still exists `EXIT_GRACE` seconds later (a probe busy with a plan does not quit at
   once; Textual is wedged), the hard exit: the app's last words (a plan still running gets its
   `done` line in the audit log, outcome unknown: whole, fsync'd lines, like every line there), at
   most `LAST_WORDS_TIMEOUT` seconds of them; SIGTERM to each child process (the probes: a sim ends
   its processes with its probe); then os._exit.
A signal that comes before the app runs (nothing started yet) is the hard exit at once.

`TerminalDriver` is Textual's Linux driver with the two threads that touch the terminal made safe
for a terminal that goes away. Textual 8.2.8's input thread loops on select() while stdin is at EOF
(select says readable, read() returns nothing: a core spun forever; Textualize/textual PR #6690,
open upstream), and its writer thread dies on the first EIO, after which the main thread blocks for
good on the writer's full queue. Here the input thread ends on EOF, EIO or a hang-up and says the
terminal is lost (when stdin is not a terminal, `--force-tty < /dev/null`, EOF only ends input);
output that fails says so too and is dropped from then on, so no write ever blocks.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import termios
import threading
import time
from codecs import getincrementaldecoder
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, NoReturn

from gputui.text.glyphs import to_ascii

from ._textual import HookedDriver

if TYPE_CHECKING:
    from textual.app import App

LOST_STATUS = 128 + signal.SIGHUP  # the exit status when the terminal went away, as a shell says it
EXIT_GRACE = 0.5  # seconds the app has to close in order before the hard exit
# Seconds the hard exit waits for the last words (an fsync can hang). It was 0.3 s, and one CI run
# on a heavily loaded machine lost a plan's outcome after a hang-up, most likely here. Unloaded the
# line and its fsync take milliseconds, so the exit stays at about EXIT_GRACE (BENCHMARKS section 9).
LAST_WORDS_TIMEOUT = 1.0
SIGNALS = (signal.SIGHUP, signal.SIGTERM)
LOST = 0  # the byte that says "the terminal is lost" (the others are signal numbers)
SIGNAL_WORDS: dict[int, str] = {signal.SIGHUP: "SIGHUP: the terminal hung up", signal.SIGTERM: "SIGTERM"}
# What a hard exit sends a terminal that is still there: Textual's settings undone (mouse, paste,
# focus and resize reports, the kitty keyboard), line wrap and the cursor back, the main screen.
RESTORE = (
    b"\x1b[<u\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?1016l\x1b[?2004l\x1b[?1004l"
    b"\x1b[?2048l\x1b[?7h\x1b[?1049l\x1b[?25h"
)


def hung_up(stream: IO[Any] | None) -> bool:
    """`stream` is a terminal that has hung up. The kernel marks it so (its calls then fail with EIO)
    before it sends SIGHUP, so for a moment it reads as no terminal at all; only the EIO tells it from
    a file or a pipe (ENOTTY)."""
    try:
        fd = stream.fileno() if stream is not None else -1
        termios.tcgetattr(fd)
    except termios.error as e:
        return bool(e.args) and e.args[0] == errno.EIO
    except (OSError, ValueError):  # closed, or no file descriptor
        return False
    return False


class Lifeline:
    """SIGHUP, SIGTERM and a lost terminal end the process (the module's docstring says how)."""

    def __init__(self, grace: float = EXIT_GRACE, words_timeout: float = LAST_WORDS_TIMEOUT) -> None:
        self.grace = grace
        self.words_timeout = words_timeout
        self.reason: str | None = None  # why the app is ending, in words (None: it is not)
        self.code = LOST_STATUS  # the exit status once it is
        self._read, self._write = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._write, False)  # one pending byte is enough: a full pipe never blocks
        self._lock = threading.Lock()  # never taken in a signal handler
        self._exit_app: Callable[[int], object] | None = None
        self._ending = False
        self._signalled: int | None = None  # the first SIGHUP or SIGTERM, as its handler saw it
        self._last_words: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._watch, name="gputui-lifeline", daemon=True)

    def install(self) -> None:
        """Handle SIGHUP and SIGTERM from now on (the main thread only, as Python requires)."""
        if not self._thread.is_alive():
            self._thread.start()
        for sig in SIGNALS:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Runs between two bytecodes of the main thread, wherever it is: one store and one write.
        if self._signalled is None:
            self._signalled = signum
        with contextlib.suppress(OSError):  # EAGAIN: a byte is pending already
            os.write(self._write, bytes([signum]))

    def signalled(self) -> int | None:
        """The exit status of the signal that is ending the process (128 + N), or None. A terminal
        that hangs up during start-up also fails the start-up's checks; this says why first."""
        return None if self._signalled is None else 128 + self._signalled

    def lost(self, why: str) -> None:
        """The terminal is gone (called from the driver's threads, never from a signal handler)."""
        with self._lock:
            if self.reason is None:
                self.reason = why
        with contextlib.suppress(OSError):
            os.write(self._write, bytes([LOST]))

    def attach(self, exit_app: Callable[[int], object]) -> bool:
        """From now on, end by calling `exit_app(code)` (thread-safe) and waiting `grace` seconds.
        False when the process is ending already: then the app must not start."""
        with self._lock:
            if self._ending:
                return False
            self._exit_app = exit_app
            return True

    def detach(self) -> None:
        with self._lock:
            self._exit_app = None

    def at_hard_exit(self, words: Callable[[], None]) -> None:
        """Call `words()` (from another thread) before a hard exit; an exception is ignored."""
        self._last_words.append(words)

    def _watch(self) -> None:
        data = b""
        while not data:
            data = os.read(self._read, 1)
        signum = data[0]
        with self._lock:
            self._ending = True
            if signum != LOST:
                self.code = 128 + signum
                if self.reason is None:
                    self.reason = SIGNAL_WORDS.get(signum) or signal.Signals(signum).name
            exit_app = self._exit_app
        if exit_app is not None:
            try:
                exit_app(self.code)
            except RuntimeError:
                pass  # its loop is closed: the app has ended already
            else:
                time.sleep(self.grace)
        self._hard_exit()

    def _hard_exit(self) -> NoReturn:
        words = threading.Thread(target=self._say_last_words, name="gputui-last-words", daemon=True)
        words.start()
        words.join(self.words_timeout)
        end_children()
        os._exit(self.code)

    def _say_last_words(self) -> None:
        for words in self._last_words:
            with contextlib.suppress(Exception):
                words()


def end_children(sig: int = signal.SIGTERM) -> list[int]:
    """Send `sig` to every child process of this one; the PIDs signalled.

    A child's PID is pinned with a pidfd, then checked to still be our child: it cannot be another
    process that got the PID after ours was reaped (asyncio's watcher threads reap at any moment)."""
    me = os.getpid()
    signalled = []
    for pid in _children(me):
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except OSError as exc:
            if exc.errno != errno.ENOSYS:
                continue  # gone
            pidfd = None  # a kernel before 5.3: our unreaped child's PID is still ours
        try:
            if _parent(pid) == me:
                if pidfd is not None:
                    signal.pidfd_send_signal(pidfd, sig)
                else:
                    os.kill(pid, sig)
                signalled.append(pid)
        except OSError:
            pass
        finally:
            if pidfd is not None:
                os.close(pidfd)
    return signalled


def _children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and _parent(int(name)) == pid:
            found.append(int(name))
    return found


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


class GuardedOutput:
    """Textual's output file, for its writer thread: the first failed write (EIO: the terminal is
    gone; EPIPE) reports the loss and every later write is dropped, so the writer never dies and the
    app never blocks on its full queue. `ascii`: every glyph written as its ASCII stand-in
    (gputui/text/glyphs.py), for a terminal that cannot show them."""

    def __init__(self, file: IO[str], on_lost: Callable[[str], None], *, ascii: bool = False) -> None:
        self._file = file
        self._on_lost = on_lost
        self.failed = False
        self.ascii = ascii

    def write(self, text: str) -> None:
        if not self.failed:
            try:
                self._file.write(to_ascii(text) if self.ascii else text)
            except (OSError, ValueError) as exc:
                self._fail(exc)

    def flush(self) -> None:
        if not self.failed:
            try:
                self._file.flush()
            except (OSError, ValueError) as exc:
                self._fail(exc)

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return True

    def _fail(self, exc: Exception) -> None:
        self.failed = True
        words = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        self._on_lost(f"the terminal closed: {words}")


class TerminalDriver(HookedDriver):
    """Textual's Linux driver for a terminal that can go away (the module's docstring).

    The loss goes to the app's `terminal_lost(why)`, when it has one."""

    def __init__(
        self, app: App[Any], *, debug: bool = False, mouse: bool = True, size: tuple[int, int] | None = None
    ) -> None:
        super().__init__(app, debug=debug, mouse=mouse, size=size)
        self._gone = threading.Event()
        self._out: int | None = None
        if self.output is not None:
            with contextlib.suppress(OSError, ValueError):
                self._out = self.output.fileno()
            # An app in ASCII mode (`--ascii`, or a locale that is not UTF-8) says so: `ascii_only`.
            ascii = bool(getattr(app, "ascii_only", False))
            self.output = GuardedOutput(self.output, self.terminal_lost, ascii=ascii)

    reported: tuple[int, int] | None = None  # the size the terminal itself gave last (0: none)

    def layout_size(self) -> tuple[int, int]:
        """The size to lay the screen out in; what the terminal itself said is kept in `reported`.

        A terminal that reports 0 columns or rows (some `script` sessions, `docker exec -t`, serial
        consoles) gets the size Textual's first frame was laid out in, the console's (Rich falls back
        to 80x25 there), not shutil's 80x24: with two sizes for one screen Textual laid it out again
        and again, 100 % CPU and ~1 MB/s of redraws. The app shows one line there."""
        reported = None
        for fd in (self._out, self.fileno):
            try:
                size = os.get_terminal_size(fd) if fd is not None else None
            except (OSError, ValueError):
                continue
            if size is not None:
                reported = (size.columns, size.lines)
                break
        self.reported = reported
        if reported is not None and min(reported) <= 0:
            width, height = self.owner.console.size
            return width, height
        return self.textual_size()

    def terminal_lost(self, why: str) -> None:
        if self._gone.is_set():
            return
        self._gone.set()
        report = getattr(self.owner, "terminal_lost", None)
        if callable(report):
            report(why)

    def continued(self, *args: Any) -> None:
        # A hang-up brings SIGCONT with SIGHUP: Textual would set up the dead terminal again (a
        # second input thread, a second writer) while the app is ending.
        if not self._gone.is_set() and not _hung_up(self.fileno):
            self.textual_sigcont(*args)

    def start_application_mode(self) -> None:
        super().start_application_mode()  # type: ignore[no-untyped-call]  # Textual's is unannotated
        if not self.writing and _hung_up(self.fileno):
            # Textual gave up on a terminal that refused its settings, and would then fail on its
            # first write: the terminal is gone, and the writes go nowhere until the app exits.
            self.terminal_lost("the terminal hung up")
            self.start_writer()

    def run_input_thread(self) -> None:
        """Textual's input loop, ending when the input does (EOF, EIO, a hang-up)."""
        fileno = self.fileno
        poller = select.poll()
        poller.register(fileno, select.POLLIN)  # POLLHUP, POLLERR and POLLNVAL come unasked
        parser = self.input_parser()
        decode = getincrementaldecoder("utf-8")().decode
        try:
            while not self.exit_event.is_set():
                for _fd, mask in poller.poll(100):
                    data = b""
                    if mask & select.POLLIN:
                        try:
                            data = os.read(fileno, 4096)
                        except BlockingIOError:
                            continue
                        except OSError as exc:  # EIO: the other side of the pty is closed
                            self._input_ended(f"the terminal closed: {exc.strerror or exc}")
                            return
                        if not data:
                            self._input_ended("the terminal closed: end of input")
                            return
                    elif mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                        self._input_ended("the terminal hung up")
                        return
                    for event in parser.feed(decode(data)):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        finally:
            with contextlib.suppress(Exception):
                for _ in parser.feed(""):
                    pass

    def _input_ended(self, why: str) -> None:
        if self.input_tty:
            self.terminal_lost(why)
        # Input from a file or a pipe (--force-tty) that ends leaves the app running, without keys.

    def restore_now(self) -> None:
        """For a hard exit, when the app could not close in order: give a terminal that is still
        there its settings back and leave the alternate screen (the last words are time-bounded,
        so a write that blocks cannot hold the exit)."""
        if self._gone.is_set():
            return
        if self.attrs_before is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.fileno, termios.TCSANOW, self.attrs_before)
        if self._out is not None:
            with contextlib.suppress(OSError):
                os.write(self._out, RESTORE)


def _hung_up(fd: int) -> bool:
    """A terminal that answers EIO to a request for its settings has hung up."""
    try:
        termios.tcgetattr(fd)
    except termios.error as exc:
        return bool(exc.args) and exc.args[0] == errno.EIO
    return False
