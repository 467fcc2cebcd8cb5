"""`gputui serve` as a command (docs/SERVE.md): real subprocesses, ended by their PID and reaped.

The refusals (a public --listen without tokens, bad tokens and TLS files: one line, exit 2), a new
token and its line, and a whole run: the demo served, a token let in, TLS, SIGTERM ends it with 0.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import urllib.request

import pytest

from gputui.serve.tokens import digest
from tests.support.exporter import get, gputui, served_url, stop
from tests.support.exporter import start as start_command

pytestmark = pytest.mark.timeout(300)


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return gputui("serve", *args, timeout=timeout)


def start(*args: str) -> subprocess.Popen[bytes]:
    return start_command(*args, command="serve")


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0", ":0", "192.0.2.7:8765", "gpuhub.example:8765"])
def test_a_public_listen_without_tokens_is_refused_in_one_line(address):
    result = run("--demo", "--listen", address)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a loopback address" in lines[0] and "--tokens" in lines[0], lines
    assert result.stdout == ""


def test_a_new_token_and_its_line_work_together(tmp_path):
    result = run("--new-token", "alice", "--role", "operator")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    token, line = lines[1], lines[3]
    assert line == f"alice operator {digest(token)}"
    assert len(token) >= 40 and token.isascii()
    again = run("--new-token", "alice").stdout.splitlines()
    assert again[1] != token and again[3].split()[1] == "viewer"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no tokens in it"),
        ("alice viewer\n", "expected NAME ROLE SHA256HEX"),
        (f"alice admin {'a' * 64}\n", "is not viewer or operator"),
        ("alice viewer abc\n", "not a SHA-256"),
        (f"al<ice viewer {'a' * 64}\n", "is not a token name"),
        (f"a viewer {'a' * 64}\nb viewer {'a' * 64}\n", "the same token as a"),
    ],
)
def test_a_bad_tokens_file_is_one_line_and_exit_2(tmp_path, text, says):
    path = tmp_path / "tokens"
    path.write_text(text)
    result = run("--demo", "--tokens", str(path))
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_tokens_file_or_bad_tls_file_is_one_line_and_exit_2(tmp_path):
    missing = run("--demo", "--tokens", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "No such file" in missing.stderr
    (tmp_path / "cert.pem").write_text("not a certificate\x1b[2J")
    bad = run("--demo", "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "cert.pem"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "--tls-cert" in bad.stderr and "\x1b" not in bad.stderr and "Traceback" not in bad.stderr
    alone = run("--demo", "--tls-cert", str(tmp_path / "cert.pem"))
    assert alone.returncode == 2 and "go together" in alone.stderr


def test_the_demo_served_with_tokens_on_every_interface_then_stopped_with_sigterm(tmp_path):
    path = tmp_path / "tokens"
    path.write_text(f"# the team\nalice viewer {digest('s3cret')}  # a viewer\n")
    proc = start("--demo", "--listen", "0.0.0.0:0", "--tokens", str(path), "--interval", "0.5")
    try:
        url = served_url(proc).replace("0.0.0.0", "127.0.0.1")
        assert get(f"{url}api/v1/snapshot")[0] == 401
        status, headers, body = get(f"{url}api/v1/snapshot", {"Authorization": "Bearer s3cret"})
        assert status == 200 and b'"demo-a"' in body
        assert headers["Cache-Control"] == "no-store"
    finally:
        assert stop(proc) == 0


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_tls_serves_https(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    proc = start("--demo", "--listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        url = served_url(proc)
        assert url.startswith("https://")
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
        with urllib.request.urlopen(f"{url}-/healthy", context=context, timeout=30) as answer:
            assert answer.status == 200
    finally:
        assert stop(proc) == 0
    assert os.path.exists(cert)


def test_each_refusal_names_the_command_once(tmp_path):
    """Every refusal of `gputui serve` reads `gputui serve: ...` (as pick's, wait's and demo's name
    their command), never `gputui: gputui serve: ...`."""
    (tmp_path / "cert.pem").write_text("not a certificate")
    (tmp_path / "tokens").write_text("alice viewer\n")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    with taken:
        results = [
            run("--demo", "--tokens", str(tmp_path / "nope")),
            run("--demo", "--tokens", str(tmp_path / "tokens")),
            run("--demo", "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "cert.pem")),
            run("--demo", "--tls-cert", str(tmp_path / "cert.pem")),
            run("--demo", "--listen", "0.0.0.0:0"),
            run("--new-token", "a b"),
            run("gpu-nowhere", "--listen", f"127.0.0.1:{port}"),
        ]
    for result in results:
        lines = result.stderr.splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert lines[0].startswith("gputui serve: ") and "gputui: " not in lines[0], lines
    assert "--tokens" in results[0].stderr and "--listen" in results[-1].stderr


def test_allow_actions_without_tokens_is_refused_in_one_line():
    """A hub acts only for an operator named by a token (its audit log names who): --allow-actions
    without --tokens would serve a hub that offers actions and refuses each; it is bad usage."""
    result = run("--demo", "--allow-actions")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui serve: --allow-actions"), lines
    assert "--tokens" in lines[0]


def test_a_long_token_name_or_role_is_cut_with_a_mark(tmp_path):
    """A refusal quotes the user's word, cut to a bound: with a mark where it was cut, never a
    silent slice (docs/RELIABILITY.md "Cut text")."""
    (tmp_path / "tokens").write_text(f"alice {'r' * 300} {'a' * 64}\n")
    role = run("--demo", "--tokens", str(tmp_path / "tokens"))
    name = run("--new-token", "n" * 300)
    for result, letter in ((role, "r"), (name, "n")):
        assert result.returncode == 2, result.stderr
        assert letter * 300 not in result.stderr and letter * 20 in result.stderr, result.stderr
        assert f"{letter}…'" in result.stderr or f"{letter}...'" in result.stderr, result.stderr
