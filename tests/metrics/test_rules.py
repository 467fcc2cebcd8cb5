"""The alerting rules shipped with gputui (gputui/rules/gputui.rules.yml; docs/MONITORING.md "Alert
rules"): Prometheus' own promtool checks them and runs their unit tests (tests/metrics/rules/), they name
only metrics `gputui export` writes, `gputui export --rules` prints them, and the wheel carries them.
Every metric written is in docs/MONITORING.md's table, and nothing else is.

promtool comes with Debian's `prometheus` package (.ci/run installs it); without it those tests skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gputui.fleet.session import LIVE, HostView
from gputui.model import HostFacts, Sample
from gputui.views.metrics import families

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "gputui" / "rules" / "gputui.rules.yml"
RULES_TEST = REPO / "tests" / "metrics" / "rules" / "gputui.rules.test.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian package `prometheus`; .ci/run installs it)"
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )


@needs_promtool
def test_promtool_checks_the_rules():
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@needs_promtool
def test_the_rules_unit_tests_pass_under_promtool():
    result = promtool("test", "rules", str(RULES_TEST))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def emitted_names() -> set[str]:
    """Every sample name `gputui export` can write, from a host whose GPU shows every state there
    is a series for (an error, a throttle reason, a preflight reading, a holder)."""
    gpu = {
        "index": 0, "uuid": "GPU-0", "memory_total": 1 << 30, "memory_used": 1 << 20, "memory_baseline": 0,
        "util_gpu": 0, "util_mem": 0, "temperature": 30, "power_draw": 80.0, "power_limit": 700.0,
        "error": "gpu-lost", "accounting": {"processes": 1 << 20},
        "preflight": {"throttle": ["hw-slowdown"], "ecc_corrected": 0, "ecc_uncorrected": 0,
                      "remap_pending": False, "remap_failed": False, "retired_pending": False},
    }  # fmt: skip
    holder = {
        "pid": 7,
        "kind": "user",
        "gpus": [0],
        "gpu_memory": {"0": 1 << 20},
        "gpu_util": {"0": {"sm": 0}},
    }
    view = HostView(name="n1", status=LIVE)
    view.facts = HostFacts.from_hello({"host": {"hostname": "n1"}, "read_only": True})
    view.record(Sample.from_wire({"seq": 1, "time": 1.0, "gpus": [gpu], "processes": [holder]}))
    return {s.name for family in families([view]) for s in family.samples}


def test_the_rules_name_only_metrics_gputui_export_writes():
    used = set(re.findall(r"\bgputui_[a-z_]+", "\n".join(
        line for line in RULES.read_text().splitlines() if line.strip().startswith("expr:")
    )))  # fmt: skip
    assert used, "no gputui metric in the rules' expressions"
    assert used <= emitted_names(), used - emitted_names()


def test_export_rules_prints_the_shipped_file(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "gputui", "export", "--rules"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the repository: the file comes from the package
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])),
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == RULES.read_text()


def test_the_wheel_carries_the_rules(tmp_path):
    """hatchling (the build backend) packs non-Python files of the package: the rules among them."""
    builders = pytest.importorskip("hatchling.builders.wheel", reason="hatchling not installed")
    (wheel,) = builders.WheelBuilder(str(REPO)).build(directory=str(tmp_path), versions=["standard"])
    with zipfile.ZipFile(wheel) as z:
        assert z.read("gputui/rules/gputui.rules.yml").decode() == RULES.read_text()
        assert "gputui/views/metrics/__init__.py" in z.namelist() and "gputui/cli/export.py" in z.namelist()


def test_every_metric_written_is_documented_and_every_documented_one_written():
    """docs/MONITORING.md's table names each metric once, as a scrape shows it (`_total`, `_info`)."""
    doc = (REPO / "docs" / "MONITORING.md").read_text()
    documented = set(re.findall(r"^\| `(gputui_[a-z_]+)` \|", doc, re.MULTILINE))
    assert documented == emitted_names(), documented ^ emitted_names()
