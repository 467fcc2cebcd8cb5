"""Clients that no hub should have to take, against a real `gputui serve --demo` (a subprocess, ended
by its PID): malformed requests, half-sent requests held open (slowloris), more connections than the
process has file descriptors. Each is answered 400 or closed within gputui export's deadline for a
whole request; the hub answers its health check meanwhile, and says at most a line now and then on
stderr: never a traceback, whatever the clients do.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gputui.text.clients import HEAD_DEADLINE
from tests.support.exporter import REPO, env, get, served_url

pytestmark = pytest.mark.timeout(300)

HANG_GUARD = 120.0  # seconds a test waits for what the hub must do within HEAD_DEADLINE (a busy machine)
HALF = b"GET /api/v1/snapshot HTTP/1.1\r\nHost: x\r\nX-a: "  # a request whose headers never end
MALFORMED = {
    "header-over-8190": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-a: " + b"a" * 9000 + b"\r\n\r\n",
    "line-over-8190": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "20000-headers": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n"
    + b"".join(b"X-%d: a\r\n" % i for i in range(20_000))
    + b"\r\n",
    "not-deflate": b"POST /api/v1/actions HTTP/1.1\r\nHost: x\r\nContent-Encoding: deflate\r\n"
    b"Content-Length: 4\r\nConnection: close\r\n\r\nabcd",
}


@contextmanager
def serving(files: int | None = None, *options: str) -> Iterator[tuple[str, int, subprocess.Popen[bytes]]]:
    """`gputui serve --demo [OPTIONS]` on a free loopback port: (host, port, the process); `files`: its
    limit of open files (RLIMIT_NOFILE). Ended by its PID (SIGTERM, then SIGKILL); stderr is left to
    read."""

    def limit() -> None:
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui",
            "serve",
            "--demo",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "1",
            *options,
        ],
        cwd=REPO,
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=limit,
    )
    try:
        address = urllib.parse.urlsplit(served_url(proc))
        assert address.hostname is not None and address.port is not None
        yield address.hostname, address.port, proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(60)


def said(proc: subprocess.Popen[bytes]) -> str:
    """What the ended process wrote on stderr after it said where it serves."""
    assert proc.stderr is not None and proc.poll() is not None
    with proc.stderr:
        return proc.stderr.read().decode(errors="replace")


def answer(host: str, port: int, request: bytes, size: int = 200) -> bytes:
    with socket.create_connection((host, port), timeout=HANG_GUARD) as sock:
        try:
            sock.sendall(request)
        except OSError:
            pass  # the hub may close before all of it is sent: its answer is still there to read
        return sock.recv(size)


@contextmanager
def half_sent(host: str, port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections to the hub, each of which sent half a request (HALF); closed after."""
    held = [socket.create_connection((host, port), timeout=HANG_GUARD) for _ in range(count)]
    try:
        for sock in held:
            sock.sendall(HALF)
        yield held
    finally:
        for sock in held:
            sock.close()


def healthy(host: str, port: int) -> bool:
    return get(f"http://{host}:{port}/-/healthy", timeout=HANG_GUARD)[0] == 200


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_request_is_400_and_at_most_a_line_now_and_then(kind: str) -> None:
    with serving() as (host, port, proc):
        for _ in range(20):
            status = answer(host, port, MALFORMED[kind]).split(b"\r\n", 1)[0]
            assert status in (b"HTTP/1.0 400 Bad Request", b"HTTP/1.1 400 Bad Request"), (kind, status)
        assert healthy(host, port)
    err = said(proc)
    assert "Traceback" not in err, err[:3000]
    assert len(err.splitlines()) <= 3, err[:3000]  # 20 clients: one line, and one that counts the rest


def test_half_sent_requests_are_closed_and_the_hub_answers_meanwhile() -> None:
    with serving() as (host, port, proc):
        with half_sent(host, port, 50) as held:
            assert healthy(host, port)
            for sock in held:  # closed by the hub: a whole request did not come within HEAD_DEADLINE
                assert sock.recv(100) == b""
        assert healthy(host, port)
    err = said(proc)
    assert "Traceback" not in err and len(err.splitlines()) <= 3, err[:3000]
    assert f"no whole request in {HEAD_DEADLINE:g} s" in err or err == "", err


def test_more_connections_than_open_files_is_a_line_now_and_then() -> None:
    """With its limit of open files low, half-sent requests take every descriptor: accept() fails
    (EMFILE) until the deadline closes them; the hub says so in a line now and then, and answers
    its health check once they are closed."""
    with serving(files=128) as (host, port, proc):
        with half_sent(host, port, 200) as held:
            for sock in held:
                assert sock.recv(100) == b""
        assert healthy(host, port)
    err = said(proc)
    assert "Traceback" not in err, err[:3000]
    assert len(err) < 4000, err[:3000]


def test_half_sent_requests_count_against_the_connection_limit() -> None:
    """`--connections 8` and 8 clients that each sent half a request: the hub holds 8 connections, so
    the next is answered 503 at once (with the usual headers) instead of being held too; once the
    deadline has closed the 8, a request is answered again."""
    whole = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with serving(None, "--connections", "8") as (host, port, proc):
        with half_sent(host, port, 8) as held:
            refused = answer(host, port, whole, 2000)
            assert refused.startswith(b"HTTP/1.1 503 "), refused
            assert b"\r\nX-Content-Type-Options: nosniff\r\n" in refused, refused
            for sock in held:
                assert sock.recv(100) == b""
        assert answer(host, port, whole).startswith(b"HTTP/1.1 200 ")
    err = said(proc)
    assert "Traceback" not in err and len(err.splitlines()) <= 4, err[:3000]
    assert "too many connections" in err, err
