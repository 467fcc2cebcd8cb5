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
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    "probe imports the app's units": ("gputui/probe/common.py", "import gputui.text.units", "gputui.probe"),
    "the UI imports CLI modules": (
        "gputui/ui/fmt.py",
        "import gputui.cli.wait, gputui.cli.gpuspec",
        "gputui.ui",
    ),
    "the fleet imports the kill flow (a circle)": (
        "gputui/fleet/session.py",
        "import gputui.kill.operate",
        "gputui.fleet",
    ),
    "the model imports readiness (a circle)": (
        "gputui/model",
        "import gputui.views.readiness",
        "gputui.model",
    ),
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


def test_no_circle_anywhere_in_the_package():
    """No module of gputui imports another that imports it back, directly or through others, a lazy
    import inside a function included (grimp sees those): a circle hidden by a function-local import
    is still a circle. Each wing's contract keeps them out between floors; this keeps them out inside a
    floor's `|` too, and inside packages that have no contract of their own."""
    graph = grimp.build_graph("gputui", cache_dir=None)
    circles = set()
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                circles.add(" -> ".join((importer, *back)))
    assert sorted(circles) == [], "\n".join(sorted(circles))


# -- no constant defined twice ----------------------------------------------------------------------

# What a module-level constant may be: literals, containers of them, arithmetic on them
# (`1 << 16`), frozenset/set/tuple of a literal, and names the same module bound to one before.
_OPERATORS: dict[type[ast.AST], Any] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
    ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b,
    ast.BitOr: lambda a, b: a | b,
    ast.BitAnd: lambda a, b: a & b,
    ast.USub: lambda a: -a,
    ast.UAdd: lambda a: +a,
    ast.Invert: lambda a: ~a,
}
_MAKERS: dict[str, Any] = {"frozenset": frozenset, "set": set, "tuple": tuple}
_CONTAINERS: dict[type[ast.AST], Any] = {ast.Tuple: tuple, ast.List: list, ast.Set: set}


class NotLiteral(Exception):
    pass


def literal(node: ast.AST, known: dict[str, Any]) -> Any:
    """The value of a constant expression, or NotLiteral (a call, an import, anything computed)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return _CONTAINERS[type(node)](literal(e, known) for e in node.elts)
    if isinstance(node, ast.Dict) and None not in node.keys:  # None: a `**mapping`
        pairs = zip(node.keys, node.values, strict=True)
        return {literal(k, known): literal(v, known) for k, v in pairs if k is not None}
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](literal(node.operand, known))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](literal(node.left, known), literal(node.right, known))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _MAKERS
        and len(node.args) == 1
        and not node.keywords
    ):
        return _MAKERS[node.func.id](literal(node.args[0], known))
    raise NotLiteral


def frozen(value: Any) -> Any:
    """A hashable key that tells 1 from 1.0 and True, and a list from a tuple."""
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(frozen(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(frozen(v) for v in value))
    if isinstance(value, dict):
        return ("dict", frozenset((frozen(k), frozen(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def module_constants(path: Path) -> Iterator[tuple[str, Any, int]]:
    """(name, value, line) of each literal a module binds at module level (in `if`/`try` blocks too);
    `A, B = 1, 2` binds A, B and the tuple (1, 2) under the name "A, B"."""
    known: dict[str, Any] = {}
    body = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while body:
        node = body.pop(0)
        if isinstance(node, (ast.If, ast.Try)):
            blocks = [node.body, node.orelse, *(h.body for h in getattr(node, "handlers", ()))]
            body[:0] = [n for block in blocks for n in block] + list(getattr(node, "finalbody", ()))
            continue
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            bound = literal(value, known)
        except (NotLiteral, TypeError, ValueError, ArithmeticError):
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                known[target.id] = bound
                yield target.id, bound, node.lineno
            elif isinstance(target, ast.Tuple) and isinstance(bound, (tuple, list)):
                names = [e.id for e in target.elts if isinstance(e, ast.Name)]
                if len(names) != len(target.elts) or len(names) != len(bound):
                    continue
                yield ", ".join(names), tuple(bound), node.lineno
                for name, item in zip(names, bound, strict=True):
                    known[name] = item
                    yield name, item, node.lineno


def non_trivial(value: Any) -> bool:
    """Worth one owner whatever it is called: a string of 10+ characters, a container of 3+ items."""
    if isinstance(value, str):
        return len(value) >= 10
    return isinstance(value, (tuple, list, set, frozenset, dict)) and len(value) >= 3


def upper_case(name: str) -> bool:
    """A constant's name: EXIT_USAGE, _PINNED_KINDS (not __all__, not a class or a function)."""
    return name == name.upper() and any(c.isalpha() for c in name) and not name.startswith("__")


def constants_defined_twice(root: Path) -> list[str]:
    by_name: dict[tuple[str, Any], list[tuple[str, int]]] = defaultdict(list)
    by_value: dict[Any, list[tuple[str, str, int]]] = defaultdict(list)
    shown: dict[Any, str] = {}
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root.parent).as_posix()
        for name, value, line in module_constants(path):
            if upper_case(name):
                by_name[(name, frozen(value))].append((module, line))
            if non_trivial(value):
                by_value[frozen(value)].append((module, name, line))
                shown[frozen(value)] = repr(value)
    found = []
    for (name, _), places in by_name.items():
        if len({m for m, _ in places}) > 1:
            found.append(f"{name} bound to the same value in " + ", ".join(f"{m}:{n}" for m, n in places))
    for value, bound in by_value.items():
        modules = sorted({m for m, _, _ in bound})
        if len(modules) > 1:
            found.append(
                f"{shown[value]:.60} bound in " + ", ".join(f"{m}:{n} ({name})" for m, name, n in bound)
            )
    return found


def test_no_constant_is_defined_in_two_modules():
    """Each constant has one owner that the others import: no two modules bind the same UPPER_CASE
    name to the same value, nor the same string of 10+ characters or container of 3+ items to any
    names. What crosses the wire is the probe's (common.py, classify.py, orders.py): the model and
    the kill flow import it from gputui.probe, the UI from gputui.model, which re-exports it. The same
    name for different things is allowed (the model's MAX_PARENTS, what it accepts, is not the
    probe's, what it sends), and so are two modules that alias one owner's value by name."""
    found = constants_defined_twice(REPO / "gputui")
    assert found == [], "\n".join(found)


def test_the_constant_check_finds_a_copy(tmp_path: Path) -> None:
    """The check above sees each kind of copy it is meant to see, so that it cannot pass by seeing
    nothing."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text(
        'EXIT_USAGE = 2\nUSER, GHOST, HIDDEN = "user", "ghost", "hidden"\nCHUNK = 1 << 16\n'
        'COMM = "nvidia-cuda-mps"\nOK = frozenset(("x", "y", "z"))\nMAX = 64\n'
    )
    (package / "b.py").write_text(
        'EXIT_USAGE = 2\nKINDS = ("user", "ghost", "hidden")\nCHUNK = 65536\nMPS = "nvidia-cuda-mps"\n'
        'if True:\n    ALLOWED = frozenset({"z", "y", "x"})\nMAX = 256\nSHORT = ("a", "b")\n'
    )
    found = constants_defined_twice(package)
    assert len(found) == 5, found
    assert not any("MAX" in line.split(" bound")[0] or "SHORT" in line for line in found), found


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
