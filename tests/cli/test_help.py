"""`gputui --help` lists every command, from the one place they are defined (issue 17, defect 12:
it said "snapshot | clean | probe" and not `wait`)."""

from __future__ import annotations

from pathlib import Path

from gputui.cli import commands, quick
from gputui.cli.quick import INTERVALS
from tests.support.cli import gputui

ROOT = Path(__file__).resolve().parents[2]


def test_top_level_help_lists_every_command_and_each_has_its_own_help() -> None:
    top = gputui("--help")
    assert top.returncode == 0, top.stderr
    listed = top.stdout[top.stdout.index("other commands") :]
    for command in commands.COMMANDS:
        assert f"gputui {command}" in listed, (command, listed)
        own = gputui(command, "--help")
        assert own.returncode == 0 and f"gputui {command}" in own.stdout, (command, own.stderr)
    assert "wait" in commands.COMMANDS


def test_the_commands_are_defined_once() -> None:
    # What main() runs, what --help lists and what a typo is matched against are one table.
    assert tuple(commands.SUBCOMMANDS) == commands.COMMANDS
    assert set(quick.QUICK_EXIT) <= set(commands.COMMANDS) and set(INTERVALS) <= set(commands.COMMANDS)
