"""One rule for a host name, at every entry: no control character (C0, DEL, C1 such as U+009B, which
a terminal reads as CSI), no format character (bidi overrides like U+202E, zero-width ones), no
surrogate, no line or paragraph separator, no undecodable byte. The command line, a host file, an
ssh config and the config file refuse such a name with the same words, one line, exit 2, and no
output carries it raw. Real subprocesses for the entries; the rule itself, which the tool sources
(kube, ansible, slurm) and Prometheus' names go through, in-process."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from gputui.cli.commands.hosts import table
from gputui.config.hostlist import word_problem
from gputui.inventory.base import ResolvedHost
from gputui.inventory.tool import word
from tests.support.cli import gputui

pytestmark = pytest.mark.timeout(300)

SAYS = "contains control or invisible characters"
NAMES = {
    "csi-c1": "a\u009b31mb",
    "nel-c1": "a\u0085b",
    "bidi-override": "a\u202eb",
    "line-separator": "a\u2028b",
    "zero-width": "a\u200bb",
    "escape": "a\x1bcb",  # ESC c: a terminal's full reset
    "undecodable": os.fsdecode(b"a\xffb"),  # as Python hands an argument of bytes that are no UTF-8
}
UNSAFE = ("Cc", "Cf", "Cs", "Zl", "Zp")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("GPUTUI_CONFIG", "SSH_AUTH_SOCK")}
    out.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "xdg"), LANG="C.UTF-8", LC_ALL="C.UTF-8")
    (tmp_path / ".ssh").mkdir()
    return out


def raw(text: str) -> list[str]:
    """The characters of `text` that must never reach a terminal as they are (a newline may; U+FFFD,
    which a message shows where a file held a byte that is no UTF-8, is a visible character)."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in UNSAFE]


def refused(env: dict[str, str], *args: str) -> str:
    result = gputui(*args, env=env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and SAYS in lines[0], lines
    assert raw(result.stdout + result.stderr) == [], (result.stdout, result.stderr)
    return lines[0]


@pytest.mark.parametrize("name", NAMES.values(), ids=NAMES.keys())
def test_on_the_command_line(env: dict[str, str], name: str) -> None:
    refused(env, "hosts", "--", name)


@pytest.mark.parametrize("name", NAMES.values(), ids=NAMES.keys())
def test_in_a_host_file(env: dict[str, str], tmp_path: Path, name: str) -> None:
    listed = tmp_path / "hosts.txt"
    listed.write_bytes(b"good\n" + os.fsencode(name) + b"\n")
    assert "line 2" in refused(env, "hosts", f"@file:{listed}")


@pytest.mark.parametrize("name", NAMES.values(), ids=NAMES.keys())
def test_in_an_ssh_config(env: dict[str, str], tmp_path: Path, name: str) -> None:
    (tmp_path / ".ssh" / "config").write_bytes(b"Host good " + os.fsencode(name) + b"\n  User ops\n")
    refused(env, "hosts", "@ssh:*")


@pytest.mark.parametrize("key", ["name", "address"])
@pytest.mark.parametrize(
    "name", [n for k, n in NAMES.items() if k != "undecodable"], ids=[k for k in NAMES if k != "undecodable"]
)
def test_in_the_config_file(env: dict[str, str], tmp_path: Path, key: str, name: str) -> None:
    escaped = "".join(c if c.isalnum() else f"\\u{ord(c):04x}" for c in name)  # TOML's escapes
    config = tmp_path / "gputui.toml"
    config.write_text(f'[[hosts]]\n{key} = "{escaped}"\n' + ('address = "b"\n' if key == "name" else ""))
    config.chmod(0o600)
    refused(env, "--config", str(config), "hosts")


@pytest.mark.parametrize("name", NAMES.values(), ids=NAMES.keys())
def test_the_rule_that_every_source_uses(name: str) -> None:
    assert word_problem(name) == SAYS
    assert word_problem("a\ufffdb") == SAYS  # what an undecodable byte becomes, decoded with "replace"
    with pytest.raises(Exception, match=SAYS):
        word(name, "host name", "@kube:gpu")  # kube and ansible read their tools' names with it
    for good in ("gpu-01.example.org", "пример", "例え", "[::1]"):
        assert word_problem(good) is None


def test_the_summary_line_is_escaped_as_the_table_is() -> None:
    """`gputui hosts`' last line names the hosts collapsed: never raw, whatever a name holds."""
    lines = table([ResolvedHost("a\u009b31mb", "a"), ResolvedHost("b\u202ec", "b")])
    assert lines[-1].startswith("2 hosts: ")
    assert raw("\n".join(lines)) == []
