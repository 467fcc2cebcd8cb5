"""`gputui clean` over many hosts: hosts chosen by a group of the config, at most --parallel hosts
acting at once, and one summary table of verdicts at the end. Real CLI subprocesses, real probes
with simulated GPUs (the fresh demo, and sim hosts of a config)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGE = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d\d\d) (\S+) ")


def gputui(tmp_path: Path, *args: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUTUI_CONFIG"}
    env.update(
        PYTHONPATH=str(ROOT),
        GPUTUI_DEMO="fresh",
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    if config is not None:
        env["GPUTUI_CONFIG"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def stage_spans(out: str) -> dict[str, tuple[float, float]]:
    """Each host's first and last stage line time (seconds of the day)."""
    spans: dict[str, tuple[float, float]] = {}
    for line in out.splitlines():
        match = STAGE.match(line)
        if match is None:
            continue
        h, m, s, host = match.groups()
        at = int(h) * 3600 + int(m) * 60 + float(s)
        first, _last = spans.get(host, (at, at))
        spans[host] = (first, at)
    return spans


def test_parallel_1_runs_one_host_at_a_time_then_one_summary(tmp_path: Path) -> None:
    done = gputui(tmp_path, "clean", "--demo", "demo-a", "demo-b", "--all", "--yes", "--parallel", "1")
    assert done.returncode == 0, done.stderr
    spans = stage_spans(done.stdout)
    assert set(spans) == {"demo-a", "demo-b"}
    (_, a_last), (b_first, _) = sorted(spans.values())
    assert a_last <= b_first  # the second host's plan began once the first one's had ended
    lines = done.stdout.splitlines()
    start = lines.index("== summary: 2 hosts")
    assert lines[start + 1].split() == ["HOST", "RESULT", "GPUS", "PROCESSES", "MEMORY", "TIME", "NOTE"]
    rows = [line.split() for line in lines[start + 2 : start + 4]]
    assert [r[:3] for r in rows] == [["demo-a", "CLEAN", "4/4"], ["demo-b", "CLEAN", "8/8"]]
    assert lines[start + 4].strip() == "total: 2 clean, 18 processes stopped"
    assert lines[-1] == lines[start + 4]  # the table ends the output


SIMS = """\
[[hosts]]
name = "sim-{n}"
address = "local"
reader = "sim"
sim_scenario = "demo"
sim_variant = {n}
sim_seed = {n}
"""


def test_a_group_of_hosts_dry_run_one_row_each(tmp_path: Path) -> None:
    config = tmp_path / "gputui.toml"
    config.write_text(
        "".join(SIMS.format(n=n) for n in range(3)) + '[groups]\nsims = ["sim-0", "sim-1", "sim-2"]\n'
    )
    config.chmod(0o600)
    done = gputui(tmp_path, "clean", "sims", "--all", "--dry-run", "--parallel", "2", config=config)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("== summary: 3 hosts (dry run: nothing done)")
    rows = [line.split()[:2] for line in lines[start + 2 : start + 5]]
    assert rows == [["sim-0", "PLANNED"], ["sim-1", "PLANNED"], ["sim-2", "PLANNED"]]
    assert lines[-1].strip().startswith("total: 3 planned")


def test_parallel_must_be_a_count(tmp_path: Path) -> None:
    done = gputui(tmp_path, "clean", "--demo", "demo-a", "--all", "--parallel", "0")
    assert done.returncode == 2
    assert "--parallel: '0' is not a number of hosts from 1 to 4096" in done.stderr


def test_idle_stops_each_hosts_idle_holders_and_nothing_else(tmp_path: Path) -> None:
    """--idle (issue 21): the hosts are watched for --idle-minutes, then each host's processes that
    held GPU memory at 0 % SM all that time are stopped, by the staged kill, and nothing else: on
    the demo, each host's notebook kernel, and demo-a's job stopped by Ctrl+Z (at 0 % SM too); its
    vLLM servers (busy) keep running."""
    done = gputui(
        tmp_path, "clean", "--demo", "demo-a", "demo-b", "--idle", "--idle-minutes", "0.02", "--yes", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert "watching 2 hosts for 0.02 min for idle holders" in done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is True
    for host in doc["hosts"]:
        assert host["status"] == "stopped", host
        scripts = sorted(Path(t["command"][2]).name for t in host["plan"]["targets"])
        stopped = ["sweep.py"] if host["host"] == "demo-a" else []
        assert scripts == sorted(["notebook_kernel.py", *stopped]), host


def test_idle_of_a_user_and_what_it_does_not_combine_with(tmp_path: Path) -> None:
    """--idle with --user: only that user's idle holders (the demo's processes are all this test's
    user: another name leaves every host alone, said per host)."""
    me = gputui(
        tmp_path, "clean", "--demo", "demo-a", "--idle", "--idle-minutes", "0.02", "--dry-run", "--json"
    )
    assert me.returncode == 0, me.stderr
    [host] = json.loads(me.stdout)["hosts"]
    [kernel] = [t for t in host["plan"]["targets"] if "notebook_kernel.py" in " ".join(t["command"])]
    mine = gputui(
        tmp_path, "clean", "--demo", "demo-a", "--idle", "--idle-minutes", "0.02", "--dry-run", "--json",
        "--user", kernel["user"],
    )  # fmt: skip
    # (a fresh demo each run: the same process by its command, not its PID)
    [mine_host] = json.loads(mine.stdout)["hosts"]
    [target] = [t for t in mine_host["plan"]["targets"] if "notebook_kernel.py" in " ".join(t["command"])]
    assert target["command"][-2:] == kernel["command"][-2:]  # notebook_kernel.py's -f and its file
    other = gputui(
        tmp_path, "clean", "--demo", "demo-a", "--idle", "--idle-minutes", "0.02", "--dry-run", "--json",
        "--user", "nobody-else",
    )  # fmt: skip
    assert other.returncode == 0, other.stderr
    [host] = json.loads(other.stdout)["hosts"]
    assert (
        host["status"] == "skipped" and host["message"] == "no idle holder (GPU memory at 0% SM for 0.02 min)"
    )
    bad = gputui(tmp_path, "clean", "--demo", "demo-a", "--idle", "--all")
    assert bad.returncode == 2 and "--idle stops the idle holders" in bad.stderr
