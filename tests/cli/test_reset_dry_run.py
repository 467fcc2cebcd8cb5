"""`gputui clean --reset-gpu N --dry-run` as a person reads it (issue 19, item 6): one blocker a
line with what to do about it, the ladder's steps, and whether a reset is needed at all (a free GPU,
or one whose memory processes hold, needs none: a reset frees only orphaned memory). `--json`
carries the same: each blocker (kind, PID, words, advice) and the ladder.

Real probes over the sim: demo-b's GPU 3 is free, demo-a's GPU 0 is held by a server, the
"preflight" scenario's GPU 1 has 2.1 GiB orphaned (tests/kill/test_reset.py); every CUDA process of a
host holds every /dev/nvidiaN and /dev/nvidiactl, as on a real host, so each blocks a reset.
"""

from __future__ import annotations

import json
import re

from gputui.cli.demo import demo_specs
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from tests.support.commands import clean, fleet_of


def demo_host(name: str) -> Fleet:
    return fleet_of([s for s in demo_specs() if s.name == name])


def preflight_host() -> Fleet:
    return fleet_of([HostSpec(name="p", reader="sim", sim_scenario="preflight", sim_seed=9)])


def blocker_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if re.match(r"^\s+\d+ .* holds ", line)]


async def test_a_free_gpu_needs_no_reset_and_each_blocker_has_its_line_and_advice(tmp_path):
    log = str(tmp_path / "a.jsonl")
    code, out, err = await clean(
        "demo-b", "--reset-gpu", "3", "--dry-run", "--log", log, fleet=demo_host("demo-b")
    )
    assert code == 4, err + out  # a reset now would be refused: scripts can tell
    assert "needs no reset" in out and "free" in out, out
    # Nothing says the GPU needs nothing to hold it while blockers are listed below.
    assert "needs nothing to hold it" not in out
    lines = out.splitlines()
    blockers = blocker_lines(out)
    assert len(blockers) >= 3, out
    for line in blockers:
        pid = re.match(r"^\s+(\d+) ", line).group(1)  # type: ignore[union-attr]
        advice = lines[lines.index(line) + 1]
        assert advice.lstrip().startswith("->"), (line, advice)
        assert pid in advice or "monitor" in advice, advice
    # The user processes of other GPUs are named with the command that stops them.
    assert any("gputui clean demo-b --pid" in line for line in lines)
    # The ladder's steps, numbered.
    steps = re.findall(r"^\s+\d\. (.*)$", out, re.M)
    assert "reset GPU 3" in steps and any(s.startswith("verify its memory is back at idle") for s in steps), (
        out
    )
    # No line holds the whole list (it was one line of ~1,000 characters).
    assert max(len(line) for line in lines) < 250, max(lines, key=len)
    assert "blocked by:" not in out


async def test_the_json_carries_the_blockers_and_the_ladder(tmp_path):
    log = str(tmp_path / "a.jsonl")
    code, out, err = await clean(
        "demo-b", "--reset-gpu", "3", "--dry-run", "--json", "--log", log, fleet=demo_host("demo-b")
    )
    assert code == 4, err
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["exit_code"] == 4 and doc["ok"] is False
    reset = doc["reset"]
    assert reset["host"] == "demo-b" and reset["gpu"] == 3 and reset["needed"] is False
    assert "reset GPU 3" in reset["ladder"] and len(reset["ladder"]) >= 2
    assert reset["blockers"] and all(
        {"kind", "pid", "words", "advice"} <= set(b) and b["words"] and b["advice"] for b in reset["blockers"]
    )
    assert {b["kind"] for b in reset["blockers"]} == {"process"}
    assert all(isinstance(b["pid"], int) for b in reset["blockers"])
    # The people's text went to stderr, one blocker a line.
    assert len(blocker_lines(err)) == len(reset["blockers"])


async def test_memory_that_processes_hold_needs_a_clean_not_a_reset(tmp_path):
    log = str(tmp_path / "a.jsonl")
    code, out, err = await clean(
        "demo-a", "--reset-gpu", "0", "--dry-run", "--log", log, fleet=demo_host("demo-a")
    )
    assert code == 4, err + out
    assert "needs no reset" in out and "gputui clean demo-a --gpu 0" in out, out


async def test_orphaned_memory_needs_the_reset_and_nothing_blocks_it(tmp_path):
    log = str(tmp_path / "a.jsonl")
    code, out, err = await clean("p", "--reset-gpu", "1", "--dry-run", "--log", log, fleet=preflight_host())
    assert code == 0, err + out
    assert "2.1 GiB orphaned, no process holds it; a reset would free it" in out, out
    assert "nothing blocks a reset" in out and "DRY RUN" in out
    assert "needs no reset" not in out
    assert re.search(r"^\s+1\. turn persistence mode off$", out, re.M), out
    code, out, err = await clean(
        "p", "--reset-gpu", "1", "--dry-run", "--json", "--log", log, fleet=preflight_host()
    )
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True and doc["exit_code"] == 0
    assert doc["reset"]["needed"] is True and doc["reset"]["blockers"] == []
    assert doc["reset"]["orphaned"] > 2 << 30 and "reset GPU 1" in doc["reset"]["ladder"]
