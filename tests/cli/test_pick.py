"""`gputui pick N` as a script runs it: `python -m gputui pick ...` as a real subprocess, its line
evaluated by a real shell, its JSON document, its words on stderr and its exit code
(gputui/cli/pick.py).

On a fresh demo (tests/conftest.py sets GPUTUI_DEMO=fresh: each command runs sims of its own, ended
when it exits): demo-a's 4 GPUs are all busy; of demo-b's 8, GPUs 3 to 7 are free. On configs of sim
hosts: the "workers" scenario leaves GPUs 2 and 3 free, "empty" all four, "jobs" (8 GPUs) 5, 6 and 7;
the "preflight" scenario's GPU 0 and 3 are ready, GPU 1 has orphaned memory and GPU 2 throttles. The
sim lays its GPUs out as a PCIe server: pairs (0-1, 2-3, ...) share a switch, four a NUMA node.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gputui.cli.exits import Exit
from tests.support.paths import REPO
from tests.support.procs import cmdline, descendants, start_time

LINE = re.compile(r"export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=([0-9,]+)\n")
UUIDS = re.compile(r"export CUDA_VISIBLE_DEVICES=(GPU-[0-9a-f-]+(,GPU-[0-9a-f-]+)*)\n")


def have_driver() -> bool:
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


def env_of(tmp_path: Path) -> dict[str, str]:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp))


def gputui_pick(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", "pick", *args],
        env=env_of(cwd),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def evaluated(line: str, cwd: Path) -> dict[str, str]:
    """What a shell has in CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER after `eval "$LINE"`."""
    script = 'eval "$LINE"; printf "%s\\n%s\\n" "${CUDA_VISIBLE_DEVICES-unset}" "${CUDA_DEVICE_ORDER-unset}"'
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_")}
    done = subprocess.run(
        ["bash", "-c", script], env=dict(env, LINE=line), cwd=cwd, capture_output=True, text=True, check=True
    )
    devices, order = done.stdout.splitlines()
    assert done.stderr == ""
    return {"CUDA_VISIBLE_DEVICES": devices, "CUDA_DEVICE_ORDER": order}


def config(tmp_path: Path, *hosts: tuple[str, str]) -> Path:
    """A config of sim hosts: (name, scenario) each, seeded."""
    path = tmp_path / "gputui.toml"
    path.write_text(
        "".join(
            f'[[hosts]]\nname = "{name}"\naddress = "local"\nreader = "sim"\nsim_scenario = "{scenario}"\n'
            f"sim_seed = {seed}\n"
            for seed, (name, scenario) in enumerate(hosts, 3)
        )
    )
    return path


def test_pick_one_on_the_demo_prints_a_line_a_shell_takes(tmp_path: Path) -> None:
    done = gputui_pick("1", "--demo", cwd=tmp_path)
    assert done.returncode == Exit.PICKED, done.stdout + done.stderr
    assert LINE.fullmatch(done.stdout), done.stdout  # stdout: the line, and nothing else
    assert evaluated(done.stdout, tmp_path) == {
        "CUDA_VISIBLE_DEVICES": "3",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    lines = done.stderr.splitlines()
    # GPU 3, whose switch partner is busy: a pair under one switch (4-5, 6-7) is kept for a pick of two.
    assert lines[0] == "# gputui pick: demo-b GPU 3", done.stderr  # which host: the variable is its
    # Why each other GPU is not ready, one line each, in wait's words.
    assert re.search(
        r"^  demo-a GPU 0: processes: used or held by \d+ \(user: .*vllm_serve\.py", done.stderr, re.M
    )
    assert len([line for line in lines if line.startswith("  demo-")]) == 11, done.stderr


def test_pick_two_on_the_demo_is_one_line_a_shell_takes_two_free_gpus_of_demo_b(tmp_path: Path) -> None:
    """The README's example: demo-b (8 GPUs) has GPUs 4-7 free and ready; 4 and 5 share a switch."""
    done = gputui_pick("2", "--demo", cwd=tmp_path)
    assert done.returncode == Exit.PICKED, done.stdout + done.stderr
    assert done.stdout.count("\n") == 1 and LINE.fullmatch(done.stdout), done.stdout
    shell = subprocess.run(
        ["bash", "-c", 'eval "$(cat)"; echo $CUDA_VISIBLE_DEVICES'],
        input=done.stdout,
        env={k: v for k, v in os.environ.items() if not k.startswith("CUDA_")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    picked = [int(i) for i in shell.stdout.strip().split(",")]
    assert len(picked) == 2 and set(picked) <= {3, 4, 5, 6, 7}, shell.stdout  # the GPUs demo-b has free
    assert picked == [4, 5], shell.stdout  # a pair under one switch before the lowest indexes
    assert done.stderr.splitlines()[0] == "# gputui pick: demo-b GPU 4, 5 (linked by switch or closer)"


def test_two_gpus_a_host_has_free_are_one_line_and_the_shell_sees_both(tmp_path: Path) -> None:
    path = config(tmp_path, ("w", "workers"))
    done = gputui_pick("2", "--config", str(path), "w", cwd=tmp_path)
    assert done.returncode == Exit.PICKED, done.stdout + done.stderr
    assert evaluated(done.stdout, tmp_path)["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert done.stderr.splitlines()[0] == "# gputui pick: w GPU 2, 3 (linked by switch or closer)"

    by_uuid = gputui_pick("2", "--config", str(path), "w", "--uuid", cwd=tmp_path)
    as_json = gputui_pick("2", "--config", str(path), "w", "--uuid", "--format", "json", cwd=tmp_path)
    assert by_uuid.returncode == as_json.returncode == Exit.PICKED, by_uuid.stderr + as_json.stderr
    assert UUIDS.fullmatch(by_uuid.stdout), by_uuid.stdout
    doc = json.loads(as_json.stdout)
    assert doc["version"] == 1 and doc["ok"] is True and doc["exit_code"] == 0 and doc["host"] == "w"
    assert [g["index"] for g in doc["gpus"]] == [2, 3] and doc["link"] == "switch"
    uuids = ",".join(g["uuid"] for g in doc["gpus"])
    assert doc["cuda_visible_devices"] == uuids  # the same seed: the same GPUs, the same UUIDs
    assert evaluated(by_uuid.stdout, tmp_path) == {
        "CUDA_VISIBLE_DEVICES": uuids,
        "CUDA_DEVICE_ORDER": "unset",
    }
    held = {c["condition"] for c in doc["hosts"][0]["gpus"]["0"]["unready"]}
    assert {"processes", "memory", "utilization"} <= held, doc


def test_gpus_that_share_a_switch_come_before_the_lowest_indexes(tmp_path: Path) -> None:
    # "jobs": GPUs 5, 6 and 7 are free; 6 and 7 share a switch, 5's partner (4) is busy.
    done = gputui_pick("2", "--config", str(config(tmp_path, ("j", "jobs"))), "j", cwd=tmp_path)
    assert done.returncode == Exit.PICKED, done.stdout + done.stderr
    assert evaluated(done.stdout, tmp_path)["CUDA_VISIBLE_DEVICES"] == "6,7"
    assert "  j GPU 5: ready, not needed" in done.stderr.splitlines()


def test_the_first_host_in_order_with_n_ready_is_picked(tmp_path: Path) -> None:
    path = config(tmp_path, ("w", "workers"), ("e", "empty"))
    for hosts, count, host, devices in (
        (["w", "e"], "2", "w", "2,3"),
        (["e", "w"], "2", "e", "0,1"),
        (["w", "e"], "3", "e", "0,1,2"),
    ):
        done = gputui_pick(count, "--config", str(path), *hosts, cwd=tmp_path)
        assert done.returncode == Exit.PICKED, done.stdout + done.stderr
        assert evaluated(done.stdout, tmp_path)["CUDA_VISIBLE_DEVICES"] == devices, (hosts, count)
        assert done.stderr.startswith(f"# gputui pick: {host} GPU "), done.stderr


def test_a_throttled_gpu_is_not_ready_and_too_few_is_exit_1_with_every_reason(tmp_path: Path) -> None:
    path = config(tmp_path, ("p", "preflight"))
    done = gputui_pick("1", "--config", str(path), "p", cwd=tmp_path)
    assert done.returncode == Exit.PICKED, done.stdout + done.stderr
    assert evaluated(done.stdout, tmp_path)["CUDA_VISIBLE_DEVICES"] == "0"
    assert "  p GPU 2: throttle: throttling: hw-thermal" in done.stderr.splitlines(), done.stderr

    done = gputui_pick("3", "--config", str(path), "p", "--format", "json", cwd=tmp_path)
    assert done.returncode == Exit.TOO_FEW, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is False and doc["exit_code"] == Exit.TOO_FEW and "host" not in doc
    gpus = doc["hosts"][0]["gpus"]
    assert [i for i, g in gpus.items() if g["ready"]] == ["0"]  # GPU 3's ECC error: never ready
    assert {u["condition"] for u in gpus["1"]["unready"]} == {"memory", "unaccounted"}
    assert {u["condition"] for u in gpus["2"]["unready"]} == {"throttle"}
    assert {u["condition"] for u in gpus["3"]["unready"]} == {"ecc"}

    done = gputui_pick("6", "--demo", "demo-a", "demo-b", cwd=tmp_path)  # demo-b has 5 ready
    assert done.returncode == Exit.TOO_FEW and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.startswith("gputui pick: no host has 6 GPUs ready (--wait S waits for them)\n")
    assert "  demo-b GPU 3: ready\n" in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["0", "--demo"], "argument N: '0' is not a number of GPUs from 1 to 4096"),
        (["two", "--demo"], "argument N: 'two' is not a number of GPUs"),
        (["9", "--demo"], "gputui pick: no host has 9 GPUs to pick from (demo-a has 4, demo-b has 8)"),
        (["1", "--demo", "--format", "x\x1b[2J"], "invalid choice: 'x\\x1b[2J'"),
        (["1", "--demo", "--memory-below", "8 parsecs"], "--memory-below"),
        (["1", "--demo", "--wait", "-1"], "--wait"),
        ([], "the following arguments are required: N"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    done = gputui_pick(*args, cwd=tmp_path)
    assert done.returncode == Exit.USAGE, done.stdout + done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr and "\x1b" not in done.stderr
    assert says in done.stderr, done.stderr


@pytest.mark.skipif(have_driver(), reason="this machine has an NVIDIA driver")
def test_no_driver_is_exit_3_with_the_demo_suggested_and_json_says_it_too(tmp_path: Path) -> None:
    for args in ([], ["--format", "json"]):
        done = gputui_pick("1", *args, cwd=tmp_path)
        assert done.returncode == Exit.NO_GPU, done.stdout + done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith("gputui pick: local: no NVIDIA driver") and "`gputui pick 1 --demo`" in line
        if args:
            doc = json.loads(done.stdout)
            assert doc["ok"] is False and doc["exit_code"] == Exit.NO_GPU and doc["error"] == line[13:]
        else:
            assert done.stdout == ""


def test_help_lists_the_exit_codes_and_the_formats(tmp_path: Path) -> None:
    done = gputui_pick("--help", cwd=tmp_path)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "exit codes: 0 picked; 1 fewer than N GPUs ready on every host" in text
    assert "2 bad usage" in text and "3 no NVIDIA driver or GPU" in text
    assert "--format {cvd,json}" in done.stdout and "--uuid" in done.stdout and "--wait S" in done.stdout
    assert 'eval "$(gputui pick 2)"' in done.stdout


def below_named(pid: int, name: bytes) -> list[tuple[int, int | None]]:
    """The processes below `pid` (this test's own command) whose command line has `name`."""
    return [(p, start_time(p)) for p in descendants(pid) if name in cmdline(p)]


def test_wait_returns_once_a_gpu_becomes_free(tmp_path: Path) -> None:
    """`pick 4 --wait`: on "jobs", GPUs 5-7 are free and eval.py holds GPU 4; once this test ends
    eval.py (a process of the pick's own sim, by PID and start time), GPUs 4-7 are picked."""
    path = config(tmp_path, ("j", "jobs"))
    pick = subprocess.Popen(
        [sys.executable, "-m", "gputui", "pick", "4", "--config", str(path), "j", "--wait", "120"],
        env=env_of(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert pick.stderr is not None
        waiting = pick.stderr.readline()  # said once it judged the GPUs and found too few
        assert (
            waiting == "gputui pick: waiting up to 120 s for 4 GPUs ready on one host (ready now: j 3)\n"
        ), waiting
        [(pid, started)] = below_named(pick.pid, b"eval.py")
        fd = os.pidfd_open(pid)
        try:
            if start_time(pid) == started:
                signal.pidfd_send_signal(fd, signal.SIGTERM)
        finally:
            os.close(fd)
        out, err = pick.communicate(timeout=180)
    finally:
        if pick.poll() is None:
            pick.kill()
            pick.wait()
    assert pick.returncode == Exit.PICKED, out + err
    assert evaluated(out, tmp_path)["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    assert err.startswith("# gputui pick: j GPU 4, 5, 6, 7"), err


def test_wait_that_runs_out_says_so_and_exits_1(tmp_path: Path) -> None:
    done = gputui_pick("6", "--demo", "demo-b", "--wait", "1", "--format", "json", cwd=tmp_path)
    assert done.returncode == Exit.TOO_FEW, done.stdout + done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    assert doc["ok"] is False and [h["host"] for h in doc["hosts"]] == ["demo-b"]
    assert "gputui pick: no host has 6 GPUs ready after 1 s\n" in done.stderr, done.stderr
