"""`gputui wait` as a script runs it: `python -m gputui wait ...` as a real subprocess, its exit code,
its JSON document and its words (gputui/cli/wait.py).

On a fresh demo (tests/conftest.py sets GPUTUI_DEMO=fresh: each command runs sims of its own, every
job as the scenario starts it, ended when the command exits): demo-b's GPU 3 is free, demo-a's GPU 0
is held by a vLLM server. And on a config of sim hosts: the "preflight" scenario's GPU 0 is ready and
its GPU 1 has 2.1 GiB that no process holds. The in-process tests of the same command (readiness,
hosts that cannot be judged) are tests/cli/test_readiness.py; its live line on a terminal,
tests/cli/test_wait_live.py; a restarted worker named by its parent, tests/cli/test_wait_jobs.py.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gputui.cli.exits import Exit
from tests.support.paths import REPO

HELD = re.compile(r"used or held by (\d+) \(user: python -S \.\.\./vllm_serve\.py --model ")


def gputui_wait(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any] | None, str, str, float]:
    """`gputui wait ARGS...`: the exit code, the JSON document (with --json), stdout, stderr, and the
    seconds the command took from start to exit."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "wait", *args],
        env=dict(env or os.environ, PYTHONPATH=str(REPO)),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    took = time.monotonic() - started
    doc = json.loads(done.stdout) if "--json" in args else None
    return done.returncode, doc, done.stdout, done.stderr, took


def gpus_of(doc: dict[str, Any], host: str) -> dict[str, Any]:
    [entry] = [h for h in doc["hosts"] if h["host"] == host]
    gpus: dict[str, Any] = entry["gpus"]
    return gpus


def test_a_free_gpu_is_ready_at_once(tmp_path: Path) -> None:
    code, doc, out, err, _ = gputui_wait("--demo", "demo-b", "--gpu", "demo-b:3", "--json", cwd=tmp_path)
    assert code == Exit.READY, out + err
    assert doc is not None and doc["version"] == 1
    assert doc["ready"] is True and doc["exit_code"] == Exit.READY and doc["settle_s"] == 0.0
    assert [h["host"] for h in doc["hosts"]] == ["demo-b"]
    assert gpus_of(doc, "demo-b") == {"3": {"ready": True, "ready_for_s": 0.0, "unready": []}}
    assert doc["waited_s"] < 60  # at once: the first sample judged (its default timeout is 600 s)

    code, _, out, err, _ = gputui_wait("--demo", "demo-b", "--gpu", "demo-b:3", cwd=tmp_path)
    assert code == Exit.READY, out + err
    assert re.fullmatch(r"ready: demo-b GPU 3 \(after \d+\.\d s\)\n", out), out


def test_a_held_gpu_times_out_and_the_reason_names_its_holder(tmp_path: Path) -> None:
    # 4 s: the demo starts and sends its first sample within them, even on a loaded box.
    code, doc, out, err, took = gputui_wait(
        "--demo", "demo-a", "--gpu", "demo-a:0", "--timeout", "4", "--json", cwd=tmp_path
    )
    assert code == Exit.TIMEOUT, out + err
    assert doc is not None and doc["ready"] is False and doc["exit_code"] == Exit.TIMEOUT
    assert doc["waited_s"] >= 4.0 and took >= 4.0  # it waited out its timeout
    gpu = gpus_of(doc, "demo-a")["0"]
    assert gpu["ready"] is False and gpu["ready_for_s"] == 0.0
    failing = {u["condition"]: u["words"] for u in gpu["unready"]}
    assert {"processes", "memory", "utilization"} <= set(failing), failing
    assert HELD.match(failing["processes"]), failing["processes"]

    # Judged once, at its first sample (--timeout 0): the words do not hang on a sample coming
    # within a second, which a loaded CI box did not give (the reasons were then "no sample yet").
    code, _, out, err, _ = gputui_wait(
        "--demo", "demo-a", "--gpu", "demo-a:0", "--timeout", "0", cwd=tmp_path
    )
    assert code == Exit.TIMEOUT, out + err
    assert out == "" and err.startswith("gputui wait: not ready after "), err
    [held] = [line for line in err.splitlines() if line.startswith("  demo-a GPU 0: processes: ")]
    assert HELD.search(held), held


def test_a_gpu_the_host_does_not_have_is_bad_usage_at_once(tmp_path: Path) -> None:
    code, doc, out, err, _ = gputui_wait(
        "--demo", "demo-a", "--gpu", "demo-a:7", "--timeout", "60", "--json", cwd=tmp_path
    )
    assert code == Exit.USAGE, out + err
    assert doc is not None and doc["ready"] is False and doc["exit_code"] == Exit.USAGE
    assert doc["error"] == "--gpu demo-a:7: demo-a has no GPU 7 (its GPUs: 0, 1, 2, 3)"
    assert doc["hosts"] == [] and doc["waited_s"] < 60  # refused, not waited for
    assert err == f"gputui: {doc['error']}\n"


def test_a_uuid_no_answering_host_has_is_waited_for_while_a_host_is_silent(tmp_path: Path) -> None:
    """A GPU UUID none of the hosts that answered has may be on the one that did not: not bad usage
    (exit 2) but not ready (exit 1), the silent host named; with every host answering it is bad usage."""
    config = tmp_path / "gputui.toml"
    config.write_text(
        '[[hosts]]\nname = "p"\naddress = "local"\nreader = "sim"\nsim_scenario = "preflight"\n'
        '[[hosts]]\nname = "far"\naddress = "127.0.0.1"\nport = 1\nuser = "nobody"\n'  # refused: down
    )
    uuid = "GPU-00000000-dead"
    code, _, out, err, _ = gputui_wait(
        "--config", str(config), "p", "far", "--gpu", uuid, "--timeout", "5", cwd=tmp_path
    )
    assert code == Exit.TIMEOUT, out + err
    assert "far: no sample yet (down" in err and "Traceback" not in err
    code, _, out, err, _ = gputui_wait(
        "--config", str(config), "p", "--gpu", uuid, "--timeout", "5", cwd=tmp_path
    )
    assert code == Exit.USAGE and err == f"gputui: --gpu {uuid}: no GPU has that UUID\n", out + err


def test_settle_waits_the_settle_time_and_a_timeout_shorter_than_it_is_not_ready(tmp_path: Path) -> None:
    code, doc, out, err, took = gputui_wait(
        "--demo", "demo-b", "--gpu", "demo-b:3", "--settle", "2", "--json", cwd=tmp_path
    )
    assert code == Exit.READY, out + err
    assert doc is not None and doc["ready"] is True and doc["settle_s"] == 2.0
    assert doc["waited_s"] >= 2.0 and took >= 2.0
    assert gpus_of(doc, "demo-b")["3"]["ready_for_s"] >= 2.0  # ready all along the settle period

    code, _, out, err, _ = gputui_wait(
        "--demo", "demo-b", "--gpu", "demo-b:3", "--settle", "30", "--timeout", "1.5", cwd=tmp_path
    )
    assert code == Exit.TIMEOUT, out + err
    assert re.search(r"^  demo-b GPU 3: ready for \d+\.\d s of 30$", err, re.M), err


def test_a_config_of_sim_hosts_is_waited_for_gpu_by_gpu(tmp_path: Path) -> None:
    config = tmp_path / "gputui.toml"
    config.write_text(
        '[[hosts]]\nname = "p"\naddress = "local"\nreader = "sim"\nsim_scenario = "preflight"\nsim_seed = 7\n'
    )
    code, doc, out, err, _ = gputui_wait("--config", str(config), "p", "--gpu", "p:0", "--json", cwd=tmp_path)
    assert code == Exit.READY, out + err
    assert doc is not None and gpus_of(doc, "p") == {"0": {"ready": True, "ready_for_s": 0.0, "unready": []}}

    code, doc, out, err, _ = gputui_wait(
        "--config", str(config), "p", "--gpu", "p:0", "--gpu", "p:1", "--timeout", "0", "--json", cwd=tmp_path
    )  # judged at its first sample, however long the sim takes to start
    assert code == Exit.TIMEOUT, out + err
    assert doc is not None
    gpus = gpus_of(doc, "p")
    assert gpus["0"]["ready"] is True and gpus["0"]["unready"] == []
    failing = {u["condition"]: u["words"] for u in gpus["1"]["unready"]}
    assert set(failing) == {"memory", "unaccounted"}, failing  # no process: memory nobody holds
    assert failing["unaccounted"] == "2.1 GiB orphaned, no process holds it; a reset would free it"


@pytest.mark.skipif(
    os.path.exists("/dev/nvidiactl") or ctypes.util.find_library("nvidia-ml") is not None,
    reason="an NVIDIA driver is here: this machine's GPUs would be waited for",
)
def test_this_machine_without_a_driver_is_exit_3(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "GPUTUI_CONFIG"}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))  # no config: this machine
    code, doc, out, err, _ = gputui_wait("--timeout", "60", "--json", cwd=tmp_path, env=env)
    assert code == Exit.NO_GPU, out + err
    assert doc is not None and doc["exit_code"] == Exit.NO_GPU and doc["hosts"] == []
    # The document is for scripts (a Slurm prolog on a real node): no hint to try the demo in it.
    assert doc["error"].startswith("local: no NVIDIA driver") and "--demo" not in doc["error"]
