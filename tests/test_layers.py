"""The layers hold by test, not by habit: import-linter's contracts (pyproject.toml) and what a fresh
interpreter really loads; and the tests' own: no module imports a test module or a conftest.

Readers feed the probe, the probe the transport, the transport the fleet, the fleet the UI; plans
flow back through gputui.kill.operate. The UI never imports the CLI, the probe's internals or a transport;
the kill flow runs without Textual; the probe imports nothing of the app.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_import_contracts_are_kept():
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint), "--no-cache", str(REPO / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def loaded_by(module: str) -> set[str]:
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60, check=True
    )
    return {m.split(".")[0] for m in json.loads(out.stdout)} | set(json.loads(out.stdout))


def test_the_kill_flow_and_the_clean_command_load_neither_textual_nor_asyncssh():
    for module in ("gputui.kill.operate", "gputui.cli.clean"):
        loaded = loaded_by(module)
        assert not loaded & {"textual", "rich", "asyncssh"}, (
            module,
            loaded & {"textual", "rich", "asyncssh"},
        )


def test_the_probe_loads_nothing_of_the_app():
    loaded = loaded_by("gputui.probe.main")
    app_side = {m for m in loaded if m.startswith("gputui.") and not m.startswith("gputui.probe")}
    assert app_side == set(), app_side


# Wrong imports that once passed every contract (issue 20), seeded on a copy of the tree: the layers
# contract must break on each, or it has rotted. (module to change, the line added, who should object)
SEEDS = {
    "probe imports the app's units": ("gputui/probe/common.py", "import gputui.units", "gputui.probe"),
    "the UI imports CLI modules": (
        "gputui/ui/fmt.py",
        "import gputui.cli.wait, gputui.cli.gpuspec",
        "gputui.ui",
    ),
    "the fleet imports the kill flow (a circle)": (
        "gputui/fleet.py",
        "import gputui.kill.operate",
        "gputui.fleet",
    ),
    "the model imports readiness (a circle)": ("gputui/model", "import gputui.readiness", "gputui.model"),
    "a new module outside every floor": ("gputui/newroom.py", "import gputui.model", "gputui.newroom"),
}


def lint_copy(tmp_path: Path, seed: tuple[str, str, str] | None) -> subprocess.CompletedProcess[str]:
    shutil.copytree(REPO / "gputui", tmp_path / "gputui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    if seed is not None:
        target = tmp_path / seed[0]
        if target.is_dir():  # a package (gputui/model/): its __init__
            target = target / "__init__.py"
        elif not target.exists() and target.with_suffix(".py").exists():  # gputui/model.py
            target = target.with_suffix(".py")
        with target.open("a") as f:
            f.write(f"\n{seed[1]}  # seeded by tests/test_layers.py\n")
    lint = Path(sys.executable).parent / "lint-imports"
    return subprocess.run(
        [str(lint), "--no-cache", "--config", str(tmp_path / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        timeout=120,
        check=False,
    )


def test_the_copy_of_the_tree_lints_clean(tmp_path: Path) -> None:
    """The seeded runs below lint a copy: the copy itself passes (else they would prove nothing)."""
    result = lint_copy(tmp_path, None)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("seed", SEEDS.values(), ids=list(SEEDS))
def test_each_seeded_wrong_import_breaks_the_layers_contract(
    tmp_path: Path, seed: tuple[str, str, str]
) -> None:
    result = lint_copy(tmp_path, seed)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "The house by layers" in out and "BROKEN" in out, out
    assert seed[2] in out, out


def test_no_circle_inside_the_probe():
    """No module of the probe imports another that imports it back, directly or through others (a
    lazy import inside a function counts): each module can be read, and shipped, on its own floor.
    The one circle there was, core -> detail -> core for the clip helpers, went to the wire format."""
    graph = grimp.build_graph("gputui", cache_dir=None)
    probe = {m for m in graph.modules if m == "gputui.probe" or m.startswith("gputui.probe.")}
    circles = []
    for importer in sorted(probe):
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & probe):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                circles.append(" -> ".join((importer, *back)))
    assert circles == [], "\n".join(circles)


# -- the tests' own layers ---------------------------------------------------------------------


def imported_modules(path: Path, root: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved, with the code it runs in a subprocess
    (a string that parses as Python: the writers the audit log's tests start) counted too."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    found: set[str] = set()

    def walk(tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
                module = ".".join(p for p in (base, node.module or "") if p)
                found.add(module)
                found.update(f"{module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
                try:
                    walk(ast.parse(node.value))
                except SyntaxError:
                    pass

    walk(ast.parse(path.read_text(), str(path)))
    return found


def imports_of_test_modules(root: Path) -> list[str]:
    """Where a test, a support module, a benchmark or a script imports a test module or a conftest."""
    importers = [*root.glob("tests/**/*.py"), *root.glob("bench/*.py"), root / "scripts" / "screenshots"]
    wrong = []
    for path in sorted(p for p in importers if p.is_file() and "fixtures" not in p.parts):
        reached = set()
        for module in imported_modules(path, root):
            parts = module.split(".")
            if parts[0] != "tests":
                continue
            for i, part in enumerate(parts[1:], 2):
                if part.startswith("test_") or part == "conftest":
                    reached.add(".".join(parts[:i]))  # the module itself, not each name it gives
                    break
        wrong += [f"{path.relative_to(root)} imports {module}" for module in sorted(reached)]
    return wrong


def test_no_test_module_is_imported():
    """What tests share is in tests/support (fixtures in the nearest conftest.py): a test module or a
    conftest imported by another module runs, and is collected, by whoever imports it."""
    assert imports_of_test_modules(REPO) == []
