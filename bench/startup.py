#!/usr/bin/env python3
"""Whole-command wall time of what scripts call between two runs, and where it goes (issue 11).

    python bench/startup.py [--runs 10] [--gib 4] [--out raw.json]

On a local GPU host with PyTorch: `gputui clean --pid P --yes` on a fresh cooperative CUDA job,
next to `kill P; sleep 1; nvidia-smi` on a fresh job; `gputui wait` on GPUs that are already ready;
and the parts of a start: the interpreter alone, importing the CLI, `gputui --version`, a probe from
spawn to its hello and first full sample (through the bootstrap as over SSH, and from the installed
package as the local transport starts it), `gputui snapshot --json`. Every job is started here and
ended by PID; nothing changes a GPU setting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.api import HostSpec, boot_argv, build_payload, local_argv, probe_argv  # noqa: E402

PY = sys.executable
# The same command with the head start switched off (the probe started by the transport, after the
# imports, as before it): what the head start saves, measured side by side on one machine.
NO_HEAD_START = [
    PY,
    "-c",
    "import sys; import gputui.cli.main as c; c.head_start = lambda args: None; sys.exit(c.main(sys.argv[1:]))",
]


def timed(argv: list[str], stdin: bytes | None = None) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, check=False, cwd=ROOT)
    return time.perf_counter() - t0, done.returncode, (done.stdout + done.stderr).decode(errors="replace")


def probe_to_first_sample(argv: list[str], payload: bytes | None) -> float:
    """Spawn to the first sample line (the hello comes first): what every command waits for."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin and proc.stdout
    if payload:
        proc.stdin.write(payload)
    proc.stdin.write(b'{"type": "sample", "full": true}\n')
    proc.stdin.flush()
    took = None
    for line in proc.stdout:
        if b'"type":"sample"' in line.replace(b" ", b""):
            took = time.perf_counter() - t0
            break
    proc.stdin.close()
    proc.wait()
    if took is None:
        raise RuntimeError("the probe sent no sample")
    return took


def bytecode_state() -> dict[str, object]:
    """Whether what a command imports comes from cached bytecode: `pip install` compiles a package's
    modules; a source tree (or an editable install) is compiled on first import unless
    PYTHONDONTWRITEBYTECODE is set, and then every command compiles them again."""
    import importlib.util

    def cached(origin: str | None) -> bool:
        return origin is not None and os.path.exists(importlib.util.cache_from_source(origin))

    pynvml = importlib.util.find_spec("pynvml")
    return {
        "gputui": all(cached(str(ROOT / "gputui" / m)) for m in ("cli.py", "probe/core.py", "probe/main.py")),
        "pynvml": cached(pynvml.origin if pynvml else None),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
    }


def repeat(runs: int, fn) -> list[float]:
    return [fn() for _ in range(runs)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--no-gpu",
        action="store_true",
        help="only the start-up rows (no CUDA job): `clean`/`wait` as far as a machine without a GPU takes them",
    )
    args = ap.parse_args()
    spec = HostSpec(name="local")
    bytecode = bytecode_state()
    rows: dict[str, list[float]] = {}
    notes: dict[str, str] = {}

    def whole(label: str, argv: list[str]) -> None:
        results = [timed(argv) for _ in range(args.runs)]
        rows[label] = [t for t, _, _ in results]
        codes = sorted({rc for _, rc, _ in results})
        notes[label] = f"exit {','.join(map(str, codes))}"
        if codes != [0]:
            notes[label] += ": " + results[-1][2].strip().splitlines()[-1][:80]

    whole("python3 -c pass", [PY, "-c", "pass"])
    whole("python3 -c 'import gputui.cli'", [PY, "-c", "import gputui.cli"])
    whole("gputui --version", [PY, "-m", "gputui", "--version"])
    whole("gputui clean --help", [PY, "-m", "gputui", "clean", "--help"])
    whole("gputui wait --help", [PY, "-m", "gputui", "wait", "--help"])
    if args.no_gpu:
        # Parsing, config, the local probe's start and its "no GPU" answer: all a start costs here.
        whole("gputui clean --all --dry-run (no GPU)", [PY, "-m", "gputui", "clean", "--all", "--dry-run"])
        whole("gputui wait --timeout 1 (no GPU)", [PY, "-m", "gputui", "wait", "--timeout", "1"])
        return report(args, rows, notes, bytecode)
    payload = build_payload(probe_argv(spec))
    rows["probe to 1st sample: bootstrap (as SSH)"] = repeat(
        args.runs, lambda: probe_to_first_sample(boot_argv(PY), payload)
    )
    rows["probe to 1st sample: local transport"] = repeat(
        args.runs, lambda: probe_to_first_sample(local_argv(PY, probe_argv(spec)), None)
    )
    whole("gputui snapshot --json", [PY, "-m", "gputui", "snapshot", "--json"])
    whole("gputui wait (GPUs ready)", [PY, "-m", "gputui", "wait", "--timeout", "10"])
    whole("... wait without the head start", [*NO_HEAD_START, "wait", "--timeout", "10"])

    clean: list[float] = []
    cold: list[float] = []
    old: list[float] = []
    codes: set[int] = set()
    from tests.support.cudajob import CudaJob

    for _ in range(args.runs):
        for times, argv in ((clean, [PY, "-m", "gputui"]), (cold, NO_HEAD_START)):
            job = CudaJob(args.gib, gpu=0)
            try:
                took, rc, _ = timed([*argv, "clean", "--pid", str(job.pid), "--yes"])
                times.append(took)
                codes.add(rc)
            finally:
                job.stop()
        job = CudaJob(args.gib, gpu=0)
        try:
            took, _, _ = timed(["bash", "-c", f"kill {job.pid}; sleep 1; nvidia-smi"])
            old.append(took)
        finally:
            job.stop()
    rows[f"gputui clean --pid P --yes ({args.gib:g} GiB job)"] = clean
    notes[f"gputui clean --pid P --yes ({args.gib:g} GiB job)"] = f"exit {','.join(map(str, sorted(codes)))}"
    rows["... clean without the head start"] = cold
    rows["kill P; sleep 1; nvidia-smi"] = old
    return report(args, rows, notes, bytecode)


def report(
    args: argparse.Namespace, rows: dict[str, list[float]], notes: dict[str, str], bytecode: dict[str, object]
) -> int:
    print(
        f"\nwhole-command wall time on {os.uname().nodename}, Python {sys.version.split()[0]}, {args.runs} runs"
    )
    print(
        "bytecode cached: gputui {gputui}, pynvml {pynvml} (PYTHONDONTWRITEBYTECODE={PYTHONDONTWRITEBYTECODE})".format(
            **bytecode
        )
    )
    print(f"{'what':<46} {'median s':>9} {'min s':>7} {'max s':>7}  note")
    for label, values in rows.items():
        print(
            f"{label:<46} {statistics.median(values):>9.3f} {min(values):>7.3f} {max(values):>7.3f}"
            f"  {notes.get(label, '')}"
        )
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "notes": notes, "bytecode": bytecode}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
