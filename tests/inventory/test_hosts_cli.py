"""`gputui hosts` as a real subprocess (text, --json, prometheus-sd), and bad host specs on every
command: one line on stderr and exit 2, before anything connects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """\
[defaults]
user = "ops"

[[hosts]]
name = "head"
address = "10.9.0.1"
port = 2022

[groups]
rack3 = ["gpu[001-003]", "@file:{listed}"]
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    listed = tmp_path / "rack3.txt"
    listed.write_text("# spares\nspare[1-2]\n")
    config = tmp_path / "gputui.toml"
    config.write_text(CONFIG.format(listed=listed))
    config.chmod(0o600)
    out = {k: v for k, v in os.environ.items() if k not in ("GPUTUI_CONFIG", "SSH_AUTH_SOCK")}
    out.update(
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
        GPUTUI_CONFIG=str(config),
        PYTHONPATH=str(ROOT),
    )
    return out


def gputui(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_128_hosts_as_json(env: dict[str, str]) -> None:
    done = gputui(env, "hosts", "gpu[001-128]", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["version"] == 1 and doc["count"] == 128 and len(doc["hosts"]) == 128
    assert doc["hosts"][0] == {
        "name": "gpu001",
        "address": "gpu001",
        "user": "ops",
        "port": None,
        "jump": None,
        "group": None,
        "source": "gpu[001-128]",
    }
    assert doc["hosts"][-1]["name"] == "gpu128"


def test_text_lists_a_group_and_a_config_host(env: dict[str, str]) -> None:
    done = gputui(env, "hosts", "rack3", "head")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ADDRESS", "USER", "PORT", "JUMP", "GROUP", "SOURCE"]
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert list(rows) == ["gpu001", "gpu002", "gpu003", "spare1", "spare2", "head"]
    # The config's [defaults] where a source says nothing, as the connection will use them.
    assert rows["gpu002"] == ["gpu002", "gpu002", "ops", "-", "-", "rack3", "gpu[001-003]"]
    assert rows["head"] == ["head", "10.9.0.1", "ops", "2022", "-", "-", "config"]
    assert lines[-1] == "6 hosts: head,gpu[001-003],spare[1-2]"


def test_without_a_spec_the_config_s_hosts(env: dict[str, str]) -> None:
    done = gputui(env, "hosts", "--json")
    assert [h["name"] for h in json.loads(done.stdout)["hosts"]] == ["head"]


def test_prometheus_file_sd(env: dict[str, str]) -> None:
    done = gputui(env, "hosts", "@group:rack3", "[::1]", "--format", "prometheus-sd", "--sd-port", "9100")
    assert done.returncode == 0, done.stderr
    groups = json.loads(done.stdout)
    assert groups[0] == {
        "targets": ["gpu001:9100"],
        "labels": {"gputui_host": "gpu001", "gputui_group": "rack3", "gputui_source": "gpu[001-003]"},
    }
    assert groups[-1] == {"targets": ["[::1]:9100"], "labels": {"gputui_host": "::1"}}
    assert len(groups) == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["hosts", "gpu[3-1]"], "gputui: bad hostlist 'gpu[3-1]': the range 3-1 goes down"),
        (["hosts", "@slrum:gpu"], "gputui: '@slrum:gpu': unknown source (the sources are @file:, @ssh:, "
         "@slurm:, @slurm-job:, @ansible:, @prometheus:, @kube:, @group:)"),
        (["hosts", "@group:rack4"], "gputui: @group:rack4: no group 'rack4' in the config (its groups: rack3)"),
        (["snapshot", "gpu[001-"], "gputui: bad hostlist 'gpu[001-': '[' without a closing ']'"),
        (["node[2-1]"], "gputui: bad hostlist 'node[2-1]': the range 2-1 goes down"),  # the dashboard
        (["wait", "@file:/nonexistent/hosts"], "gputui: @file:/nonexistent/hosts: cannot read "
         "'/nonexistent/hosts': No such file or directory"),
        (["clean", "gpu[a-b]", "--all", "--dry-run"], "gputui: bad hostlist 'gpu[a-b]': 'a-b' in brackets "
         "is not a number or a range like 001-128"),
        (["hosts", "--json", "--format", "text"], None),
    ],
)  # fmt: skip
def test_a_bad_spec_is_one_line_and_exit_2(env: dict[str, str], args: list[str], message: str | None) -> None:
    done = gputui(env, *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    if message is None:
        assert "say different things" in lines[-1]
    else:
        assert lines == [message]
    assert done.stdout == ""


def test_a_group_name_as_the_first_word_is_no_mistyped_command(env: dict[str, str], tmp_path: Path) -> None:
    """`gputui waitt` says "did you mean wait"; a config group of that name is hosts to watch."""
    config = Path(env["GPUTUI_CONFIG"])
    config.write_text(config.read_text() + 'waitt = ["@file:/nonexistent"]\n')
    done = gputui(env, "waitt")
    assert done.returncode == 2
    assert "no command" not in done.stderr and "cannot read '/nonexistent'" in done.stderr
