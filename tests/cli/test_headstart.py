"""The head start: `clean`, `wait` and `snapshot` on this machine start its probe before importing
the rest, and the local transport takes that very process (gputui/transport/headstart.py)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli import entry
from gputui.cli import main as cli
from gputui.cli.commands import clean, snapshot, wait
from gputui.cli.quick import INTERVALS
from gputui.config.file import HostSpec
from gputui.transport import headstart
from gputui.transport.local import LocalLink
from tests.support.hosts import probe_host


def value_options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions if a.option_strings and a.nargs != 0 for o in a.option_strings}


def test_the_value_options_are_those_of_the_parsers() -> None:
    """A word after one of these is its value, any other word a HOST: the list cannot drift."""
    for parser in (snapshot.parser(), clean.parser(), wait.parser()):
        assert value_options(parser) == set(cli.value_options(parser))


def test_the_intervals_are_those_the_commands_use() -> None:
    assert INTERVALS["wait"] == wait.parser().get_default("interval")


@pytest.fixture
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("GPUTUI_CONFIG", raising=False)


@pytest.mark.parametrize(
    ("args", "starts"),
    [
        (["clean", "--pid", "4121", "--yes"], True),
        (["clean", "--gpu", "0", "--term-timeout", "2", "-y"], True),
        (["wait", "--settle", "5", "--json"], True),
        (["snapshot", "--json"], True),
        (["clean", "gpu-a", "--all"], False),  # a HOST: that host's probe, not this machine's
        (["clean", "--pid", "1", "gpu-a"], False),
        (["snapshot", "--demo"], False),
        (["snapshot", "--replay", "r.gz", "--at", "+1"], False),  # a recording: no probe at all
        (["snapshot", "--at=+1", "--replay=r.gz", "--json"], False),
        (["wait", "--interval", "1"], False),  # another interval than the head start's
        (["clean", "--config", "x.toml"], False),
        (["clean", "--help"], False),
        ([], False),  # the dashboard
        (["probe"], False),
    ],
)
def test_which_command_lines_get_a_head_start(
    args: list[str], starts: bool, no_config: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    begun: list[list[str]] = []
    monkeypatch.setattr(headstart, "begin", lambda argv: begun.append(list(argv)))
    argv = cli.head_start(args)
    assert (argv is not None) == starts and len(begun) == int(starts)
    if starts:
        assert argv == begun[0] and "gputui-probe" in argv and "--reader" in argv
        assert ("--read-only" in argv) == (args[0] == "wait")  # as the command's own host


@pytest.mark.parametrize("command", sorted(INTERVALS))
def test_the_guess_starts_the_probe_the_command_would(command: str) -> None:
    """cli/entry.py builds the probe's argv without the config module: it must be the very argv the
    command's own host gives, or the transport would start a second probe."""
    spec = HostSpec(name="local", read_only=command == "wait")
    exact = headstart.local_argv(sys.executable, headstart.probe_argv(spec, INTERVALS[command]))
    assert headstart.default_local_argv(command == "wait", INTERVALS[command]) == exact


GUESSES = [  # (command line, whether the guess starts a probe)
    (["clean", "--pid", "4121", "--yes"], True),
    (["clean", "--gpu", "0", "--term-timeout", "2", "-y"], True),
    (["clean", "--pid=4121", "--all", "--yes"], True),
    (["wait", "--settle", "5", "--json"], True),
    (["wait", "--timeout", "60", "--gpu", "0,1"], True),
    (["snapshot", "--json"], True),
    (["snapshot"], True),
    (["clean", "--all", "gpu-a"], True),  # wrong: gpu-a is a HOST; put right by the exact rule
    (["clean", "--yes", "--pid", "7", "gpu-a"], False),
    (["clean", "gpu-a", "--all"], False),
    (["clean", "--", "gpu-a"], False),
    (["snapshot", "--demo"], False),
    (["snapshot", "--at=+1", "--replay=r.gz", "--json"], False),
    (["wait", "--interval", "1"], False),
    (["clean", "--config", "x.toml"], False),
    (["clean", "--help"], False),
    ([], False),
    (["probe"], False),
    (["record", "--out", "x"], False),
]


@pytest.mark.parametrize(("args", "guessed"), GUESSES)
def test_the_guess_misses_no_command_line_the_exact_rule_starts(
    args: list[str], guessed: bool, no_config: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guess may start a probe the command does not need (cli.head_start ends it), never miss
    one it needs, and always the same one."""
    monkeypatch.setattr(headstart, "begin", lambda argv: None)
    guess = entry.guess_head_start(args)
    exact = cli.head_start(args)
    assert (guess is not None) == guessed
    assert exact is None or guess == exact


def test_no_guess_where_a_config_may_apply(
    no_config: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(headstart, "begin", lambda argv: None)
    assert entry.guess_head_start(["clean", "--all"]) is not None
    assert entry.guess_head_start(["clean", "--all"], environ={"GPUTUI_CONFIG": "/etc/gputui.toml"}) is None
    default = tmp_path / "config" / "gputui" / "config.toml"
    default.parent.mkdir(parents=True)
    default.write_text("")
    assert entry.guess_head_start(["clean", "--all"]) is None


def test_a_wrong_guess_is_told_to_end(no_config: None) -> None:
    """`clean --all gpu-a` looks like this machine's to the guess; the exact rule sees a HOST, and the
    probe the guess started gets EOF at once (here a stand-in that ends on EOF), reaped at exit."""
    args = ["clean", "--all", "gpu-a"]
    argv = headstart.default_local_argv(False, INTERVALS["clean"])
    stand_in = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    headstart._started[tuple(argv)] = stand_in
    try:
        assert cli.head_start(args) is None
        assert stand_in.wait(30) == 0  # it read EOF: told to end, not killed
    finally:
        headstart.abandon()
    assert stand_in.poll() is not None and not headstart._started


def test_no_head_start_where_a_config_lists_the_hosts(
    no_config: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(headstart, "begin", lambda argv: None)
    assert cli.head_start(["clean", "--all"], environ={"GPUTUI_CONFIG": "/etc/gputui.toml"}) is None


async def test_the_local_link_takes_the_probe_started_ahead() -> None:
    link = LocalLink(probe_host("here"), interval=0.2)
    argv = link.direct_argv()
    assert argv is not None
    headstart.begin(argv)
    started = headstart._started[tuple(argv)]
    await link.open()
    try:
        assert link.pid == started.pid and not headstart._started
        assert link.hello is not None and link.hello["type"] == "hello"
        record = None
        while record is None or record["type"] != "sample":
            record = await link.recv()
            assert record is not None
    finally:
        await link.close()
    assert started.poll() is not None  # ended and reaped by the link's close
    assert link.failure is None


def test_a_probe_nobody_took_ends_at_exit() -> None:
    argv = LocalLink(probe_host("here"), interval=0.2).direct_argv()
    assert argv is not None
    headstart.begin(argv)
    started = headstart._started[tuple(argv)]
    headstart.abandon()
    assert started.poll() is not None and not headstart._started


def test_only_the_apps_own_interpreter_gets_this_installations_probe() -> None:
    assert headstart.direct(sys.executable, False, ())
    assert not headstart.direct("/usr/bin/python3.8", False, ())
    assert not headstart.direct(sys.executable, True, ())
    assert not headstart.direct(sys.executable, False, ("docker", "exec", "c"))
    assert LocalLink(HostSpec(name="local")).direct_argv() is not None
