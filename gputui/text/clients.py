"""What gputui's two HTTP servers (`gputui export --listen`, gputui/cli/exportserver.py; the hub,
gputui/serve/listen.py) allow a client, and what they say of one: the same rules for both.

- a request must arrive whole (its line and headers) within HEAD_DEADLINE seconds, else it is closed:
  a client that sends half a request and waits (slowloris) holds a socket for that long, no more;
- what is said of clients goes through `Notices`: one line at most for each, and lines of one kind
  at most once every NOTICE_EVERY seconds (the next one counts those not said): a flood of bad
  clients never becomes a flood on stderr, and never a traceback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..model.textsafe import printable

HEAD_DEADLINE = 5.0  # seconds from accept (or the last answer) to a whole request line and headers
NOTICE_EVERY = 10.0  # seconds between two lines of one kind on stderr


class Notices:
    """Lines about clients, at most one per client and one of a kind every `every` seconds: a flood of
    bad clients must not become a flood on stderr. Those held back are counted in one line when the
    kind's time comes again (`flush`). Thread-safe (the exporter's loop and its workers both say).
    `who`: the command that says them (`gputui export`)."""

    def __init__(
        self, say: Callable[[str], None], every: float = NOTICE_EVERY, who: str = "gputui export"
    ) -> None:
        self.say = say
        self.every = every
        self.who = who
        self.last: dict[str, float] = {}  # reason: when a line of it was last said
        self.held: dict[str, int] = {}  # reason: clients not said since
        self.units: dict[str, tuple[str, str]] = {}  # reason: what its count counts, one and many
        self.lock = threading.Lock()

    def note(self, peer: str, reason: str, units: tuple[str, str] = ("client", "clients")) -> None:
        """`peer` was ended for `reason` (words without the client's own text: lines are grouped by it).
        `units`: what the line that counts those held back counts (a client, a try), one and many."""
        now = time.monotonic()
        with self.lock:
            self.units[reason] = units
            last = self.last.get(reason)
            if last is not None and now - last < self.every:
                self.held[reason] = self.held.get(reason, 0) + 1
                return
            self.last[reason] = now
        self.say(f"{self.who}: {peer}: {reason}")

    def flush(self, everything: bool = False) -> None:
        """One line for each reason whose held clients are due (all of them with `everything`)."""
        now = time.monotonic()
        with self.lock:
            due = {
                reason: count
                for reason, count in self.held.items()
                if everything or now - self.last.get(reason, 0.0) >= self.every
            }
            for reason in due:
                del self.held[reason]
                self.last[reason] = now
        for reason, count in due.items():
            one, many = self.units.get(reason, ("client", "clients"))
            self.say(f"{self.who}: {count} more {one if count == 1 else many}: {reason}")


def peer_name(address: Any) -> str:
    """A client's address as `HOST:PORT` (`[HOST]:PORT` for IPv6)."""
    if isinstance(address, tuple) and len(address) >= 2:
        host = printable(str(address[0]))
        return f"[{host}]:{address[1]}" if ":" in host else f"{host}:{address[1]}"
    return printable(str(address))
