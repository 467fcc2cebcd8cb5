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


# -- every config value type-checked -----------------------------------------------------------------

# One of each TOML type, and the numbers that break a careless check.
TOML_VALUES = [
    '["SIGSTOP"]', "[]", "[[1]]", "{ a = 1 }", "{}", '"x"', '""', "1", "0", "-1", "9223372036854775807",
    "-9223372036854775808", "1" + "0" * 400, "1e400", "-1e400", "nan", "inf", "-inf", "0.5", "true",
    "false", "1979-05-27T07:32:00Z", "1979-05-27", "07:32:00",
]  # fmt: skip


def config_texts() -> list[tuple[str, str]]:
    from gputui import config

    tables = {
        "": [*config.TOP_KEYS],
        "[defaults]\n": [*config.DEFAULT_KEYS],
        '[[hosts]]\naddress = "gpu-a"\nreader = "sim"\n': [k for k in config.HOST_KEYS if k != "address"],
        "[kill]\n": [*config.KILL_KEYS],
        "[columns]\n": [f"hide_{name}" for name in config.COLUMNS],
    }
    return [
        (f"{header}{key} = {value}\n", f"{header.strip() or 'top'} {key} = {value}")
        for header, keys in tables.items()
        for key in keys
        for value in TOML_VALUES
    ]


def test_every_config_value_of_every_type_is_a_config_error_or_fine() -> None:
    """`[kill] signals = ["SIGSTOP"]` (any list or inline table) was a TypeError traceback."""
    from gputui.config import ConfigError, parse_config

    crashed = []
    for text, what in config_texts():
        try:
            parse_config(text, "c.toml")
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("c.toml"), (what, str(exc))
        except Exception as exc:  # the point: nothing else may come out
            crashed.append(f"{what}: {type(exc).__name__}: {exc}")
    assert crashed == []


@pytest.mark.parametrize("value", ['["SIGSTOP"]', "{ a = 1 }", "1" + "0" * 400])
def test_a_kill_signals_list_is_exit_2_for_cli_and_dashboard(tmp_path: Path, value: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[kill]\nsignals = {value}\n")
    for argv in (["clean", "--demo", "demo-a", "--all", "--dry-run"], ["--demo"]):
        run = gputui(*argv, "--config", str(path))
        one_clear_line(run, f"{path}:2", "'signals' in [kill] must be")
