"""gputui.api, the face scripts and bench/ use: every name it lists resolves, what it loads on first
use is the module's own object and typed the same way, and importing it (the command line does, at
every start) loads nothing heavy."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputui import api

REPO = Path(__file__).resolve().parents[1]
HEAVY = {"asyncssh", "aiohttp", "prometheus_client", "textual", "rich", "pynvml", "gzip"}


def test_every_name_of_the_api_resolves_and_a_lazy_one_is_its_modules_own():
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    for module, names in api._LAZY.items():
        loaded = importlib.import_module(module, "gputui")
        for name in names:
            assert name in api.__all__, name
            assert getattr(api, name) is getattr(loaded, name), name
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        api.nothing  # noqa: B018


def test_the_lazy_names_are_the_ones_typed_for_mypy():
    """What `__getattr__` loads and what the `if TYPE_CHECKING:` block imports are one list."""
    tree = ast.parse((REPO / "gputui" / "api.py").read_text())
    typed: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                typed["." * imp.level + (imp.module or "")] = tuple(a.name for a in imp.names)
    assert typed == api._LAZY


def test_importing_the_api_loads_nothing_heavy():
    code = "import json, sys; import gputui.api; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60, check=True
    )
    loaded = {m.split(".")[0] for m in json.loads(out.stdout)}
    assert not loaded & HEAVY, loaded & HEAVY
