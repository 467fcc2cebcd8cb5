"""Inputs that never end, through `gputui hosts` as a real subprocess under a 3 GB address space:
hostlists, @file: and ~/.ssh/config that are too large, too long, not numbers, or not files. Each is
one line on stderr and exit 2 (no traceback, no MemoryError), or, where it is a real if large
config, the right hosts. The subprocess timeout only detects a hang; nothing here asserts a duration.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADDRESS_SPACE = 3 << 30  # a bracket expanded whole, or /dev/zero read whole, is a MemoryError here
HANG = 120.0  # seconds: far beyond what any of these takes; only a hang gets there


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("GPUTUI_CONFIG", "SSH_AUTH_SOCK")}
    out.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT))
    (tmp_path / ".ssh").mkdir()
    return out


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def hosts(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", "hosts", *args],
        env=env,
        capture_output=True,
        timeout=HANG,
        stdin=subprocess.DEVNULL,
        preexec_fn=_limited,
    )


def refused(done: subprocess.CompletedProcess[bytes], *words: str) -> str:
    """The one line a refusal says (exit 2, nothing on stdout), checked for `words`."""
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err[-2000:]
    assert "Traceback" not in err and "Error:" not in err, err[-2000:]
    assert done.stdout == b""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: "), err[-2000:]
    assert len(lines[0]) < 1000  # the user's own text is cut short in a message
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def listed(done: subprocess.CompletedProcess[bytes]) -> list[dict[str, object]]:
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-2000:]
    doc = json.loads(done.stdout)
    assert doc["count"] == len(doc["hosts"])
    hosts: list[dict[str, object]] = doc["hosts"]
    return hosts


# -- hostlists: one cap on the whole command, counted before anything is expanded ---------------


def test_a_bracket_of_2000_ranges_is_counted_not_expanded(env: dict[str, str]) -> None:
    spec = "gpu[" + ",".join("00001-99999" for _ in range(2000)) + "]"
    refused(hosts(env, spec), "100,000 hosts")


def test_400_brackets_are_counted_not_expanded(env: dict[str, str]) -> None:
    refused(hosts(env, "n" + "[1-2]" * 400), "100,000 hosts")  # 2**400 names of 401 characters


def test_the_cap_is_on_the_whole_command_not_each_spec(env: dict[str, str]) -> None:
    specs = [f"r{i}n[000001-100000]" for i in range(50)]
    refused(hosts(env, *specs), "100,000 hosts")


def test_a_host_file_of_3000_large_lines_is_refused_at_the_cap(env: dict[str, str], tmp_path: Path) -> None:
    listing = tmp_path / "hosts.txt"
    listing.write_text("".join(f"r{i}n[000001-100000]\n" for i in range(3000)))
    refused(hosts(env, f"@file:{listing}"), "100,000 hosts", "line 2")


def test_the_cap_counts_groups_and_files_together(env: dict[str, str], tmp_path: Path) -> None:
    listing = tmp_path / "hosts.txt"
    listing.write_text("a[00001-60000]\n")
    config = tmp_path / "gputui.toml"
    config.write_text('[groups]\nrack = ["b[00001-30000]", "c[00001-20000]"]\n')
    config.chmod(0o600)
    refused(hosts(env, "--config", str(config), f"@file:{listing}", "rack"), "100,000 hosts")
    assert (
        len(listed(hosts(env, "--config", str(config), "--json", f"@file:{listing}", "b[1-40000]")))
        == 100_000
    )


@pytest.mark.parametrize(
    "spec",
    [
        "gpu[" + "1" * 5000 + "]",
        "gpu[1-" + "9" * 5000 + "]",
        "gpu[" + "0" * 5000 + "1-2]",
        "gpu[1-\u00b2]",
        "gpu[\u0661-\u0663]",  # Arabic-Indic digits: a number to str.isdigit, not to a hostlist
        "a" + "1" * 5000,  # one host: its name's number is too long to range in the summary line
    ],
)
def test_numbers_are_ascii_decimal_and_short(env: dict[str, str], spec: str) -> None:
    refused(hosts(env, spec))


def test_a_long_number_in_a_name_is_no_range(env: dict[str, str]) -> None:
    """A name whose number is longer than a bracket may hold is listed as it is."""
    name = "a" + "1" * 40
    assert [h["name"] for h in listed(hosts(env, "--json", name, "a1"))] == [name, "a1"]


def test_a_name_longer_than_a_host_name_can_be_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    listing = tmp_path / "hosts.txt"
    listing.write_text("x" * 5_000_000 + "[1-100000]\n")
    refused(hosts(env, f"@file:{listing}"), "longer than")
    listing.write_text("1a" * 1_000_000 + "\n")
    refused(hosts(env, f"@file:{listing}"), "longer than")
    refused(hosts(env, "x" * 100_000), "longer than")


# -- @file: regular files only, read with a bound ------------------------------------------------


def test_a_fifo_is_refused_not_waited_on(env: dict[str, str], tmp_path: Path) -> None:
    fifo = tmp_path / "hosts.fifo"
    os.mkfifo(fifo)
    refused(hosts(env, f"@file:{fifo}"), "not a regular file")


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null", "/"])
def test_a_device_or_a_directory_is_refused(env: dict[str, str], path: str) -> None:
    refused(hosts(env, f"@file:{path}"), "not a regular file")


def test_a_host_file_over_the_bound_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    listing = tmp_path / "hosts.txt"
    listing.write_bytes(b"# a comment line\n" * (1 << 20) * 2)  # 34 MiB
    refused(hosts(env, f"@file:{listing}"), "MiB")


# -- ~/.ssh/config: bounded depth and size, regular files only, linear time ----------------------


def ssh_config(env: dict[str, str], text: str) -> Path:
    path = Path(env["HOME"]) / ".ssh" / "config"
    path.write_text(text)
    return path


def test_include_of_dev_zero_is_refused(env: dict[str, str]) -> None:
    ssh_config(env, "Host a\n  HostName a.lan\nInclude /dev/zero\n")
    refused(hosts(env, "@ssh:a"), "/dev/zero", "not a regular file")


def test_include_of_a_fifo_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".ssh" / "more.fifo")
    ssh_config(env, "Include more.fifo\nHost a\n")
    refused(hosts(env, "@ssh:a"), "more.fifo", "not a regular file")


def test_a_glob_include_reads_regular_files_only(env: dict[str, str], tmp_path: Path) -> None:
    conf_d = tmp_path / ".ssh" / "conf.d"
    conf_d.mkdir()
    (conf_d / "a.conf").write_text("Host a\n  User alice\n")
    os.mkfifo(conf_d / "b.conf")
    ssh_config(env, "Include conf.d/*.conf\n")
    refused(hosts(env, "@ssh:a"), "b.conf", "not a regular file")


def test_an_ssh_config_that_is_a_fifo_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".ssh" / "config")
    refused(hosts(env, "@ssh:a"), "not a regular file")


def test_an_include_over_the_bound_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / ".ssh" / "big.conf").write_bytes(b"# padding\n" * (3 << 20))  # 30 MiB
    ssh_config(env, "Host a\nInclude big.conf\n")
    refused(hosts(env, "@ssh:a"), "MiB")


def test_includes_that_fan_out_are_bounded(env: dict[str, str], tmp_path: Path) -> None:
    """Each file includes the next one 40 times, 12 deep: no loop, but 40**12 reads."""
    ssh = tmp_path / ".ssh"
    for depth in range(12):
        (ssh / f"f{depth}.conf").write_text(f"Include f{depth + 1}.conf\n" * 40)
    (ssh / "f12.conf").write_text("Host a\n")
    ssh_config(env, "Include f0.conf\n")
    refused(hosts(env, "@ssh:a"))


@pytest.mark.parametrize("port", ["\u00b2", "\u0662\u0662", "9" * 5000, "0", "65536", "22x"])
def test_a_bad_port_is_one_line(env: dict[str, str], port: str) -> None:
    ssh_config(env, f"Host a\n  Port {port}\n")
    refused(hosts(env, "@ssh:a"), "Port", "line 2")


def test_a_good_port_is_read(env: dict[str, str]) -> None:
    ssh_config(env, "Host a\n  Port 2222\nHost b\n  Port=022\n")
    assert [(h["name"], h["port"]) for h in listed(hosts(env, "--json", "@ssh:"))] == [("a", 2222), ("b", 22)]


@pytest.mark.timeout(600)
def test_100000_host_blocks_in_linear_time(env: dict[str, str]) -> None:
    blocks = "".join(
        f"Host h{i}\n  HostName 10.0.{i // 250}.{i % 250}\n  User u{i % 7}\n" for i in range(100_000)
    )
    ssh_config(env, blocks + "Host *\n  Port 2200\n")
    got = listed(hosts(env, "--json", "@ssh:h9999*"))
    names = ["h9999", *(f"h9999{d}" for d in range(10))]
    assert [h["name"] for h in got] == names
    assert (got[-1]["address"], got[-1]["user"], got[-1]["port"]) == ("10.0.399.249", f"u{99999 % 7}", 2200)
    assert len(listed(hosts(env, "--json", "@ssh:"))) == 100_000


@pytest.mark.timeout(600)
def test_one_line_of_200000_names_in_linear_time(env: dict[str, str]) -> None:
    names = " ".join(f"n{i}" for i in range(200_000))
    ssh_config(env, f"Host {names}\n  User bob\nHost !n7 n*\n  Port 2\n")
    got = listed(hosts(env, "--json", "@ssh:n19999?"))
    assert [h["name"] for h in got] == [f"n19999{d}" for d in range(10)]
    assert {(h["user"], h["port"]) for h in got} == {("bob", 2)}
    assert [(h["user"], h["port"]) for h in listed(hosts(env, "--json", "@ssh:n7"))] == [("bob", None)]
    refused(hosts(env, "@ssh:"), "100,000 hosts")  # every name: over the command's cap


@pytest.mark.timeout(600)
def test_a_line_with_a_long_run_of_spaces(env: dict[str, str]) -> None:
    ssh_config(env, "Host a" + " " * 3_000_000 + "b\n  User carol\n")
    assert [h["user"] for h in listed(hosts(env, "--json", "@ssh:b"))] == ["carol"]
