#!/usr/bin/env python3
"""Where `gputui clean --pid P --yes` spends its time, from the CLI's start to its exit (issue 39).

    python bench/clean_path.py [--runs 10] [--gib 4] [--out raw.json] [--no-trace]

On a local GPU host with PyTorch. Each run starts a fresh cooperative CUDA job (`--gib` GiB on GPU 0,
tests/support/cudajob.py), then runs the real command on it, `python -m gputui clean --pid P --yes
--log L`, and puts the marks of three witnesses on one clock (time.time()):
- this script: the command's spawn, each line it prints, the job's exit (a thread waits on it, as the
  shell that started a job reaps it) and the command's exit;
- the command itself: a tracer (TRACER below, this script's own: `python -c TRACER`, nothing in
  gputui changes) marks when the interpreter is up, when `gputui.cli.entry` is imported, and when the
  functions of WATCH begin and end, each patched as its module is imported (a post-import hook, so the
  command imports what it imports when it would);
- the audit log: what the probe did and when its events reached the command (plan, signal, exit,
  memory released, verdict).
Prints each mark's median, min and max over the runs (seconds after the spawn), the whole command's
time next to `kill P; sleep 1; nvidia-smi` on a fresh job, and a split: ours before the signal, the
job and the driver (signal to memory back), ours after. `--no-trace`: the command as `python -m
gputui` (the whole time only: what the tracer itself costs). Every job is started here and ended by
PID; nothing changes a GPU setting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pynvml  # noqa: E402

from gputui.transport import headstart  # noqa: E402
from tests.support.cudajob import CudaJob  # noqa: E402

PY = sys.executable

# (module, class or None, function, label): what the tracer times in the command.
WATCH = (
    ("gputui.transport.headstart", None, "begin", "head start: probe spawned"),
    ("gputui.cli.main", None, "main", "gputui.cli.main imported; main"),
    ("gputui.transport.headstart", None, "take", "local link takes the probe"),
    ("gputui.cli.clean", None, "run", "clean.run"),
    ("gputui.kill.operate", "Operations", "report_unfinished", "audit log read"),
    ("gputui.fleet.fleet", "Fleet", "wait_first_samples", "first samples"),
    ("gputui.kill.operate", "Operations", "scans", "full scans"),
    ("gputui.kill.operate", "Operations", "build", "plan built"),
    ("gputui.kill.operate", "Operations", "run_all", "plan run"),
    ("gputui.fleet.fleet", "Fleet", "stop", "fleet stopped"),
)

TRACER = r"""
import sys, time
marks = [["interpreter up", time.time()]]
out = sys.argv.pop(1)
watch = __import__("json").loads(sys.argv.pop(1))
import functools, importlib.abc, importlib.util, inspect

def wrap(owner, name, label):
    fn = getattr(owner, name)
    if inspect.iscoroutinefunction(fn):
        async def timed(*a, **k):
            marks.append([label + " <", time.time()])
            try:
                return await fn(*a, **k)
            finally:
                marks.append([label + " >", time.time()])
    else:
        def timed(*a, **k):
            marks.append([label + " <", time.time()])
            try:
                return fn(*a, **k)
            finally:
                marks.append([label + " >", time.time()])
    setattr(owner, name, functools.wraps(fn)(timed))

def first_records(cls):
    # The first hello and the first sample the fleet takes from the probe.
    dispatch, seen = cls._dispatch, set()
    def timed(self, record):
        kind = record.get("type")
        if kind in ("hello", "sample") and kind not in seen:
            seen.add(kind)
            marks.append(["first " + kind + " taken", time.time()])
        return dispatch(self, record)
    cls._dispatch = timed

class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        todo = [w for w in watch if w[0] == fullname]
        if not todo and fullname != "gputui.fleet.session":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            for _, cls, name, label in todo:
                wrap(getattr(module, cls) if cls else module, name, label)
            if fullname == "gputui.fleet.session":
                first_records(module.HostSession)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Hook())
import atexit
atexit.register(lambda: open(out, "w").write(__import__("json").dumps(marks)))
import gputui.cli.entry
marks.append(["gputui.cli.entry imported", time.time()])
sys.argv[0] = "gputui"
gputui.cli.entry.entry()
"""

# Audit-log records (kind, stage, result) -> the mark they make (the first of each).
AUDIT = {
    ("plan", "plan", "intent"): "audit: plan written",
    ("event", "accepted", "accepted"): "audit: probe accepted",
    ("event", "signal", "sent"): "audit: SIGTERM sent",
    ("event", "wait", "exited"): "audit: exit seen",
    ("event", "verify", "released"): "audit: memory released",
    ("verdict", "verdict", "released"): "audit: verdict released",
    ("done", "done", "released"): "audit: done",
}


def one_run(gib: float, trace: bool, tmp: Path, n: int) -> dict[str, float]:
    """One fresh job, one `clean --pid`; every mark in seconds after the spawn."""
    job = CudaJob(gib, gpu=0)
    exited: list[float] = []
    log, trace_out = tmp / f"audit-{n}.jsonl", tmp / f"trace-{n}.json"

    def reap() -> None:
        job.proc.wait()
        exited.append(time.time())

    waiter = threading.Thread(target=reap, daemon=True)
    waiter.start()
    argv = [PY, "-m", "gputui"] if not trace else [PY, "-c", TRACER, str(trace_out), json.dumps(WATCH)]
    argv += ["clean", "--pid", str(job.pid), "--yes", "--log", str(log)]
    marks: dict[str, float] = {}
    try:
        t0 = time.time()
        cli = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
        assert cli.stdout is not None
        for n_line, line in enumerate(cli.stdout):
            text = line.decode(errors="replace")
            if n_line == 0:
                marks["output: first line"] = time.time() - t0
            if "SIGTERM ->" in text:
                marks.setdefault("output: SIGTERM line", time.time() - t0)
            if text.startswith("== ") and ("RELEASED" in text or "CLEAN" in text or "FAILED" in text):
                marks["output: verdict line"] = time.time() - t0
        code = cli.wait()
        marks["command exit"] = time.time() - t0
        marks["exit code"] = float(code)
        waiter.join(10)
        if exited:
            marks["job reaped (its exit)"] = exited[0] - t0
        if trace and trace_out.exists():
            for label, at in json.loads(trace_out.read_text()):
                marks.setdefault(label, at - t0)
        if log.exists():
            for raw in log.read_text().splitlines():
                record = json.loads(raw)
                label = AUDIT.get((record.get("kind"), record.get("stage"), record.get("result")))
                if label is not None:
                    marks.setdefault(label, record["time"] - t0)
    finally:
        job.stop()
    return marks


def filesystem(path: Path) -> str:
    """The type of the filesystem `path` is on (its audit log's fsyncs cost what that disk takes)."""
    best, kind = "", "?"
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 2 and str(path).startswith(fields[1]) and len(fields[1]) > len(best):
                best, kind = fields[1], fields[2]
    return f"{kind} at {best}"


def old_way(gib: float) -> float:
    job = CudaJob(gib, gpu=0)
    try:
        t0 = time.perf_counter()
        subprocess.run(
            ["bash", "-c", f"kill {job.pid}; sleep 1; nvidia-smi"], capture_output=True, check=False
        )
        return time.perf_counter() - t0
    finally:
        job.stop()


def spawn_to_exit(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=False)
    return time.perf_counter() - t0


def probe_start() -> tuple[float, float]:
    """This machine's probe as a head start spawns it: seconds to its hello, to its first sample."""
    argv = headstart.default_local_argv(False, 1.0)
    t0 = time.perf_counter()
    probe = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert probe.stdout is not None and probe.stdin is not None
    hello = first = float("nan")
    for line in probe.stdout:
        kind = json.loads(line).get("type")
        if kind == "hello":
            hello = time.perf_counter() - t0
        elif kind == "sample":
            first = time.perf_counter() - t0
            break
    probe.stdin.close()  # EOF ends it
    probe.wait(10)
    return hello, first


def floor(runs: int) -> dict[str, list[float]]:
    """The parts no clean can go without, each alone: an interpreter, NVML's start, the probe's first
    sample (it must see the target hold the GPU before a signal). The driver's part (signal to memory
    back) comes from the traced runs' audit logs."""
    nvml = f"import sys; sys.path[0:0] = {[str(Path(pynvml.__file__).parent)]}; import pynvml; "
    nvml += "pynvml.nvmlInit(); pynvml.nvmlDeviceGetCount()"
    parts: dict[str, list[float]] = {}
    for _ in range(runs):
        for label, argv in (
            ("interpreter: python -c pass (site and .pth)", [PY, "-c", "pass"]),
            ("interpreter: python -S -c pass", [PY, "-S", "-c", "pass"]),
            ("python -S, import pynvml, nvmlInit, count", [PY, "-S", "-c", nvml]),
        ):
            parts.setdefault(label, []).append(spawn_to_exit(argv))
        hello, first = probe_start()
        parts.setdefault("the probe: spawn to hello", []).append(hello)
        parts.setdefault("the probe: spawn to first sample", []).append(first)
    return parts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--no-trace", action="store_true", help="only `python -m gputui clean`, untraced")
    ap.add_argument(
        "--log-dir",
        type=Path,
        default=ROOT,
        help="where the runs' audit logs go (default: the source tree, on a disk as a user's state "
        "directory is; /tmp may be memory, where an fsync costs nothing)",
    )
    args = ap.parse_args()
    runs: list[dict[str, float]] = []
    plain: list[float] = []
    old: list[float] = []
    with tempfile.TemporaryDirectory(prefix=".clean-path-", dir=args.log_dir) as tmp:
        where = filesystem(Path(tmp).resolve())
        for n in range(args.runs):
            if not args.no_trace:
                runs.append(one_run(args.gib, True, Path(tmp), n))
            plain.append(one_run(args.gib, False, Path(tmp), 1000 + n)["command exit"])
            old.append(old_way(args.gib))
    labels: list[str] = []
    for r in runs:
        labels += [k for k in r if k not in labels and k != "exit code"]
    labels.sort(key=lambda k: statistics.median(r[k] for r in runs if k in r))
    print(f"\n`gputui clean --pid P --yes` of a {args.gib:g} GiB job on {os.uname().nodename}, "
          f"Python {sys.version.split()[0]}, {args.runs} runs (seconds after the spawn), audit log on {where}")  # fmt: skip
    print(f"{'mark':<46} {'median':>8} {'min':>7} {'max':>7} {'runs':>5}")
    for label in labels:
        values = [r[label] for r in runs if label in r]
        print(
            f"{label:<46} {statistics.median(values):>8.3f} {min(values):>7.3f} {max(values):>7.3f} {len(values):>5}"
        )
    codes = sorted({int(r["exit code"]) for r in runs})
    print(f"\n{'whole command':<46} {'median':>8} {'min':>7} {'max':>7}")
    for label, values in (
        ("gputui clean --pid P --yes (python -m gputui)", plain),
        ("... traced", [r["command exit"] for r in runs]),
        ("kill P; sleep 1; nvidia-smi", old),
    ):
        if values:
            print(f"{label:<46} {statistics.median(values):>8.3f} {min(values):>7.3f} {max(values):>7.3f}")
    split = [
        (r["audit: SIGTERM sent"], r.get("audit: memory released", r["command exit"]) - r["audit: SIGTERM sent"],
         r["command exit"] - r.get("audit: memory released", r["command exit"]))
        for r in runs if "audit: SIGTERM sent" in r
    ]  # fmt: skip
    if split:
        print("\nsplit (median s): ours before the signal {:.3f}; signal to memory back {:.3f}; ours after {:.3f}"
              .format(*(statistics.median(s[i] for s in split) for i in range(3))))  # fmt: skip
    print(f"exit codes (traced): {codes}")
    parts = floor(args.runs)
    print(f"\n{'the floor, part by part (s, spawn to exit)':<46} {'median':>8} {'min':>7} {'max':>7}")
    for label, values in parts.items():
        print(f"{label:<46} {statistics.median(values):>8.3f} {min(values):>7.3f} {max(values):>7.3f}")
    if split:
        least = (
            statistics.median(parts["interpreter: python -c pass (site and .pth)"])
            + statistics.median(parts["the probe: spawn to first sample"])
            + statistics.median(s[1] for s in split)
        )
        print(
            f"floor: an interpreter, then the probe's first sample, then signal to memory back: {least:.3f} s"
        )
    if args.out:
        args.out.write_text(json.dumps({"runs": runs, "plain": plain, "old": old, "floor": parts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
