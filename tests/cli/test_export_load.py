"""`gputui export --listen` under load (docs/MONITORING.md "Under load"): a burst of scrapes at once is
answered whole, slow clients are cut off at a deadline without holding a thread each, and neither
leaves more than one short line on stderr per client.

The real command over a fresh demo, started and ended by its PID (tests/support/exporter.py); the
clients are this test's threads and sockets. Timeouts here only detect a hang: nothing is timed.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest

from gputui.cli.export import make_app, serve, url
from gputui.cli.exportserver import HEAD_DEADLINE, WORKERS
from tests.support.exporter import get, served_url, start, stop, wait_for

pytestmark = pytest.mark.timeout(600)  # a fresh demo and hundreds of clients on a busy machine

BURST = 300
LORIS = 50
# The exporter's own threads besides the server's workers: the main one, the HTTP loop's, asyncio's
# default executor (a few), the demo's; a thread per client would be hundreds.
OTHER_THREADS = 24


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def address(metrics: str) -> tuple[str, int]:
    parts = urllib.parse.urlsplit(metrics)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def end(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    """The exporter ended by its PID (SIGTERM; SIGKILL if it lingers): its exit status, and what it
    said on stderr after its first line."""
    assert proc.stderr is not None
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(60)
    said = proc.stderr.read() if proc.poll() is not None else b""
    return stop(proc), said.decode(errors="replace")


def scrape(metrics: str) -> tuple[int, bytes]:
    status, _, body = get(metrics, timeout=300)
    return status, body


def test_a_burst_of_scrapes_at_once_is_answered_whole_by_a_bounded_number_of_threads():
    proc = start("--demo", "--listen", "127.0.0.1:0", "--interval", "0.5")
    peak = 0
    try:
        metrics = served_url(proc)
        assert wait_for(lambda: get(metrics.removesuffix("/metrics") + "/-/ready")[0] == 200), "never ready"
        done = threading.Event()

        def watch() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, threads(proc.pid))
                time.sleep(0.01)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with concurrent.futures.ThreadPoolExecutor(BURST) as pool:
                answers = list(pool.map(scrape, [metrics] * BURST))
        finally:
            done.set()
            watcher.join()
        assert [status for status, _ in answers] == [200] * BURST
        assert all(b"gputui_host_up" in body for _, body in answers)
    finally:
        code, said = end(proc)
    assert code == 0
    assert peak <= WORKERS + OTHER_THREADS, f"{peak} threads for {BURST} scrapes"
    assert "Traceback" not in said, said[-3000:]


def test_slow_clients_are_cut_off_without_a_thread_each_and_a_scrape_still_answers():
    """Clients that send their request a byte at a time, slower than a request may take: each is
    closed at the deadline; while they hang the exporter keeps its threads and answers a scrape; each
    leaves one line on stderr at most, never a traceback."""
    proc = start("--demo", "--listen", "127.0.0.1:0", "--interval", "0.5")
    clients: list[socket.socket] = []
    try:
        metrics = served_url(proc)
        assert wait_for(lambda: get(metrics.removesuffix("/metrics") + "/-/ready")[0] == 200), "never ready"
        before = threads(proc.pid)
        for _ in range(LORIS):
            client = socket.create_connection(address(metrics), timeout=60)
            client.sendall(b"GET /metrics HTTP/1.1\r\n")
            clients.append(client)
        closed = [False] * LORIS
        # A byte every second: well inside any per-read timeout, never a whole request.
        deadline = time.monotonic() + HEAD_DEADLINE + 120  # a hang detector only
        scraped = False
        while not all(closed) and time.monotonic() < deadline:
            for i, client in enumerate(clients):
                if not closed[i]:
                    try:
                        client.sendall(b"X")
                        client.setblocking(False)
                        try:
                            closed[i] = client.recv(4096) == b""
                        except BlockingIOError:
                            pass
                        finally:
                            client.setblocking(True)
                    except OSError:  # reset, or a pipe the server closed
                        closed[i] = True
            assert threads(proc.pid) <= before + WORKERS, f"{threads(proc.pid)} threads (was {before})"
            if not scraped:
                status, body = scrape(metrics)
                assert status == 200 and b"gputui_host_up" in body
                scraped = True
            time.sleep(1)
        assert all(closed), f"{closed.count(False)} slow clients still connected"
        assert scraped
    finally:
        for client in clients:
            client.close()
        code, said = end(proc)
    assert code == 0
    assert "Traceback" not in said, said[-3000:]
    assert len(said.splitlines()) <= LORIS, said[-3000:]
    for line in said.splitlines():
        assert line.startswith("gputui export: ") and len(line) < 200, line


def test_clients_over_the_limit_are_refused_in_a_line_each_at_most():
    """More connections than it keeps open: the extra ones get a 503 and are closed at once, each
    said in one line at most (fewer where they come in a burst)."""
    proc = start("--demo", "--listen", "127.0.0.1:0", "--interval", "0.5", "--connections", "8")
    clients: list[socket.socket] = []
    try:
        metrics = served_url(proc)
        assert wait_for(lambda: get(metrics.removesuffix("/metrics") + "/-/ready")[0] == 200), "never ready"
        for _ in range(8):  # the limit, each holding its connection (no request yet)
            clients.append(socket.create_connection(address(metrics), timeout=60))
        extra = [socket.create_connection(address(metrics), timeout=60) for _ in range(5)]
        clients.extend(extra)
        for client in extra:
            assert client.recv(4096).startswith(b"HTTP/1.0 503 ")
    finally:
        for client in clients:
            client.close()
        code, said = end(proc)
    assert code == 0
    assert "Traceback" not in said, said[-3000:]
    refused = [line for line in said.splitlines() if "refused" in line]
    assert 1 <= len(refused) <= 5, said


def test_an_oversized_head_or_a_bare_lf_request_in_process():
    """The server alone, in this process, on a real socket: a request head over 64 KiB is answered
    431 and closed; a request whose lines end in a bare LF is read as one ending in CRLF."""
    app = make_app(lambda environ, start_response: [], lambda: True)
    server = serve("127.0.0.1", 0, app)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        where = address(url(server))
        with socket.create_connection(where, timeout=60) as client:
            client.sendall(b"GET /-/ready HTTP/1.1\r\nX-Big: " + b"a" * (70 << 10) + b"\r\n\r\n")
            assert client.recv(4096).startswith(b"HTTP/1.0 431 ")
        with socket.create_connection(where, timeout=60) as client:
            client.sendall(b"GET /-/healthy HTTP/1.0\nHost: x\n\n")
            answer = b""
            while chunk := client.recv(4096):
                answer += chunk
            assert answer.startswith(b"HTTP/1.0 200 ") and answer.endswith(b"healthy\n")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)
