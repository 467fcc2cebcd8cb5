"""The user's own words in errors are shown escaped, as remote text is: an ESC in a spec, a file name,
an ssh pattern or an option never reaches the terminal raw (`gputui hosts @slurm:$'\\e[2J'` cleared
the screen). Every error path of `gputui hosts` and of the main commands' host parsing, as real
subprocesses, then fuzzed in-process: no traceback, no raw control character on stderr."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
ESC = "\x1b[2J"
RAW = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xae\xab\xaa\xad\xac]")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("GPUTUI_CONFIG", "SSH_AUTH_SOCK")}
    out.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host a\n")
    return out


def gputui(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        env=env,
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def escaped(done: subprocess.CompletedProcess[bytes]) -> str:
    assert RAW.search(done.stderr) is None, done.stderr
    err = done.stderr.decode()
    assert "Traceback" not in err, err
    assert "\\e" in err or "\\x1b" in err, err
    return err


@pytest.mark.parametrize(
    "args",
    [
        ["hosts", f"@slurm:{ESC}"],
        ["hosts", f"@slurm-job:{ESC}"],
        ["hosts", f"@file:{ESC}"],
        ["hosts", f"@file:/nonexistent/{ESC}"],
        ["hosts", f"@ssh:{ESC}"],
        ["hosts", f"@group:{ESC}"],
        ["hosts", f"@no{ESC}:x"],
        ["hosts", f"gpu[{ESC}]"],
        ["hosts", f"gpu[1-2]{ESC}"],
        ["hosts", f"a{ESC}"],
        ["hosts", f"alice@a:{ESC}"],
        ["hosts", f"--x{ESC}"],
        ["hosts", "--format", ESC],
        ["hosts", "--sd-port", ESC],
        ["hosts", "--config", ESC],
        ["snapshot", f"@file:{ESC}"],
        ["snapshot", f"--x{ESC}"],
        ["wait", f"a{ESC}"],
        ["clean", f"@file:{ESC}", "--all", "--dry-run"],
        ["export", f"@file:{ESC}", "--once"],
        [f"@file:{ESC}"],  # the dashboard
        [f"--x{ESC}"],
    ],
)
def test_an_error_shows_the_user_s_words_escaped(env: dict[str, str], args: list[str]) -> None:
    done = gputui(env, *args)
    assert done.returncode == 2
    escaped(done)


def test_a_file_line_and_an_ssh_config_are_escaped(env: dict[str, str], tmp_path: Path) -> None:
    listing = tmp_path / f"hosts{ESC}.txt"
    listing.write_text(f"good\nbad{ESC}\n")
    err = escaped(gputui(env, "hosts", f"@file:{listing}"))
    assert "line 2" in err
    Path(env["HOME"], ".ssh", "config").write_text(f"Host a{ESC}\nHost b\n  Port {ESC}\n")
    assert "line 3" in escaped(gputui(env, "hosts", "@ssh:b"))


# -- fuzzed, in-process (no tool: @slurm and @ansible would run scontrol and ansible-inventory) -----

_WORD = st.text(
    st.sampled_from([*"ab01-9,[]:@~/!*?.# ", "\x1b", "\x07", "\n", "\t", "\u202e", "\x9b", "\u00b2", "\x00"]),
    max_size=30,
)
_SPEC = st.one_of(
    _WORD,
    st.builds(lambda kind, arg: f"@{kind}:{arg}", st.sampled_from(["file", "ssh", "group", "nope"]), _WORD),
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("GPUTUI_CONFIG", "SSH_AUTH_SOCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host a b\n  Port 22\nHost *\n  User u\n")
    return tmp_path


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=st.lists(_SPEC, min_size=1, max_size=3), dashed=st.booleans())
def test_fuzzed_specs_never_show_a_raw_control_character(
    home: Path, capsys: pytest.CaptureFixture[str], specs: list[str], dashed: bool
) -> None:
    if any(s.lstrip().startswith(("@slurm", "@ansible")) for s in specs):
        return
    args = ["hosts", "--json", *(["--"] if dashed else []), *specs]
    try:
        code = main(args)
    except SystemExit as stop:  # argparse: a spec that reads as an option
        code = stop.code if isinstance(stop.code, int) else 2
    err = capsys.readouterr().err
    assert code in (0, 1, 2), err
    assert RAW.search(err.encode("utf-8", "surrogateescape")) is None, err
    if code:
        assert "Traceback" not in err and err.strip(), err
