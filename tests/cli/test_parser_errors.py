"""Every command's usage errors show the user's words escaped, as remote text is: an ESC in an unknown
option or a bad value of `record`, `demo` (and its subcommands), `probe` or the demo's daemon never reaches
the terminal raw; one line of usage, one of error, exit 2, no traceback."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli import argtypes, commands

ROOT = Path(__file__).resolve().parents[2]
ESC = "\x1b[2J"
RAW = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
DAEMON = "import sys; from gputui.cli.demod import daemon_main; sys.exit(daemon_main(sys.argv[1:]))"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "GPUTUI_CONFIG"}
    out.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT))
    out.update(XDG_RUNTIME_DIR=str(tmp_path / "run"), TMPDIR=str(tmp_path))
    return out


def run(env: dict[str, str], argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, env=env, capture_output=True, timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT)


@pytest.mark.parametrize(
    "args",
    [
        ["record", "out.gz", f"--x{ESC}"],
        ["record", "out.gz", "--interval", ESC],
        ["record", "out.gz", "--max-bytes", f"1{ESC}"],
        ["demo", f"--x{ESC}"],
        ["demo", ESC],
        ["demo", "status", f"--x{ESC}"],
        ["demo", "start", "--idle-timeout", ESC],
        ["demo", "stop", f"x{ESC}"],
        ["probe", f"x{ESC}"],  # the probe's own parser (stdlib only): the wire's escaping
        ["probe", f"--x{ESC}"],
    ],
)
def test_a_command_s_usage_error_is_escaped(env: dict[str, str], args: list[str]) -> None:
    done = run(env, [sys.executable, "-m", "gputui", *args])
    assert done.returncode == 2, done.stderr
    assert RAW.search(done.stderr) is None, done.stderr
    err = done.stderr.decode()
    assert "Traceback" not in err and ("\\e" in err or "\\x1b" in err), err
    assert not os.path.exists(ROOT / "out.gz")


@pytest.mark.parametrize(
    "args", [["--dir", "d", "--ready-fd", "1", f"--x{ESC}"], ["--dir", "d", "--ready-fd", ESC]]
)
def test_the_demo_daemon_s_usage_error_is_escaped(env: dict[str, str], args: list[str]) -> None:
    done = run(env, [sys.executable, "-c", DAEMON, *args])
    assert done.returncode == 2, done.stderr
    assert RAW.search(done.stderr) is None, done.stderr
    assert "Traceback" not in done.stderr.decode()


def test_every_command_parses_with_the_escaping_parser() -> None:
    """The rule behind the cases above: every parser of every command (its subcommands' too) is an
    argtypes.Parser, whose errors are escaped; the probe, which runs alone, keeps its own."""
    names = [n for n in commands.COMMANDS if n != "probe"] + [commands.DASHBOARD]
    for name in names:
        parser = commands.parser_of(name)
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for each in [parser] + [p for a in subparsers for p in a.choices.values()]:
            assert isinstance(each, argtypes.Parser), (name, each.prog)
