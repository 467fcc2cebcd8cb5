"""Connections that do not storm: how many SSH handshakes run at once, and what a dropped one does.

sshd drops unauthenticated connections past its `MaxStartups` (default 10:30:100: from 10 at once,
30 % of new ones, rising to all at 100), and a client that opens a thousand at once also runs out of
file descriptors (1,024 by default) and of CPU for key exchanges. So every hop's handshake (TCP
connect, key exchange, authentication: what MaxStartups counts) waits for a slot:

- per destination (the address and port a hop dials, as the ssh config resolves it): at most
  `per_host` (default 8, under MaxStartups' 10) at once. A handshake the server drops before it
  starts (the connection lost or reset: MaxStartups' mark) halves that destination's window (at most
  once per round of handshakes, as TCP's congestion window), each one that succeeds widens it again
  by a half, up to `per_host`: a server with a tight MaxStartups gets fewer at once, not a storm of
  retries;
- in all: at most `total` (default 64) at once, whatever their destinations.

A dropped handshake is tried again after an exponential backoff with full jitter (0.25 s doubling to
8 s, at most 8 tries); any other failure (refused, auth, host key, timeout) is the caller's at once.
Each link reports its phase (queued, connecting, backing off and why) to whoever watches it (the
fleet shows it). The soft limit on open files is raised toward the hard one once, when the first
dialer is made. GPUTUI_SSH_HANDSHAKES and GPUTUI_SSH_HANDSHAKES_TOTAL set the two limits.
"""

from __future__ import annotations

import asyncio
import os
import random
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

PER_HOST = 8  # handshakes at once to one destination: under sshd's default MaxStartups (10)
TOTAL = 64  # handshakes at once in all
RETRY_FIRST = 0.25  # seconds before the first retry of a dropped handshake (full jitter below it)
RETRY_CAP = 8.0
MAX_TRIES = 8  # tries of one handshake the server keeps dropping, then the link fails (and the
# fleet's own backoff takes over)
FD_WANTED = 1 << 16  # open files: enough for thousands of links (one socket each, two with a jump)
ENV_PER_HOST = "GPUTUI_SSH_HANDSHAKES"
ENV_TOTAL = "GPUTUI_SSH_HANDSHAKES_TOTAL"

QUEUED, CONNECTING, BACKING_OFF = "queued", "connecting", "backing off"

T = TypeVar("T")
Report = Callable[[str, "str | None"], None]


class Dropped(ConnectionError):
    """The server dropped this handshake every time it was tried (MaxStartups, most likely)."""


def is_dropped(exc: BaseException) -> bool:
    """A handshake the server ended before it began: sshd's MaxStartups closes (or resets) the
    connection at once. asyncssh says ConnectionLost; the socket may say reset or broken pipe."""
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
        return True
    try:
        import asyncssh
    except ImportError:  # pragma: no cover - the SSH transport needs it anyway
        return False
    return isinstance(exc, asyncssh.ConnectionLost)


@dataclass
class Gate:
    """At most `window` holders at once (FIFO); `adaptive`: the window halves when a handshake is
    dropped and grows back by a half with each success, between 1 and `ceiling`."""

    ceiling: int
    adaptive: bool = True
    window: float = 0.0
    active: int = 0
    round: int = 0  # bumped at each halving: drops of handshakes begun before it count no more
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.window = float(self.ceiling)

    def ready(self) -> bool:
        """Whether `acquire` would return at once."""
        return self.active < int(self.window) and not self.waiting

    async def acquire(self) -> int:
        """A slot; the round it was taken in (for `release`)."""
        if self.active < int(self.window) and not self.waiting:
            self.active += 1
            return self.round
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future in self.waiting:
                self.waiting.remove(future)
            elif future.done() and not future.cancelled():
                self.active -= 1  # it was handed a slot as it was cancelled: pass it on
                self._wake()
            raise
        return self.round

    def release(self, taken_in: int, dropped: bool = False, ok: bool = False) -> None:
        self.active -= 1
        if self.adaptive:
            if dropped and taken_in == self.round:
                self.window = max(1.0, self.window / 2)
                self.round += 1
            elif ok:
                self.window = min(float(self.ceiling), self.window + 0.5)
        self._wake()

    def _wake(self) -> None:
        while self.waiting and self.active < int(self.window):
            future = self.waiting.popleft()
            if not future.done():
                self.active += 1
                future.set_result(None)


@dataclass
class DialStats:
    """What a dialer did, for benchmarks and tests."""

    handshakes: int = 0  # tries begun
    dropped: int = 0  # tries the server dropped (each retried, or the last one given up)
    given_up: int = 0  # handshakes that failed for good after MAX_TRIES drops
    peak: int = 0  # the most handshakes at once, in all
    peak_by_destination: dict[str, int] = field(default_factory=dict)


class Dialer:
    def __init__(
        self,
        per_host: int = PER_HOST,
        total: int = TOTAL,
        *,
        retry_first: float = RETRY_FIRST,
        retry_cap: float = RETRY_CAP,
        max_tries: int = MAX_TRIES,
    ) -> None:
        self.per_host = max(1, per_host)
        self.total = Gate(max(1, total), adaptive=False)
        self.gates: dict[str, Gate] = {}
        self.retry_first = retry_first
        self.retry_cap = retry_cap
        self.max_tries = max(1, max_tries)
        self.stats = DialStats()
        self._running: dict[str, int] = {}

    def gate(self, destination: str) -> Gate:
        gate = self.gates.get(destination)
        if gate is None:
            gate = self.gates[destination] = Gate(self.per_host)
        return gate

    async def dial(
        self, destination: str, connect: Callable[[], Awaitable[T]], report: Report | None = None
    ) -> T:
        """`connect()` once a slot is free for `destination`; retried while the server drops it."""

        def say(phase: str, detail: str | None = None) -> None:
            if report is not None:
                report(phase, detail)

        gate = self.gate(destination)
        delay = self.retry_first
        for attempt in range(1, self.max_tries + 1):
            if not (gate.ready() and self.total.ready()):
                say(QUEUED, f"{len(gate.waiting) + 1} waiting for a handshake with {destination}")
            taken_in = await gate.acquire()
            try:
                await self.total.acquire()
            except BaseException:
                gate.release(taken_in)
                raise
            dropped = ok = False
            self._begin(destination)
            say(CONNECTING, None)
            try:
                result = await connect()
                ok = True
                return result
            except Exception as exc:
                if not is_dropped(exc):
                    raise
                dropped = True
                self.stats.dropped += 1
                if attempt == self.max_tries:
                    self.stats.given_up += 1
                    raise Dropped(
                        f"the server dropped the handshake {attempt} times (its MaxStartups?)"
                    ) from None
            finally:
                self._end(destination)
                self.total.release(0)
                gate.release(taken_in, dropped=dropped, ok=ok)
            wait = random.uniform(delay / 2, delay)
            say(BACKING_OFF, f"dropped by the server before the handshake; try {attempt + 1} in {wait:.1f} s")
            await asyncio.sleep(wait)
            delay = min(self.retry_cap, delay * 2)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _begin(self, destination: str) -> None:
        self.stats.handshakes += 1
        running = self._running[destination] = self._running.get(destination, 0) + 1
        peaks = self.stats.peak_by_destination
        peaks[destination] = max(peaks.get(destination, 0), running)
        self.stats.peak = max(self.stats.peak, sum(self._running.values()))

    def _end(self, destination: str) -> None:
        self._running[destination] -= 1


_dialers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Dialer] = weakref.WeakKeyDictionary()
_fd_raised = False


def dialer() -> Dialer:
    """The running event loop's dialer (every link of a fleet shares it), made on first use."""
    loop = asyncio.get_running_loop()
    found = _dialers.get(loop)
    if found is None:
        raise_fd_limit()
        found = _dialers[loop] = Dialer(_env_int(ENV_PER_HOST, PER_HOST), _env_int(ENV_TOTAL, TOTAL))
    return found


def use(d: Dialer) -> Dialer:
    """Make `d` the running loop's dialer (benchmarks and tests set their own limits)."""
    _dialers[asyncio.get_running_loop()] = d
    return d


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else default


def raise_fd_limit(wanted: int = FD_WANTED) -> tuple[int, int] | None:
    """Raise the soft limit on open files toward `wanted`, never past the hard limit (raising that
    needs privileges). Once per process; returns (soft, hard) after, or None where there is none."""
    global _fd_raised
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if _fd_raised:
        return soft, hard
    _fd_raised = True
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # a container may refuse it: the links that fit still connect
    return soft, hard
