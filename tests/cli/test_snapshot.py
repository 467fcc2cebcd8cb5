"""`gputui snapshot`: the real CLI, on the demo cluster and on this machine."""

import json
import os

import pytest

from tests.support.cli import gputui


def have_driver():
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


def test_demo_json_follows_the_documented_schema():
    run = gputui("snapshot", "--demo", "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["version"] == 1
    assert [h["name"] for h in doc["hosts"]] == ["demo-a", "demo-b"]
    kinds = set()
    for host in doc["hosts"]:
        assert host["status"] == "live" and len(host["gpus"]) >= 4
        for p in host["processes"]:
            assert {"pid", "start_time", "kind", "gpus", "holds", "command"} <= set(p)
            kinds.add(p["kind"])
    assert kinds == {"user", "ghost", "hidden", "monitor", "zombie"}


def test_demo_table_is_readable_and_literal():
    run = gputui("snapshot", "--demo")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "== demo-a" in out and "== demo-b" in out
    assert "ghost" in out and "memory held by" in out and "must reap it" in out
    assert "\x1b" not in out


@pytest.mark.skipif(have_driver(), reason="this machine has an NVIDIA driver")
def test_no_driver_exits_3_in_one_line():
    run = gputui("snapshot")  # stderr is a pipe: no demo hint (tests/cli/test_demo_hints.py has the terminal)
    assert run.returncode == 3
    assert "no NVIDIA driver or GPU" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_bad_usage_exits_2_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[hosts]]\nname = "a"\nadress = "x"\n')
    for args in (["snapshot", "--nope"], ["snapshot", "--config", str(bad)], ["snapshot", "user@host:99999"]):
        run = gputui(*args)
        assert run.returncode == 2, (args, run.stderr)
        assert "Traceback" not in run.stderr and run.stderr.strip()
    run = gputui("snapshot", "--config", str(bad))
    assert "line 3" in run.stderr or ":3" in run.stderr
    assert "address" in run.stderr


def test_probe_subcommand_prints_hello_and_a_sample():
    run = gputui("probe", "--reader", "sim", "--sim-scenario", "empty", "--once")
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["type"] for r in lines] == ["hello", "sample"]
    assert lines[0]["reader"] == "sim" and len(lines[1]["gpus"]) == 4
    assert run.returncode == 0
    assert os.path.basename(lines[0]["host"]["device_prefix"]) == "nvidia"


def test_snapshot_carries_each_hosts_metrics_in_json_and_text():
    run = gputui("snapshot", "--demo", "--json")
    assert run.returncode == 0, run.stderr
    for host in json.loads(run.stdout)["hosts"]:
        metrics = host["metrics"]
        assert set(metrics) == {
            "cpu_percent", "cpus", "load1", "load5", "load15", "memory_total", "memory_used", "swap_total", "swap_used", "uptime",
        }  # fmt: skip
        assert 0 < metrics["memory_used"] <= metrics["memory_total"] and metrics["uptime"] > 0
    text = gputui("snapshot", "--demo").stdout
    lines = text.splitlines()
    metrics_line = lines[lines.index(next(line for line in lines if line.startswith("== demo-a"))) + 1]
    assert metrics_line.startswith("   CPU ") and " · load " in metrics_line and " · RAM " in metrics_line
    assert " · up " in metrics_line


def test_the_dashboard_and_the_cli_write_one_json_document():
    from gputui.cli import snapshot
    from gputui.views import report as export

    assert snapshot.dumps is export.dumps and snapshot.as_json is export.as_json


JOBS_CONFIG = """
[[hosts]]
name = "lab"
address = "local"
reader = "sim"
sim_scenario = "jobs"

[[hosts]]
name = "guest"
address = "local"
reader = "sim"
sim_scenario = "neighbour"
"""


def test_snapshot_lists_each_hosts_jobs_and_memory_used_outside_a_container(tmp_path):
    """Issue 18: `snapshot --json` lists the jobs per host (the sim's "jobs" scenario: a launcher
    without a GPU is the root of its two ranks); the "neighbour" guest's memory nobody here holds
    is `outside`, never orphaned, in the JSON and the table."""
    config = tmp_path / "gputui.toml"
    config.write_text(JOBS_CONFIG)
    run = gputui("snapshot", "--config", str(config), "--json", timeout=120)
    assert run.returncode == 0, run.stderr
    hosts = {h["name"]: h for h in json.loads(run.stdout)["hosts"]}
    lab = hosts["lab"]
    assert len(lab["gpus"]) == 8 and lab["jobs_omitted"] == 0
    jobs = {j["name"]: j for j in lab["jobs"]}
    launcher = jobs["torchrun"]
    assert {"id", "root", "members", "gpus", "memory", "slurm_job", "container", "unit"} <= set(launcher)
    assert launcher["id"] == str(launcher["root"]) and launcher["gpus"] == [0, 1]
    assert len(launcher["members"]) == 2 and launcher["root"] not in launcher["members"]
    procs = {p["pid"]: p for p in lab["processes"]}
    assert all(
        procs[m]["job"] == launcher["id"] and procs[m]["ppid"] == launcher["root"]
        for m in launcher["members"]
    )
    assert len(lab["jobs"]) == 4 and sorted(g for j in lab["jobs"] for g in j["gpus"]) == [0, 1, 2, 3, 4]
    guest = hosts["guest"]
    assert guest["host"]["host_pid_namespace"] is False
    books = {g["index"]: g["accounting"] for g in guest["gpus"]}
    assert books[1]["outside"] > 0 and books[1]["orphaned"] == 0 and books[2]["outside"] > 0
    text = gputui("snapshot", "--config", str(config), timeout=120)
    assert text.returncode == 0, text.stderr
    out = text.stdout
    [line] = [row for row in out.splitlines() if "torchrun --nproc-per-node 2" in row]
    job_id, _user, gpus, size, unit, members = line.split()[:6]  # another run: its own PIDs
    assert job_id.isdigit() and (gpus, size, unit, members) == ("0,1", "36.0", "GiB", "2")
    assert "4.6 GiB outside" in out and "orphaned" not in out
