"""Every bad value is refused with one clear line and exit 2, never a traceback (issue 17, defect 10):
every numeric flag range-checked and overflow-safe, every config value type-checked, a GPU index a
host lists twice refused at the edge, an export that fails leaves no half of itself behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.model import Sample

ROOT = Path(__file__).resolve().parents[1]


def gputui(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def one_clear_line(run: subprocess.CompletedProcess[str], *words: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert "Traceback" not in run.stderr, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    last = lines[-1]  # argparse prints its usage first, then the one line that says what is wrong
    assert last.startswith(("gputui", "usage")) or "error:" in last, lines
    for word in words:
        assert word in last, (word, last)


# -- a GPU index listed twice ------------------------------------------------------------------------


def gpu(index: Any, used: int = 0) -> dict[str, Any]:
    return {"index": index, "uuid": f"GPU-{index}", "memory_used": used, "memory_total": 1 << 30}


def test_a_gpu_index_listed_twice_is_refused_and_said() -> None:
    """Both records were taken: a wait or a plan could judge or target either one."""
    sample = Sample.from_wire({"seq": 1, "gpus": [gpu(0, 5), gpu(1), gpu(0, 7), gpu(2)]})
    assert [g.index for g in sample.gpus] == [1, 2]  # neither GPU 0 can be believed
    assert sample.gpus_refused == 2 and sample.gpus_refused_why == ("GPU 0: listed 2 times",)
    sample = Sample.from_wire({"seq": 1, "gpus": [gpu(0), gpu("x"), "junk", gpu(1)]})
    assert [g.index for g in sample.gpus] == [0, 1]
    assert sample.gpus_refused == 2
    assert sample.gpus_refused_why == ("GPU record #2: no usable index", "GPU record #3: no usable index")
    clean = Sample.from_wire({"seq": 1, "gpus": [gpu(0), gpu(1)]})
    assert clean.gpus_refused == 0 and clean.gpus_refused_why == ()
