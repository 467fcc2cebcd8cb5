"""`gputui clean` end to end: real probe subprocesses over the simulated GPUs, the fleet, the audit log.

The demo hosts are real probes (`--reader sim --sim-scenario demo`) reached through the local
transport; every sim process ends with its probe (the fleet stops them). The SIGKILL test starts
`python -m gputui clean` itself and ends every process it started through it, by PID.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.cli.clean import plan_lines
from gputui.cli.demo import demo_specs
from gputui.cli.exits import Exit
from gputui.cli.gpuspec import resolve_gpu_specs, split_targets
from gputui.cli.outcome import HostOutcome, exit_code
from gputui.config.file import HostSpec
from gputui.kill.auditlog import read_records, unfinished
from gputui.kill.operate import status_of
from gputui.kill.plan import PlanOptions, plan_for_gpus
from gputui.model import Event, PlanVerdict, Sample
from gputui.text.words import stage_line
from tests.support.commands import clean, fleet_of
from tests.support.procs import descendants, end_probes, start_time
from tests.support.samples import sample
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
STAGE_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} demo-[ab] ")


# -- helpers ------------------------------------------------------------------------------------


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


# -- end to end ---------------------------------------------------------------------------------


async def test_the_demo_cluster_ends_clean(tmp_path):
    log = tmp_path / "actions.jsonl"
    code, out, err = await clean(
        "--demo", "--all", "--sweep", "--yes", "--json", "--term-timeout", "0.5", "--log", str(log)
    )
    assert code == Exit.CLEAN, err
    doc = json.loads(out)
    assert doc["version"] == 2 and doc["ok"] is True and doc["exit_code"] == 0 and doc["log"] == str(log)
    assert [h["host"] for h in doc["hosts"]] == ["demo-a", "demo-b"]
    gpus = {"demo-a": 4, "demo-b": 8}  # every GPU of each, its free ones as well
    for host in doc["hosts"]:
        assert host["status"] == "clean" and host["ok"] is True
        assert {g["result"] for g in host["gpus"].values()} == {"clean"}
        assert set(host["gpus"]) == {str(i) for i in range(gpus[host["host"]])}
        assert all(v == 0 for v in host["memory_after"].values())
        results = {p["result"] for p in host["processes"]}
        assert results <= {"exited", "vanished"}, host["processes"]
        plan = host["plan"]
        assert plan["sweep_included"] and plan["excluded"] and plan["targets"]
        kinds = {e["kind"] for e in plan["excluded"]}
        assert {"ghost", "zombie", "monitor"} <= kinds  # ghosts, zombies and monitors are left alone
    # The ignore-term jobs were escalated; the ghosts' children stopped.
    escalated = [p for h in doc["hosts"] for p in h["processes"] if p["signals"] == ["SIGTERM", "SIGKILL"]]
    assert len(escalated) == 2
    # Stages streamed to stderr (stdout holds the JSON) with millisecond timestamps.
    stage_lines = [line for line in err.splitlines() if STAGE_LINE.match(line)]
    assert any("SIGTERM -> " in line for line in stage_lines)
    assert any("SIGKILL -> " in line for line in stage_lines)
    # The audit log: the plan and intents first, then events, a done per action.
    records, bad = read_records(log)
    assert bad == 0
    by_action: dict[str, list[str]] = {}
    for r in records:
        by_action.setdefault(r["action"], []).append(r["kind"])
    assert len(by_action) == 2
    for kinds in by_action.values():
        assert kinds[0] == "plan" and kinds[1] == "intent" and kinds[-1] == "done"
        assert kinds.index("event") > max(i for i, k in enumerate(kinds) if k == "intent")
    assert unfinished(log) == []


async def test_a_scoped_clean_prints_a_table_and_verdicts(tmp_path):
    log = tmp_path / "actions.jsonl"
    code, out, err = await clean("--demo", "demo-a:2", "--yes", "--log", str(log))
    assert code == Exit.CLEAN, err + out
    assert "== demo-a: plan" in out and "holds the memory of ghost" in out
    assert "already dead; its memory is held by" in out
    assert "proves: GPU 2 clean" in out
    assert "== demo-a: CLEAN" in out and "GPU 2   clean" in out
    assert "demo-b" not in out  # not asked
    assert any(STAGE_LINE.match(line) for line in out.splitlines())


async def test_a_dry_run_prints_the_plan_and_touches_nothing(tmp_path):
    log = tmp_path / "actions.jsonl"
    code, out, err = await clean("--demo", "--all", "--dry-run", "--json", "--log", str(log))
    assert code == Exit.CLEAN, err
    doc = json.loads(out)
    # A dry run is ok when every plan could be made: "ok" and the exit code always agree (issue 19).
    assert doc["dry_run"] is True and doc["ok"] is True and doc["exit_code"] == 0
    assert all(h["status"] == "planned" and h["plan"]["targets"] for h in doc["hosts"])
    assert "stages: SIGTERM -> wait up to 5 s" in err and "left alone:" in err
    # The unattributed holders are listed as the sweep, not included: --sweep adds them.
    assert all(h["plan"]["sweep"] and not h["plan"]["sweep_included"] for h in doc["hosts"])
    assert "sweep candidates (not included; --sweep adds them)" in err
    assert not log.exists()


async def test_without_a_terminal_or_yes_it_refuses(tmp_path):
    log = tmp_path / "actions.jsonl"
    code, _, err = await clean("--demo", "--all", "--log", str(log))
    assert code == Exit.USAGE
    assert "stdin is not a terminal (pass --yes)" in err
    assert not log.exists()


async def test_answering_no_on_a_terminal_does_nothing(tmp_path):
    """Declining is its own exit code (5), not "not clean" (1): nothing was done, nothing failed."""
    log = tmp_path / "actions.jsonl"
    code, out, _ = await clean("--demo", "demo-a:0", "--log", str(log), stdin=Tty("n\n"))
    assert code == Exit.DECLINED == 5
    assert "Proceed? [y/N]" in out and out.rstrip().endswith("NOTHING DONE: not confirmed")  # said once
    assert not log.exists()


async def test_answering_yes_on_a_terminal_proceeds(tmp_path):
    log = tmp_path / "actions.jsonl"
    code, out, _ = await clean("--demo", "demo-b:0", "--log", str(log), stdin=Tty("y\n"))
    assert code == Exit.CLEAN, out
    assert "Proceed? [y/N]" in out and "== demo-b: CLEAN" in out


async def test_a_read_only_host_is_refused(tmp_path):
    log = tmp_path / "a.jsonl"
    code, out, _ = await clean(
        "--demo", "--all", "--yes", "--log", str(log), fleet=fleet_of(demo_specs(read_only=True))
    )
    assert code == Exit.REFUSED
    assert "== demo-a: REFUSED: read-only host: kill actions are disabled here" in out
    assert not log.exists()


async def test_a_read_only_probe_refuses_a_plan_sent_anyway():
    spec = HostSpec(name="ro", reader="sim", sim_scenario="demo", read_only=True)
    fleet = fleet_of([spec])
    # The app's own guard is bypassed on purpose: the view says killing is allowed.
    fleet.view("ro").read_only = False
    fleet.start()
    try:
        await fleet.wait_first_samples(30)
        view = fleet.view("ro")
        assert view.facts is not None and view.facts.read_only
        plan = plan_for_gpus(view.sample, [0], host="ro", options=PlanOptions(operator="t"))
        events = [e async for e in fleet.execute("ro", plan.to_wire())]
    finally:
        await fleet.stop()
    [done] = events
    assert done.stage == "done" and done.result == "refused" and done.data["error"] == "read-only"


async def test_naming_a_protected_process_is_refused(tmp_path):
    fleet = fleet_of(demo_specs()[:1])
    fleet.start()
    await fleet.wait_first_samples(30)
    sample_ = fleet.view("demo-a").sample
    assert sample_ is not None
    [monitor] = [p for p in sample_.processes if p.protected == "monitor"]
    # run_clean reuses the started fleet (start() is idempotent) and stops it.
    code, out, _err = await clean(
        "--demo", "--pid", str(monitor.pid), "--yes", "--log", str(tmp_path / "a"), fleet=fleet
    )
    assert code == Exit.REFUSED
    assert f"REFUSED: {monitor.pid} (nv-hostengine)" in out and "--include-monitor stops it anyway" in out
    assert not (tmp_path / "a").exists()


async def test_a_monitor_named_with_include_monitor_is_stopped(tmp_path):
    fleet = fleet_of(demo_specs()[:1])
    fleet.start()
    await fleet.wait_first_samples(30)
    sample_ = fleet.view("demo-a").sample
    assert sample_ is not None
    [monitor] = [p for p in sample_.processes if p.protected == "monitor"]
    code, out, err = await clean(
        "demo-a", "--pid", str(monitor.pid), "--include-monitor", "--yes", "--json",
        "--log", str(tmp_path / "a"), fleet=fleet,
    )  # fmt: skip
    assert code == Exit.CLEAN, err
    [host] = json.loads(out)["hosts"]
    assert host["status"] == "stopped"
    assert host["plan"]["include_protected"] == [monitor.pid]
    assert any(w["kind"] == "protected-included" for w in host["plan"]["warnings"])
    [verdict] = [p for p in host["processes"] if p["pid"] == monitor.pid]
    assert verdict["result"] == "exited" and verdict["signals"] == ["SIGTERM"]


@pytest.mark.parametrize(
    "argv, words",
    [
        (("--demo",), "say what to clean"),
        (("--demo", "--all", "--gpu", "0"), "does not combine"),
        (("--demo", "--gpu", "demo-a:9", "--yes"), "demo-a has no GPU 9"),
        (("--demo", "--gpu", "nohost:1", "--yes"), "nohost is not one of the hosts"),
        (("--demo", "--gpu", "GPU-ffffffff", "--yes"), "no GPU has that UUID"),
        (("--demo", "--pid", "999999999", "--yes"), "not a GPU process"),
        (("--demo", "--gpu", "²", "--yes"), "expected an index"),
        (("--demo", "--gpu", "0", "--include-monitor", "--yes"), "--include-monitor includes the monitors"),
        (("--demo", "--gpu", "0", "--sigint-first", "--signals", "kill", "--yes"), "say different things"),
    ],
)
async def test_bad_usage_is_exit_2(tmp_path, argv, words):
    code, _, err = await clean(*argv, "--log", str(tmp_path / "a.jsonl"))
    assert code == Exit.USAGE and words in err


async def test_no_driver_is_exit_3(tmp_path):
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has an NVIDIA driver")
    code, out, _ = await clean(
        "--all", "--yes", "--log", str(tmp_path / "a"), fleet=fleet_of([HostSpec(name="local")])
    )
    assert code == Exit.NO_GPU
    # Not a terminal: no hint to try the demo (tests/cli/test_demo_hints.py)
    assert "== local: NO GPU" in out and "--demo" not in out


# -- killed in the middle of an action ----------------------------------------------------------


def test_sigkill_in_the_middle_of_an_action_leaves_a_parseable_log_and_is_reported(tmp_path):
    log = tmp_path / "actions.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # GPU 3 of demo-a runs a job that ignores SIGTERM: with a 60 s TERM timeout the action waits.
    argv = [sys.executable, "-m", "gputui", "clean", "--demo", "demo-a:3", "--yes", "--term-timeout", "60",
            "--log", str(log)]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    started: list[tuple[int, int | None]] = []
    try:

        def signalled() -> bool:
            records, _ = read_records(log)
            return any(r.get("stage") == "signal" and r.get("result") == "sent" for r in records)

        assert wait_until(signalled, 90), (
            proc.stderr.read1().decode() if proc.poll() is not None else "no signal"
        )
        started = [(pid, start_time(pid)) for pid in descendants(proc.pid)]
        proc.send_signal(signal.SIGKILL)  # our own child: not reaped yet, so its PID is still ours
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        # The probes outlive their app (they finish the plan): end them by PID. They close their sims.
        end_probes(started)
    raw = log.read_bytes()
    assert raw.endswith(b"\n")
    parsed = [json.loads(line) for line in raw.splitlines()]
    assert {r["kind"] for r in parsed} >= {"plan", "intent", "event"} and "done" not in {
        r["kind"] for r in parsed
    }
    [lost] = unfinished(log)
    intents = [r for r in parsed if r["kind"] == "intent"]
    assert lost.action == intents[0]["action"] and lost.host == "demo-a"
    assert {i.pid for i in lost.pending} == {r["pid"] for r in intents}
    # The next start reports it, once.
    again = subprocess.run(
        [sys.executable, "-m", "gputui", "clean", "--demo", "demo-b:3", "--dry-run", "--log", str(log)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert (
        f"WARNING: action {lost.action} on demo-a" in again.stderr
        and "outcome never recorded" in again.stderr
    )
    assert unfinished(log) == []


# -- pieces -------------------------------------------------------------------------------------


def test_positional_gpu_specs_are_split_from_hosts():
    assert split_targets(["gpu-a", "gpu-b:3", "gpu-c:all", "bench@gpu-d:2222", "[::1]:5", "gpu-b:1"]) == (
        ["gpu-a", "gpu-b", "gpu-c", "bench@gpu-d:2222", "[::1]:5"],
        ["gpu-b:3", "gpu-c:all", "gpu-b:1"],
    )  # fmt: skip
    # HOST:N is a GPU below 64 (even 22), a port from 64 up; user@host:N is always a port.
    assert split_targets(["gpu-e:22", "gpu-a:2222", "me@gpu-f:22"]) == (
        ["gpu-e", "gpu-a:2222", "me@gpu-f:22"],
        ["gpu-e:22"],
    )


def test_gpu_specs_resolve_by_index_uuid_and_host():
    s = sample()
    samples = {"a": s, "b": s}

    def gpus(specs: list[str], where: dict[str, Sample], hosts: list[str]) -> dict[str, set[int]]:
        found = resolve_gpu_specs(specs, where, hosts)
        assert not any(t.instances for t in found.values())  # whole GPUs only
        return {h: t.gpus for h, t in found.items()}

    assert gpus(["1"], samples, ["a", "b"]) == {"a": {1}, "b": {1}}
    assert gpus(["a:all", "b:2"], samples, ["a", "b"]) == {"a": {0, 1, 2, 3}, "b": {2}}
    one = {"a": s}
    assert gpus(["GPU-00000003"], one, ["a"]) == {"a": {3}}
    assert gpus(["gpu-00000003-aaaa-bbbb-cccc-dddddddddddd"], one, ["a"]) == {"a": {3}}
    # Hosts named like a UUID prefix: HOST:INDEX and HOST:all still name the host.
    named = {"gpu-a": s, "gpu-b": s}
    assert gpus(["gpu-a:3", "gpu-b:all"], named, ["gpu-a", "gpu-b"]) == {
        "gpu-a": {3},
        "gpu-b": {0, 1, 2, 3},
    }


def test_exit_codes_take_the_worst_host():
    def o(status: str) -> HostOutcome:
        return HostOutcome("h", status=status)

    assert exit_code([o("clean"), o("skipped")]) == Exit.CLEAN
    assert exit_code([o("stopped"), o("clean")]) == Exit.CLEAN
    assert exit_code([o("clean"), o("not-clean")]) == Exit.NOT_CLEAN
    assert exit_code([o("not-stopped")]) == Exit.NOT_CLEAN
    assert exit_code([o("not-trusted")]) == Exit.NOT_CLEAN
    assert exit_code([o("aborted")]) == Exit.DECLINED
    assert exit_code([o("aborted"), o("not-clean")]) == Exit.NOT_CLEAN
    assert exit_code([o("outcome-unknown")]) == Exit.NOT_CLEAN
    assert exit_code([o("unreachable"), o("refused")]) == Exit.REFUSED
    assert exit_code([o("refused"), o("no-gpu")]) == Exit.NO_GPU


def test_untrusted_text_is_escaped_in_stage_lines_and_plans():
    event = Event(
        plan="p", time=0.12, stage="signal", pid=5, message="SIGTERM -> 5 \x1b[2Jevil\x07", data={"gpus": [3]}
    )
    line = stage_line("h\x1b", event)
    assert "\x1b" not in line and "\x07" not in line
    assert line.endswith(" h\\e GPU 3   SIGTERM -> 5 \\e[2Jevil\\x07")
    s = sample()
    procs = tuple(
        dataclasses.replace(p, command=("x\x1b]0;pwned\x07",)) if p.pid == 100 else p for p in s.processes
    )
    plan = plan_for_gpus(dataclasses.replace(s, processes=procs), [0], host="h")
    text = "\n".join(plan_lines(plan))
    assert "\x1b" not in text and "\x07" not in text and "x\\e]0;pwned\\x07" in text


def test_verdicts_map_to_outcomes():
    def verdict(result: str, **data: Any) -> PlanVerdict:
        event = Event(plan="p", time=0.0, stage="done", result=result, message=result, data=data)
        return PlanVerdict.from_event(event, allowed={7})

    assert status_of(verdict("clean", ok=True)) == ("clean", None)
    assert status_of(verdict("stopped", ok=True)) == ("stopped", None)
    assert status_of(verdict("outcome-unknown", ok=False))[0] == "outcome-unknown"
    assert status_of(verdict("refused", ok=False, error="read-only"))[0] == "refused"
    assert status_of(verdict("refused", ok=False, error="no-gpu"))[0] == "no-gpu"
    denied = {"pid": 7, "result": "permission-denied", "allow": "run the probe as root or as user bob"}
    status, message = status_of(verdict("not-clean", ok=False, processes=[denied]))
    assert status == "refused" and message == "permission denied for 7: run the probe as root or as user bob"
    assert status_of(verdict("not-clean", ok=False, processes=[]))[0] == "not-clean"
    assert status_of(verdict("not-stopped", ok=False))[0] == "not-stopped"
    # A success the probe does not spell out, or one naming a process that was not in the plan,
    # is not taken at its word.
    assert status_of(verdict("clean"))[0] == "not-trusted"
    forged = {"pid": 99, "result": "exited", "origin": "plan"}
    status, message = status_of(verdict("clean", ok=True, processes=[forged]))
    assert status == "not-trusted" and "PID 99, which was not in the plan" in (message or "")
