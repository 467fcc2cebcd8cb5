"""`gputui` (the dashboard) on a bad day at the command line (issue 12, defect 7): no terminal, a
mistyped command, an unknown theme, a demo host that does not exist. Each is refused at once with a
message that says what to do, exit 2: no escape codes into a file, no SSH attempt."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.cli import dashboard, fleets
from gputui.cli import main as cli
from gputui.cli.commands import dashboard as dashboard_command
from gputui.config.file import Config


def gputui(
    *args: str, tmp_path: Path, stdin: Any = subprocess.DEVNULL, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "empty.toml"
    config.write_text("")
    env = dict(os.environ, GPUTUI_CONFIG=str(config))
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,  # the old gputui ran here until killed
        check=False,
        env=env,
        **kwargs,
    )


def test_no_terminal_on_stdout_is_refused(tmp_path: Path) -> None:
    run = gputui("--demo", tmp_path=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "stdout is not one" in run.stderr and "gputui snapshot" in run.stderr
    assert "--force-tty" in run.stderr
    assert run.stdout == "" and "\x1b" not in run.stderr


def test_no_terminal_on_stdin_is_refused(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    try:
        config = tmp_path / "empty.toml"
        config.write_text("")
        run = subprocess.run(
            [sys.executable, "-m", "gputui", "--demo"],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
            env=dict(os.environ, GPUTUI_CONFIG=str(config)),
        )
    finally:
        os.close(slave)
        os.close(master)
    assert run.returncode == 2 and "stdin is not one" in run.stderr


def test_force_tty_draws_anyway(monkeypatch: pytest.MonkeyPatch) -> None:
    """--force-tty skips the check (the app itself is replaced here: nothing is started)."""
    ran: list[Any] = []

    class App:
        return_code = 0

        def run(self) -> None:
            ran.append(self)

    monkeypatch.setattr(dashboard, "make_app", lambda *a, **k: App())
    monkeypatch.setattr(dashboard, "tune_gc", lambda fleet=None: None)
    monkeypatch.setattr(dashboard, "load", lambda path=None: Config())
    assert cli.main(["--demo"]) == 2 and ran == []  # under pytest stdout is no terminal
    assert cli.main(["--demo", "--force-tty"]) == 0 and len(ran) == 1
    assert "--force-tty" in dashboard_command.parser().format_help()


@pytest.mark.parametrize(
    ("typed", "meant"), [("snapshto", "snapshot"), ("clena", "clean"), ("prob", "probe")]
)
def test_a_mistyped_command_is_not_taken_for_a_host(typed: str, meant: str, tmp_path: Path) -> None:
    run = gputui(typed, "--json", tmp_path=tmp_path)
    assert run.returncode == 2, run.stderr
    assert f"did you mean `gputui {meant}`?" in run.stderr
    assert f"gputui -- {typed}" in run.stderr
    assert "ssh" not in run.stderr.lower() and "Traceback" not in run.stderr


def test_a_host_that_looks_like_a_command_can_still_be_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli.mistyped_command(["--", "clena"]) is None
    assert cli.mistyped_command(["root@clena"]) is None
    assert cli.mistyped_command(["gpu-a", "gpu-b"]) is None  # not close to any command
    config = tmp_path / "hosts.toml"
    config.write_text('[[hosts]]\nname = "clena"\naddress = "10.0.0.7"\n')
    assert cli.mistyped_command(["clena", "--config", str(config)]) is None
    monkeypatch.setenv("GPUTUI_CONFIG", str(config))
    assert cli.mistyped_command(["clena"]) is None


def test_an_unknown_theme_lists_the_themes_and_suggests_one(tmp_path: Path) -> None:
    run = gputui("--demo", "--theme", "drak", tmp_path=tmp_path)
    assert run.returncode == 2
    assert "--theme: unknown theme 'drak' (did you mean 'dark'?)" in run.stderr
    assert "gputui's: contrast, dark, light" in run.stderr and "nord" in run.stderr

    config = tmp_path / "themed.toml"
    config.write_text('theme = "ligth"\n')
    run = gputui("--demo", "--config", str(config), tmp_path=tmp_path)
    assert run.returncode == 2
    assert f"theme in {config}: unknown theme 'ligth' (did you mean 'light'?)" in run.stderr

    for known in ("light", "gputui-contrast", "nord"):
        run = gputui("--demo", "--theme", known, tmp_path=tmp_path)
        assert "unknown theme" not in run.stderr and "stdout is not one" in run.stderr


def test_demo_hosts_are_checked(tmp_path: Path) -> None:
    run = gputui("--demo", "nohost", tmp_path=tmp_path)
    assert run.returncode == 2
    assert "the demo has no host 'nohost' (its hosts: demo-a, demo-b)" in run.stderr
    assert [s.name for s in fleets.resolve_hosts(["demo-b"], True, Config())] == ["demo-b"]


def test_columns_config_errors_exit_2_with_the_known_columns(tmp_path: Path) -> None:
    """[columns]: an unknown column, a column that must stay, an unknown table: a message that
    names the file, the line and the columns there are; exit 2, never a traceback."""
    config = tmp_path / "columns.toml"
    cases = {
        '[columns]\nhide_processes = ["rss", "memz"]\n': (
            ":2:",
            "unknown column 'memz'; did you mean 'mem'? the processes columns are: user, container, gpu, mem, sm",
        ),
        '[columns]\nhide_gpus = ["pid"]\n': (":2:", "the gpus columns are: name, memory, util"),
        '[columns]\nhide_processes = ["pid"]\n': (":2:", "the 'pid' column is always shown"),
        '[columns]\nhide_proceses = ["rss"]\n': (":2:", "did you mean 'hide_processes'?"),
        '[columns]\nhide_fleet = "ram"\n': (":2:", "must be a list of column names"),
        "columns = 3\n": (":1:", "'columns' must be a table"),
    }
    for text, (line, words) in cases.items():
        config.write_text(text)
        for command in ((), ("snapshot",)):
            run = gputui(*command, "--demo", "--config", str(config), tmp_path=tmp_path)
            assert run.returncode == 2, (text, run.stderr)
            assert words in run.stderr and f"{config}{line}" in run.stderr, run.stderr
            assert "Traceback" not in run.stderr
    config.write_text('[columns]\nhide_processes = ["rss", "elapsed"]\nhide_fleet = ["ram"]\n')
    run = gputui("--demo", "--config", str(config), tmp_path=tmp_path)
    assert run.returncode == 2 and "stdout is not one" in run.stderr  # the config passed
