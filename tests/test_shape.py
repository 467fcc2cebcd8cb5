"""The rooms stay small enough to read: no class in gputui/ over 500 lines, no function over 80
(from its `def` or `class` line to its last line, docstring and comments included). A longer one is
split into named parts before it lands."""

from __future__ import annotations

import ast
from pathlib import Path

import gputui

ROOT = Path(gputui.__file__).parent
MAX_CLASS_LINES = 500
MAX_FUNCTION_LINES = 80


def oversized(source: str, name: str) -> list[str]:
    """`name:line what N lines` for each class or function of `source` over its limit."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.ClassDef):
            what, limit = "class", MAX_CLASS_LINES
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            what, limit = "function", MAX_FUNCTION_LINES
        else:
            continue
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        if lines > limit:
            found.append(f"{name}:{node.lineno} {what} {node.name}: {lines} lines (at most {limit})")
    return found


def test_no_class_or_function_is_too_long() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += oversized(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT.parent)))
    assert not found, "\n".join(found)


def test_the_check_sees_a_long_function_and_class() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert oversized("def f():\n" + body, "f.py") == ["f.py:1 function f: 81 lines (at most 80)"]
    assert oversized("def f():\n" + body[: -len("    x79 = 79\n")], "f.py") == []
    methods = "".join(f"    def m{i}(self):\n        pass\n" for i in range(MAX_CLASS_LINES // 2))
    assert oversized("class C:\n" + methods, "c.py") == ["c.py:1 class C: 501 lines (at most 500)"]
