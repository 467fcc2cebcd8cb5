"""`gputui export` (docs/MONITORING.md): the fleet in Prometheus' text format, printed once, written
to a textfile for node_exporter, or served on /metrics with a readiness endpoint.

Real subprocesses over a fresh demo (GPUTUI_DEMO=fresh: sims of their own), each ended by its PID
and reaped (tests/support/exporter.py); what they write is read back with prometheus_client's parser, and
with promtool where Debian's `prometheus` package is installed.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.cli.export import make_app, serve, url, write_textfile
from tests.support.exporter import REPO, env, get, gputui, served_url, start, stop, wait_for

pytestmark = pytest.mark.timeout(300)  # real subprocesses on a fresh demo: slow on a busy machine

# The list: every one of these is in the demo's export.
REQUIRED = {
    "gputui_host_up", "gputui_gpu_memory_used_bytes", "gputui_gpu_memory_total_bytes",
    "gputui_gpu_utilization_ratio", "gputui_gpu_memory_unaccounted_bytes", "gputui_gpu_ready",
    "gputui_gpu_holder_info", "gputui_process_gpu_memory_bytes", "gputui_gpu_idle_holders",
    "gputui_gpu_throttled", "gputui_gpu_ecc_errors_total", "gputui_gpu_remap_pending",
}  # fmt: skip


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return gputui("export", *args, timeout=timeout)


def names(text: str) -> set[str]:
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    ]


@pytest.fixture(scope="module")
def once() -> str:
    result = run("--demo", "--once")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_once_over_the_demo_parses_with_every_required_metric(once):
    assert names(once) >= REQUIRED, REQUIRED - names(once)
    hosts = {labels["host"]: value for labels, value in samples(once, "gputui_host_up")}
    assert hosts == {"demo-a": 1.0, "demo-b": 1.0}
    # The demo's ghosts: memory listed for a dead PID on GPU 2 of each host.
    ghosts = [
        (labels["host"], labels["gpu"])
        for labels, value in samples(once, "gputui_gpu_memory_unaccounted_bytes")
        if labels["category"] == "ghost" and value > 0
    ]
    assert sorted(ghosts) == [("demo-a", "2"), ("demo-b", "2")]
    # Holders join the GPU series by uuid: each holder's uuid is one of the GPUs'.
    uuids = {labels["uuid"] for labels, _ in samples(once, "gputui_gpu_memory_used_bytes")}
    holders = samples(once, "gputui_gpu_holder_info")
    assert holders and {labels["uuid"] for labels, _ in holders} <= uuids
    assert {labels["kind"] for labels, _ in holders} >= {"user", "ghost", "hidden"}
    assert all(labels["pci_bus_id"] for labels, _ in samples(once, "gputui_gpu_ready"))


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (.ci/run installs it)")
def test_once_passes_promtool_check_metrics(once):
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=once, capture_output=True, text=True, timeout=60, check=False
    )
    # promtool exits non-zero for a format error and prints lint problems (names, units, help).
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result.stdout + result.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "say where the metrics go"),
        (("--once", "--listen", "127.0.0.1:0"), "do not go together"),
        (("--listen", "localhost"), "is not ADDR:PORT"),
        (("--listen", "127.0.0.1:70000"), "is not ADDR:PORT"),
        (("--once", "--textfile", "/nonexistent-gputui-dir/gputui.prom"), "no directory"),
        (("--interval", "0"), "interval"),
        (("--listen", "127.0.0.1:0", "--connections", "0"), "not a number of connections"),
    ],
)
def test_bad_usage_is_one_clear_message_and_exit_2(args, says):
    result = run("--demo", *args)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_textfile_that_is_a_directory_is_refused(tmp_path):
    result = run("--demo", "--once", "--textfile", str(tmp_path))
    assert result.returncode == 2 and "a directory, not a file" in result.stderr


def test_a_textfile_path_that_is_a_fifo_is_refused_before_anything_is_written(tmp_path):
    """A FIFO (as a device would be) at --textfile is never replaced by the rename: one line, exit 2."""
    fifo = tmp_path / "gputui.prom"
    os.mkfifo(fifo)
    result = run("--demo", "--once", "--textfile", str(fifo))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"gputui: --textfile {fifo}: is not a regular file (a FIFO): refused"
    ]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["gputui.prom"]


def test_a_textfile_path_that_is_a_symlink_is_refused_and_left_alone(tmp_path):
    """The rename would replace the link, not what it names: refused, the link and its file kept."""
    target = tmp_path / "elsewhere.prom"
    target.write_text("kept\n")
    link = tmp_path / "gputui.prom"
    link.symlink_to(target)
    result = run("--demo", "--once", "--textfile", str(link))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"gputui: --textfile {link}: is a symbolic link: refused (name the file itself)"
    ]
    assert link.is_symlink() and target.read_text() == "kept\n"


def test_write_textfile_checks_the_path_again_before_the_rename(tmp_path):
    """What is at the path may change while the exporter runs: each write looks again, and a
    FIFO or a directory put there is refused (OSError), with no temporary file left."""
    fifo = tmp_path / "fifo.prom"
    os.mkfifo(fifo)
    directory = tmp_path / "dir.prom"
    directory.mkdir()
    for path in (fifo, directory):
        with pytest.raises(OSError, match="is not a regular file"):
            write_textfile(path, b"x 1\n")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and directory.is_dir()
    assert sorted(os.listdir(tmp_path)) == ["dir.prom", "fifo.prom"]
    regular = tmp_path / "gputui.prom"
    write_textfile(regular, b"x 1\n")
    write_textfile(regular, b"x 2\n")
    assert regular.read_bytes() == b"x 2\n"


def test_listening_on_a_taken_address_is_refused_in_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("--demo", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"gputui: --listen 127.0.0.1:{port}: Address already in use"
    ]


def test_once_with_a_textfile_writes_it_once_and_leaves_nothing_else(tmp_path):
    path = tmp_path / "gputui.prom"
    result = run("--demo", "--once", "--textfile", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert names(path.read_text()) >= REQUIRED
    assert os.listdir(tmp_path) == ["gputui.prom"]
    assert path.stat().st_mode & 0o777 == 0o644  # node_exporter's user reads it


def test_the_textfile_is_replaced_whole_every_interval(tmp_path):
    """Rewritten by rename: each read finds a whole exposition (never a half-written file), and the
    file is a new one (a new inode) after each interval. SIGTERM ends it with exit 0, no temporary
    file left behind."""
    path = tmp_path / "gputui.prom"
    proc = start("--demo", "--textfile", str(path), "--interval", "0.2")
    try:
        assert wait_for(path.exists), "no textfile written"
        inodes = set()
        deadline = time.monotonic() + 120
        while len(inodes) < 3 and time.monotonic() < deadline:
            with open(path) as f:  # one open file: one version of it
                inodes.add(os.fstat(f.fileno()).st_ino)
                text = f.read()
            assert text.endswith("\n") and names(text) >= REQUIRED
        assert len(inodes) >= 3, "the textfile was not rewritten"
    finally:
        code = stop(proc)
    assert code == 0
    assert os.listdir(tmp_path) == ["gputui.prom"]


def test_listen_serves_metrics_readiness_and_health():
    proc = start("--demo", "--listen", "127.0.0.1:0", "--interval", "0.5")
    try:
        metrics = served_url(proc)
        base = metrics.removesuffix("/metrics")
        assert wait_for(lambda: get(base + "/-/ready")[0] == 200), "never ready"
        status, headers, body = get(metrics)
        assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert names(body.decode()) >= REQUIRED
        # The client's own negotiation: gzip, and OpenMetrics for a scraper that asks for it.
        status, headers, body = get(metrics, {"Accept-Encoding": "gzip"})
        assert headers.get("Content-Encoding") == "gzip" and b"gputui_host_up" in gzip.decompress(body)
        status, headers, body = get(metrics, {"Accept": "application/openmetrics-text; version=1.0.0"})
        assert headers["Content-Type"].startswith("application/openmetrics-text") and body.endswith(
            b"# EOF\n"
        )
        # A scraper's selection of families (`name[]`), as prometheus-client's app reads it.
        status, _, body = get(metrics + "?name[]=gputui_host_up&name[]=gputui_gpu_holder_info")
        assert status == 200 and names(body.decode()) == {"gputui_host_up", "gputui_gpu_holder_info"}
        assert get(base + "/-/healthy")[0] == 200
        assert get(base + "/nothing-here")[0] == 404
        assert b"/metrics" in get(base + "/")[2]
    finally:
        code = stop(proc)
    assert code == 0


def test_ready_answers_503_until_the_fleet_has_been_heard_from():
    """The HTTP side alone, in this process, on a real socket: /-/ready follows what it is told."""
    heard = threading.Event()
    app = make_app(lambda environ, start_response: [], heard.is_set)
    server = serve("127.0.0.1", 0, app)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = url(server).removesuffix("/metrics")
        status, _, body = get(base + "/-/ready")
        assert status == 503 and b"not ready" in body
        heard.set()
        assert get(base + "/-/ready")[0] == 200
        assert get(base + "/-/healthy")[0] == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)


def test_sigint_ends_a_server_quietly_with_exit_0():
    proc = start("--demo", "--listen", "127.0.0.1:0")
    try:
        served_url(proc)
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(60)
    finally:
        code = stop(proc)
    assert code == 0


def test_once_with_stdout_closed_says_so_without_a_traceback():
    result = subprocess.run(
        ["bash", "-c", f'exec "{sys.executable}" -m gputui export --demo --once >&-'],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "stdout" in result.stderr
