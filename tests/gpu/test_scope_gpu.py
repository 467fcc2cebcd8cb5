"""Only what you chose, on a real GPU: a CUDA launcher on GPU 0 with three forked workers (its process
group, holding its context), cleaned first by one worker's PID, then by GPU, through `gputui clean`
itself (a subprocess, the local probe on NVML). Each run's output is printed (pytest -s shows it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gputui.kill.auditlog import read_records

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state != b"Z"


def clean(log: Path, *argv: str) -> tuple[int, dict, str]:
    result = subprocess.run(
        [sys.executable, "-m", "gputui", "clean", "local", *argv, "--yes", "--json", "--log", str(log)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    print(result.stderr)
    return result.returncode, json.loads(result.stdout), result.stderr


def signalled(log: Path, action: str) -> set[int]:
    records, _ = read_records(log)
    return {
        r["pid"]
        for r in records
        if r["action"] == action and r.get("stage") in ("signal", "escalate") and r.get("result") == "sent"
    }


def test_one_worker_then_the_whole_gpu(cuda_job, tmp_path):
    job = cuda_job(gib=4.0, gpu=0, workers=3)
    chosen, *siblings = job.workers
    log = tmp_path / "actions.jsonl"

    code, doc, _ = clean(log, "--pid", str(chosen), "--term-timeout", "2")
    [host] = doc["hosts"]
    print(json.dumps({k: host[k] for k in ("status", "gpus", "processes")}, indent=1))
    assert code == 0 and host["status"] == "stopped"
    assert host["plan"]["scope"] == "processes" and [t["pid"] for t in host["plan"]["targets"]] == [chosen]
    assert signalled(log, host["plan"]["id"]) == {chosen}
    assert alive(job.pid) and all(alive(pid) for pid in siblings)
    gpu0 = host["gpus"]["0"]
    assert gpu0["result"] == "released" and set(gpu0["others"]) >= {job.pid, *siblings}

    code, doc, _ = clean(log, "--gpu", "0", "--term-timeout", "2")
    [host] = doc["hosts"]
    print(json.dumps({k: host[k] for k in ("status", "gpus", "processes", "elapsed_ms")}, indent=1))
    assert code == 0 and host["status"] == "clean" and host["gpus"]["0"]["result"] == "clean"
    assert signalled(log, host["plan"]["id"]) == {job.pid, *siblings}
    assert not alive(job.pid) and not any(alive(pid) for pid in siblings)
