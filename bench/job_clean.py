#!/usr/bin/env python3
"""A job clean (a launcher and its two ranks) next to a single-process clean; and, on a GPU host,
the two cases of issue 18 through the real CLI.

    python bench/job_clean.py [--reader sim|nvml] [--runs 5] [--gib 2] [--term-timeout 5] [--out raw.json]

Timing: for each run a fresh job is started, gputui plans from a full sample as `gputui clean
--pid` does (gputui/kill/plan/jobs.py: the PID of a launcher that holds no GPU chooses its job) and the
probe's engine executes it; the clock runs from handing the plan to the engine to its `done`
event. "single": one process on GPU 0 stopped by its PID. "job": a torchrun-like launcher (a
Python parent with no CUDA) with two CUDA ranks (GPU 0 and 1, both on GPU 0 with one GPU), stopped
by the launcher's PID: root first (it forwards SIGTERM to its ranks), then any member left.

Checks (--reader nvml only, real CUDA jobs with PyTorch, as tests/support/cudajob.py starts them):
1. the launcher with two CUDA ranks, stopped by `gputui clean --pid <launcher> --yes --json`:
   exit 0, every rank and the launcher gone, their memory released (NVML lists none of them);
2. a supervisor that restarts its CUDA worker 0.5 s after it ends: `gputui clean --gpu 0 --yes
   --json` must name the supervisor in the verdict (`restarts`); then `gputui clean --pid
   <supervisor>` stops it for good. `clean --gpu 0` stops everything on GPU 0, so it runs only when
   nothing but this benchmark's processes uses GPU 0 (else that check is skipped, and says why).
With --reader sim the checks run on the engine (the sim's CLI probe would start a sim of its own).

Only processes this script starts are signalled, by PID (a pidfd and the start time read when
each started); everything left is ended at the end. Prints a table; --out writes the raw runs.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui import api  # noqa: E402
from gputui.api import (  # noqa: E402
    KillOptions,
    PlanOptions,
    Probe,
    Sample,
    execute,
    plan_for_gpus,
    plan_for_pids,
    signal_checked,
)

# A CUDA rank: allocates `gib` GiB on its GPU, says so, and lives until its stdin ends (the
# benchmark's pipe: when the benchmark goes, so does every rank) or a signal ends it.
RANK = r"""
import os, sys
import torch
gib, gpu = float(sys.argv[1]), int(sys.argv[2])
x = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device=f"cuda:{gpu}")
torch.cuda.synchronize()
print(os.getpid(), flush=True)
sys.stdin.readline()
"""

# A torchrun-like launcher: no CUDA of its own; starts one rank per GPU of argv[2] (comma list),
# forwards SIGTERM, SIGINT and SIGHUP to them, stops the rest when one ends, and exits once all
# have. Prints its PID and its ranks' once every rank has its memory.
LAUNCHER = r"""
import os, signal, subprocess, sys, threading, time
gib, gpus, rank_source = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
ranks = [subprocess.Popen([sys.executable, "-c", rank_source, gib, gpu], stdout=subprocess.PIPE, text=True)
         for gpu in gpus]
for r in ranks:
    r.stdout.readline()
def forward(sig, frame=None):
    for r in ranks:
        if r.poll() is None:
            try:
                r.send_signal(sig)
            except ProcessLookupError:
                pass
for name in ("SIGTERM", "SIGINT", "SIGHUP"):
    signal.signal(getattr(signal, name), forward)
def orphaned():  # the benchmark went away: end the ranks too
    sys.stdin.readline()
    forward(signal.SIGKILL)
threading.Thread(target=orphaned, daemon=True).start()
print(os.getpid(), *[r.pid for r in ranks], flush=True)
stopping = False
while any(r.poll() is None for r in ranks):
    if not stopping and any(r.poll() is not None for r in ranks):
        stopping = True
        forward(signal.SIGTERM)
    time.sleep(0.05)
"""

# A supervisor (an elastic agent, `Restart=always`): no CUDA of its own; runs one CUDA worker and
# starts a new one 0.5 s after it ends; SIGTERM is passed on to the worker, then it exits.
SUPERVISOR = r"""
import os, signal, subprocess, sys, threading, time
gib, gpu, rank_source = sys.argv[1], sys.argv[2], sys.argv[3]
state = {"worker": None, "stop": False}
def start():
    w = subprocess.Popen([sys.executable, "-c", rank_source, gib, gpu], stdout=subprocess.PIPE, text=True)
    w.stdout.readline()
    state["worker"] = w
def stop(sig, frame=None):
    state["stop"] = True
    w = state["worker"]
    if w is not None and w.poll() is None:
        w.send_signal(sig)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
def orphaned():
    sys.stdin.readline()
    stop(signal.SIGKILL)
threading.Thread(target=orphaned, daemon=True).start()
start()
print(os.getpid(), state["worker"].pid, flush=True)
while True:
    w = state["worker"]
    if w.poll() is not None:
        if state["stop"]:
            break
        time.sleep(0.5)
        if state["stop"]:
            break
        start()
    time.sleep(0.05)
"""


def start_time(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(raw[raw.rindex(b")") + 2 :].split()[19])


def alive(pid: int, start: int | None) -> bool:
    """The process (pid, start time) runs: not gone, not another at its PID, not a zombie."""
    if start is None or start_time(pid) != start:
        return False
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return raw[raw.rindex(b")") + 2 :].split()[0] != b"Z"


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return found


class Started:
    """A process tree this benchmark started (a Popen child and the processes below it): their
    identities when first seen, and the way to end what is left of them, by PID."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert self.proc.stdout is not None
        words = self.proc.stdout.readline().split()
        if not words:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("the job did not start (is PyTorch with CUDA installed?)")
        self.pid = int(words[0])
        self.children = [int(w) for w in words[1:]]
        self.known = {pid: start_time(pid) for pid in [self.pid, *self.children]}

    def watch(self) -> None:
        """Learn the processes below the root now (a supervisor's new worker)."""
        for pid in children_of(self.pid):
            self.known.setdefault(pid, start_time(pid))

    def stop(self) -> None:
        """SIGKILL what is left, each through a pidfd, only while it is the process first seen."""
        self.watch()
        fds = []
        for pid, start in self.known.items():
            if pid == self.proc.pid:
                continue
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            if start is not None and start_time(pid) == start:
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                fds.append(fd)
            else:
                os.close(fd)
        if self.proc.poll() is None:
            self.proc.kill()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()
        for fd in fds:
            select.select([fd], [], [], 10)
            os.close(fd)


# -- jobs, real or simulated -------------------------------------------------------------------


class CudaJobs:
    def __init__(self, gib: float, gpus: int) -> None:
        self.gib = gib
        self.rank_gpus = "0,1" if gpus > 1 else "0,0"
        self.live: list[Started] = []

    def _start(self, argv: list[str]) -> Started:
        job = Started([sys.executable, "-c", *argv])
        self.live.append(job)
        return job

    def single(self) -> int:
        return self._start([RANK, str(self.gib), "0"]).pid

    def launcher(self) -> Started:
        return self._start([LAUNCHER, str(self.gib), self.rank_gpus, RANK])

    def supervisor(self) -> Started:
        return self._start([SUPERVISOR, str(self.gib), "0", RANK])

    def cleanup(self) -> None:
        for job in self.live:
            job.stop()
        self.live.clear()


class SimJobs:
    def __init__(self, reader: Any, gib: float) -> None:
        self.reader = reader
        self.memory = int(gib * (1 << 30))
        self.live: list[Any] = []

    def single(self) -> int:
        job = self.reader.spawn("idle", gpu=0, memory=self.memory)
        self.live.append(job)
        return job.pid

    def launcher(self) -> Any:
        job = self.reader.spawn("launcher", gpu=[0, 1], memory=self.memory)
        self.live.append(job)
        return job

    def supervisor(self) -> Any:
        job = self.reader.spawn("supervisor", gpu=0, memory=self.memory)
        self.live.append(job)
        return job

    def cleanup(self) -> None:
        for job in self.live:
            for pid, start in job.workers:
                signal_checked(pid, start, signal.SIGKILL, job.session)
            job.signal(signal.SIGKILL)
        self.live.clear()


# -- timing ------------------------------------------------------------------------------------


def timed(probe: Probe, pid: int, term_timeout: float, what: str) -> dict[str, Any]:
    sample = Sample.from_wire(probe.sample(full=True))
    options = PlanOptions(operator="bench", kill=KillOptions(term_timeout=term_timeout))
    plan = plan_for_pids(sample, [pid], host="bench", options=options)
    wire = plan.to_wire()
    events: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    done = execute(probe, wire, events.append)
    seconds = time.perf_counter() - t0
    processes = (done or {}).get("data", {}).get("processes", [])
    return {
        "what": what,
        "seconds": seconds,
        "probe_ms": done["data"]["elapsed_ms"] if done else None,
        "ok": bool(done and done["data"].get("ok")),
        "result": done["result"] if done else None,
        "job": bool(plan.jobs),
        "targets": [(t["pid"], t.get("role")) for t in wire["targets"]],
        "results": {str(p["pid"]): p["result"] for p in processes},
        "escalated": any(e["stage"] == "escalate" and e["result"] == "sent" for e in events),
    }


def settle(probe: Probe, timeout: float = 20.0) -> None:
    """Until GPUs 0 and 1 list nothing and are back at idle (the last run's memory)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gpus, listed = probe.read_gpus()
        mine = [g for g in gpus if g["index"] in (0, 1)]
        if not any({0, 1} & set(m) for m in listed.values()) and all(Probe.gpu_is_idle(g) for g in mine):
            return
        time.sleep(0.05)


def summary(rows: list[dict[str, Any]]) -> str:
    secs = sorted(r["seconds"] for r in rows)
    ok = sum(r["ok"] for r in rows)
    p95 = secs[min(len(secs) - 1, round(0.95 * (len(secs) - 1)))]
    return f"{statistics.median(secs):>8.3f} {p95:>8.3f}   {ok:>2}/{len(rows):<2}"


# -- the CLI checks (a GPU host) ---------------------------------------------------------------


def gputui(*argv: str, timeout: float = 180) -> tuple[int, dict[str, Any] | None, str]:
    run = subprocess.run(
        [sys.executable, "-m", "gputui", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env=dict(
            os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        ),
    )
    try:
        doc = json.loads(run.stdout)
    except ValueError:
        doc = None
    return run.returncode, doc, run.stderr


def others_on_gpu0(probe: Probe, ours: set[int]) -> list[int]:
    _, listed = probe.read_gpus()
    return sorted(pid for pid, mem in listed.items() if 0 in mem and pid not in ours)


def check_launcher(jobs: CudaJobs, probe: Probe, log: str) -> dict[str, Any]:
    launcher = jobs.launcher()
    ranks = launcher.children
    code, doc, err = gputui("clean", "--pid", str(launcher.pid), "--yes", "--json", "--log", log)
    host = (doc or {}).get("hosts", [{}])[0]
    results = {p["pid"]: p["result"] for p in host.get("processes", [])}
    _, listed = probe.read_gpus()
    launcher.proc.poll()  # the launcher is this script's child: reaped here (the probe says zombie)
    gone = not any(alive(pid, launcher.known[pid]) for pid in [launcher.pid, *ranks])
    ok = (
        code == 0
        and host.get("status") == "stopped"
        and all(results.get(pid) in ("exited", "zombie") for pid in [launcher.pid, *ranks])
        and gone
        and not any(pid in listed for pid in ranks)
    )
    return {
        "check": "launcher --pid",
        "ok": ok,
        "exit": code,
        "status": host.get("status"),
        "results": results,
        "gone": gone,
        "stderr": err[-2000:] if not ok else "",
    }


def check_supervisor(jobs: CudaJobs, probe: Probe, log: str) -> dict[str, Any]:
    supervisor = jobs.supervisor()
    [worker] = supervisor.children
    others = others_on_gpu0(probe, {worker})
    if others:
        return {
            "check": "supervisor --gpu 0",
            "ok": None,
            "skipped": f"GPU 0 is also used by {others}: clean --gpu 0 would stop them",
        }
    code, doc, err = gputui("clean", "--gpu", "0", "--yes", "--json", "--log", log)
    supervisor.watch()
    host = (doc or {}).get("hosts", [{}])[0]
    restarts = host.get("restarts", [])
    named = [r for r in restarts if r["pid"] == supervisor.pid and worker in r["children"]]
    # Its new worker must be on the GPU before the supervisor is a job's root (CUDA takes seconds).
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        supervisor.watch()
        _, listed = probe.read_gpus()
        if any(pid in listed for pid in children_of(supervisor.pid)):
            break
        time.sleep(0.1)
    # Then the supervisor itself, by its PID: its job (it and whatever worker runs now) stops.
    code2, doc2, err2 = gputui("clean", "--pid", str(supervisor.pid), "--yes", "--json", "--log", log)
    host2 = (doc2 or {}).get("hosts", [{}])[0]
    supervisor.proc.poll()  # this script's child: reaped here
    gone = not any(alive(pid, start) for pid, start in supervisor.known.items())
    ok = bool(named) and code2 == 0 and host2.get("status") == "stopped" and gone
    return {
        "check": "supervisor --gpu 0",
        "ok": ok,
        "exit_gpu_clean": code,
        "status_gpu_clean": host.get("status"),
        "restart_words": [r.get("words") for r in restarts],
        "exit_supervisor_clean": code2,
        "status_supervisor_clean": host2.get("status"),
        "gone": gone,
        "stderr": (err + err2)[-3000:] if not ok else "",
    }


def check_sim(jobs: SimJobs, probe: Probe, term_timeout: float) -> list[dict[str, Any]]:
    """The same two cases on the engine (the sim's CLI probe would start a sim of its own)."""
    out = []
    launcher = jobs.launcher()
    row = timed(probe, launcher.pid, term_timeout, "job")
    ok = row["ok"] and row["job"] and row["targets"][0] == (launcher.pid, "root")
    out.append({"check": "launcher --pid (engine)", "ok": ok, "results": row["results"]})
    settle(probe)
    supervisor = jobs.supervisor()
    [(worker, _)] = supervisor.workers
    sample = Sample.from_wire(probe.sample(full=True))
    plan = plan_for_gpus(sample, [0], host="bench", options=PlanOptions(operator="bench"))
    events: list[dict[str, Any]] = []
    done = execute(probe, plan.to_wire(), events.append)
    restarts = (done or {}).get("data", {}).get("restarts", [])
    named = any(r["pid"] == supervisor.pid and worker in r["children"] for r in restarts)
    out.append({"check": "supervisor --gpu 0 (engine)", "ok": named, "restarts": restarts})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reader", choices=("sim", "nvml"), default="sim")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--term-timeout", type=float, default=5.0)
    ap.add_argument("--no-checks", action="store_true", help="the timing table only")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.reader == "nvml":
        reader: Any = api.NvmlReader()
    else:
        reader = api.SimReader(gpus=2, scenario="empty")
    probe = Probe(reader)
    hello = probe.start()
    if hello["error"]:
        print("no GPU reader:", hello["error"]["message"])
        return 3
    gpus, _ = probe.read_gpus()
    jobs: Any = CudaJobs(args.gib, len(gpus)) if args.reader == "nvml" else SimJobs(reader, args.gib)
    names = sorted({str(g.get("name", "?")).replace("NVIDIA ", "") for g in gpus})
    where = f"{len(gpus)}x{'/'.join(names)}"
    rows: dict[str, list[dict[str, Any]]] = {"single": [], "job": []}
    checks: list[dict[str, Any]] = []
    try:
        for _ in range(args.runs):
            settle(probe)
            rows["single"].append(timed(probe, jobs.single(), args.term_timeout, "single"))
            jobs.cleanup()
            settle(probe)
            launcher = jobs.launcher()
            rows["job"].append(timed(probe, launcher.pid, args.term_timeout, "job"))
            jobs.cleanup()
        if not args.no_checks:
            settle(probe)
            if args.reader == "nvml":
                with tempfile.TemporaryDirectory() as tmp:
                    log = str(Path(tmp) / "actions.jsonl")
                    checks.append(check_launcher(jobs, probe, log))
                    jobs.cleanup()
                    settle(probe)
                    checks.append(check_supervisor(jobs, probe, log))
                    jobs.cleanup()
            else:
                checks += check_sim(jobs, probe, args.term_timeout)
                jobs.cleanup()
    finally:
        jobs.cleanup()
        probe.close()
    ranks = "2 ranks on GPU 0,1" if args.reader == "sim" or len(gpus) > 1 else "2 ranks on GPU 0"
    print(
        f"\nstop by PID to a verified verdict ({where}, reader {args.reader}, {args.gib:g} GiB per "
        f"process, {args.runs} runs each, TERM timeout {args.term_timeout:g} s)"
    )
    print(f"{'what':<52} {'median s':>8} {'p95 s':>8}   ok")
    print(f"{'single: one CUDA process, --pid PID':<52} {summary(rows['single'])}")
    print(f"{'job: launcher (no GPU) + ' + ranks + ', --pid':<52} {summary(rows['job'])}")
    not_job = [r for r in rows["job"] if not r["job"]]
    if not_job:
        print(f"! {len(not_job)} job run(s) were not planned as a job: {not_job[0]['targets']}")
    escalated = sum(r["escalated"] for r in rows["job"])
    print(f"(job runs needing SIGKILL: {escalated} of {len(rows['job'])}; the launcher forwards SIGTERM)")
    for check in checks:
        state = "SKIPPED" if check.get("ok") is None else ("ok" if check["ok"] else "FAILED")
        print(
            f"check {check['check']:<30} {state}" + (f": {check['skipped']}" if check.get("skipped") else "")
        )
        for words in check.get("restart_words") or []:
            print(f"   verdict: {words}")
        if check.get("stderr"):
            print(check["stderr"])
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "checks": checks, "where": where}, indent=1))
    failed = [c for c in checks if c.get("ok") is False] or [
        r for r in rows["job"] + rows["single"] if not r["ok"]
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
