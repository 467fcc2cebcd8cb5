"""Two gputui runs on one real GPU host: a clean never signals the other's probe or its gputui.

The other operator's run is `gputui snapshot --watch 1 --json` on this machine: its probe holds every
/dev/nvidia* through NVML and NVML lists it on no GPU. Our own CUDA job (a forked worker too, so the
sweep has a hidden holder to take) is what the clean may stop. The sweep runs for real only when
its dry run names nothing but the processes this test started; otherwise the machine has holders of
its own and only the dry run's answer is checked. Every process is started here and ended by PID."""

import json
import os
import pwd
import signal
import subprocess
import sys
import time

from tests.support.procs import probes_below, start_time
from tests.support.simprobe import alive
from tests.support.waiting import wait_until


def gputui(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def record_of(pid: int) -> dict | None:
    run = gputui("snapshot", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    (host,) = json.loads(run.stdout)["hosts"]
    return next((p for p in host["processes"] if p["pid"] == pid), None)


def targets(run: subprocess.CompletedProcess) -> set:
    doc = json.loads(run.stdout)
    return {t["pid"] for h in doc["hosts"] if h.get("plan") for t in h["plan"]["targets"]}


def test_another_gputui_survives_a_sweep_and_a_user_clean_on_a_real_gpu(cuda_job, tmp_path):
    job = cuda_job(gib=1.0, gpu=0, fork=True)
    ours = {job.pid, *job.workers}
    out = (tmp_path / "watch.out").open("w")
    other = subprocess.Popen(
        [sys.executable, "-m", "gputui", "snapshot", "--watch", "1", "--json"],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        other_id = (other.pid, start_time(other.pid))
        wait_until(lambda: probes_below(other.pid), 60.0, step=0.1)
        (probe,) = probes_below(other.pid)
        record = wait_until(lambda: record_of(probe[0]), 60.0, step=0.5)
        print(
            "the other gputui's probe as a clean sees it:",
            {k: record[k] for k in ("kind", "reason", "protected", "job")},
        )
        assert (record["kind"], record["reason"], record["protected"], record["job"]) == (
            "monitor", "gputui", "gputui", None,
        )  # fmt: skip

        me = pwd.getpwuid(os.getuid()).pw_name
        log = str(tmp_path / "actions.jsonl")
        by_user = gputui("clean", "--user", me, "--dry-run", "--json", "--log", log)
        assert by_user.returncode in (0, 2), by_user.stdout + by_user.stderr
        if by_user.returncode == 0:
            assert not {other.pid, probe[0]} & targets(by_user)
        refused = gputui("clean", "--pid", str(probe[0]), "--include-monitor", "--yes", "--log", log)
        print(
            "clean --pid <its probe> --include-monitor:", refused.returncode, refused.stdout + refused.stderr
        )
        assert refused.returncode == 4

        dry = gputui("clean", "--all", "--sweep", "--dry-run", "--json", "--log", log)
        assert dry.returncode in (0, 1), dry.stdout + dry.stderr
        planned = targets(dry)
        print("clean --all --sweep --dry-run targets:", sorted(planned), "ours:", sorted(ours))
        assert not {other.pid, probe[0]} & planned
        if planned <= ours:
            t0 = time.perf_counter()
            swept = gputui("clean", "--all", "--sweep", "--yes", "--json", "--log", log)
            print(f"clean --all --sweep: rc {swept.returncode} in {time.perf_counter() - t0:.3f} s")
            assert swept.returncode in (0, 1), swept.stdout + swept.stderr
            assert not {other.pid, probe[0]} & targets(swept)
        assert alive(*other_id) and alive(*probe)
        assert other.poll() is None
    finally:
        if other.poll() is None:
            os.kill(other.pid, signal.SIGINT)
        other.wait(timeout=60)
        out.close()
