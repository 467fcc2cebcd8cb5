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
