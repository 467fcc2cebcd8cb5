"""Several "hosts" behind real loopback sshd servers, for fleet, UI and CLI tests over SSH.

`SshCluster(base, {"sshd-1": ["gpu-a", "gpu-b"], "sshd-2": ["gpu-c"]})` starts one sshd per key (with
`sshd_config` lines added to each, e.g. a MaxStartups) and
gives each alias its own `Host` block (so each host is its own SSH connection and its own remote
probe). Every server sets `TMPDIR` for its sessions to a private directory, which makes what the
remote probes start easy to find and check afterwards: the sims make their `gputui-sim-*`
directories there, and every remote process has that path in its environment or its command line.

For the CLI (which only knows ~/.ssh), `home` is a directory with `.ssh/config`, `.ssh/known_hosts`
and the aliases; run `gputui` with `HOME` set to it (`cli_env()`).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from gputui.config.file import HostSpec
from gputui.transport.ssh import SshLink
from tests.support.paths import REPO
from tests.support.sshd import SshEnv, SshServer, have_sshd

SSHD_NAMES = ("sshd", "sshd-session")  # per-connection processes: OpenSSH < 9.8, >= 9.8


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def processes_marked(marker: str) -> list[int]:
    """PIDs whose environment or command line contains `marker` (a directory path)."""
    needle = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        if needle in _read(f"/proc/{entry}/environ") or needle in _read(f"/proc/{entry}/cmdline"):
            found.append(int(entry))
    return found


def comm(pid: int) -> str:
    return _read(f"/proc/{pid}/comm").decode(errors="replace").strip()


def sshd_pids(server: SshServer) -> list[int]:
    """The listener and its per-connection sshd processes (not the commands they run)."""
    if server.process is None:
        return []
    return [server.process.pid] + [p for p in server.session_pids() if comm(p) in SSHD_NAMES]


def freeze(server: SshServer) -> list[int]:
    """SIGSTOP the server's sshd processes: the host hangs (no FIN, no RST, no data)."""
    pids = sshd_pids(server)
    for pid in pids:
        _signal(pid, signal.SIGSTOP)
    return pids


def kill_sshd(server: SshServer) -> None:
    """SIGKILL the listener and its per-connection sshd processes, by PID, and reap the listener.

    Unlike `SshServer.stop()`, the commands the sessions run (the probes) are not killed: as when
    only sshd dies on a host, each probe sees its channel end and exits by itself, cleaning up."""
    pids = sshd_pids(server)
    for pid in pids:
        _signal(pid, signal.SIGKILL)
    if server.process is not None:
        server.process.wait()
        server.process = None


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _sshd_lines(remote_tmp: Path, extra: tuple[str, ...]) -> tuple[str, ...]:
    """The servers' own lines, then `extra`; sshd takes only its first SetEnv line, so every
    variable is set on one."""
    setenv = [f"TMPDIR={remote_tmp}"]
    setenv += [word for line in extra if line.startswith("SetEnv ") for word in line.split()[1:]]
    return (f"SetEnv {' '.join(setenv)}", *(line for line in extra if not line.startswith("SetEnv ")))


# Sessions skip the user's ~/.bashrc (bash reads it under sshd only below SHLVL 2): a test machine's
# rc file may do slow or locking work per shell (pyenv's `rehash` takes a lock that a session killed
# at the end of a test leaves behind, and then every shell waits on it for a minute).
NO_BASHRC = "SetEnv SHLVL=5"


class SshCluster:
    def __init__(
        self, base: Path, layout: Mapping[str, Iterable[str]], sshd_config: tuple[str, ...] = ()
    ) -> None:
        self.base = base
        self.remote_tmp = base / "remote-tmp"
        self.remote_tmp.mkdir(parents=True)
        self.env = SshEnv(base / "ssh")
        self.server_of: dict[str, SshServer] = {}
        self.links: list[SshLink] = []
        for server_name, aliases in layout.items():
            server = self.env.add(server_name, extra_config=_sshd_lines(self.remote_tmp, sshd_config))
            for alias in aliases:
                with open(self.env.ssh_config, "a") as out:
                    out.write(server.config_block(alias))
                self.server_of[alias] = server
        self.home = base / "home"
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / ".ssh" / "config").write_text(self.env.ssh_config.read_text())
        (self.home / ".ssh" / "known_hosts").write_text(self.env.known_hosts.read_text())

    # ----------------------------------------------------------------- clients

    def link(self, spec: HostSpec, interval: float, **options: object) -> SshLink:
        options.setdefault("connect_timeout", 5.0)
        link = SshLink(
            spec,
            known_hosts=self.env.known_hosts,
            ssh_config=self.env.ssh_config,
            agent_path=None,
            interval=interval,
            **options,  # type: ignore[arg-type]
        )
        self.links.append(link)
        return link

    def cli_env(self) -> dict[str, str]:
        """The environment for `python -m gputui ...`: HOME with .ssh, no agent, this checkout."""
        env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "GPUTUI_CONFIG")}
        env["HOME"] = str(self.home)
        env["XDG_STATE_HOME"] = str(self.home / ".local" / "state")
        env["XDG_CONFIG_HOME"] = str(self.home / ".config")
        root = str(REPO)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        return env

    def write_config(self, hosts: Iterable[Mapping[str, object]], name: str = "gputui.toml") -> Path:
        """A gputui TOML config with one [[hosts]] table per mapping."""
        lines = []
        for host in hosts:
            lines.append("[[hosts]]")
            for key, value in host.items():
                if isinstance(value, bool):
                    text = "true" if value else "false"
                elif isinstance(value, int):
                    text = str(value)
                else:
                    text = '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
                lines.append(f"{key} = {text}")
            lines.append("")
        path = self.base / name
        path.write_text("\n".join(lines))
        return path

    # ----------------------------------------------------------------- checks and cleanup

    def remote_processes(self) -> list[int]:
        """Everything the remote sessions started that still runs (probes, sims, sim jobs)."""
        return processes_marked(str(self.remote_tmp))

    def sim_dirs(self) -> list[str]:
        return sorted(p.name for p in self.remote_tmp.glob("gputui-sim-*"))

    def wait_remote_gone(self, timeout: float = 15.0) -> tuple[list[int], list[str]]:
        """Until every remote process has ended and every sim directory is gone; what is left."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left, dirs = self.remote_processes(), self.sim_dirs()
            if not left and not dirs:
                return [], []
            time.sleep(0.05)
        return self.remote_processes(), self.sim_dirs()

    def close(self) -> tuple[list[int], list[str]]:
        """Wait for the probes to end by themselves, then stop the servers (by PID), then SIGKILL
        (by PID) whatever a broken test left behind. Returns what had to be killed and the sim
        directories that were left (both empty when every probe cleaned up after itself)."""
        left, dirs = self.wait_remote_gone()
        for server in self.env.servers.values():
            if server.process is None:
                continue
            for pid in sshd_pids(server):
                _signal(pid, signal.SIGCONT)  # a frozen server, so that it can die
        self.env.close()
        for pid in self.remote_processes():
            _signal(pid, signal.SIGKILL)
        return left, dirs


def running_cluster(
    base: Path, layout: Mapping[str, Iterable[str]], sshd_config: tuple[str, ...] = ()
) -> Iterator[SshCluster]:
    """The body of a pytest fixture: the cluster for one test, then proof that it left nothing behind
    (every remote probe and sim gone). Skips where OpenSSH's sshd is missing."""
    import pytest

    if not have_sshd():
        pytest.skip("OpenSSH sshd is not installed (.ci/run installs it)")
    cluster = SshCluster(base, layout, sshd_config)
    try:
        yield cluster
    finally:
        left, dirs = cluster.close()
    assert not left, f"remote processes still running after the test (killed now): {left}"
    assert not dirs, f"sim directories left behind: {dirs}"
