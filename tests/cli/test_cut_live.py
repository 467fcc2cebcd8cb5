"""Every command line `gputui clean` shows is whole or marked cut: the real CLI against a live demo of
the test's own (tests/support/livedemo.py), its plan, its refusal of an unknown PID and its verdict,
at several terminal widths. What a command "is" comes from /proc/PID/cmdline of the demo's real
processes, read while they run, made brief and printable as every front end shows it."""

from __future__ import annotations

import re

import pytest

from gputui.model.textsafe import printable
from gputui.probe.common import brief_command
from tests.support.livedemo import Live, snapshot

# A demo (two sims, some twenty processes) and several commands at each width: more than the suite's
# 120 s on a busy machine.
pytestmark = pytest.mark.timeout(600)
WIDTHS = ("40", "80", "200")
ROW = re.compile(r"^ +(\d+) ")


def argv_of(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw.decode("utf-8", "replace").split("\0")[:-1] or None


def commands(live: Live, host: str) -> dict[int, str]:
    """{pid: the command as shown whole} of every live process the demo lists on `host` (and its
    jobs' roots)."""
    doc = snapshot(live, host)
    (entry,) = [h for h in doc["hosts"] if h["name"] == host]
    pids = {p["pid"] for p in entry["processes"]} | {int(j["id"]) for j in entry.get("jobs") or []}
    out = {}
    for pid in pids:
        argv = argv_of(pid)
        if argv is not None:
            out[pid] = printable(brief_command(argv))
    return out


def whole_or_marked(shown: str, command: str) -> str | None:
    """Why `shown` (the text from where the command starts) is a silent cut of `command`, or None:
    it starts with the whole command, or with a part of it then an ellipsis."""
    if shown.startswith(command):
        return None
    mark = shown.find("…")
    if mark > 0 and command.startswith(shown[:mark]):
        return None
    return f"cut with no mark: {shown!r} for {command!r}"


def check_rows(text: str, known: dict[int, str]) -> int:
    """Check each table row that starts with a PID whose command is known; how many were checked."""
    checked = 0
    for line in text.splitlines():
        row = ROW.match(line)
        if row is None or int(row.group(1)) not in known:
            continue
        command = known[int(row.group(1))]
        start = line.find(command.split()[0], row.end())
        assert start > 0, f"no command in {line!r} (expected {command!r})"
        problem = whole_or_marked(line[start:], command)
        assert problem is None, f"{problem}\n in {line!r}"
        checked += 1
    return checked


def test_every_command_clean_shows_is_whole_or_marked(live: Live) -> None:
    known = commands(live, "demo-a")
    assert known
    live.record()
    cut = whole = 0
    for width in WIDTHS:
        env = dict(live.env, COLUMNS=width)
        plan = live.gputui("clean", "--demo", "demo-a", "--all", "--sweep", "--dry-run", env=env)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        assert check_rows(plan.stdout, known) >= 5, plan.stdout
        cut += plan.stdout.count("…")
        whole += sum(1 for c in known.values() if c in plan.stdout)

        refused = live.gputui("clean", "--demo", "demo-a", "--pid", "999999", env=env)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        jobs = 0
        for pid, command in known.items():
            at = refused.stderr.find(f" {pid} (")
            if at >= 0:
                problem = whole_or_marked(refused.stderr[at + len(f" {pid} (") :], command)
                assert problem is None, f"{problem}\n in {refused.stderr!r}"
                jobs += 1
        assert jobs >= 3, refused.stderr
    # The demo's commands are cut at the narrow widths and whole at the wide one: both were seen.
    assert cut and whole, (cut, whole)


@pytest.mark.parametrize("width", ["40", "200"])
def test_every_command_a_verdict_shows_is_whole_or_marked(live: Live, width: str) -> None:
    known = commands(live, "demo-a")
    live.record()
    env = dict(live.env, COLUMNS=width)
    r = live.gputui("clean", "--demo", "demo-a:2", "demo-a:3", "--yes", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    verdict = r.stdout[r.stdout.index("== demo-a: CLEAN") :]
    assert check_rows(verdict, known) >= 2, verdict
    if width == "200":
        assert "…" not in verdict, verdict  # room for every command: none was cut
    else:
        assert "…" in verdict, verdict  # the demo's train.py does not fit: cut, and said so


def test_an_ascii_terminal_gets_three_dots_and_the_whole_plan(live: Live) -> None:
    """Where the output cannot take `…` (PYTHONIOENCODING=ascii, a C or Latin-1 locale of old), a cut
    is marked `...`, and text it cannot take (the probe's own marks) is escaped: the plan is printed
    whole, not lost at the first such character."""
    known = commands(live, "demo-a")
    live.record()
    env = dict(live.env, COLUMNS="40", PYTHONIOENCODING="ascii")
    plan = live.gputui("clean", "--demo", "demo-a", "--all", "--sweep", "--dry-run", env=env)
    assert plan.returncode == 0 and "stdout" not in plan.stderr, plan.stdout + plan.stderr
    assert plan.stdout.isascii() and "stages:" in plan.stdout
    checked = 0
    for line in plan.stdout.splitlines():
        row = ROW.match(line)
        if row is None or int(row.group(1)) not in known:
            continue
        command = known[int(row.group(1))]
        shown = line[line.find(command.split()[0], row.end()) :]
        mark = shown.find("...", len("python -S .../"))  # past the brief's own `.../` of a path
        assert shown.startswith(command) or (mark > 0 and command.startswith(shown[:mark])), line
        checked += 1
    assert checked >= 5 and "...  (" in plan.stdout, plan.stdout
