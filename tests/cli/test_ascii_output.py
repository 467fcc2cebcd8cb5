"""ASCII mode on every command that writes for a person: `--ascii`, or by itself where the locale is not
UTF-8 (LANG=C, LC_ALL=POSIX), as the dashboard's (gputui/text/glyphs.py). The commands run for real
(subprocesses; `wait`'s live line on a real pty): no byte outside ASCII on stdout or stderr, each
glyph as the dashboard's stand-in and as wide, a cut marked `...` and measured so; a UTF-8 locale still
gets the glyphs; JSON is data and comes out the same in either mode; a process name outside ASCII is
replaced, never a crash."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli.commands import COMMANDS, DASHBOARD, parser_of
from gputui.cli.main import main
from gputui.model.textsafe import ascii_only, cells
from gputui.text.glyphs import shows_unicode
from tests.support.recfile import demo_recording, gputui, lines_of
from tests.support.ttyrun import on_pty

REPO = Path(__file__).resolve().parents[2]
# Commands whose output is data for a program, not text for a person: no --ascii (their messages on
# stderr still follow the locale).
DATA_COMMANDS = ("export", "probe", "serve")
# A process name as a host may send it: Latin-1, CJK (two cells a character), a mark of the glyph table.
NAME = "notebook_k\u00e9rnel_\u540d\u524d\u2713"
NAME_ASCII = "notebook_k?rnel_????+"

WAITED = "10"  # seconds `wait --demo` judges (never ready) before its report

MODES = [
    pytest.param(("--ascii",), {"LANG": "C.UTF-8"}, id="--ascii"),
    pytest.param((), {"LANG": "C"}, id="LANG=C"),
    pytest.param((), {"LC_ALL": "POSIX", "LANG": "en_US.UTF-8"}, id="LC_ALL=POSIX"),
]


def locale_env(**values: str) -> dict[str, str]:
    """This environment with its locale variables replaced by `values`."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith("LC_") or k in ("LANG", "PYTHONUTF8"))}
    env.update(values)
    return env


def not_ascii(data: bytes) -> list[bytes]:
    return sorted({data[i : i + 3] for i, b in enumerate(data) if b > 0x7F})[:10]


def run(*args: str, env: dict[str, str]) -> tuple[int, bytes]:
    """`gputui ARGS`: its exit status and what it wrote on stdout and stderr, as bytes."""
    done = subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        timeout=120,
        env=dict(env, PYTHONPATH=str(REPO)),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def run_on_pty(*args: str, env: dict[str, str], columns: int = 120) -> tuple[int, bytes]:
    """`gputui ARGS` with stdout and stderr on a real terminal of `columns` (wait's live line)."""
    env = dict(env, PYTHONPATH=str(REPO), COLUMNS=str(columns), TERM="xterm")
    return on_pty([sys.executable, "-m", "gputui", *args], env=env, size=(columns, 40))


def recording_with_name(tmp_path: Path) -> Path:
    """A recording of the demo whose notebook kernel is named NAME."""
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=3)
    lines = [line.replace(b"notebook_kernel", NAME.encode()) for line in lines_of(path)]
    assert any(NAME.encode() in line for line in lines)
    with gzip.open(path, "wb") as f:
        f.writelines(lines)
    return path


# -- every command that writes for a person ---------------------------------------------------------


@pytest.mark.parametrize(("args", "env"), MODES)
def test_snapshot_and_clean_write_only_ascii(args: tuple[str, ...], env: dict[str, str]) -> None:
    for command in (("snapshot", "--demo"), ("clean", "--demo", "demo-a", "--all", "--dry-run")):
        code, data = run(*command, *args, env=locale_env(**env))
        assert code == 0, data.decode(errors="replace")
        assert b"demo-a" in data and b"GiB" in data
        assert not_ascii(data) == [], command


@pytest.mark.parametrize(("args", "env"), MODES)
def test_wait_writes_its_live_line_and_report_in_ascii(args: tuple[str, ...], env: dict[str, str]) -> None:
    # The demo is never ready; the timeout leaves a busy machine room to connect and draw a line.
    code, data = run_on_pty("wait", "--demo", "--timeout", WAITED, *args, env=locale_env(**env))
    assert code == 1 and b"not ready" in data, data.decode(errors="replace")
    assert b"ready, " in data  # the live line was drawn
    assert not_ascii(data) == []


def test_a_utf8_locale_gets_the_glyphs() -> None:
    env = locale_env(LANG="C.UTF-8")
    code, data = run("snapshot", "--demo", env=env)
    assert code == 0 and "·".encode() in data and "…".encode() in data
    code, data = run_on_pty("wait", "--demo", "--timeout", WAITED, env=env)
    assert code == 1 and "·".encode() in data  # between a host's GPUs on the live line


def test_help_and_usage_errors_are_ascii() -> None:
    env = locale_env(LANG="C")
    for command in [c for c in COMMANDS if c != "probe"]:
        code, data = run(command, "--help", env=env)
        assert code == 0 and (b"--ascii" in data or command in DATA_COMMANDS), command
        assert not_ascii(data) == [], command
    code, data = run("snapshot", "--timeout", "\u2713\u540d", env=env)  # the user's own words quoted
    assert code == 2 and b"is not" in data and b"Traceback" not in data
    assert not_ascii(data) == []


def test_every_command_for_a_person_takes_ascii() -> None:
    for name in [*COMMANDS, DASHBOARD]:
        if name in DATA_COMMANDS:
            continue
        options = parser_of(name)._option_string_actions
        assert "--ascii" in options, name


# -- what ASCII mode changes, and what it leaves -------------------------------------------------------


def test_a_name_outside_ascii_is_replaced_and_the_columns_keep_their_width(tmp_path: Path) -> None:
    path = recording_with_name(tmp_path)
    code, unicode = run("snapshot", "--replay", str(path), env=locale_env(LANG="C.UTF-8"))
    assert code == 0 and NAME.encode() in unicode, unicode.decode(errors="replace")
    code, ascii = run("snapshot", "--replay", str(path), "--ascii", env=locale_env(LANG="C.UTF-8"))
    assert code == 0 and b"Traceback" not in ascii
    assert not_ascii(ascii) == [] and NAME_ASCII.encode() in ascii
    wide, narrow = unicode.decode().splitlines(), ascii.decode().splitlines()
    assert len(wide) == len(narrow)
    # Each line as wide as it was: a glyph is one character, a cut `...` measured as it is written.
    assert [cells(line) for line in wide] == [len(line) for line in narrow]
    assert "~" not in ascii.decode() and "..." in ascii.decode()


def test_json_is_data_and_is_not_changed(tmp_path: Path) -> None:
    path = recording_with_name(tmp_path)
    outputs = {
        run("snapshot", "--replay", str(path), "--json", *args, env=locale_env(**env))
        for args, env in [((), {"LANG": "C.UTF-8"}), (("--ascii",), {"LANG": "C.UTF-8"}), ((), {"LANG": "C"})]
    }
    assert len(outputs) == 1
    code, data = outputs.pop()
    assert code == 0 and b"\\u540d\\u524d" in data  # the name, as JSON escapes it


def test_the_mode_lasts_one_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hosts", "--ascii", "gpu[1-2]"]) == 0
    assert "gpu[1-2]" in capsys.readouterr().out  # the hosts' count and hostlist
    assert not ascii_only()  # the next command (a test in this process) starts from the locale again


def test_the_suite_runs_in_a_utf8_locale() -> None:
    # tests/conftest.py: a CI box with no LANG (or LANG=C) would otherwise run every test in ASCII mode.
    assert shows_unicode()
    assert gputui("snapshot", "--help").returncode == 0
