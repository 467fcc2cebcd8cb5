"""The UI package's own shape: no import circle inside it, and Textual's private API reached from one
module only (gputui/ui/_textual.py), so that an upgrade of Textual has one place to look.

A private reach is an import of a private module of Textual or Rich (`textual._two_way_dict`,
`textual.widgets._footer`, ...), or, in a class of ours that extends one of theirs, a `_name` of
their classes read, written or overridden (`self._data`, `super()._render_line`, `def
_get_terminal_size`), or such a name reached on a parameter typed as one of their classes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import grimp

UI = Path(__file__).resolve().parents[2] / "gputui" / "ui"
PRIVATE_HOME = UI / "_textual.py"
THEIRS = ("textual", "rich")


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(UI.rglob("*.py")):
        parts = path.relative_to(UI.parent.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def _theirs(cls: type) -> bool:
    return cls.__module__.split(".")[0] in THEIRS


@cache
def _private_names(cls: type) -> frozenset[str]:
    """The `_names` (not dunders) that Textual's or Rich's classes in `cls`'s MRO define or set."""
    names: set[str] = set()
    for base in cls.__mro__:
        if not _theirs(base):
            continue
        names |= {n for n in vars(base) if n.startswith("_") and not n.startswith("__")}
        try:
            source = inspect.getsource(base)
        except (OSError, TypeError):
            continue
        names |= set(re.findall(r"self\.(_[a-z][a-z0-9_]*)\s*(?::[^=\n]*)?=", source))
    return frozenset(names)


def _reaches(node: ast.AST, holder: str, names: frozenset[str]) -> Iterator[str]:
    """`holder._x` (and `super()._x` for `self`) in `node`, where `_x` is one of `names`."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Attribute) or sub.attr not in names:
            continue
        value = sub.value
        named = isinstance(value, ast.Name) and value.id == holder
        inherited = (
            holder == "self" and isinstance(value, ast.Call) and getattr(value.func, "id", "") == "super"
        )
        if named or inherited:
            yield sub.attr


def _class_reaches(module: object, tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(module, node.name, None)
        if not isinstance(cls, type):
            continue
        names = _private_names(cls)
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if item.name in names:
                    yield f"{node.name}.{item.name} overrides {item.name}"
                for name in _reaches(item, "self", names):
                    yield f"{node.name}.{item.name} reaches {name}"
            elif (
                isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and item.target.id in names
            ):
                yield f"{node.name} redefines {item.target.id}"


def _parameter_reaches(module: object, tree: ast.Module) -> Iterator[str]:
    scope = vars(module)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for arg in node.args.args + node.args.kwonlyargs:
            if arg.annotation is None:
                continue
            head = ast.unparse(arg.annotation).split("[")[0]
            cls = scope.get(head.split(".")[0])
            for part in head.split(".")[1:]:
                cls = getattr(cls, part, None)
            if isinstance(cls, type) and _theirs(cls):
                for name in _reaches(node, arg.arg, _private_names(cls)):
                    yield f"{node.name} reaches {arg.arg}.{name}"


def _private_imports(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] in THEIRS and any(p.startswith("_") for p in parts[1:]):
                yield f"imports {name}"


def test_textual_private_api_is_reached_from_one_module_only() -> None:
    found = []
    for name, path in _modules():
        if path == PRIVATE_HOME:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = importlib.import_module(name)
        for reach in [
            *_private_imports(tree),
            *_class_reaches(module, tree),
            *_parameter_reaches(module, tree),
        ]:
            found.append(f"{path.relative_to(UI.parent.parent)}: {reach}")
    assert found == [], "\n".join(found)


def test_the_private_home_is_there_and_reaches_textual() -> None:
    """The check above looks for something that exists: the one module does reach in."""
    tree = ast.parse(PRIVATE_HOME.read_text(encoding="utf-8"))
    assert list(_private_imports(tree))
    module = importlib.import_module("gputui.ui._textual")
    assert list(_class_reaches(module, tree))


def test_no_circle_inside_the_ui() -> None:
    """No module of the UI imports another that imports it back, directly or through others (a
    lazy import inside a function counts). The screens are held by their own check, beside their
    split into panels."""
    graph = grimp.build_graph("gputui", cache_dir=None)
    ui = {
        m
        for m in graph.modules
        if (m == "gputui.ui" or m.startswith("gputui.ui.")) and not m.startswith("gputui.ui.screens")
    }
    circles = []
    for importer in sorted(ui):
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & ui):
            if imported == "gputui.ui" or importer == "gputui.ui":
                continue  # the package's own __init__ re-exports the factory
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                circles.append(" -> ".join((importer, *back)))
    assert circles == [], "\n".join(circles)


MARKUP_SETTERS = frozenset({"border_title", "border_subtitle"})


def _literal(node: ast.expr) -> bool:
    """A string written in the code: a constant, or one of two chosen by a condition."""
    if isinstance(node, ast.IfExp):
        return _literal(node.body) and _literal(node.orelse)
    return isinstance(node, ast.Constant)


def _built_titles(tree: ast.Module) -> Iterator[int]:
    """Lines where a border title is set to anything but a literal string: Textual reads a str
    there as markup, so a host's name such as `gpu[/b]` would end the app (widgets/borders.py's
    set_title and set_subtitle take it literally)."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and not _literal(node.value)
            and any(isinstance(t, ast.Attribute) and t.attr in MARKUP_SETTERS for t in node.targets)
        ):
            yield node.lineno


def test_a_border_title_that_is_built_goes_through_set_title() -> None:
    found = [
        f"{path.relative_to(UI.parent.parent)}:{line}"
        for _name, path in _modules()
        for line in _built_titles(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert found == [], "\n".join(found)
    seeded = ast.parse(
        'box.border_title = f"Process {pid} · {host}"\n'
        'box.border_subtitle = "esc close"\n'
        'box.border_subtitle = "a" if ok else name\n'
    )
    assert list(_built_titles(seeded)) == [1, 3]  # the check sees them
