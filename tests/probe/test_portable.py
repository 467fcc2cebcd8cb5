"""The probe ships to hosts with only python3 >= 3.8 and the driver: stdlib + pynvml, 3.8 syntax."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.pythons import PYTHON38

PROBE = Path(__file__).resolve().parents[2] / "gputui" / "probe"
SOURCES = sorted(PROBE.rglob("*.py"))


def test_vermin_says_python_3_8_is_enough():
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "vermin"),
            "--no-tips",
            "--violations",
            "-t=3.8-",
            "--backport",
            "typing",
            "--eval-annotations",
            *map(str, SOURCES),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PROBE)))
def test_parses_as_python_3_8(path):
    ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PROBE)))
def test_imports_only_stdlib_pynvml_and_itself(path):
    allowed_third_party = {"pynvml"}
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        for name in names:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top in allowed_third_party, f"{path.name} imports {name}"


@pytest.mark.skipif(not os.path.exists(PYTHON38), reason="no Python 3.8 interpreter here")
def test_probe_runs_on_python_3_8():
    env = dict(os.environ, PYTHONPATH=str(PROBE.parents[1]))
    out = subprocess.run(
        [PYTHON38, "-m", "gputui.probe", "--reader", "sim", "--sim-scenario", "demo", "--once"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    hello, sample = json.loads(out[0]), json.loads(out[1])
    assert hello["host"]["python"].startswith("3.8")
    kinds = {p["kind"] for p in sample["processes"]}
    assert kinds == {"user", "ghost", "hidden", "monitor", "zombie"}


def probe_imports(python: str, reader: str) -> set[str]:
    """The modules a probe with `reader` imports to take one sample (-X importtime's names)."""
    env = dict(os.environ, PYTHONPATH=str(PROBE.parents[1]))
    args = [python, "-X", "importtime", "-m", "gputui.probe", "--reader", reader, "--once"]
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60, check=True)
    return {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }


@pytest.mark.parametrize("python", [sys.executable, PYTHON38], ids=["this python", "python 3.8"])
def test_the_nvml_probe_does_not_pay_for_the_sims_modules(python):
    """The sim's records are dataclasses (the demo and the tests pay for the import, a few ms on 3.8);
    the probe on a real host must not: nothing on its path imports the sim or dataclasses."""
    if not os.path.exists(python):
        pytest.skip("no Python 3.8 interpreter here")
    assert {"dataclasses", "gputui.probe.readers.sim"} <= probe_imports(python, "sim")  # the check sees them
    assert not {"dataclasses", "gputui.probe.readers.sim"} & probe_imports(python, "nvml")
