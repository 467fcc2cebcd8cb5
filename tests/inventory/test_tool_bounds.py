"""The tools a source runs (scontrol, sinfo, squeue, ansible-inventory) as hostile fakes on PATH: huge
answers, endless node lists, deep JSON, ports and names that are not. `gputui hosts` runs as a real
subprocess under RLIMIT_AS 3 GB and must end with one line on stderr and its exit code, never a
traceback or a MemoryError (the test's timeout is the hang detector)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.inventory.base import InventoryError
from gputui.inventory.tool import MAX_OUTPUT, run_tool
from tests.support.faketools import fake

ROOT = Path(__file__).resolve().parents[2]
MEMORY = 3 << 30  # RLIMIT_AS of the gputui under test: a 2 GB answer held whole cannot fit

# A writer of 2 GB that makes it lazily, a MiB at a time (the fake never holds it).
FLOOD = """\
chunk = ({line!r} * ((1 << 20) // len({line!r}) + 1)).encode()
out = sys.stdout.buffer
for _ in range(2048):
    out.write(chunk)
"""


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def gputui_hosts(tmp_path: Path, spec: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": str(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
    }
    return subprocess.run(
        [sys.executable, "-m", "gputui", "hosts", spec],
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=240,
        preexec_fn=limit_memory,
    )


def one_line(done: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The one line on stderr of a command that failed with `code`, naming `words`."""
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    line = lines[0]
    assert line.startswith("gputui: "), line
    assert len(line) < 1000, line[:2000]
    assert "\x1b" not in line and "\x07" not in line  # a tool's text is escaped
    for word in words:
        assert word in line, line
    assert done.returncode == code, (done.returncode, line)
    assert done.stdout == ""
    return line


# --- Slurm ---------------------------------------------------------------------------------------


def scontrol(tmp_path: Path, partition_line: str) -> None:
    fake(tmp_path / "bin", "scontrol", f"print({partition_line!r})\n")


@pytest.mark.timeout(300)
def test_a_2_gb_answer_from_scontrol_is_cut_and_refused(tmp_path: Path) -> None:
    fake(tmp_path / "bin", "scontrol", FLOOD.format(line="PartitionName=gpu Nodes=gpu[1-4] "))
    one_line(gputui_hosts(tmp_path, "@slurm:gpu"), 2, "@slurm:gpu", "scontrol", "more than 64 MiB")


@pytest.mark.timeout(300)
def test_a_2_gb_error_output_is_cut_to_its_last_line(tmp_path: Path) -> None:
    body = "err = sys.stderr.buffer\nfor _ in range(2048):\n    err.write(b'noise ' * 174762 + b'\\n')\n"
    fake(
        tmp_path / "bin",
        "scontrol",
        body + "err.write(b'slurm_load_partitions: \\x1b[31mdown\\n')\nsys.exit(1)\n",
    )
    line = one_line(gputui_hosts(tmp_path, "@slurm:gpu"), 1, "scontrol failed", "slurm_load_partitions")
    assert "noise" not in line


@pytest.mark.timeout(300)
def test_2000_lines_of_100000_nodes_each_are_refused(tmp_path: Path) -> None:
    lines = "\n".join(f"RUNNING|r{i}n[000000-099999]" for i in range(2000))
    fake(tmp_path / "bin", "squeue", f"print({lines!r})\n")
    one_line(gputui_hosts(tmp_path, "@slurm-job:77"), 2, "@slurm-job:77", "more than 100,000")


@pytest.mark.timeout(300)
def test_2000_lines_that_overlap_are_bounded_in_work(tmp_path: Path) -> None:
    """Each line names 50,000 nodes, all of them within 52,000: few hosts, but 100 million names
    to make one at a time."""
    lines = "\n".join(f"RUNNING|gpu[{i:05d}-{i + 49_999:05d}]" for i in range(2000))
    fake(tmp_path / "bin", "squeue", f"print({lines!r})\n")
    one_line(gputui_hosts(tmp_path, "@slurm-job:77"), 2, "@slurm-job:77", "node lists")


@pytest.mark.timeout(300)
def test_the_same_node_list_on_2000_lines_is_read_once(tmp_path: Path) -> None:
    """A job array whose 2,000 tasks all run on the same 50,000 nodes: 50,000 hosts."""
    fake(tmp_path / "bin", "squeue", "print('\\n'.join(['RUNNING|gpu[00001-50000]'] * 2000))\n")
    done = gputui_hosts(tmp_path, "@slurm-job:77")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) >= 50_000


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "nodes",
    [
        "gpu[" + ",".join(["0-99999"] * 20_000) + "]",  # ranges in one bracket, each under the cap
        "a[0-9]" * 200,  # 10^200 combinations
        "gpu[" + "9" * 5000 + "]",  # a number Python will not even convert
        "n" * 5_000_000,  # one name of 5 million characters
    ],
    ids=["ranges", "brackets", "digits", "long"],
)
def test_a_partition_whose_node_list_names_too_much_is_refused(tmp_path: Path, nodes: str) -> None:
    scontrol(tmp_path, f"PartitionName=gpu Nodes={nodes} State=UP")
    one_line(gputui_hosts(tmp_path, "@slurm:gpu"), 2, "@slurm:gpu")


@pytest.mark.timeout(300)
def test_a_partition_of_all_nodes_with_a_flood_from_sinfo(tmp_path: Path) -> None:
    scontrol(tmp_path, "PartitionName=gpu Nodes=ALL")
    fake(tmp_path / "bin", "sinfo", FLOOD.format(line="node\n"))
    one_line(gputui_hosts(tmp_path, "@slurm:gpu"), 2, "sinfo", "more than 64 MiB")


@pytest.mark.timeout(300)
def test_sinfo_listing_too_many_nodes_is_refused(tmp_path: Path) -> None:
    scontrol(tmp_path, "PartitionName=gpu Nodes=ALL")
    fake(tmp_path / "bin", "sinfo", "sys.stdout.write(''.join(f'n{i}\\n' for i in range(200_000)))\n")
    one_line(gputui_hosts(tmp_path, "@slurm:gpu"), 2, "more than 100,000")


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "nodes",
    ["gpu1,ev\x1b]0;owned\x07il", "gpu1,a\u202eb", "gpu1,-oProxyCommand=x", "gpu1,\x9bm"],
    ids=["esc", "bidi", "dash", "c1"],
)
def test_a_hostile_node_name_is_refused_and_shown_escaped(tmp_path: Path, nodes: str) -> None:
    scontrol(tmp_path, f"PartitionName=gpu Nodes={nodes}")
    line = one_line(gputui_hosts(tmp_path, "@slurm:gpu"), 2, "@slurm:gpu")
    assert "\u202e" not in line and "\x9b" not in line


@pytest.mark.timeout(300)
def test_an_unreadable_node_list_never_reaches_scontrol_as_an_option(tmp_path: Path) -> None:
    """A list hostlist cannot read goes to `scontrol show hostnames`: never one that reads as an option."""
    marker = tmp_path / "ran"
    body = f"""\
    if sys.argv[1:3] == ['show', 'hostnames']:
        open({str(marker)!r}, 'w').write(repr(sys.argv))
        print('n1')
    else:
        print('PartitionName=gpu Nodes=-x[1-2')
    """
    fake(tmp_path / "bin", "scontrol", body)
    one_line(gputui_hosts(tmp_path, "@slurm:gpu"), 2, "@slurm:gpu")
    assert not marker.exists()


@pytest.mark.timeout(300)
def test_a_job_with_endless_garbage_states_says_so_briefly(tmp_path: Path) -> None:
    fake(tmp_path / "bin", "squeue", "print('\\n'.join(f'S{i}\\x1b|' for i in range(200_000)))\n")
    line = one_line(gputui_hosts(tmp_path, "@slurm-job:77"), 2, "has no nodes")
    assert "S199999" not in line


@pytest.mark.timeout(60)
def test_a_tool_that_hangs_while_writing_is_killed_and_reaped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    tool = fake(
        tmp_path / "bin",
        "slowtool",
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "while True:\n    sys.stdout.write('x'); sys.stdout.flush(); time.sleep(0.05)\n",
    )
    with pytest.raises(InventoryError, match="did not answer within 1 s") as caught:
        run_tool([str(tool)], "@test", install="nothing", timeout=1)
    assert caught.value.unavailable  # like a host that is down (exit 1)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped: no such process, not even a zombie
        os.kill(pid, 0)


def test_run_tool_gives_what_fits_within_the_bound(tmp_path: Path) -> None:
    tool = fake(tmp_path / "bin", "fits", "sys.stdout.write('x' * 100_000); sys.stderr.write('warn\\n')\n")
    assert run_tool([str(tool)], "@test", install="nothing", limit=100_000) == "x" * 100_000
    with pytest.raises(InventoryError, match="more than") as caught:
        run_tool([str(tool)], "@test", install="nothing", limit=99_999)
    assert not caught.value.unavailable
    assert MAX_OUTPUT == 64 << 20


# --- Ansible -------------------------------------------------------------------------------------


def ansible(tmp_path: Path, document: object | str) -> None:
    (tmp_path / "inv.ini").write_text("")
    text = document if isinstance(document, str) else json.dumps(document)
    data = tmp_path / "answer.json"
    data.write_text(text)
    fake(tmp_path / "bin", "ansible-inventory", f"sys.stdout.write(open({str(data)!r}).read())\n")


def one_host(name: str = "gpu1", **hostvars: object) -> dict[str, object]:
    return {
        "_meta": {"hostvars": {name: hostvars}},
        "all": {"children": ["ungrouped"]},
        "ungrouped": {"hosts": [name]},
    }


@pytest.mark.timeout(300)
def test_a_2_gb_answer_from_ansible_inventory_is_cut_and_refused(tmp_path: Path) -> None:
    (tmp_path / "inv.ini").write_text("")
    fake(tmp_path / "bin", "ansible-inventory", FLOOD.format(line='{"all": {"hosts": ["a"]}} '))
    one_line(
        gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini"), 2, "ansible-inventory", "more than 64 MiB"
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("opening", ["[", '{"a":'], ids=["arrays", "objects"])
def test_json_nested_100000_deep_is_refused(tmp_path: Path, opening: str) -> None:
    closing = "]" if opening == "[" else "}"
    ansible(tmp_path, opening * 100_000 + "1" + closing * 100_000)
    one_line(gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini"), 2, "nested")


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "port",
    ["²", "-1", "70000", "0", "9" * 5000, "1" + "0" * 5000, 70000, 0, -1, 22.5, True, [22], "٢٢", " 2 2"],
    ids=lambda port: repr(port)[:12],
)
def test_an_ansible_port_that_is_no_port_is_refused(tmp_path: Path, port: object) -> None:
    if isinstance(port, str) and port.isdigit() and len(port) > 100:
        document = json.dumps(one_host(ansible_port="PORT")).replace('"PORT"', port)  # a JSON number
        ansible(tmp_path, document)
        one_line(gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini"), 2, "ansible_port")
        ansible(tmp_path, one_host(ansible_port=port))  # and as text
    else:
        ansible(tmp_path, one_host(ansible_port=port))
    one_line(gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini"), 2, "gpu1", "ansible_port")


def test_a_good_port_as_a_number_or_text(tmp_path: Path) -> None:
    for port in (2222, "2222", " 2222 "):
        ansible(tmp_path, one_host(ansible_port=port, ansible_host="10.0.0.1", ansible_user="ops"))
        done = gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[1].split()[:4] == ["gpu1", "10.0.0.1", "ops", "2222"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("name", "hostvars"),
    [
        ("ev\x1b[2Jil", {}),
        ("gpu1", {"ansible_host": "10.0.0.1\x1b]52;c;aGk=\x07"}),
        ("gpu1", {"ansible_user": "al\u202eice"}),
        ("gpu1", {"ansible_host": ["10.0.0.1"]}),
        ("gpu1", {"ansible_user": {"name": "ops"}}),
        ("gpu1", {"ansible_host": "NESTED"}),
        ("g" * 1_000_000, {}),
        ("gpu1", {"ansible_host": "h" * 1_000_000}),
        ("gpu1", {"ansible_ssh_common_args": "-J -oProxyCommand=touch"}),
        ("gpu1", {"ansible_ssh_common_args": "-J bad\x1bhost"}),
        ("gpu1", {"ansible_ssh_common_args": "-o " * 2_000_000}),
    ],
    ids=[
        "esc-name",
        "osc-host",
        "bidi-user",
        "list-host",
        "dict-user",
        "nested-host",
        "long-name",
        "long-host",
        "dash-jump",
        "esc-jump",
        "long-args",
    ],
)
def test_a_hostile_host_from_an_inventory_is_refused_in_one_escaped_line(
    tmp_path: Path, name: str, hostvars: dict[str, object]
) -> None:
    document = json.dumps(one_host(name, **hostvars))
    ansible(tmp_path, document.replace('"NESTED"', "[" * 970 + "]" * 970))  # as deep as Python parses
    line = one_line(gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini"), 2, "@ansible:")
    assert "\u202e" not in line


@pytest.mark.timeout(300)
def test_an_inventory_of_too_many_hosts_is_refused(tmp_path: Path) -> None:
    ansible(tmp_path, {"all": {"hosts": [f"n{i}" for i in range(100_001)]}})
    one_line(gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini"), 2, "more than 100,000")


@pytest.mark.timeout(300)
def test_a_chain_of_100000_child_groups_is_read_without_recursion(tmp_path: Path) -> None:
    groups: dict[str, object] = {f"g{i}": {"children": [f"g{i + 1}"]} for i in range(100_000)}
    groups["g100000"] = {"hosts": ["deep1"]}
    groups["all"] = {"children": ["g0"]}
    ansible(tmp_path, groups)
    done = gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "deep1" in done.stdout


@pytest.mark.timeout(300)
def test_an_unknown_group_among_a_million_names_a_few(tmp_path: Path) -> None:
    ansible(tmp_path, {f"g{i}\x1b": {} for i in range(1_000_000)} | {"all": {}})
    line = one_line(gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini:nosuch"), 2, "no group 'nosuch'")
    assert "more" in line


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "document",
    [
        {"all": {"hosts": [1, 2]}},
        {"all": {"hosts": "gpu1"}},
        {"all": {"children": [["g"]]}},
        {"all": {"hosts": ["gpu1"]}, "_meta": {"hostvars": ["gpu1"]}},
    ],
    ids=["numbers", "text", "list-child", "list-hostvars"],
)
def test_an_inventory_of_the_wrong_shape_is_refused(tmp_path: Path, document: object) -> None:
    ansible(tmp_path, document)
    one_line(gputui_hosts(tmp_path, f"@ansible:{tmp_path}/inv.ini"), 2, "@ansible:")


# --- the user's own spec -------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "spec",
    [
        "@ansible:" + "a" * 5000,  # longer than a file name may be
        "@ansible:~nosuchuser/inventory.ini",  # no such user: no home to expand
        "@ansible:/tmp/ev\x1b[2Jil.ini",
        "@slurm:" + "p" * 100_000,
        "@slurm:gpu\x1b]0;x\x07",
        "@slurm-job:" + "1" * 5000,
        "@slurm-job:12\u202e34",
    ],
    ids=["long-path", "no-such-user", "esc-path", "long-partition", "esc-partition", "long-job", "bidi-job"],
)
def test_a_spec_that_names_nothing_is_quoted_escaped_and_short(tmp_path: Path, spec: str) -> None:
    """Never reaches a tool: one line, the user's text escaped and cut, exit 2."""
    for name in ("scontrol", "squeue", "ansible-inventory"):
        fake(tmp_path / "bin", name, "sys.exit('the tool ran')\n")
    line = one_line(gputui_hosts(tmp_path, spec), 2, spec[: spec.index(":") + 1])
    assert "the tool ran" not in line and "\u202e" not in line
