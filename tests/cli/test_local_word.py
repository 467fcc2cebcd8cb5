"""`local` is this machine, read without SSH: a user or a port with it (`alice@local`,
`local:2222`) does not apply, and was dropped without a word (this machine was read, as if
`local` alone had been written). Every command that takes hosts refuses it now, in one line,
exit 2, whether written on the command line, in a host file or in the config's [[hosts]] (the real
CLI, as a user runs it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import gputui

pytestmark = pytest.mark.timeout(300)

WORDS = "`local` is this machine, read without SSH: a user, port or jump host does not apply"


def refused(*args: str, said: str) -> None:
    result = gputui(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and WORDS in lines[0] and said in lines[0], lines
    assert "Traceback" not in result.stderr and "== local" not in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("snapshot", "alice@local"), "'alice@local'"),
        (("snapshot", "local:2222"), "'local:2222'"),
        (("snapshot", "--json", "alice@local:2222"), "'alice@local:2222'"),
        (("clean", "alice@local", "--all", "--dry-run"), "'alice@local'"),
        (("hosts", "alice@local"), "'alice@local'"),
        (("pick", "1", "alice@local"), "'alice@local'"),
        (("export", "--once", "alice@local"), "'alice@local'"),
        (("wait", "alice@local", "--timeout", "1"), "'alice@local'"),
    ],
)
def test_a_user_or_port_with_local_is_refused(args: tuple[str, ...], said: str) -> None:
    refused(*args, said=said)


def test_a_host_file_that_gives_local_a_user_is_refused(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("alice@local\n")
    refused("snapshot", f"@file:{hosts}", said="'alice@local'")


@pytest.mark.parametrize("key", ['user = "alice"', "port = 2222", 'jump = "bastion"'])
def test_a_config_host_at_local_with_its_own_user_port_or_jump_is_refused(tmp_path: Path, key: str) -> None:
    config = tmp_path / "gputui.toml"
    config.write_text(f'[[hosts]]\nname = "box"\naddress = "local"\n{key}\n')
    refused("snapshot", "--config", str(config), said="[[hosts]] #1")
