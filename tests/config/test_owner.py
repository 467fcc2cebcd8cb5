"""A config (and what it names to run) from another user's directory is refused, as OpenSSH refuses
"Bad owner or permissions" (issue 17, defect 3).

`sudo -E gputui` (and `su`) keep XDG_CONFIG_HOME and HOME: root loaded the invoking user's config
and ran its `python = "/home/OTHER/evil.sh"`. These tests run as root (here and in CI) and make
"another user's" files with os.chown to uid 65534 (nobody); without root they are skipped.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.config.file import ConfigError, load, load_config

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
NOGROUP = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")

GOOD = '[[hosts]]\nname = "a"\nreader = "sim"\n'


def config_in(directory: Path, text: str = GOOD, mode: int = 0o644) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.toml"
    path.write_text(text)
    path.chmod(mode)
    return path


def refused(path: Path, *words: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert "bad owner or permissions" in text, text
    for word in words:
        assert word in text, text
    return text


def test_a_config_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = config_in(tmp_path / "d")
    os.chown(path, NOBODY, NOGROUP)
    refused(path, str(path), "uid 65534")


@pytest.mark.parametrize("mode, words", [(0o664, "group"), (0o646, "others"), (0o666, "others")])
def test_a_config_others_can_write_is_refused(tmp_path: Path, mode: int, words: str) -> None:
    path = config_in(tmp_path / "d", mode=mode)
    os.chown(path, 0, NOGROUP)  # a group with other members than root
    refused(path, words)


def test_a_group_of_the_owner_alone_may_write_it(tmp_path: Path) -> None:
    """OpenSSH's rule for user private groups: root:root 0664 has no writer but root."""
    path = config_in(tmp_path / "d", mode=0o664)
    os.chown(path, 0, 0)
    assert [h.name for h in load_config(path).hosts] == ["a"]


def test_a_directory_another_user_controls_is_refused(tmp_path: Path) -> None:
    """The file is root's, but the directory above it (or any above that) is another user's, who
    can swap the file for their own."""
    theirs = tmp_path / "home-other"
    path = config_in(theirs / ".config" / "gputui")
    os.chown(theirs, NOBODY, NOGROUP)
    refused(path, f"directory {theirs}", "uid 65534")


def test_a_directory_others_can_write_is_refused_unless_sticky(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    path = config_in(shared / "cfg")
    shared.chmod(0o777)
    refused(path, f"directory {shared}", "others")
    shared.chmod(0o1777)  # like /tmp: nobody may replace what is not theirs
    assert load_config(path).hosts


def test_a_symlink_is_judged_by_what_it_points_to(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    real = config_in(theirs)
    os.chown(theirs, NOBODY, NOGROUP)
    link = tmp_path / "mine.toml"
    link.symlink_to(real)
    refused(link, str(theirs))


def test_a_python_another_user_owns_is_refused_and_never_run(tmp_path: Path) -> None:
    theirs = tmp_path / "home-other"
    theirs.mkdir()
    evil = theirs / "evil.sh"
    marker = tmp_path / "ran"
    evil.write_text(f'#!/bin/sh\ntouch {marker}\nexec {sys.executable} "$@"\n')
    evil.chmod(0o755)
    os.chown(evil, NOBODY, NOGROUP)
    path = config_in(tmp_path / "mine", f'[[hosts]]\nname = "local"\npython = "{evil}"\n')
    text = refused(path, f"python {str(evil)!r}", "uid 65534")
    assert "host 'local'" in text
    # The same through the CLI: exit 2, one clear line, the script never run.
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "snapshot", "--config", str(path), "--timeout", "5"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "bad owner or permissions" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not marker.exists()
    # A python others may write, in [defaults], and a wrap command named by path: the same rule.
    os.chown(evil, 0, NOGROUP)
    evil.chmod(0o775)
    os.chown(theirs, 0, 0)
    path.write_text(f'[defaults]\npython = "{evil}"\n[[hosts]]\nname = "local"\n')
    refused(path, "group")
    path.write_text(f'[[hosts]]\nname = "local"\nwrap = "{evil} --x"\n')
    refused(path, f"wrap command {str(evil)!r}")
    # A remote host's python is a path on that host: nothing here to check.
    path.write_text(f'[[hosts]]\nname = "gpu-a"\npython = "{evil}"\n')
    assert load_config(path).hosts[0].python == str(evil)


@pytest.mark.parametrize("via", ["XDG_CONFIG_HOME", "HOME"])
def test_sudo_e_with_another_users_config_dir_is_exit_2_for_cli_and_dashboard(
    tmp_path: Path, via: str
) -> None:
    """`sudo -E gputui ...`: the environment names the other user's directories."""
    home = tmp_path / "home-other"
    config_home = home / ".config"
    path = config_in(config_home / "gputui")
    for p in (home, config_home, config_home / "gputui", path):
        os.chown(p, NOBODY, NOGROUP)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "GPUTUI_CONFIG")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home), XDG_STATE_HOME=str(tmp_path / "state"))
    if via == "XDG_CONFIG_HOME":
        env["HOME"] = str(tmp_path)
        env["XDG_CONFIG_HOME"] = str(config_home)
    for argv in (["snapshot", "--demo"], ["wait", "--demo", "--timeout", "1"], ["--demo"]):
        done = subprocess.run(
            [sys.executable, "-m", "gputui", *argv],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2, (argv, done.returncode, done.stderr[-2000:])
        assert f"config error: {path}: bad owner or permissions" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_a_good_config_still_loads(tmp_path: Path) -> None:
    path = config_in(tmp_path / "mine")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [h.name for h in load(str(path), {}).hosts] == ["a"]
