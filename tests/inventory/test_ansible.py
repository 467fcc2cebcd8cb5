"""@ansible:INVENTORY[:GROUP] through Debian's ansible-core (`ansible-inventory --list`), with real INI
and YAML inventories written here. Skips where ansible-inventory is absent (.ci/run installs it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.config.file import parse_config
from gputui.inventory.ansible import inventory_hosts
from gputui.inventory.base import InventoryError
from gputui.inventory.specs import host_specs
from gputui.transport import make_link
from gputui.transport.local import LocalLink
from gputui.transport.ssh import SshLink

ROOT = Path(__file__).resolve().parents[2]
needs_ansible = pytest.mark.skipif(
    shutil.which("ansible-inventory") is None,
    reason="ansible-inventory (ansible-core) is not installed (.ci/run installs it)",
)

INI = """\
[gpus]
gpu-a ansible_host=10.0.0.1 ansible_user=alice ansible_port=2222
gpu-b ansible_ssh_common_args='-o ProxyJump=bob@bastion:2200'
node[01:03]

[cpus]
cpu1 ansible_connection=local

[rack3:children]
gpus
"""

YAML = """\
all:
  children:
    train:
      hosts:
        t1:
          ansible_host: 192.168.1.11
          ansible_ssh_extra_args: -J jump1
        t2: {}
      children:
        big:
          hosts:
            b1:
              ansible_port: "2201"
"""


@pytest.fixture
def ansible_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Ansible writes ~/.ansible/tmp: never the real user's.
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@needs_ansible
def test_an_ini_group_with_its_children_and_host_vars(ansible_home: Path) -> None:
    inv = ansible_home / "hosts.ini"
    inv.write_text(INI)
    hosts = {h.name: h for h in inventory_hosts(f"{inv}:rack3")}
    assert list(hosts) == ["gpu-a", "gpu-b", "node01", "node02", "node03"]
    a = hosts["gpu-a"]
    assert (a.address, a.user, a.port, a.jump, a.group) == ("10.0.0.1", "alice", 2222, None, "rack3")
    assert hosts["gpu-b"].jump == "bob@bastion:2200"
    assert hosts["node02"].address == "node02"
    assert a.source == f"@ansible:{inv}:rack3"


@needs_ansible
def test_the_whole_inventory_and_a_local_host(ansible_home: Path) -> None:
    inv = ansible_home / "hosts.ini"
    inv.write_text(INI)
    hosts = {h.name: h for h in inventory_hosts(str(inv))}
    assert set(hosts) == {"gpu-a", "gpu-b", "node01", "node02", "node03", "cpu1"}
    assert hosts["cpu1"].address == "local"  # ansible_connection=local: this machine
    assert hosts["cpu1"].group is None


@needs_ansible
def test_an_inventory_host_named_local_is_that_host_over_ssh(ansible_home: Path) -> None:
    """Only `ansible_connection=local` is this machine (Ansible's own meaning): a host the inventory
    names `local`, or whose ansible_host is `local`, is another machine, reached over SSH by that
    name. Before, both had the address gputui keeps for this machine, and `gputui clean @ansible:...
    --all` would have cleaned the operator's own GPUs in their place."""
    inv = ansible_home / "hosts.ini"
    inv.write_text(
        "local ansible_user=ops\nother ansible_host=local\nhere ansible_connection=local\n"
        "there ansible_host=local ansible_connection=local\n"
    )
    specs = {s.name: s for s in host_specs([f"@ansible:{inv}"], parse_config(""))}
    assert set(specs) == {"local", "other", "here", "there"}
    for name in ("local", "other"):
        assert specs[name].address == "local" and not specs[name].is_local(), specs[name]
        assert isinstance(make_link(specs[name]), SshLink)
    assert specs["local"].user == "ops"
    for name in ("here", "there"):
        assert specs[name].is_local() and isinstance(make_link(specs[name]), LocalLink), specs[name]


@needs_ansible
def test_a_yaml_inventory_with_nested_groups_and_jump_options(ansible_home: Path) -> None:
    inv = ansible_home / "cluster.yml"
    inv.write_text(YAML)
    hosts = {h.name: h for h in inventory_hosts(f"{inv}:train")}
    assert list(hosts) == ["t1", "t2", "b1"]
    assert (hosts["t1"].address, hosts["t1"].jump) == ("192.168.1.11", "jump1")
    assert hosts["b1"].port == 2201


@needs_ansible
def test_the_jump_reaches_the_host_spec(ansible_home: Path) -> None:
    inv = ansible_home / "hosts.ini"
    inv.write_text(INI)
    specs = {s.name: s for s in host_specs([f"@ansible:{inv}:gpus"], parse_config(""))}
    assert specs["gpu-b"].jump == "bob@bastion:2200"
    assert (specs["gpu-a"].address, specs["gpu-a"].user, specs["gpu-a"].port) == ("10.0.0.1", "alice", 2222)


@needs_ansible
def test_an_unknown_group_names_the_groups_there_are(ansible_home: Path) -> None:
    inv = ansible_home / "hosts.ini"
    inv.write_text(INI)
    with pytest.raises(InventoryError, match=r"no group 'gpu'.*cpus, gpus, rack3") as caught:
        inventory_hosts(f"{inv}:gpu")
    assert not caught.value.unavailable  # bad usage (exit 2)


def test_a_missing_inventory_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="no inventory at") as caught:
        inventory_hosts(str(tmp_path / "nope.ini"))
    assert not caught.value.unavailable  # bad usage (exit 2)


@needs_ansible
def test_a_host_name_that_reads_as_an_option_is_refused(ansible_home: Path) -> None:
    inv = ansible_home / "bad.yml"
    inv.write_text("all:\n  hosts:\n    ok1:\n      ansible_host: -oProxyCommand=touch\n")
    with pytest.raises(InventoryError, match="starts with '-'"):
        inventory_hosts(str(inv))


@needs_ansible
def test_gputui_hosts_prints_prometheus_targets_from_an_inventory(ansible_home: Path) -> None:
    inv = ansible_home / "hosts.ini"
    inv.write_text(INI)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(ansible_home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "hosts", f"@ansible:{inv}:gpus", "--format", "prometheus-sd"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    groups = json.loads(done.stdout)
    assert groups[0] == {
        "targets": ["10.0.0.1:9842"],
        "labels": {"gputui_host": "gpu-a", "gputui_group": "gpus", "gputui_source": f"@ansible:{inv}:gpus"},
    }
    assert len(groups) == 5


@needs_ansible
@pytest.mark.parametrize(
    "port", ["²", "-1", "70000", "9" * 5000], ids=["superscript", "-1", "70000", "5000-digits"]
)
def test_a_port_that_is_no_port_is_refused_in_one_line(ansible_home: Path, port: str) -> None:
    """Through the real ansible-inventory: INI gives `²` as text, `70000` as a number."""
    inv = ansible_home / "hosts.ini"
    inv.write_text(f"[gpus]\ngpu-a ansible_port={port}\n")
    with pytest.raises(InventoryError) as caught:
        inventory_hosts(str(inv))
    assert not caught.value.unavailable  # bad usage (exit 2)
    message = caught.value.message
    assert "ansible_port" in message and "gpu-a" in message and "\n" not in message and len(message) < 400


@needs_ansible
def test_an_executable_inventory_is_run_by_ansible_inventory(ansible_home: Path) -> None:
    """A script inventory: ansible-inventory runs it (gputui runs only ansible-inventory), and what it
    says is checked like any other inventory's answer."""
    script = ansible_home / "inventory.py"
    hosts = {"all": {"hosts": ["gpu-ok", "ev\x1b[2Jil"]}, "_meta": {"hostvars": {}}}
    script.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({hosts!r}))\n")
    script.chmod(0o755)
    with pytest.raises(
        InventoryError, match=r"host name 'ev\\e\[2Jil' contains control or invisible characters"
    ):
        inventory_hosts(str(script))
