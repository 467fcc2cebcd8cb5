"""A real Slurm controller for the @slurm sources' tests: munged and slurmctld as children, in a
temporary directory, on free ports; no slurmd (nodes are defined, never started).

`SlurmCluster(base).start()` writes a munge key and a slurm.conf with partitions `gpu` (gpu[001-004]),
`login` (login1, login2; NodeAddr differs from the name) and `cloud` (cn[01-04], State=CLOUD with
`/bin/true` as Resume/SuspendProgram: slurmctld allocates them to a job and waits for them to boot,
so a job there is real and has a node list without any slurmd). `env()` is the environment for
scontrol, sinfo, squeue and sbatch (SLURM_CONF). `stop()` ends both daemons by PID and reaps them.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.support.sshd import free_port

SLURMCTLD = shutil.which("slurmctld") or "/usr/sbin/slurmctld"
MUNGED = shutil.which("munged") or "/usr/sbin/munged"


def have_slurm() -> bool:
    tools = ("scontrol", "sinfo", "squeue", "sbatch")
    return os.access(SLURMCTLD, os.X_OK) and os.access(MUNGED, os.X_OK) and all(map(shutil.which, tools))


class SlurmCluster:
    def __init__(self, base: Path) -> None:
        self.dir = base
        self.munge_dir = base / "munge"
        self.munge_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.socket = self.munge_dir / "munge.socket"
        self.state = base / "state"
        self.state.mkdir(mode=0o700, exist_ok=True)
        self.conf = base / "slurm.conf"
        self.port = free_port()
        self.munged: subprocess.Popen[bytes] | None = None
        self.slurmctld: subprocess.Popen[bytes] | None = None

    def _write(self) -> None:
        key = self.munge_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        host = socket.gethostname().split(".")[0]
        user = getpass.getuser()
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=gputuitest",
                    f"SlurmctldHost={host}(127.0.0.1)",
                    f"SlurmctldPort={self.port}",
                    f"SlurmdPort={free_port()}",
                    f"SlurmUser={user}",
                    f"SlurmdUser={user}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={self.socket}",
                    f"StateSaveLocation={self.state}",
                    f"SlurmdSpoolDir={self.dir / 'spool'}",
                    f"SlurmctldPidFile={self.dir / 'slurmctld.pid'}",
                    f"SlurmctldLogFile={self.dir / 'slurmctld.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SchedulerType=sched/builtin",
                    "SelectType=select/linear",
                    "MpiDefault=none",
                    "JobCompType=jobcomp/none",
                    "AccountingStorageType=accounting/storage/none",
                    "SlurmdTimeout=0",
                    "ReturnToService=2",
                    "SuspendProgram=/bin/true",
                    "ResumeProgram=/bin/true",
                    "SuspendTime=3600",
                    "ResumeTimeout=3600",
                    "NodeName=gpu[001-004] NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
                    "NodeName=login[1-2] NodeAddr=127.0.0.2 CPUs=1 State=UNKNOWN",
                    "NodeName=cn[01-04] CPUs=1 State=CLOUD",
                    "PartitionName=gpu Nodes=gpu[001-004] Default=YES State=UP",
                    "PartitionName=login Nodes=login[1-2] State=UP",
                    "PartitionName=cloud Nodes=cn[01-04] State=UP",
                    "PartitionName=everything Nodes=ALL State=UP",
                    "PartitionName=empty State=UP",
                    "",
                ]
            )
        )

    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def start(self, timeout: float = 30.0) -> SlurmCluster:
        self._write()
        with open(self.munge_dir / "munged.out", "ab") as log:
            self.munged = subprocess.Popen(
                [
                    MUNGED,
                    "--foreground",
                    "--force",  # a key and socket in a temporary directory, not /etc and /run
                    f"--socket={self.socket}",
                    f"--key-file={self.munge_dir / 'munge.key'}",
                    f"--pid-file={self.munge_dir / 'munged.pid'}",
                    f"--log-file={self.munge_dir / 'munged.log'}",
                    f"--seed-file={self.munge_dir / 'munged.seed'}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + timeout
        while not self.socket.exists():
            if self.munged.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"munged did not start: {self._tail(self.munge_dir / 'munged.out')}")
            time.sleep(0.05)
        with open(self.dir / "slurmctld.out", "ab") as log:
            self.slurmctld = subprocess.Popen(
                [SLURMCTLD, "-D", "-f", str(self.conf)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.env(),
            )
        while True:
            ping = subprocess.run(
                ["scontrol", "ping"], env=self.env(), capture_output=True, stdin=subprocess.DEVNULL
            )
            if b"UP" in ping.stdout:
                return self
            if self.slurmctld.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"slurmctld did not start: {self._tail(self.dir / 'slurmctld.out')}")
            time.sleep(0.2)

    def submit(self, *args: str) -> str:
        """sbatch with these arguments (a job that runs `true`); its job id."""
        done = subprocess.run(
            ["sbatch", "--parsable", *args, "--wrap", "true"],
            env=self.env(),
            capture_output=True,
            check=True,
            stdin=subprocess.DEVNULL,
            cwd=self.dir,
        )
        return done.stdout.decode().strip().split(";")[0]

    def stop_controller(self) -> None:
        _end(self.slurmctld)
        self.slurmctld = None

    def stop(self) -> None:
        self.stop_controller()
        _end(self.munged)
        self.munged = None

    @staticmethod
    def _tail(path: Path) -> str:
        try:
            return path.read_text(errors="replace")[-1500:]
        except OSError:
            return ""


def _end(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL after 10 s; reaped either way (by its PID: our own child)."""
    if process is None or process.poll() is not None:
        if process is not None:
            process.wait()
        return
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
