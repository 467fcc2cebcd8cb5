"""Every command's --help ends with its exit codes: a script that branches on them finds them where it
looks first, not only in the README. Over every command the registry lists (a new one is checked as
soon as it is registered) and the dashboard, through the real `gputui` entry point."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli.commands import COMMANDS

REPO = Path(__file__).resolve().parents[2]
# `exit codes:` then at least the success code and the usage error every command shares.
SECTION = re.compile(r"exit codes:.*\b0\b.*\b2 bad usage", re.IGNORECASE | re.DOTALL)


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_every_help_has_an_exit_code_section(command):
    argv = [sys.executable, "-m", "gputui", *([command] if command else []), "--help"]
    env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(REPO))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert SECTION.search(done.stdout), f"gputui {command} --help has no exit codes:\n{done.stdout}"
