"""Only what you chose, proved: `gputui clean` end to end on a launcher with three workers.

The host is a real sim probe (scenario "workers": a launcher on GPU 0 with three data-loader workers
in its process group, another job sharing GPU 0, a job on GPU 1) through the local transport. What
was signalled is read from the audit log, which records every signal before the verdict. Every
process signalled here belongs to the test's own sim, which ends with the probe when the fleet stops.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from gputui.cli.main import main
from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.kill.auditlog import read_records, unfinished
from gputui.model import Proc
from gputui.transport.local import LocalLink
from tests.support.commands import clean, fleet_of

HOST = "w"
REPO = Path(__file__).resolve().parents[2]


async def workers_host() -> tuple[Fleet, Proc, list[Proc], list[Proc]]:
    """A started fleet of one sim host; the launcher, its workers and the other GPU users."""
    fleet = fleet_of([HostSpec(name=HOST, reader="sim", sim_scenario="workers", sim_seed=1)])
    fleet.start()
    await fleet.wait_first_samples(60)
    sample = fleet.view(HOST).sample
    assert sample is not None
    [launcher] = [p for p in sample.processes if p.kind == "user" and "launch.py" in " ".join(p.command)]
    workers = sorted((p for p in sample.processes if p.kind == "hidden" and launcher.pid in p.links),
                     key=lambda p: p.pid)  # fmt: skip
    others = [p for p in sample.processes if p.kind == "user" and p.pid != launcher.pid]
    assert len(workers) == 3 and len(others) == 2
    return fleet, launcher, workers, others


def signalled(log: Path) -> set[int]:
    records, _ = read_records(log)
    return {
        r["pid"]
        for r in records
        if r.get("stage") in ("signal", "escalate") and r.get("result") == "sent" and r.get("pid")
    }


async def test_cleaning_one_worker_signals_that_worker_alone_and_says_it_worked(tmp_path):
    """Defects 1 and 2: `--pid <one child>` killed its two siblings too and exited 1 ("NOT clean:
    GPU0 held by ...") although exactly what was asked had happened."""
    fleet, launcher, workers, others = await workers_host()
    log = tmp_path / "actions.jsonl"
    chosen = workers[0]
    code, out, err = await clean(HOST, "--pid", str(chosen.pid), "--yes", "--json", "--log", str(log),
                                 fleet=fleet)  # fmt: skip
    assert signalled(log) == {chosen.pid}
    assert code == 0, err
    doc = json.loads(out)
    [host] = doc["hosts"]
    assert host["status"] == "stopped" and host["ok"] is True
    assert host["plan"]["scope"] == "processes" and host["plan"]["gpus"] == []
    gpu0 = host["gpus"]["0"]
    assert gpu0["result"] == "released"
    # What else still uses GPU 0 is named, untouched: the launcher, the other workers, the other job.
    sharing = [p.pid for p in others if 0 in p.gpus]
    assert set(gpu0["others"]) == {launcher.pid, *(w.pid for w in workers[1:]), *sharing}
    assert gpu0["memory_after"] == gpu0["memory_before"]  # the worker held no memory of its own


async def test_cleaning_the_gpu_stops_the_whole_family_and_proves_the_gpu_clean(tmp_path):
    fleet, launcher, workers, others = await workers_host()
    log = tmp_path / "actions.jsonl"
    code, out, err = await clean(HOST, "--gpu", "0", "--yes", "--json", "--log", str(log), fleet=fleet)
    assert code == 0, err
    on_gpu1 = [p for p in others if 1 in p.gpus]
    assert signalled(log) == {launcher.pid, *(w.pid for w in workers), *(p.pid for p in others)} - {
        p.pid for p in on_gpu1
    }
    [host] = json.loads(out)["hosts"]
    assert host["status"] == "clean" and host["gpus"]["0"]["result"] == "clean"
    assert "1" not in host["gpus"]


def test_without_a_host_clean_refuses_when_a_config_lists_hosts(tmp_path, capsys):
    """Defect 3: with a config listing hosts, `gputui clean --all` reached every one of them."""
    config = tmp_path / "config.toml"
    config.write_text(
        '[[hosts]]\nname = "far-a"\naddress = "203.0.113.7"\n\n[[hosts]]\nname = "far-b"\n'
        'address = "203.0.113.8"\n'
    )
    code = main(["clean", "--config", str(config), "--all", "--yes", "--log", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert code == 2
    assert "name the hosts to clean" in err and "far-a, far-b" in err and "`local` is this machine" in err
    assert not (tmp_path / "a").exists()


def test_the_demo_needs_its_hosts_named(tmp_path, capsys):
    """`gputui clean --demo --gpu 1` killed GPU 1 on both demo hosts."""
    code = main(["clean", "--demo", "--gpu", "1", "--yes", "--log", str(tmp_path / "a")])
    assert code == 2 and "name the hosts to clean: the demo has demo-a, demo-b" in capsys.readouterr().err


def test_a_demo_host_that_does_not_exist_is_named(tmp_path, capsys):
    code = main(["clean", "--demo", "demo-z", "--all", "--yes", "--log", str(tmp_path / "a")])
    assert (
        code == 2 and "the demo has no host 'demo-z' (its hosts: demo-a, demo-b)" in capsys.readouterr().err
    )


async def test_a_probe_stopped_mid_plan_ends_as_outcome_unknown_not_a_hang(tmp_path):
    """Issue 13 #6: with the probe stopped (SIGSTOP) after SIGTERM, `gputui clean` waited forever.
    A plan has a deadline and a silence limit derived from its timeouts: past them, the outcome is
    unknown, `clean` exits 1, and the audit log says so at the next start."""
    fleet = fleet_of([HostSpec(name="d", reader="sim", sim_scenario="demo", sim_seed=3)])
    fleet.start()
    await fleet.wait_first_samples(60)
    link = fleet.sessions["d"].link
    assert isinstance(link, LocalLink) and link.pid is not None
    probe = link.pid
    log = tmp_path / "actions.jsonl"
    stopped = asyncio.Event()

    def recorded(stage: str) -> bool:
        return any(r.get("stage") == stage for r in read_records(log)[0])

    async def stop_then_resume() -> None:
        """SIGSTOP the probe (this test's own child, through a pidfd) once it has sent SIGTERM;
        SIGCONT it once gputui has given up on it, so that it finishes and the fleet can stop it."""
        while not recorded("signal"):
            await asyncio.sleep(0.02)
        fd = os.pidfd_open(probe)
        try:
            signal.pidfd_send_signal(fd, signal.SIGSTOP)
            stopped.set()
            while not recorded("done"):
                await asyncio.sleep(0.05)
            signal.pidfd_send_signal(fd, signal.SIGCONT)
        finally:
            os.close(fd)

    watcher = asyncio.create_task(stop_then_resume())
    # GPU 3 runs a server that ignores SIGTERM: the probe is stopped while it waits to escalate.
    code, out, err = await clean(
        "d:3", "--yes", "--json", "--term-timeout", "1", "--verify-timeout", "1", "--log", str(log),
        fleet=fleet,
    )  # fmt: skip
    await asyncio.wait_for(watcher, 60)
    assert stopped.is_set()
    assert code == 1, err
    [host] = json.loads(out)["hosts"]
    assert host["status"] == "outcome-unknown"
    assert "said nothing for 12 s" in host["message"]
    [lost] = unfinished(log)
    assert lost.host == "d"


def test_clean_piped_into_head_finishes_the_plan_and_prints_no_traceback(tmp_path):
    """Defect 6: `gputui clean ... | head -2` died with a BrokenPipeError traceback (and its plan's
    verdict never reached the audit log). The plan runs to its verdict; the exit code is the verdict's."""
    log = tmp_path / "actions.jsonl"
    argv = [sys.executable, "-m", "gputui", "clean", "--demo", "demo-b:0", "--yes", "--log", str(log)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert proc.stdout is not None and proc.stderr is not None
    first = [proc.stdout.readline() for _ in range(2)]
    proc.stdout.close()  # what `head -2` does after two lines
    _, err = proc.communicate(timeout=120)
    assert first[0].startswith(b"== demo-b: plan")
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
    assert proc.returncode == 0
    records, _ = read_records(log)
    assert records[-1]["kind"] == "done" and records[-1]["result"] == "clean"
