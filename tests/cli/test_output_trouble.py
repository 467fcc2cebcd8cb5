"""Output trouble never stops a plan or changes its outcome (issue 17, defect 2).

The real CLI as a subprocess (`python -m gputui ... --demo`), its stdout or stderr closed, or its
stdout on /dev/full or on a 4 KiB tmpfs that fills in the middle of the plan. The demo's clean kills
real simulated processes: the audit log (`--log`) must hold the verdict, the exit code must be the
plan's, and stderr (where it works) says in one line what happened to the output; no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--term-timeout", "1", "--verify-timeout", "10")  # the demo's embedder ignores SIGTERM


def gputui(
    *args: str,
    tmp: Path,
    close: tuple[int, ...] = (),
    stdout: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run `python -m gputui ARGS` with the fds in `close` closed and stdout to `stdout` (a file),
    else a pipe. Its user dirs are under `tmp` (no config, a private audit-log dir)."""
    env = {
        **os.environ,
        "HOME": str(tmp),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "XDG_STATE_HOME": str(tmp / "state"),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("GPUTUI_CONFIG", None)

    def closing() -> None:  # runs in the child after its stdio is set up, before the exec
        for fd in close:
            os.close(fd)

    out = open(stdout, "wb") if stdout is not None else None  # noqa: SIM115 (closed below)
    try:
        return subprocess.run(
            [sys.executable, "-m", "gputui", *args],
            stdin=subprocess.DEVNULL,
            stdout=out if out is not None else subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
            timeout=120,
            check=False,
            preexec_fn=closing,
        )
    finally:
        if out is not None:
            out.close()


def records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def check_clean_ran(done: subprocess.CompletedProcess[bytes], log: Path) -> None:
    """The plan ran to its verdict, on disk, and the exit code is that verdict's."""
    err = done.stderr.decode(errors="replace")
    assert "Traceback" not in err, err
    written = records(log)
    kinds = [r["kind"] for r in written]
    assert "done" in kinds, (kinds, err)
    [finished] = [r for r in written if r["kind"] == "done"]
    assert finished["result"] == "clean", finished
    assert any(r["kind"] == "event" and r["signal"] == "SIGTERM" and r["result"] == "sent" for r in written)
    assert done.returncode == 0, (done.returncode, err)  # the plan's: every GPU verified clean


@pytest.mark.parametrize("close", [(1,), (2,), (1, 2)], ids=["stdout-closed", "stderr-closed", "both-closed"])
def test_clean_with_a_closed_stream_runs_and_exits_with_the_plans_code(tmp_path: Path, close) -> None:
    """It exited 1 with "'NoneType' object has no attribute 'flush'" after a clean that completed."""
    log = tmp_path / "actions.jsonl"
    done = gputui(
        "clean", "--demo", "demo-a", "--all", "--yes", *FAST, "--log", str(log), tmp=tmp_path, close=close
    )
    check_clean_ran(done, log)
    err = done.stderr.decode(errors="replace")
    if close == (1,):
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "stdout" in lines[0] and "closed" in lines[0], err
        assert str(log) in lines[0]  # where the whole story is
    if 1 not in close:
        assert "CLEAN" in done.stdout.decode()  # stdout still has the verdict
        assert "gputui:" not in done.stdout.decode()  # stderr's words never land on stdout


def test_clean_with_stdout_on_dev_full_runs_and_exits_with_the_plans_code(tmp_path: Path) -> None:
    """The first line written raised OSError (ENOSPC) before anything was sent."""
    log = tmp_path / "actions.jsonl"
    done = gputui(
        "clean", "--demo", "demo-a", "--all", "--yes", *FAST, "--log", str(log),
        tmp=tmp_path, stdout=Path("/dev/full"),
    )  # fmt: skip
    check_clean_ran(done, log)
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "stdout" in lines[0] and "No space left on device" in lines[0], lines


@pytest.fixture
def tiny_tmpfs() -> Iterator[Path]:
    """A 4 KiB tmpfs: the plan fits on it, the stages after the first SIGTERM do not."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    where = Path(tempfile.mkdtemp(prefix="gputui-tmpfs-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4k,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
        where.rmdir()


def test_clean_with_stdout_filling_mid_plan_logs_the_verdict(tmp_path: Path, tiny_tmpfs: Path) -> None:
    """An OSError traceback after SIGTERM was sent, and no verdict logged."""
    log = tmp_path / "actions.jsonl"
    out = tiny_tmpfs / "out.txt"
    done = gputui(
        "clean", "--demo", "demo-a", "--all", "--yes", *FAST, "--log", str(log), tmp=tmp_path, stdout=out
    )
    check_clean_ran(done, log)
    text = out.read_text(errors="replace")
    assert "SIGTERM ->" in text and "CLEAN" not in text  # it filled after the first signal
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], lines


def test_wait_keeps_its_exit_code_whatever_happens_to_its_output(tmp_path: Path) -> None:
    ready = ("wait", "--demo", "demo-b", "--gpu", "demo-b:3", "--timeout", "60")  # demo-b's GPU 3 is free
    for kwargs in ({"close": (1,)}, {"close": (2,)}, {"close": (1, 2)}, {"stdout": Path("/dev/full")}):
        for extra in ((), ("--json",)):
            done = gputui(*ready, *extra, tmp=tmp_path, **kwargs)  # type: ignore[arg-type]
            err = done.stderr.decode(errors="replace")
            assert done.returncode == 0 and "Traceback" not in err, (kwargs, extra, done.returncode, err)
            if 2 not in kwargs.get("close", ()):
                assert len(err.strip().splitlines()) == 1 and "stdout" in err, err
    busy = gputui("wait", "--demo", "demo-a", "--timeout", "0.5", tmp=tmp_path, close=(1, 2))
    assert busy.returncode == 1


def test_snapshot_whose_output_cannot_be_written_says_so_and_fails(tmp_path: Path) -> None:
    """Its output is all a snapshot is for: lost output is exit 1 (as a closed pipe always was)."""
    for kwargs in ({"close": (1,)}, {"stdout": Path("/dev/full")}):
        done = gputui("snapshot", "--demo", "--json", tmp=tmp_path, **kwargs)  # type: ignore[arg-type]
        err = done.stderr.decode(errors="replace")
        assert done.returncode == 1 and "Traceback" not in err, (kwargs, done.returncode, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gputui: ") and "stdout" in lines[0], lines
    # stderr closed: the snapshot is whole and its code kept.
    done = gputui("snapshot", "--demo", "--json", tmp=tmp_path, close=(2,))
    assert done.returncode == 0 and len(json.loads(done.stdout)["hosts"]) == 2


def test_an_error_with_stderr_closed_never_lands_on_stdout(tmp_path: Path) -> None:
    """print(file=sys.stderr) with stderr closed (None) printed to stdout: into a script's JSON."""
    for args in (("snapshto",), ("clean", "--demo", "--yes")):
        done = gputui(*args, tmp=tmp_path, close=(2,))
        assert done.returncode == 2 and done.stdout == b"", (args, done.returncode, done.stdout)
