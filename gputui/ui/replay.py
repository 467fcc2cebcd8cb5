"""The dashboard on a recording (`gputui --replay FILE`): the replay's keys and the line that shows
where it is.

The CLI gives the app a fleet whose hosts are played from the file, and the player's controls
(`ReplayControls`, implemented by gputui.recording.player.ReplayPlayer: the UI imports no transport);
the app's clock is the recorded time, so sample ages are as they were then. Everything else is the
dashboard as it is live, read-only. Keys (KEYS: the same words in the line, the help screen, `gputui
--help` and the README): p pause or play, n one sample on (pausing first), , and . ten seconds back
and on, { and } to the start and to the end, < and > speed (x1/4 to x64). The line above the
dashboard says the file, the recorded time (on the recording's clock: as it read where it was
recorded), how far in, the speed, and whether the replay has ended, and why if it stopped early (a
damaged line). After a seek back the hosts' histories start again from there.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

from gputui.fleet.fleet import Fleet
from gputui.fleet.idle import HostIdle
from gputui.recording.format import clock_at, offset_words

from . import fmt
from .app import GpuTuiApp

BAR_INTERVAL = 0.25  # seconds between two updates of the line while playing
SEEK_STEP = 10.0  # seconds `,` and `.` jump
# The replay's keys, as its line says them (the help screen and `gputui --help` say the same).
KEYS = "p pause · n step · ,/. 10 s back/on · {/} start/end · </> speed"


class ReplayControls(Protocol):
    """What the dashboard needs of a replay (gputui.recording.player.ReplayPlayer)."""

    name: str  # the file's name, made printable
    ended: bool  # every entry has been played (or a damaged one stopped it: `problem`)
    problem: str | None
    rewound: int  # how many times a seek went back

    @property
    def paused(self) -> bool: ...

    @property
    def speed(self) -> float: ...

    @property
    def started(self) -> float: ...

    @property
    def utc_offset(self) -> int: ...

    @property
    def truncated(self) -> bool: ...

    def now(self) -> float:
        """The recorded time being shown (Unix seconds)."""
        ...

    def toggle_pause(self) -> None: ...

    def step(self) -> None: ...

    def seek(self, seconds: float) -> None: ...

    def seek_to(self, at: float) -> None: ...

    def faster(self) -> None: ...

    def slower(self) -> None: ...

    def stop(self) -> None: ...


def speed_words(speed: float) -> str:
    return f"x{speed:g}" if speed >= 1 else f"x1/{round(1 / speed)}"


def bar_text(replay: ReplayControls) -> Text:
    """` REPLAY demo.gz  2025-12-01 02:14:07  +1:23  ▶ x2   p pause · n step · ...` (KEYS)."""
    now = replay.now()
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(" REPLAY ", "bold reverse")
    text.append(f" {fmt.safe(replay.name, 60)}  ")
    text.append(clock_at(now, replay.utc_offset), "bold")
    text.append(f"  {offset_words(now - replay.started)}  ")
    if replay.problem:
        state = "■ stopped"
    elif replay.ended:
        state = "■ end" + (" (cut short)" if replay.truncated else "")
    elif replay.paused:
        state = "⏸ paused"
    else:
        state = "▶"
    text.append(f"{state} {speed_words(replay.speed)}", "bold")
    text.append(f"   {KEYS}", "dim")
    if replay.problem:
        text.append(f"   {fmt.safe(replay.problem, 300)}", "bold")
    return text


class ReplayBar(Static):
    """The replay's line, docked above the dashboard."""

    DEFAULT_CSS = """
    ReplayBar {
        dock: top;
        height: 1;
        width: 1fr;
        background: $boost;
    }
    """

    def __init__(self, replay: ReplayControls) -> None:
        super().__init__("", id="replay-bar", markup=False)
        self.replay = replay
        self._last = ""

    def on_mount(self) -> None:
        self.show()

    def show(self) -> None:
        text = bar_text(self.replay)
        if text.plain != self._last:
            self._last = text.plain
            self.update(text)


class ReplayApp(GpuTuiApp):
    """The dashboard on a recording: read-only, its clock the recorded time, the replay's keys."""

    read_only_why = "a replay shows a recording: it signals nothing."

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "replay('toggle_pause')", "Pause replay", tooltip="pause the replay (again: play on)"),
        Binding("n", "replay('step')", "Step", tooltip="the replay's next sample (pauses first)"),
        # Keys no pane takes: the tables take the arrows, Home and End; the fleet table + and -.
        Binding("comma", "seek(-1)", "Back 10 s", key_display=",", tooltip="the replay 10 s back"),
        Binding("full_stop", "seek(1)", "On 10 s", key_display=".", tooltip="the replay 10 s on"),
        Binding(
            "left_curly_bracket", "seek_end(0)", "Start", key_display="{", tooltip="the replay from its start"
        ),
        Binding(
            "right_curly_bracket", "seek_end(1)", "End", key_display="}", tooltip="the replay to its end"
        ),
        Binding("greater_than_sign", "replay('faster')", "Faster", key_display=">", tooltip="replay faster"),
        Binding("less_than_sign", "replay('slower')", "Slower", key_display="<", tooltip="replay slower"),
    ]
    # What the keys above may ask of the replay (ReplayControls' methods of these names).
    VERBS: ClassVar[frozenset[str]] = frozenset({"toggle_pause", "step", "faster", "slower"})

    def __init__(self, fleet: Fleet, *, replay: ReplayControls, **options: Any) -> None:
        super().__init__(fleet, **options)
        self.replay = replay
        self.replay_bar = ReplayBar(replay)

    def on_mount(self) -> None:
        # (GpuTuiApp's own on_mount runs too: Textual calls each class's handler.)
        self.set_interval(BAR_INTERVAL, self.replay_bar.show)

    def on_ready(self) -> None:
        main = self._main
        if main is not None and not self.replay_bar.is_mounted:
            main.mount(self.replay_bar)

    async def on_unmount(self) -> None:
        self.replay.stop()

    async def _report_unfinished(self) -> None:
        """A replay reports nothing of this machine's audit log (nor acknowledges it)."""

    def action_replay(self, verb: str) -> None:
        """Pause, step, faster or slower (VERBS), and the bar says so at once."""
        if verb in self.VERBS:
            getattr(self.replay, verb)()
            self.replay_bar.show()

    def action_seek(self, direction: int) -> None:
        """SEEK_STEP back (-1) or on (1)."""
        self._seeked(lambda: self.replay.seek(SEEK_STEP * (1 if direction > 0 else -1)))

    def action_seek_end(self, end: int) -> None:
        """To the recording's start (0) or its end (1)."""
        self._seeked(lambda: self.replay.seek_to(math.inf if end else self.replay.started))

    def _seeked(self, seek: Any) -> None:
        """Seek; after a seek back, the hosts' histories and idle times start again from there
        (what they held is of a later time), and the bar says where it is at once."""
        rewound = self.replay.rewound
        seek()
        if self.replay.rewound != rewound:
            for view in self.fleet.hosts:
                view.history.clear()
                view.idle = HostIdle()
            self.received.clear()
        self.replay_bar.show()
