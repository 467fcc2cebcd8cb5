"""@file, @ssh (a temporary ssh config with Include, ProxyJump and wildcard entries), [groups] in the
config, and what the resolved hosts become (HostSpec: defaults, config entries, aliases)."""

from __future__ import annotations

import getpass
import shutil
import subprocess
from pathlib import Path

import pytest

from gputui.config.file import ConfigError, HostSpec, parse_config
from gputui.inventory.base import InventoryError
from gputui.inventory.sources import Resolver
from gputui.inventory.specs import host_specs, resolve_hosts

# -- @file ---------------------------------------------------------------------------------------


def test_a_host_file_one_a_line_with_comments_and_hostlists(tmp_path: Path) -> None:
    listed = tmp_path / "rack3"
    listed.write_text("# rack 3\ngpu-a\n\n  alice@gpu-b:2222   # the odd one\ngpu[01-02]-ib\n")
    hosts = Resolver().resolve(f"@file:{listed}")
    assert [(h.name, h.user, h.port) for h in hosts] == [
        ("gpu-a", None, None),
        ("gpu-b", "alice", 2222),
        ("gpu01-ib", None, None),
        ("gpu02-ib", None, None),
    ]
    assert {h.source for h in hosts} == {f"@file:{listed}"}


def test_a_bad_line_of_a_host_file_is_named_by_its_number(tmp_path: Path) -> None:
    listed = tmp_path / "hosts"
    listed.write_text("gpu-a\ngpu[3-1]\n")
    with pytest.raises(InventoryError, match=r"line 2: .*goes down") as caught:
        Resolver().resolve(f"@file:{listed}")
    assert not caught.value.unavailable  # bad usage (exit 2)


@pytest.mark.parametrize("content", ["", "# only a comment\n\n"])
def test_a_host_file_without_hosts_says_so(tmp_path: Path, content: str) -> None:
    listed = tmp_path / "hosts"
    listed.write_text(content)
    with pytest.raises(InventoryError, match="lists no host"):
        Resolver().resolve(f"@file:{listed}")


def test_a_missing_host_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"cannot read .*No such file"):
        Resolver().resolve(f"@file:{tmp_path / 'nope'}")


def test_a_host_that_reads_as_an_option_is_refused(tmp_path: Path) -> None:
    listed = tmp_path / "hosts"
    listed.write_text("-oProxyCommand=touch_x\n")
    with pytest.raises(InventoryError, match="line 1"):
        Resolver().resolve(f"@file:{listed}")


# -- @ssh ----------------------------------------------------------------------------------------


SSH_CONFIG = """\
# the user's config
Include {ssh}/conf.d/*.conf

Host bastion
    HostName bastion.example.org
    User jumper

Host gpu-a gpu-b
    HostName %h.cluster.lan
    ProxyJump bastion
    Port 2222

Host *.lan !nothing
    User ignored-here

Host *
    User everyone
"""

INCLUDED = """\
Host gpu-c
    HostName 10.1.0.3
    User=carol
    ProxyJump none

Host gpu-*
    Port 2200

Match host gpu-d
    User matched
"""


@pytest.fixture
def ssh_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))  # Include's relative paths are under ~/.ssh
    ssh = tmp_path / ".ssh"
    (ssh / "conf.d").mkdir(parents=True)
    (ssh / "config").write_text(SSH_CONFIG.format(ssh=ssh))
    (ssh / "conf.d" / "cluster.conf").write_text(INCLUDED)
    return ssh / "config"


def test_ssh_entries_that_match_with_their_options(ssh_config: Path) -> None:
    hosts = {h.name: h for h in Resolver(ssh_config=ssh_config).resolve("@ssh:gpu-*")}
    assert list(hosts) == ["gpu-c", "gpu-a", "gpu-b"]  # the Include comes first in the file
    a = hosts["gpu-a"]
    # The first value obtained wins, in file order: the Included `Host gpu-*` says Port 2200 before
    # `Host gpu-a gpu-b` says 2222; `Host *` gives the User nothing before it gave.
    assert (a.address, a.user, a.port, a.jump) == ("gpu-a.cluster.lan", "everyone", 2200, "bastion")
    c = hosts["gpu-c"]
    assert (c.address, c.user, c.port, c.jump) == ("10.1.0.3", "carol", 2200, None)
    assert all(h.alias for h in hosts.values())


@pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH's ssh is not installed")
def test_what_is_shown_is_what_openssh_takes(ssh_config: Path) -> None:
    """`ssh -G` (OpenSSH's own evaluation) agrees on every entry's HostName, User, Port, ProxyJump."""
    _agrees_with_ssh(ssh_config)


def _agrees_with_ssh(ssh_config: Path) -> None:
    if shutil.which("ssh") is None:
        return
    for host in Resolver(ssh_config=ssh_config).resolve("@ssh:"):
        done = subprocess.run(
            ["ssh", "-G", "-F", str(ssh_config), host.name], capture_output=True, text=True, check=True
        )
        said = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
        assert said["hostname"] == host.address
        assert said["user"] == (host.user or getpass.getuser())
        assert int(said["port"]) == (host.port or 22)
        assert said.get("proxyjump") == host.jump


def test_a_relative_include_is_under_the_home_ssh_directory(ssh_config: Path) -> None:
    """As asyncssh (the transport) reads it: ~/.ssh with HOME's ~ (OpenSSH takes the passwd entry's)."""
    text = ssh_config.read_text().replace(str(ssh_config.parent) + "/", "")
    assert "Include conf.d/*.conf" in text
    ssh_config.write_text(text)
    assert "gpu-c" in [h.name for h in Resolver(ssh_config=ssh_config).resolve("@ssh:gpu-*")]


def test_wildcard_only_entries_are_no_hosts(ssh_config: Path) -> None:
    names = [h.name for h in Resolver(ssh_config=ssh_config).resolve("@ssh:")]
    assert names == ["gpu-c", "bastion", "gpu-a", "gpu-b"]


def test_an_include_inside_a_host_block_applies_to_that_block_s_hosts(ssh_config: Path) -> None:
    """OpenSSH's conditional Include: gpu-c's block, included inside `Host bastion`, never applies to
    gpu-c (no host is both); the included file's first lines belong to bastion. ssh -G agrees."""
    (ssh_config.parent / "more.conf").write_text("User from-include\nHost gpu-e\n    HostName e.lan\n")
    ssh_config.write_text(f"Host bastion\n    Include {ssh_config.parent}/more.conf\nHost gpu-a\n")
    hosts = {h.name: h for h in Resolver(ssh_config=ssh_config).resolve("@ssh:")}
    assert list(hosts) == ["bastion", "gpu-a"]
    assert hosts["bastion"].user == "from-include" and hosts["gpu-a"].user is None
    _agrees_with_ssh(ssh_config)


def test_no_matching_entry_is_a_usage_error(ssh_config: Path) -> None:
    with pytest.raises(InventoryError, match="no Host entry") as caught:
        Resolver(ssh_config=ssh_config).resolve("@ssh:cpu-*")
    assert not caught.value.unavailable  # bad usage (exit 2)


def test_an_include_loop_is_cut(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(f"Host one\nInclude {config}\n")
    with pytest.raises(InventoryError, match="Include nested"):
        Resolver(ssh_config=config).resolve("@ssh:*")


def test_an_ssh_entry_connects_through_its_alias(ssh_config: Path) -> None:
    """The transport reads the same config (ProxyJump, HostName, keys): the spec names the alias."""
    [spec] = host_specs(["@ssh:gpu-a"], parse_config(""), ssh_config=ssh_config)
    assert spec == HostSpec(name="gpu-a", address="gpu-a")


# -- [groups] ------------------------------------------------------------------------------------


CONFIG = """\
[defaults]
sudo = true

[[hosts]]
name = "gpu002"
address = "10.0.0.2"
read_only = true

[groups]
rack3 = ["gpu[001-003]", "@group:spares"]
spares = ["spare1", "gpu002"]
loop-a = ["@group:loop-b"]
loop-b = ["loop-a"]
"""


def test_a_group_by_name_or_as_a_source() -> None:
    config = parse_config(CONFIG)
    for word in ("rack3", "@group:rack3"):
        hosts = resolve_hosts([word], config)
        assert [h.name for h in hosts] == ["gpu001", "gpu002", "gpu003", "spare1"]
        assert {h.group for h in hosts} == {"rack3"}  # the outermost group's name


def test_group_hosts_get_the_defaults_and_config_entries_stay_themselves() -> None:
    specs = {s.name: s for s in host_specs(["rack3"], parse_config(CONFIG))}
    assert specs["gpu001"] == HostSpec(name="gpu001", address="gpu001", sudo=True, group="rack3")
    assert specs["gpu002"] == HostSpec(name="gpu002", address="10.0.0.2", sudo=True, read_only=True)


def test_a_host_written_as_itself_is_as_before() -> None:
    """No [defaults] for `user@host` on the command line: only hosts a source lists get them."""
    [spec] = host_specs(["bob@gpu9:2201"], parse_config(CONFIG))
    assert spec == HostSpec(name="gpu9", address="gpu9", user="bob", port=2201)


def test_hosts_named_by_two_specs_are_kept_once() -> None:
    hosts = resolve_hosts(["gpu[001-002]", "rack3", "gpu001"], parse_config(CONFIG))
    assert [h.name for h in hosts] == ["gpu001", "gpu002", "gpu003", "spare1", "gpu001"]


def test_a_group_that_contains_itself() -> None:
    with pytest.raises(InventoryError, match=r"contains itself .*loop-a -> loop-b -> loop-a"):
        resolve_hosts(["loop-a"], parse_config(CONFIG))


def test_an_unknown_group_lists_the_known_ones() -> None:
    with pytest.raises(InventoryError, match=r"no group 'rack4' .*loop-a, loop-b, rack3, spares"):
        resolve_hosts(["@group:rack4"], parse_config(CONFIG))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[groups]\nrack = ["gpu[3-1]"]\n', "goes down"),
        ('[groups]\nrack = ["@slrum:gpu"]\n', "names no source"),
        ('[groups]\nrack = ["a[1-99999]b[0-9]"]\n', "names more than 100,000 hosts"),  # counted, not made
        ("[groups]\nrack = []\n", "must be a list of host specs"),
        ("[groups]\nrack = [1]\n", "must be a list of host specs"),
        ('[groups]\n"bad name" = ["a"]\n', "is not a group name"),
        ("groups = 3\n", "'groups' must be a table"),
        ('[[hosts]]\nname = "rack"\n[groups]\nrack = ["a"]\n', "also the name of a"),
    ],
)
def test_bad_groups_are_config_errors_with_a_line(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        parse_config(text, "cfg.toml")
    assert caught.value.line is not None


@pytest.mark.parametrize(
    ("word", "problem"),
    [
        ("@slrum:gpu", "unknown source"),
        ("@file", "unknown source"),
        ("@file:", "name the file"),
        ("gpu[3-1]", "goes down"),
        ("alice@", "no host name"),
        ("", "empty host spec"),
    ],
)
def test_bad_specs(word: str, problem: str) -> None:
    with pytest.raises(InventoryError, match=problem) as caught:
        Resolver().resolve(word)
    assert not caught.value.unavailable  # bad usage (exit 2)
    assert "\n" not in caught.value.message
