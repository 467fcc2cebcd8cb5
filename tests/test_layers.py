"""The layers hold by test, not by habit: import-linter's contracts (pyproject.toml) and what a fresh
interpreter really loads.

Readers feed the probe, the probe the transport, the transport the fleet, the fleet the UI; plans
flow back through gputui.kill.operate. The UI never imports the CLI, the probe's internals or a transport;
the kill flow runs without Textual; the probe imports nothing of the app.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grimp

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
