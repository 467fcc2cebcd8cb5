#!/usr/bin/env python3
"""How long `gputui --demo` takes to exit once its terminal goes away (issue 17, "Bad days, second
round"; docs/RELIABILITY.md "A terminal that goes away").

    python bench/lost_terminal.py [--runs 3] [--out raw.json]

For each moment (start-up at 0.2 s and 0.6 s, the dashboard up, the plan dialog open, during a plan)
and each way (the terminal closed: SIGHUP and EOF; SIGTERM with the terminal still there), the app
runs on a fresh pty that is its controlling terminal (tests/support/ptyapp.py, the same harness as
tests/ui/test_lost_terminal.py). The time is from the close (or the signal) to the app's exit as
its parent sees it (polled every 5 ms); "left" counts the processes it started that were still there
20 s after. The rule is exit within 1 s; the test suite checks only that it exits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.ptyapp import PtyApp  # noqa: E402


def start_up(delay: float) -> Callable[[PtyApp], None]:
    def at(app: PtyApp) -> None:
        app.pause(delay)

    return at


MOMENTS: dict[str, Callable[[PtyApp], object]] = {
    "start-up, 0.2 s": start_up(0.2),
    "start-up, 0.6 s": start_up(0.6),
    "dashboard up": PtyApp.up,
    "plan dialog open": lambda app: (app.up(), app.open_dialog()),
    "during a plan": PtyApp.start_plan,
}
WAYS: dict[str, Callable[[PtyApp], float]] = {"terminal closed": PtyApp.hang_up, "SIGTERM": PtyApp.terminate}


def one(moment: Callable[[PtyApp], object], way: Callable[[PtyApp], float]) -> tuple[float | None, int]:
    """Seconds from the terminal's loss to the exit (None: still running after 20 s), and how many
    processes the app started were left."""
    with tempfile.TemporaryDirectory(prefix="gputui-lost-") as scratch:
        app = PtyApp(Path(scratch))
        try:
            moment(app)
            lost = way(app)
            status = app.wait_exit(20.0)
            took = app.exited_at - lost if status is not None and app.exited_at is not None else None
            return took, len(app.left_behind(20.0)) + len(app.sim_dirs())
        finally:
            app.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per moment and way (default 3)")
    parser.add_argument("--out", type=Path, help="write every run's time here (JSON)")
    args = parser.parse_args()
    raw: dict[str, dict[str, list[float | None]]] = {}
    print("| moment | how | runs | median exit s | max exit s | still running | left |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, moment in MOMENTS.items():
        for how, way in WAYS.items():
            times: list[float | None] = []
            left = 0
            for _ in range(args.runs):
                took, behind = one(moment, way)
                times.append(took)
                left += behind
                time.sleep(0.2)
            raw.setdefault(name, {})[how] = times
            done = [t for t in times if t is not None]
            median = f"{statistics.median(done):.3f}" if done else "-"
            worst = f"{max(done):.3f}" if done else "-"
            stuck = len(times) - len(done)
            print(f"| {name} | {how} | {len(times)} | {median} | {worst} | {stuck} | {left} |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
