"""The bootstrap: a payload of modules served from memory, on this interpreter and on old ones."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.config.file import HostSpec
from gputui.probe import wire
from gputui.transport import bootstrap, headstart
from gputui.transport.base import TransportError
from gputui.transport.bootstrap import BOOT, RecordStream, boot_argv, build_payload, shell_command
from gputui.transport.local import LocalLink
from tests.support.hosts import probe_host
from tests.support.pythons import OLD_PYTHONS, PYTHON38

HELPER = """
import json
import os
import sys

# Registered before this source runs, as pynvml expects of its own module.
_me = sys.modules[__name__]


def hello(argv):
    import gputui_shipped_only
    return {
        "type": "hello", "v": 1, "argv": argv, "package": __package__, "name": _me.__name__,
        "shipped": gputui_shipped_only.SHIPPED, "host_json": not hasattr(json, "FAKE"),
        "python": "%d.%d" % sys.version_info[:2], "sys_argv": sys.argv,
    }
"""

ECHO_MAIN = """
import json
import os
import sys

from . import helper
from .. import probe


def main(argv):
    out = sys.stdout.buffer
    out.write((json.dumps(helper.hello(argv)) + "\\n").encode())
    out.flush()
    for line in sys.stdin.buffer:  # the same stdin, right after the payload
        if b'"quit"' in line:
            break
        out.write(line)
        out.flush()
    return 0
"""


def fake_payload(main_source: str = ECHO_MAIN, argv: list[str] | None = None) -> bytes:
    modules = {
        "gputui": (True, ""),
        "gputui.probe": (True, ""),
        "gputui.probe.helper": (False, HELPER),
        "gputui.probe.main": (False, main_source),
        "gputui_shipped_only": (False, "SHIPPED = True\n"),
        "json": (False, "FAKE = True\n"),  # the host has json: this copy must not be used
    }
    return build_payload(argv or ["--x", "1"], modules=modules, optional=["json", "gputui_shipped_only"])


def run_boot(python: str, payload: bytes, extra: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(boot_argv(python), input=payload + extra, capture_output=True, timeout=60)


def needs(path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} is not installed")


# ------------------------------------------------------------------------- the BOOT program itself


def test_boot_command_line_is_one_short_line_every_shell_reads_alike():
    # No quote, backslash, "!" or newline: in single quotes it means the same to sh, bash, zsh,
    # fish and csh. And it is short: `ps` on a shared host shows what it is, not a 3 KB program.
    assert not set("'\\!\n") & set(bootstrap.STAGE1)
    assert len(bootstrap.STAGE1) < 160 and "gputui" in bootstrap.STAGE1
    assert BOOT.isascii()
    argv = boot_argv("python3", sudo=True, wrap=["pct", "exec", "129", "--"])
    assert "\n" not in shell_command(argv)
    assert shlex.split(shell_command(argv)) == argv
    assert argv[:6] == ["sudo", "-n", "pct", "exec", "129", "--"]


SHELLS = [shell for shell in ("sh", "bash", "dash", "zsh", "fish", "csh", "tcsh") if shutil.which(shell)]


@pytest.mark.parametrize("shell", SHELLS)
def test_one_line_boot_through_login_shells(shell):
    path = shutil.which(shell)
    assert path is not None
    command = shell_command(boot_argv(sys.executable))
    done = subprocess.run([path, "-c", command], input=fake_payload(), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["type"] == "hello"


@pytest.mark.parametrize(
    "python", [sys.executable, pytest.param(str(PYTHON38), marks=needs(PYTHON38))], ids=["app", "3.8"]
)
def test_modules_served_from_memory(python):
    quit_line = wire.encode({"type": "quit"})
    echo = wire.encode({"type": "sample", "v": 1, "seq": 1})
    # The protocol lines travel in the same write as the payload: the bootstrap must not eat them.
    done = run_boot(python, fake_payload(argv=["--name", "h"]), echo + quit_line)
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.splitlines()
    hello = json.loads(lines[0])
    assert hello["argv"] == ["--name", "h"]
    assert hello["sys_argv"] == [bootstrap.MARKER, "--name", "h"]
    assert hello["package"] == "gputui.probe"
    assert hello["name"] == "gputui.probe.helper"
    assert hello["shipped"] is True  # an optional module the host lacks is served
    assert hello["host_json"] is True  # one it has is not replaced
    assert lines[1:] == [echo.strip()]
    if python != sys.executable:
        assert hello["python"] == "3.8"


def test_exit_status_and_systemexit_text():
    assert run_boot(sys.executable, fake_payload("def main(argv):\n    return 7\n")).returncode == 7
    done = run_boot(sys.executable, fake_payload("import sys\ndef main(argv):\n    sys.exit('bad option')\n"))
    assert done.returncode == 1
    assert b"bad option" in done.stderr


def test_bad_payload_is_reported():
    for short in (b"", b"0033", bootstrap.boot_stdin()[:500]):  # stdin ends before BOOT is whole
        done = subprocess.run(boot_argv(sys.executable), input=short, capture_output=True, timeout=30)
        assert done.returncode == bootstrap.EXIT_BAD_PAYLOAD, done.stderr
    bad = bootstrap.boot_stdin() + b"hello?\n"
    done = subprocess.run(boot_argv(sys.executable), input=bad, capture_output=True, timeout=30)
    assert done.returncode == bootstrap.EXIT_BAD_PAYLOAD
    assert b"bad bootstrap payload" in done.stderr
    cut = fake_payload()[: len(bootstrap.boot_stdin()) + 100]
    done = subprocess.run(boot_argv(sys.executable), input=cut, capture_output=True, timeout=30)
    assert done.returncode == bootstrap.EXIT_BAD_PAYLOAD
    assert b"ended in the payload" in done.stderr


@pytest.mark.parametrize("python", [str(p) for p in OLD_PYTHONS if p.exists()] or ["missing"])
def test_old_python_says_so(python):
    if python == "missing":
        pytest.skip("no Python older than 3.8 installed")
    done = run_boot(python, fake_payload())
    assert done.returncode == bootstrap.EXIT_OLD_PYTHON
    assert b"needs Python 3.8 or newer" in done.stderr


def test_payload_has_the_probe_and_pynvml():
    modules = bootstrap.probe_modules()
    assert modules["gputui"][0] is True
    assert modules["gputui.probe"][0] is True
    assert "gputui.probe.main" in modules and "gputui.probe.wire" in modules
    assert "gputui.probe.readers.base" in modules
    assert not [name for name in modules if name.startswith("gputui.") and ".probe" not in name]
    if bootstrap.pynvml_source() is not None:
        payload = build_payload(["--x"])
        boot = bootstrap.boot_stdin()
        assert payload.startswith(boot) and int(boot[:6]) == len(boot) - 6
        header, body = payload[len(boot) :].split(b"\n", 1)
        assert header.split()[:2] == [b"gputui-boot", b"1"] and int(header.split()[2]) == len(body)
        assert json.loads(body.split(b"\n", 1)[0])["optional"] == ["pynvml"]


def test_a_shipped_probe_runs_the_sim_from_the_payload_alone(tmp_path):
    """The sim reader is a package of modules (gputui/probe/readers/sim/): a probe that can import
    nothing of gputui from disk (-I -S, started elsewhere) runs it, jobs included, from the payload."""
    modules = bootstrap.probe_modules()
    assert modules["gputui.probe.readers.sim"][0] is True
    assert {"gputui.probe.readers.sim.reader", "gputui.probe.readers.sim.worker"} <= set(modules)
    argv = [sys.executable, "-I", "-S", "-c", bootstrap.STAGE1, "gputui-probe"]
    payload = build_payload(["--reader", "sim", "--sim-scenario", "mig", "--sim-gpus", "2", "--once"])
    done = subprocess.run(argv, input=payload, cwd=tmp_path, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    hello, sample = (json.loads(line) for line in done.stdout.splitlines()[:2])
    assert hello["type"] == "hello" and sample["type"] == "sample"
    jobs = [p["command"][2] for p in sample["processes"] if "/bin/" in " ".join(p["command"][2:3])]
    assert sorted(os.path.basename(job) for job in jobs) == [  # the "mig" scenario's jobs on 2 GPUs
        "bench.py", "notebook_kernel.py", "serve.py", "train.py",
    ]  # fmt: skip


def test_probe_argv():
    spec = HostSpec(name="gpu a", read_only=True, reader="sim", sim_scenario="empty", sim_variant=2)
    assert headstart.probe_argv(spec, 0.5) == [
        "--reader", "sim", "--name", "gpu a", "--read-only", "--interval", "0.5",
        "--sim-scenario", "empty", "--sim-variant", "2",
    ]  # fmt: skip
    assert headstart.probe_argv(HostSpec(name="h")) == ["--reader", "nvml", "--name", "h"]


# ------------------------------------------------------------------------- LocalLink with a fake probe


async def test_local_link_with_fake_probe():
    link = LocalLink(HostSpec(name="here"), payload=fake_payload())
    await link.open()
    try:
        assert link.hello is not None and link.hello["shipped"] is True
        for seq in range(3):
            await link.send({"type": "sample", "v": 1, "seq": seq})
            record = await link.recv()
            assert record == {"type": "sample", "v": 1, "seq": seq}
        await link.send({"type": "configure", "v": 1})  # not a probe record type: refused on the way back
        record = await link.recv()
        assert record is not None and record["code"] == "bad-message"
    finally:
        await link.close()
    assert link.failure is None
    await link.close()  # idempotent
    assert await link.recv() is None


async def test_crash_before_hello_names_the_error():
    main = 'def main(argv):\n    raise ValueError("boom in the probe")\n'
    link = LocalLink(HostSpec(name="here"), payload=fake_payload(main))
    with pytest.raises(TransportError) as caught:
        await link.open()
    assert caught.value.reason == "probe-crashed"
    assert "ValueError: boom in the probe" in caught.value.message
    # The traceback shows the shipped source line: the loader serves it to linecache.
    assert any('raise ValueError("boom in the probe")' in line for line in link.stderr_lines)


async def test_junk_before_hello_is_skipped():
    # A login shell or a site module that prints to stdout must not break the link.
    main = "from .echo import main as echo\ndef main(argv):\n    print('motd: hi')\n    return echo(argv)\n"
    modules = {
        "gputui": (True, ""),
        "gputui.probe": (True, ""),
        "gputui.probe.helper": (False, HELPER),
        "gputui.probe.echo": (False, ECHO_MAIN),
        "gputui.probe.main": (False, main),
        "gputui_shipped_only": (False, "SHIPPED = True\n"),
    }
    link = LocalLink(HostSpec(name="here"), payload=build_payload(["--x"], modules=modules))
    await link.open()
    await link.close()
    assert link.hello is not None and link.hello["shipped"] is True


async def test_crash_after_hello_sets_failure():
    main = (
        "import sys, json\n"
        "def main(argv):\n"
        "    sys.stdout.write(json.dumps({'type': 'hello', 'v': 1}) + '\\n'); sys.stdout.flush()\n"
        "    sys.stdin.buffer.readline()\n"
        "    sys.stderr.write('Traceback...\\nRuntimeError: lost the GPU\\n')\n"
        "    return 3\n"
    )
    link = LocalLink(HostSpec(name="here"), payload=fake_payload(main))
    await link.open()
    await link.send({"type": "sample", "v": 1})
    assert await link.recv() is None
    await link.close()
    assert link.failure is not None and link.failure.reason == "probe-crashed"
    assert "RuntimeError: lost the GPU" in link.failure.message and "exit status 3" in link.failure.message


async def test_over_long_line_is_dropped_not_buffered():
    main = (
        "import sys, json\n"
        "def main(argv):\n"
        "    out = sys.stdout.buffer\n"
        "    out.write(json.dumps({'type': 'hello', 'v': 1}).encode() + b'\\n')\n"
        "    out.write(b'x' * (3 << 20) + b'\\n')\n"
        '    out.write(b\'{"type": "sample", "v": 1, "seq": 9}\\n\')\n'
        "    out.write(b'not json\\n')\n"
        "    out.flush()\n"
        "    sys.stdin.buffer.read()\n"
        "    return 0\n"
    )
    link = LocalLink(HostSpec(name="here"), payload=fake_payload(main))
    await link.open()
    try:
        first = await link.recv()
        assert first is not None and first["code"] == "too-long"
        assert await link.recv() == {"type": "sample", "v": 1, "seq": 9}
        third = await link.recv()
        assert third is not None and third["code"] == "bad-json"
    finally:
        await link.close()


async def test_hello_timeout():
    main = "import time\ndef main(argv):\n    time.sleep(60)\n"
    link = LocalLink(HostSpec(name="here"), payload=fake_payload(main), hello_timeout=0.5, close_timeout=0.2)
    with pytest.raises(TransportError) as caught:
        # (The probe would end by itself after 60 s, and then not as a timeout.)
        await asyncio.wait_for(link.open(), 60)
    assert caught.value.reason == "timeout"
    assert link.pid is not None


async def test_close_kills_a_probe_that_ignores_quit():
    main = (
        "import signal, sys, json, time\n"
        "def main(argv):\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    sys.stdout.write(json.dumps({'type': 'hello', 'v': 1}) + '\\n'); sys.stdout.flush()\n"
        "    while True:\n"
        "        time.sleep(1)\n"
    )
    link = LocalLink(HostSpec(name="here"), payload=fake_payload(main), close_timeout=0.3)
    await link.open()
    pid = link.pid
    await asyncio.wait_for(link.close(), 30)  # it never ends by itself: close() must kill it
    assert pid is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped by close()


async def test_missing_python_is_no_python():
    link = LocalLink(HostSpec(name="here", python="/nonexistent/python3"), payload=fake_payload())
    with pytest.raises(TransportError) as caught:
        await link.open()
    assert caught.value.reason == "no-python"
    assert "/nonexistent/python3" in caught.value.message


@pytest.mark.parametrize("python", [str(p) for p in OLD_PYTHONS if p.exists()][:1] or ["missing"])
async def test_old_python_is_no_python(python):
    if python == "missing":
        pytest.skip("no Python older than 3.8 installed")
    link = LocalLink(HostSpec(name="here", python=python), payload=fake_payload())
    with pytest.raises(TransportError) as caught:
        await link.open()
    assert caught.value.reason == "no-python"
    assert "3.8 or newer" in caught.value.message


async def test_wrap_runs_the_probe_through_a_command(tmp_path):
    record = tmp_path / "wrapped"
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\nshift 2\nexec "$@"\n')
    wrapper.chmod(0o755)
    spec = HostSpec(name="here", wrap=f"{wrapper} --label 'a b'")
    link = LocalLink(spec, payload=fake_payload())
    await link.open()
    await link.close()
    args = record.read_text().splitlines()
    assert args[:3] == ["--label", "a b", sys.executable]


# ------------------------------------------------------------------------- the real probe, locally


@pytest.mark.parametrize(
    "python", [None, pytest.param(str(PYTHON38), marks=needs(PYTHON38))], ids=["app", "3.8"]
)
async def test_local_link_real_probe(python):
    link = LocalLink(probe_host("here", python=python), interval=0.1)
    await link.open()
    try:
        hello = link.hello
        assert hello is not None and hello["type"] == "hello" and hello["read_only"] is False
        if python:
            assert hello["host"]["python"].startswith("3.8")
        seqs = []
        while len(seqs) < 3:
            record = await asyncio.wait_for(link.recv(), 60)
            assert record is not None
            if record["type"] == "sample":
                seqs.append(record["seq"])
        assert seqs == sorted(seqs)
    finally:
        await link.close()
    assert link.failure is None


async def test_local_probe_on_the_apps_python_is_this_installation_whatever_the_cwd(tmp_path, monkeypatch):
    """The app's own interpreter runs the installed probe from its bytecode (nothing sent over stdin);
    a `gputui` package in the directory the operator stands in is never what runs."""
    trap = tmp_path / "gputui" / "probe"
    trap.mkdir(parents=True)
    (tmp_path / "gputui" / "__init__.py").write_text("")
    (trap / "__init__.py").write_text("")
    (trap / "__main__.py").write_text(f"open({str(tmp_path / 'trap-ran')!r}, 'w').write('ran')\n")
    monkeypatch.chdir(tmp_path)
    link = LocalLink(probe_host("here"), interval=0.1)
    assert link.direct and link._payload == b""
    await link.open()
    try:
        assert link.hello is not None and link.hello["type"] == "hello"
        cmdline = Path(f"/proc/{link.pid}/cmdline").read_bytes().split(b"\0")
        assert (
            cmdline[1:3] == [b"-S", b"-c"]
            and cmdline[4] == b"gputui-probe"
            and b"gputui.probe.__main__" in cmdline[3]
        )
        assert cmdline[5:7] == [b"--reader", b"sim"]
    finally:
        await link.close()
    assert not (tmp_path / "trap-ran").exists()
    # Another interpreter, sudo or a wrapper: the bootstrap sends the probe, as over SSH.
    assert not LocalLink(probe_host("here", python="/usr/bin/python3")).direct
    assert not LocalLink(probe_host("here", sudo=True)).direct


async def test_read_only_probe_refuses_plans_locally():
    link = LocalLink(probe_host("here", read_only=True), interval=5)
    await link.open()
    try:
        assert link.hello is not None and link.hello["read_only"] is True
        await link.send({"type": "plan", "v": 1, "id": "p1", "targets": []})
        record = await asyncio.wait_for(_next_of(link, "error"), 60)
        assert record["code"] == "read-only" and record["plan"] == "p1"
    finally:
        await link.close()


async def _next_of(link, kind):
    while True:
        record = await link.recv()
        assert record is not None
        if record["type"] == kind:
            return record


def test_record_stream_splits_chunks():
    chunks = [
        b'{"type":"sample","v":1,',
        b'"seq":1}\n{"type":"ev',
        b'ent","v":1}\n\n',
        b'{"type":"error","v":1}',
    ]

    async def go():
        feed = iter(chunks)

        async def read(size):
            return next(feed, b"")

        stream = RecordStream(read)
        return [await stream.next_record() for _ in range(4)]

    records = asyncio.run(go())
    assert [r and r["type"] for r in records] == ["sample", "event", "error", None]


async def test_close_does_not_wait_for_a_grandchild_holding_the_pipes():
    # A child of the probe that inherited stdout and stderr keeps the pipes open after the probe
    # is gone; asyncio's Process.wait() would wait for it.
    main = (
        "import json, subprocess, sys\n"
        "def main(argv):\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "    sys.stdout.write(json.dumps({'type': 'hello', 'v': 1, 'child': child.pid}) + '\\n')\n"
        "    sys.stdout.flush()\n"
        "    sys.stdin.buffer.read()\n"
        "    return 0\n"
    )
    link = LocalLink(HostSpec(name="here"), payload=fake_payload(main), close_timeout=0.5)
    await link.open()
    child = link.hello["child"]
    try:
        await asyncio.wait_for(link.close(), 30)  # the grandchild keeps the pipes for 60 s
    finally:
        os.kill(child, signal.SIGKILL)
