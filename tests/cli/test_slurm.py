"""gputui's Slurm Prolog and Epilog (contrib/slurm; docs/SLURM.md).

Two ways, both against simulated GPUs (a config of sim hosts: "pre" is the `preflight` scenario,
GPU 0 ready and GPU 1 with 2.1 GiB orphaned; "busy" is demo-b, whose GPU 0 a training job uses),
through a `gputui` wrapper that names the host:

- with Slurm's variables set as slurmd sets them for a Prolog and an Epilog (SLURM_JOB_ID,
  SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES, no PATH): the outcomes one by one, hostile values, a
  gputui that is missing. Needs only a POSIX sh.
- under a real slurmctld and slurmd started here (Debian's slurm-wlm, munge with a key and socket
  of the test's own; proctrack/linuxproc, task/none; four GPUs in gres.conf whose device files are
  symlinks to /dev/null): srun and sbatch jobs, their Prolog and Epilog run by slurmd, what they
  logged, and the node drained exactly when they said so. Skipped when Slurm is absent or cannot
  start here (the reason says which); .ci/run installs it.

Every daemon the test starts is its child, ended by its PID; every job it submits is cancelled.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.hosts import mig_uuids, sim_host_toml

REPO = Path(__file__).resolve().parents[2]
PROLOG = REPO / "contrib" / "slurm" / "prolog.sh"
EPILOG = REPO / "contrib" / "slurm" / "epilog.sh"
pytestmark = pytest.mark.timeout(900)
CONFIG = """
[[hosts]]
name = "pre"
address = "local"
reader = "sim"
sim_scenario = "preflight"

[[hosts]]
name = "busy"
address = "local"
reader = "sim"
sim_scenario = "demo"
sim_variant = 1
sim_seed = 2
""" + sim_host_toml("mig", "mig", 3)


def q(text: str | Path) -> str:
    """`text` as one word of sh (single-quoted)."""
    return "'" + str(text).replace("'", "'\"'\"'") + "'"


def make_gputui(where: Path) -> Path:
    """A `gputui` for the scripts: this checkout, on a sim host named by $SLURM_JOB_PARTITION (or
    $GPUTUI_TEST_HOST): "busy" or "mig" (the `mig` scenario: GPU 0 in MIG mode), else "pre". Everything it needs is written in: slurmd passes no
    environment."""
    config = where / "hosts.toml"
    config.write_text(CONFIG)
    state = where / "state"
    state.mkdir(exist_ok=True)
    tmp = where / "tmp"
    tmp.mkdir(exist_ok=True)
    wrapper = where / "gputui"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "${SLURM_JOB_PARTITION:-${GPUTUI_TEST_HOST:-pre}}" in busy) host=busy ;; mig) host=mig ;; *) host=pre ;; esac\n'
        f"PYTHONPATH={q(REPO)} XDG_STATE_HOME={q(state)} TMPDIR={q(tmp)} GPUTUI_DEMO=fresh \\\n"
        f'    exec {q(sys.executable)} -m gputui "$@" --config {q(config)} "$host"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# -- with Slurm's variables, as slurmd sets them --------------------------------------------------


@pytest.fixture
def scripts(tmp_path: Path) -> dict[str, Any]:
    gputui = make_gputui(tmp_path)
    return {
        "gputui": gputui,
        "log": tmp_path / "log" / "slurm.jsonl",
        "audit": tmp_path / "log" / "actions.jsonl",
    }


def run_script(
    script: Path, setup: dict[str, Any], host: str = "pre", shell: str | None = None, **env: str
) -> tuple[int, dict[str, Any]]:
    """The script with only what slurmd gives a Prolog or Epilog (no PATH), and the settings a
    wrapper would export; its exit code and the one JSON line it logged. `shell`: the sh that runs
    it (default: its #!/bin/sh).

    A Prolog whose host gave no sample within its timeout is run again with a longer one (a
    machine busy with other work starts the sim slowly): what is tested is the verdict on what the
    GPUs show, not how fast a probe starts."""
    for timeout in ("3", "15", "60"):
        before = len(lines(setup["log"]))
        environ = {
            "SLURM_JOB_USER": "root",
            "SLURM_JOB_UID": "0",
            "SLURMD_NODENAME": "node-1",
            "SLURM_SCRIPT_CONTEXT": "prolog_slurmd" if script == PROLOG else "epilog_slurmd",
            "GPUTUI": str(setup["gputui"]),
            "GPUTUI_SLURM_LOG": str(setup["log"]),
            "GPUTUI_AUDIT_LOG": str(setup["audit"]),
            "GPUTUI_PROLOG_TIMEOUT": timeout,
            "GPUTUI_TEST_HOST": host,
            **env,
        }
        r = subprocess.run(
            [shell, str(script)] if shell else [str(script)],
            env=environ,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        logged = lines(setup["log"])[before:]
        assert len(logged) == 1, (r.stdout, r.stderr, logged)
        assert json.loads(r.stdout) == logged[0]  # the same line on stdout, for slurmd's own log
        assert logged[0]["exit"] == r.returncode and logged[0]["drain"] == (r.returncode != 0)
        if "unjudged" not in logged[0]["detail"]:
            break
    return r.returncode, logged[0]


def job_env(job: str, gpus: str) -> dict[str, str]:
    """A job's variables as slurmd sets them for its Prolog and Epilog."""
    return {"SLURM_JOB_ID": job, "SLURM_JOBID": job, "SLURM_JOB_GPUS": gpus, "CUDA_VISIBLE_DEVICES": gpus}


def test_the_scripts_are_executable_posix_sh() -> None:
    for script in (PROLOG, EPILOG):
        assert os.access(script, os.X_OK)
        assert script.read_text().startswith("#!/bin/sh\n")
        if shutil.which("dash"):
            subprocess.run(["dash", "-n", str(script)], check=True)


def test_prolog_ready_gpus_start_the_job(scripts: dict[str, Any]) -> None:
    code, line = run_script(PROLOG, scripts, **job_env("101", "0"))
    assert code == 0 and line["verdict"] == "ready" and line["gpus"] == "0" and line["slurm_job"] == "101"
    assert line["gputui"]["ready"] is True and line["gputui_exit"] == 0 and line["node"] == "node-1"


def test_prolog_drains_on_memory_no_process_holds(scripts: dict[str, Any]) -> None:
    code, line = run_script(PROLOG, scripts, **job_env("102", "0,1"))
    assert code == 1 and line["verdict"] == "unusable" and line["drain"] is True
    assert line["detail"] == "unusable GPU 1: memory unaccounted"
    gpus = line["gputui"]["hosts"][0]["gpus"]
    assert gpus["0"]["ready"] is True and gpus["1"]["ready"] is False


def test_prolog_lets_a_job_start_beside_a_live_process_unless_asked(scripts: dict[str, Any]) -> None:
    code, line = run_script(PROLOG, scripts, host="busy", **job_env("103", "0"))
    assert code == 0 and line["verdict"] == "busy"
    assert line["detail"].startswith("busy GPU 0: processes")
    code, line = run_script(PROLOG, scripts, host="busy", GPUTUI_PROLOG_DRAIN_BUSY="1", **job_env("104", "0"))
    assert code == 1 and line["verdict"] == "busy" and line["drain"] is True


def test_prolog_without_gpus_or_outside_slurm_does_nothing(scripts: dict[str, Any]) -> None:
    code, line = run_script(PROLOG, scripts, SLURM_JOB_ID="105")
    assert code == 0 and line["verdict"] == "no-gpus" and line["gputui"] is None
    code, line = run_script(PROLOG, scripts, SLURM_JOB_ID="106", CUDA_VISIBLE_DEVICES="NoDevFiles")
    assert code == 0 and line["verdict"] == "no-gpus"
    code, line = run_script(PROLOG, scripts, SLURM_JOB_GPUS="0")
    assert code == 0 and line["verdict"] == "error" and "not run by Slurm" in line["detail"]
    # SLURM_STEP_GPUS, then CUDA_VISIBLE_DEVICES, when SLURM_JOB_GPUS is not set.
    code, line = run_script(PROLOG, scripts, SLURM_JOB_ID="107", CUDA_VISIBLE_DEVICES="1")
    assert code == 1 and line["gpus"] == "1"


def test_prolog_drains_when_the_node_lacks_the_gpu_or_gputui(scripts: dict[str, Any], tmp_path: Path) -> None:
    code, line = run_script(PROLOG, scripts, **job_env("108", "7"))
    assert code == 1 and line["verdict"] == "unusable" and line["gputui_exit"] == 2
    assert "not on this node" in line["detail"]
    missing = dict(scripts, gputui=tmp_path / "no-such-gputui")
    code, line = run_script(PROLOG, missing, **job_env("109", "0"))
    assert code == 1 and line["verdict"] == "error" and line["gputui_exit"] == 127


def test_hostile_values_reach_no_shell(scripts: dict[str, Any], tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = f"0;touch {marker}"
    code, line = run_script(PROLOG, scripts, **job_env("110", evil))
    assert code == 1 and "not understood" in line["detail"]
    code, line = run_script(
        PROLOG, scripts, GPUTUI_WAIT_OPTIONS=f"$(touch {marker}) `touch {marker}`", **job_env("111", "0")
    )
    assert code == 1 and "is not a condition of gputui wait" in line["detail"]
    code, line = run_script(PROLOG, scripts, SLURM_JOB_ID=f"1;touch {marker}", SLURM_JOB_GPUS="0")
    assert code == 0 and line["verdict"] == "error"
    code, line = run_script(EPILOG, scripts, **job_env("112", f"*,$(touch {marker})"))
    assert code == 1 and "not understood" in line["detail"]
    code, line = run_script(PROLOG, scripts, SLURMD_NODENAME='n"\\\x1b[2J', **job_env("113", "0"))
    assert line["node"] == 'n"\\\\e[2J'  # the ESC shown as \\e, in valid JSON
    assert not marker.exists()


def test_prolog_asks_wait_for_the_sites_conditions(scripts: dict[str, Any]) -> None:
    # GPU 2 of the preflight scenario runs hot (78 °C, cooling slowly), GPU 3 has persistence off
    # and an uncorrected ECC error: that one is never ready, asked or not (it wants a reset).
    code, line = run_script(PROLOG, scripts, GPUTUI_WAIT_OPTIONS="--temp-below=50", **job_env("114", "2"))
    assert code == 1 and line["detail"] == "unusable GPU 2: temperature"
    code, line = run_script(PROLOG, scripts, GPUTUI_WAIT_OPTIONS="--persistence", **job_env("115", "3"))
    assert code == 1 and line["detail"] == "unusable GPU 3: ecc persistence"
    code, line = run_script(PROLOG, scripts, **job_env("116", "2,3"))
    assert code == 1 and line["detail"] == "unusable GPU 3: ecc"
    code, line = run_script(PROLOG, scripts, **job_env("117", "2"))  # not asked: ready
    assert code == 0 and line["verdict"] == "ready"


def test_epilog_clean_gpus_keep_the_node(scripts: dict[str, Any]) -> None:
    code, line = run_script(EPILOG, scripts, **job_env("201", "0"))
    assert code == 0 and line["verdict"] == "clean" and line["drain"] is False
    # Nothing of job 201 left: fine (clean --json says so in its document too, exit 2).
    assert line["job_exit"] == 2 and line["job_clean"]["ok"] is False
    assert "no Slurm job 201" in line["job_clean"]["error"]
    assert line["gpus_exit"] == 0 and line["gpus_clean"]["ok"] is True
    assert scripts["audit"].exists()


def test_epilog_stops_what_the_job_left_and_proves_the_gpu_clean(scripts: dict[str, Any]) -> None:
    code, line = run_script(EPILOG, scripts, host="busy", **job_env("202", "0"))
    assert code == 0 and line["verdict"] == "clean"
    (host,) = line["gpus_clean"]["hosts"]
    assert host["status"] == "clean"
    records = [json.loads(x) for x in scripts["audit"].read_text().splitlines()]
    assert any(r["kind"] == "event" and r.get("signal") == "SIGTERM" for r in records)  # logged ahead


def test_epilog_drains_when_a_gpu_is_not_clean(scripts: dict[str, Any]) -> None:
    code, line = run_script(EPILOG, scripts, **job_env("203", "1"))
    assert code == 1 and line["verdict"] == "not-clean" and line["drain"] is True
    assert line["gpus_exit"] == 1 and line["gpus_clean"]["ok"] is False
    assert "orphaned" in line["detail"]


def mig_instances(scripts: dict[str, Any]) -> dict[str, str]:
    """The "mig" host's MIG instance UUIDs by label (`1.0`), as the scripts' gputui shows them."""
    shown = subprocess.run(
        [str(scripts["gputui"]), "snapshot", "--json"],
        env={"GPUTUI_TEST_HOST": "mig"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    (host,) = json.loads(shown.stdout)["hosts"]
    return mig_uuids(host)


def test_prolog_judges_the_mig_instance_slurm_names(scripts: dict[str, Any]) -> None:
    # On a MIG node slurmd names a job's GPUs by their MIG instance UUIDs: the Prolog waits on that
    # instance alone. 5.0 is free: the job starts, whatever runs in 1.0 and 2.0 of the same GPU.
    uuids = mig_instances(scripts)
    code, line = run_script(PROLOG, scripts, host="mig", **job_env("118", uuids["5.0"]))
    assert code == 0 and line["verdict"] == "ready" and line["drain"] is False, line
    (host,) = line["gputui"]["hosts"]
    assert host["mig"]["0:5.0"]["uuid"] == uuids["5.0"] and host["mig"]["0:5.0"]["ready"] is True
    # 1.0 still runs two processes: busy, as a whole GPU would be (the job starts, the line names
    # the instance), and the node drains where the site says so.
    code, line = run_script(PROLOG, scripts, host="mig", **job_env("119", uuids["1.0"]))
    assert code == 0 and line["verdict"] == "busy" and line["drain"] is False, line
    assert line["detail"] == f"busy MIG instance 0:1.0 ({uuids['1.0']}): processes"
    code, line = run_script(
        PROLOG, scripts, host="mig", GPUTUI_PROLOG_DRAIN_BUSY="1", **job_env("122", uuids["1.0"])
    )
    assert code == 1 and line["verdict"] == "busy" and line["drain"] is True, line
    # With a whole GPU of the node beside it, each said in its words.
    code, line = run_script(PROLOG, scripts, host="mig", **job_env("120", f"{uuids['2.0']},2"))
    assert code == 0 and line["verdict"] == "busy"
    assert line["detail"] == f"busy MIG instance 0:2.0 ({uuids['2.0']}): processes"
    code, line = run_script(PROLOG, scripts, host="mig", **job_env("121", f"{uuids['5.0']},1"))
    assert (
        code == 0
        and line["verdict"] == "busy"
        and line["detail"] == "busy GPU 1: processes memory utilization"
    )


def test_epilog_cleans_the_mig_instance_slurm_names_and_no_other(scripts: dict[str, Any]) -> None:
    # On a MIG node slurmd names a job's GPUs by their MIG instance UUIDs: the instance is cleaned
    # (the two processes in 1.0), the job in 2.0 of the same GPU is left alone, the node kept.
    uuid = mig_instances(scripts)["1.0"]
    code, line = run_script(EPILOG, scripts, host="mig", **job_env("206", uuid))
    assert code == 0 and line["verdict"] == "clean" and line["drain"] is False, line
    assert line["gpus_exit"] == 0
    (cleaned,) = line["gpus_clean"]["hosts"]
    assert cleaned["status"] == "clean" and cleaned["plan"]["mig"] == ["0:1.0"]
    commands = sorted(" ".join(t["command"]) for t in cleaned["plan"]["targets"])
    assert len(commands) == 2 and "train.py" in commands[1] and "notebook_kernel.py" in commands[0]
    records = [json.loads(x) for x in scripts["audit"].read_text().splitlines()]
    signalled = {r["pid"] for r in records if r["kind"] == "event" and r.get("signal")}
    assert signalled == {t["pid"] for t in cleaned["plan"]["targets"]}


def test_epilog_of_a_job_without_gpus_or_outside_slurm(scripts: dict[str, Any]) -> None:
    code, line = run_script(EPILOG, scripts, SLURM_JOB_ID="204")
    assert code == 0 and line["verdict"] == "no-gpus" and line["job_exit"] == 2
    code, line = run_script(EPILOG, scripts, SLURM_JOB_GPUS="0")
    assert code == 0 and line["verdict"] == "error" and line["job_exit"] is None
    code, line = run_script(EPILOG, scripts, GPUTUI_EPILOG_GPUS="0", **job_env("205", "1"))
    assert code == 0 and line["verdict"] == "clean" and line["gpus_exit"] is None


# -- the job's GPU list: only what Slurm writes ----------------------------------------------------

UUID = "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
MIG = "MIG-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"
# Slurm writes SLURM_JOB_GPUS as the job's gres indexes and CUDA_VISIBLE_DEVICES as their indexes
# or UUIDs (gres.conf UniqueId), each "%d" or the UUID joined by ",": nothing else is the job's.
BAD_LISTS = [
    "all",
    "",
    ",,,",
    ",",
    "0,all",
    "all,0",
    "0;1",
    "1 2",
    " 0",
    "0\t",
    "$(touch MARKER)",
    "`touch MARKER`",
    "0\n1",
    "-1",
    "0,,1",
    ",0",
    "0,",
    "99999999999999999999",
    "1000",
    "01",
    "0,0",
    "+1",
    "0x1",
    "2-3",
    "*",
    "[0-3]",
    "\u0663",  # an Arabic-Indic digit: a digit to Python, not to Slurm
    "NoDevFiles,0",
    "GPU-",
    "GPU-1b2c",  # a prefix of a UUID could name another job's GPU
    UUID + "0",
    "gpu-" + UUID[4:],  # NVML writes GPU-
    "MIG-GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901/1/0",
    "0,1,all",
    "gpu:0",
    "node-1:0",
]


def make_recorder(where: Path) -> Path:
    """A `gputui` that records each call's arguments (one file per call, NUL-separated) and answers
    as the real one does when all is well: `wait` ready, `clean --slurm-job` finds nothing of the
    job, `clean --gpu` clean."""
    calls = where / "calls"
    calls.mkdir()
    fake = where / "fake-gputui"
    fake.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\0' \"$@\" >{q(calls)}/call.$$\n"
        'case " $* " in\n'
        '    " wait "*) echo \'{"version": 1, "ready": true}\' ;;\n'
        '    *" --slurm-job "*) echo "gputui: no Slurm job here" >&2; exit 2 ;;\n'
        '    *) echo \'{"version": 2, "ok": true}\' ;;\n'
        "esac\n"
    )
    fake.chmod(0o755)
    return fake


def calls_of(setup: dict[str, Any]) -> list[list[str]]:
    files = sorted(setup["calls"].iterdir(), key=lambda p: p.stat().st_mtime_ns)
    return [p.read_bytes().decode().split("\0")[:-1] for p in files]


@pytest.fixture
def recorded(tmp_path: Path) -> dict[str, Any]:
    return {
        "gputui": make_recorder(tmp_path),
        "calls": tmp_path / "calls",
        "log": tmp_path / "log" / "slurm.jsonl",
        "audit": tmp_path / "log" / "actions.jsonl",
    }


# /bin/sh is dash on Debian and bash on the RPM distributions most Slurm sites run.
SHELLS = [sh for sh in ("/bin/dash", "/bin/bash") if os.access(sh, os.X_OK)]


def gpu_args(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--gpu"]


def gpu_envs(value: str) -> list[dict[str, str]]:
    """The ways a list reaches the scripts: as slurmd writes both variables, CUDA_VISIBLE_DEVICES
    alone, and behind an empty SLURM_JOB_GPUS (which must not fall through to it)."""
    return [
        {"SLURM_JOB_GPUS": value, "CUDA_VISIBLE_DEVICES": value},
        {"CUDA_VISIBLE_DEVICES": value},
        {"SLURM_STEP_GPUS": value, "CUDA_VISIBLE_DEVICES": "0"},
        {"SLURM_JOB_GPUS": "", "CUDA_VISIBLE_DEVICES": value or "0"},
    ]


@pytest.mark.parametrize("value", BAD_LISTS, ids=ascii)
def test_a_gpu_list_slurm_did_not_write_waits_on_nothing_and_drains(
    recorded: dict[str, Any], tmp_path: Path, value: str
) -> None:
    marker = tmp_path / "pwned"
    value = value.replace("MARKER", str(marker))
    for env, shell in itertools.product(gpu_envs(value), SHELLS):
        before = len(calls_of(recorded))
        code, line = run_script(PROLOG, recorded, shell=shell, SLURM_JOB_ID="301", **env)
        assert calls_of(recorded)[before:] == [], env  # no `gputui wait`: not on any GPU
        assert code == 1 and line["verdict"] == "error" and line["drain"] is True, (env, line)
        assert line["detail"].startswith("GPU list not understood") and "nothing waited" in line["detail"]
    assert not marker.exists()


@pytest.mark.parametrize("value", BAD_LISTS, ids=ascii)
def test_a_gpu_list_slurm_did_not_write_cleans_only_the_jobs_processes_and_drains(
    recorded: dict[str, Any], tmp_path: Path, value: str
) -> None:
    marker = tmp_path / "pwned"
    value = value.replace("MARKER", str(marker))
    for env, shell in itertools.product(gpu_envs(value), SHELLS):
        before = len(calls_of(recorded))
        code, line = run_script(EPILOG, recorded, shell=shell, SLURM_JOB_ID="302", **env)
        (call,) = calls_of(recorded)[before:]  # step 1 only, by the job's cgroup: never a GPU
        assert call[:3] == ["clean", "--slurm-job", "302"] and "--gpu" not in call, (env, call)
        assert code == 1 and line["verdict"] == "error" and line["drain"] is True, (env, line)
        assert line["detail"].startswith("GPU list not understood") and "not cleaned" in line["detail"]
        assert line["job_exit"] == 2 and line["gpus_exit"] is None
    assert not marker.exists()


LONG_ITEM = "x" * 500  # one bad item longer than the log keeps of a detail


@pytest.mark.parametrize("script", [PROLOG, EPILOG], ids=["prolog", "epilog"])
def test_a_long_bad_list_keeps_the_verdict_in_the_detail_and_marks_what_it_cut(
    recorded: dict[str, Any], script: Path
) -> None:
    """What was decided comes first and whole; the value that could not be read is shown bounded,
    with a mark where it is cut, so however long it is the line still says what was (not) done."""
    for value in (LONG_ITEM, "0," + LONG_ITEM, LONG_ITEM + ",0"):
        for env in (e for e in gpu_envs(value) if "" not in e.values()):  # an empty one is read first
            code, line = run_script(script, recorded, SLURM_JOB_ID="303", **env)
            detail = line["detail"]
            assert code == 1 and line["verdict"] == "error", line
            said = "nothing waited on" if script == PROLOG else "not cleaned nor proven clean"
            assert detail.startswith("GPU list not understood") and said in detail, detail
            assert "x" * 100 not in detail and "..." in detail, detail
            assert line["gpus"].endswith("..."), line["gpus"]


GOOD_LISTS = [
    ("0", ["0"]),
    ("0,1", ["0", "1"]),
    ("3,1", ["3", "1"]),
    ("10,999", ["10", "999"]),
    (UUID, [UUID]),
    (UUID.upper(), [UUID.upper()]),
    (f"{MIG},2", [MIG, "2"]),
]


@pytest.mark.parametrize(("value", "gpus"), GOOD_LISTS)
def test_the_lists_slurm_writes_reach_gputui_item_by_item(
    recorded: dict[str, Any], value: str, gpus: list[str]
) -> None:
    envs = ({"SLURM_JOB_GPUS": value, "CUDA_VISIBLE_DEVICES": value}, {"CUDA_VISIBLE_DEVICES": value})
    for env, shell in itertools.product(envs, SHELLS):
        before = len(calls_of(recorded))
        code, line = run_script(PROLOG, recorded, shell=shell, SLURM_JOB_ID="303", **env)
        (call,) = calls_of(recorded)[before:]
        assert code == 0 and line["verdict"] == "ready" and call[0] == "wait" and gpu_args(call) == gpus
        before = len(calls_of(recorded))
        code, line = run_script(EPILOG, recorded, shell=shell, SLURM_JOB_ID="304", **env)
        job, gpu = calls_of(recorded)[before:]
        assert job[:3] == ["clean", "--slurm-job", "304"] and gpu_args(job) == []
        assert gpu[0] == "clean" and gpu_args(gpu) == gpus and "--slurm-job" not in gpu
        assert code == 0 and line["verdict"] == "clean"


def test_slurm_job_gpus_wins_over_cuda_visible_devices(recorded: dict[str, Any]) -> None:
    # In a Prolog, CUDA_VISIBLE_DEVICES may hold UUIDs where SLURM_JOB_GPUS holds the indexes.
    code, line = run_script(
        PROLOG, recorded, SLURM_JOB_ID="305", SLURM_JOB_GPUS="1", CUDA_VISIBLE_DEVICES="all"
    )
    (call,) = calls_of(recorded)
    assert code == 0 and gpu_args(call) == ["1"] and line["gpus"] == "1"


def test_a_job_without_gpus_touches_none(recorded: dict[str, Any]) -> None:
    envs = ({}, {"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, {"SLURM_JOB_GPUS": "NoDevFiles"})
    for env, shell in itertools.product(envs, SHELLS):
        code, line = run_script(PROLOG, recorded, shell=shell, SLURM_JOB_ID="306", **env)
        assert code == 0 and line["verdict"] == "no-gpus"
        code, line = run_script(EPILOG, recorded, shell=shell, SLURM_JOB_ID="307", **env)
        assert code == 0 and line["verdict"] == "no-gpus"
    assert all("--gpu" not in call and call[0] != "wait" for call in calls_of(recorded))


def test_a_refused_list_is_logged_escaped(recorded: dict[str, Any]) -> None:
    for shell in SHELLS:
        code, line = run_script(
            PROLOG, recorded, shell=shell, SLURM_JOB_ID="308", SLURM_JOB_GPUS='0\n1\x1b"\\'
        )
        assert code == 1 and line["gpus"] == '0\\n1\\e"\\'  # not "01": the newline shown, not dropped
        assert 'SLURM_JOB_GPUS="0\\n1\\e"\\"' in line["detail"]
        code, line = run_script(
            EPILOG, recorded, shell=shell, SLURM_JOB_ID="308", SLURM_JOB_GPUS="\u0663\xe9"
        )
        assert code == 1 and line["gpus"] == "\\xd9\\xa3\\xc3\\xa9"  # ASCII only: bytes beyond as \\xNN


def test_the_epilog_leaves_an_unused_list_alone_and_checks_its_switch(recorded: dict[str, Any]) -> None:
    code, line = run_script(EPILOG, recorded, GPUTUI_EPILOG_GPUS="0", **job_env("309", "all"))
    assert code == 0 and line["verdict"] == "clean"  # the site said: leave the GPUs to their jobs
    code, line = run_script(EPILOG, recorded, GPUTUI_EPILOG_GPUS="no", **job_env("310", "0"))
    assert code == 1 and line["verdict"] == "error" and "GPUTUI_EPILOG_GPUS" in line["detail"]
    assert all("--gpu" not in call for call in calls_of(recorded))


# -- under a real slurmctld and slurmd --------------------------------------------------------------

DAEMONS = ("munged", "slurmctld", "slurmd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Slurm:
    """A one-node cluster of this machine in `root`: munged, slurmctld and slurmd, children of the
    test, stopped by their PIDs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.node = socket.gethostname().split(".")[0]
        self.procs: list[subprocess.Popen[bytes]] = []
        self.jobs: set[str] = set()
        self.running = False
        self.log = root / "log" / "slurm.jsonl"
        root.chmod(0o700)
        for name in ("munge", "state", "spool", "dev", "log", "bin"):
            (root / name).mkdir()
        for i in range(4):
            (root / "dev" / f"nvidia{i}").symlink_to("/dev/null")  # a character device, as gres needs
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        gputui = make_gputui(root / "bin")
        self.env = dict(os.environ, SLURM_CONF=str(root / "slurm.conf"))
        for kind, script, skip in (("prolog", PROLOG, "hold|epi"), ("epilog", EPILOG, "hold")):
            wrapper = root / f"{kind}.sh"
            wrapper.write_text(
                "#!/bin/sh\n"
                f'case "${{SLURM_JOB_PARTITION:-}}" in {skip}) exit 0 ;; esac\n'
                f"GPUTUI={q(gputui)} GPUTUI_SLURM_LOG={q(self.log)} GPUTUI_AUDIT_LOG={q(root / 'log' / 'actions.jsonl')}\n"
                "GPUTUI_PROLOG_TIMEOUT=30\n"  # a busy machine starts the sims slowly
                "export GPUTUI GPUTUI_SLURM_LOG GPUTUI_AUDIT_LOG GPUTUI_PROLOG_TIMEOUT\n"
                f"exec {q(script)}\n"
            )
            wrapper.chmod(0o755)
        sock = root / "munge" / "socket"
        ctld, slurmd = free_port(), free_port()
        (root / "slurm.conf").write_text(
            f"""ClusterName=gputuitest
SlurmctldHost={self.node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmctldPort={ctld}
SlurmdPort={slurmd}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
GresTypes=gpu
Prolog={root}/prolog.sh
PrologFlags=Alloc
Epilog={root}/epilog.sh
NodeName={self.node} NodeAddr=127.0.0.1 CPUs=4 Gres=gpu:4 State=UNKNOWN
PartitionName=pre Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
PartitionName=busy Nodes={self.node} MaxTime=INFINITE State=UP
PartitionName=hold Nodes={self.node} MaxTime=INFINITE State=UP
PartitionName=epi Nodes={self.node} MaxTime=INFINITE State=UP
"""
        )
        (root / "gres.conf").write_text(f"NodeName={self.node} Name=gpu File={root}/dev/nvidia[0-3]\n")
        self.sock, self.key = sock, key

    def up(self) -> None:
        root, sock, key = self.root, self.sock, self.key
        m = root / "munge"
        self.start(
            "munged", "-F", "-f", f"--socket={sock}", f"--key-file={key}", f"--log-file={m}/log",
            f"--pid-file={m}/pid", f"--seed-file={m}/seed",
        )  # fmt: skip
        self.wait(lambda: sock.exists(), "munged's socket")
        self.start("slurmctld", "-D", "-f", str(root / "slurm.conf"))
        self.wait(lambda: self.sinfo() != "", "slurmctld")
        self.start("slurmd", "-D", "-f", str(root / "slurm.conf"), "-N", self.node)
        self.wait(lambda: self.sinfo() == "idle", "the node idle")
        self.running = True

    def start(self, *argv: str) -> None:
        out = open(self.root / "log" / f"{argv[0]}.out", "wb")  # noqa: SIM115 (kept for the reason)
        program = shutil.which(argv[0]) or f"/usr/sbin/{argv[0]}"  # sbin may be off the PATH
        self.procs.append(
            subprocess.Popen([program, *argv[1:]], stdout=out, stderr=subprocess.STDOUT, env=self.env)
        )

    def wait(self, condition: Any, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(
                        f"{Path(str(p.args[0])).name} exited ({p.returncode}): {self.tail(Path(str(p.args[0])).name)}"
                    )
            if time.monotonic() > deadline:
                raise RuntimeError(f"waited {timeout:g} s for {what}: {self.tail('slurmd')}")
            time.sleep(0.2)

    def tail(self, name: str) -> str:
        path = self.root / "log" / f"{name}.out"
        return " | ".join(path.read_text(errors="replace").splitlines()[-4:]) if path.exists() else ""

    def slurm(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def sinfo(self) -> str:
        """The node's state ("idle", "mixed", "drained"...; one line per partition, said once)."""
        r = self.slurm("sinfo", "-h", "-N", "-o", "%T", timeout=30)
        return " ".join(sorted(set(r.stdout.split()))) if r.returncode == 0 else ""

    def node_state(self) -> str:
        r = self.slurm("scontrol", "show", "node", self.node, timeout=30)
        for word in r.stdout.split():
            if word.startswith("State="):
                return word[len("State=") :]
        return ""

    def sbatch(self, partition: str, gpus: int, command: str) -> str:
        r = self.slurm(
            "sbatch",
            "--parsable",
            "-p",
            partition,
            f"--gres=gpu:{gpus}",
            "-o",
            "/dev/null",
            "--wrap",
            command,
        )
        assert r.returncode == 0, r.stderr
        job = r.stdout.strip().split(";")[0]
        self.jobs.add(job)
        return job

    def job_state(self, job: str) -> str:
        r = self.slurm("squeue", "-h", "-j", job, "-o", "%T", timeout=30)
        return r.stdout.strip()

    def logged(self, job: str, script: str) -> dict[str, Any] | None:
        found = [x for x in lines(self.log) if x["slurm_job"] == job and x["script"] == script]
        return found[-1] if found else None

    def settle(self) -> None:
        """Every job cancelled and gone, the node back in service."""
        for job in self.jobs:
            self.slurm("scancel", job, timeout=30)
        self.wait(lambda: self.slurm("squeue", "-h", timeout=30).stdout.strip() == "", "every job gone", 120)
        self.slurm("scontrol", "update", f"NodeName={self.node}", "State=RESUME", timeout=30)
        self.wait(lambda: self.sinfo() == "idle", "the node idle", 120)

    def stop(self) -> None:
        if self.running:
            try:
                self.settle()
            except (RuntimeError, subprocess.SubprocessError):
                pass
        for p in reversed(self.procs):  # slurmd, slurmctld, munged: each by its PID
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()]
    if missing or shutil.which("srun") is None:
        pytest.skip(
            f"Slurm is not installed here ({', '.join(missing) or 'srun'} missing; .ci/run installs slurm-wlm and munge)"
        )
    if os.geteuid() != 0:
        pytest.skip("slurmd runs jobs as their users: the test cluster needs root")
    cluster = Slurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.up()
    except RuntimeError as exc:
        cluster.stop()
        pytest.skip(
            f"slurmctld and slurmd do not run here ({exc}): the scripts are tested with Slurm's variables only"
        )
    try:
        yield cluster
    finally:
        cluster.stop()


def test_under_slurm_a_job_on_a_ready_gpu_runs_and_its_gpu_is_proved_clean(slurm: Slurm) -> None:
    r = slurm.slurm("srun", "-p", "pre", "--gres=gpu:1", "sh", "-c", "echo $SLURM_JOB_ID")
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()
    slurm.jobs.add(job)
    prolog = slurm.logged(job, "prolog")
    assert prolog is not None and prolog["verdict"] == "ready" and prolog["gpus"] == "0"
    assert prolog["node"] == slurm.node and prolog["exit"] == 0
    slurm.wait(lambda: slurm.logged(job, "epilog") is not None, "the epilog's line")
    epilog = slurm.logged(job, "epilog")
    assert epilog is not None and epilog["verdict"] == "clean" and epilog["gpus_clean"]["ok"] is True
    assert "DRAIN" not in slurm.node_state()


def test_under_slurm_a_busy_gpu_starts_the_job_and_the_epilog_frees_it(slurm: Slurm) -> None:
    r = slurm.slurm("srun", "-p", "busy", "--gres=gpu:1", "sh", "-c", "echo $SLURM_JOB_ID")
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()
    slurm.jobs.add(job)
    prolog = slurm.logged(job, "prolog")
    assert prolog is not None and prolog["verdict"] == "busy" and prolog["exit"] == 0
    slurm.wait(lambda: slurm.logged(job, "epilog") is not None, "the epilog's line")
    epilog = slurm.logged(job, "epilog")
    assert epilog is not None and epilog["verdict"] == "clean" and epilog["exit"] == 0
    assert "DRAIN" not in slurm.node_state()


def test_under_slurm_the_prolog_drains_the_node_for_orphaned_memory(slurm: Slurm) -> None:
    blocker = slurm.sbatch("hold", 1, "sleep 600")  # GPU 0: the next job gets GPU 1
    slurm.wait(lambda: slurm.job_state(blocker) == "RUNNING", "the blocker running")
    job = slurm.sbatch("pre", 1, "true")
    slurm.wait(lambda: slurm.logged(job, "prolog") is not None, "the prolog's line", 120)
    prolog = slurm.logged(job, "prolog")
    assert prolog is not None and prolog["gpus"] == "1" and prolog["verdict"] == "unusable"
    assert prolog["exit"] == 1 and "unaccounted" in prolog["detail"]
    slurm.wait(lambda: "DRAIN" in slurm.node_state(), "the node drained", 120)
    slurm.settle()


def test_under_slurm_the_epilog_drains_the_node_when_a_gpu_is_not_clean(slurm: Slurm) -> None:
    blocker = slurm.sbatch("hold", 1, "sleep 600")
    slurm.wait(lambda: slurm.job_state(blocker) == "RUNNING", "the blocker running")
    job = slurm.sbatch("epi", 1, "true")  # (the test's Prolog wrapper skips partition epi)
    slurm.wait(lambda: slurm.logged(job, "epilog") is not None, "the epilog's line", 120)
    epilog = slurm.logged(job, "epilog")
    assert epilog is not None and epilog["gpus"] == "1" and epilog["verdict"] == "not-clean"
    assert epilog["exit"] == 1 and epilog["gpus_clean"]["ok"] is False
    slurm.wait(lambda: "DRAIN" in slurm.node_state(), "the node drained", 120)
    slurm.settle()


def test_under_slurm_the_lists_slurmd_writes_are_the_ones_accepted(slurm: Slurm) -> None:
    # Two GPUs are "0,1"; a job without GPUs gets no variable at all (not an empty one, which the
    # scripts refuse).
    for gres, gpus, verdict in (["--gres=gpu:2"], "0,1", "busy"), ([], "", "no-gpus"):
        r = slurm.slurm("srun", "-p", "busy", *gres, "sh", "-c", "echo $SLURM_JOB_ID")
        assert r.returncode == 0, r.stderr
        job = r.stdout.strip()
        slurm.jobs.add(job)
        prolog = slurm.logged(job, "prolog")
        assert prolog is not None and prolog["gpus"] == gpus and prolog["verdict"] == verdict, prolog
        slurm.wait(lambda: slurm.logged(job, "epilog") is not None, "the epilog's line")  # noqa: B023
        epilog = slurm.logged(job, "epilog")
        assert epilog is not None and epilog["gpus"] == gpus and epilog["exit"] == 0, epilog
    assert "DRAIN" not in slurm.node_state()
