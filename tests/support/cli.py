"""`python -m gputui ARGS` run to its end, as a user runs it: one runner for the tests that need a
real process (exit codes, what reaches stdout and stderr, a config file read from disk)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def gputui(
    *args: str, timeout: float = 60, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m gputui ARGS` from the repository with this checkout first on the path, stdin
    closed, in `env` (default: this process's environment); its exit code and output, text. A run
    past `timeout` is killed (subprocess.run: by its PID) and fails the test."""
    environ = dict(os.environ if env is None else env)
    environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        cwd=ROOT,
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def host_doc(doc: dict[str, Any], name: str, key: str = "host") -> dict[str, Any]:
    """A host's part of a document: `clean --json` names it by "host", `snapshot --json` by "name"."""
    (entry,) = [h for h in doc["hosts"] if h[key] == name]
    return entry
