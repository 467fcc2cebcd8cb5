"""Bad usage is refused before anything is started: a command that exits 2 leaves no demo running
behind it (the real CLI, in a private demo environment of the test's own: tests/support/livedemo.py).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from tests.support.livedemo import Live

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port some other program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", ["export", "serve"])
def test_a_listen_address_that_is_taken_starts_no_demo(live: Live, taken: int, command: str) -> None:
    result = live.gputui(command, "--demo", "--listen", f"127.0.0.1:{taken}")
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--listen 127.0.0.1:{taken}: " in lines[0], lines
    assert "in use" in lines[0].lower(), lines
    assert not live.status()["running"], result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["export", "--demo", "--listen", "0.0.0.0:0", "--once"],
        ["export", "--demo"],
        ["serve", "--demo", "--listen", "0.0.0.0:0"],
        ["serve", "--demo", "--tls-cert", "x.pem"],
        ["clean", "--demo", "demo-a:0", "--signals", "kill", "--term-timeout", "30", "--dry-run"],
        ["clean", "--demo", "demo-a:0", "--idle-minutes", "5", "--dry-run"],
        ["clean", "--demo", "demo-a:0", "--sigint-first", "--signals", "kill", "--dry-run"],
        ["snapshot", "--demo", "--gpu", "nosuch:0"],
        ["--demo", "--gpu", "nosuch:0"],
        ["--demo", "--theme", "nosuch"],
        ["--demo"],  # stdout is no terminal here
    ],
    ids=[
        "export-once-listen",
        "export-nowhere",
        "serve-open",
        "serve-half-tls",
        "clean-kill-with-term-timeout",
        "clean-idle-minutes-alone",
        "clean-sigint-and-kill",
        "snapshot-gpu-of-no-host",
        "dashboard-gpu-of-no-host",
        "dashboard-no-theme",
        "dashboard-no-terminal",
    ],
)
def test_bad_usage_starts_no_demo(live: Live, args: list[str]) -> None:
    result = live.gputui(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not live.status()["running"], result.stderr


@pytest.mark.parametrize("config", [False, True], ids=["demo", "config"])
def test_clean_json_without_a_host_prints_its_document(live: Live, config: bool) -> None:
    """`clean --demo --json` (or a config that lists hosts) with no host named was refused by `fail`:
    stdout stayed empty, where every other refusal of `clean --json` prints its document."""
    if config:
        path = live.root / "hosts.toml"
        path.write_text('[[hosts]]\nname = "far-a"\naddress = "203.0.113.7"\n')
        args = ["--config", str(path)]
        words = "name the hosts to clean: the config"
    else:
        args, words = ["--demo"], "name the hosts to clean: the demo has demo-a, demo-b"
    result = live.gputui("clean", *args, "--all", "--dry-run", "--json")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2 and words in doc["error"], doc
    assert doc["hosts"] == [] and doc["dry_run"] is True and doc["log"] is None, doc
    assert not live.status()["running"], result.stderr


@pytest.mark.parametrize("command", ["export", "serve"])
def test_a_long_bad_listen_address_is_cut_with_a_mark(live: Live, command: str) -> None:
    """A --listen value that is no ADDR:PORT was quoted sliced at 80 characters, with no mark."""
    value = "host-" + "x" * 200
    result = live.gputui(command, "--demo", "--listen", value)
    assert result.returncode == 2, (result.stdout, result.stderr)
    line = result.stderr.strip().splitlines()[-1]  # after argparse's usage
    assert "is not ADDR:PORT" in line and value not in line, line
    quoted = line.partition("'")[2].partition("'")[0]
    assert quoted.startswith("host-xxx") and quoted.endswith(("\u2026", "...")), line
    assert not live.status()["running"], result.stderr
