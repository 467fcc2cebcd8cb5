"""The command an interrupted `gputui clean` prints to show a host again (gputui/cli/recheck.py): it
names the host as the command line did, so that it works as printed. Each command here is split as a
shell would (shlex) and resolved back through the same host resolution the command uses."""

from __future__ import annotations

import shlex
from pathlib import Path

from gputui.api import hosts as resolve
from gputui.cli.commands.snapshot import parser as snapshot_parser
from gputui.cli.recheck import snapshot_commands
from gputui.config.file import Config, HostSpec, load_config


def _means(command: str, config: Config) -> list[HostSpec]:
    """The hosts `command` (a `gputui snapshot` line) names, as `gputui snapshot` resolves them."""
    words = shlex.split(command)
    assert words[:2] == ["gputui", "snapshot"], command
    args = snapshot_parser().parse_args(words[2:])
    used = load_config(args.config) if args.config else config
    return resolve(args.hosts, used)


def test_an_ssh_host_is_named_with_its_user_and_port(tmp_path: Path) -> None:
    words = ["bench@gpu-c:2222", "root@[fe80::1]:22", "gpu-d"]
    specs = resolve(words, Config())
    recheck = snapshot_commands(specs, words, False, Config())
    for spec in specs:
        command = recheck(spec.name)
        assert _means(command, Config()) == [spec], command
    assert recheck("gpu-c") == "gputui snapshot bench@gpu-c:2222"
    assert recheck("gpu-d") == "gputui snapshot gpu-d"


def test_a_config_host_is_named_with_the_config_and_quoted(tmp_path: Path) -> None:
    path = tmp_path / "a dir" / "gputui.toml"
    path.parent.mkdir()
    name = "x;$(touch owned)'`"
    path.write_text(f'[[hosts]]\nname = "{name}"\naddress = "10.0.0.7"\nuser = "bob"\n')
    config = load_config(path)
    specs = resolve([name], config)
    command = snapshot_commands(specs, [name], False, config)(name)
    assert shlex.split(command)[2:4] == ["--config", str(path)], command
    assert _means(command, Config()) == specs


def test_a_host_its_source_gives_the_config_defaults_is_named_by_the_same_words(tmp_path: Path) -> None:
    """A host of a hostlist gets the config's [defaults]: its bare name would not, so the words that
    named it are printed again (they name the others too, but they name it as it was reached)."""
    path = tmp_path / "gputui.toml"
    path.write_text('[defaults]\nuser = "root"\nsudo = true\n')
    config = load_config(path)
    words = ["gpu[01-02]"]
    specs = resolve(words, config)
    command = snapshot_commands(specs, words, False, config)("gpu02")
    assert shlex.split(command)[-1] == "gpu[01-02]", command
    assert [s for s in _means(command, Config()) if s.name == "gpu02"] == [specs[1]]


def test_the_demo_is_named_with_demo() -> None:
    command = snapshot_commands([], ["demo-b"], True, Config())("demo-b")
    assert command == "gputui snapshot --demo demo-b"
