"""Real OpenSSH servers on 127.0.0.1 for the SSH transport tests.

`SshServer(tmp_path, "name")` generates an ed25519 host key and a user key, writes an sshd_config on a
free high port, and runs `/usr/sbin/sshd -D -e` as a child. `SshEnv` holds several of them with one
known_hosts file and one ssh config (a `Host` alias per server, optional ProxyJump) for the client.
Nothing touches ~/.ssh. `stop()` kills by PID and reaps; `start()` again reuses the port and keys.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
PRIVSEP_DIR = Path("/run/sshd")  # sshd refuses to start without its privilege separation dir


def have_sshd() -> bool:
    return os.access(SSHD, os.X_OK) and os.access(SSH_KEYGEN, os.X_OK)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def keygen(path: Path, comment: str, passphrase: str = "") -> Path:
    """An ed25519 key pair at path and path.pub."""
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", passphrase, "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path


def _descendants(pid: int) -> list[int]:
    """PIDs below pid, from /proc (sshd's session processes are not our children to reap)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        kids = [child for child, ppid in parents.items() if ppid == parent]
        found += kids
        frontier += kids
    return found


class SshServer:
    """One sshd on 127.0.0.1 that accepts the user key of its directory for the current user."""

    def __init__(
        self, base: Path, name: str = "sshd", port: int | None = None, extra_config: tuple[str, ...] = ()
    ) -> None:
        self.name = name
        self.dir = base / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.user = getpass.getuser()
        self.host_key = keygen(self.dir / "host_ed25519", f"{name}-host")
        self.user_key = keygen(self.dir / "user_ed25519", f"{name}-user")
        self.authorized_keys = self.dir / "authorized_keys"
        self.authorized_keys.write_text(self.user_key.with_suffix(".pub").read_text())
        self.config = self.dir / "sshd_config"
        self.log = self.dir / "sshd.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.extra_config = extra_config  # more sshd_config lines, e.g. "SetEnv PATH=..."
        self._write_config()

    def _write_config(self) -> None:
        self.config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {self.authorized_keys}",
                    f"PidFile {self.dir / 'sshd.pid'}",
                    "StrictModes no",
                    "UsePAM no",
                    "PermitRootLogin yes",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "AllowTcpForwarding yes",  # a jump host forwards to the next one
                    "LogLevel ERROR",
                    *self.extra_config,
                    "",
                ]
            )
        )

    # ----------------------------------------------------------------- what a client needs

    @property
    def host_public_key(self) -> str:
        """The host key as `type base64` (no comment)."""
        kind, data = self.host_key.with_suffix(".pub").read_text().split()[:2]
        return f"{kind} {data}"

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_public_key}\n"

    def config_block(self, alias: str | None = None, proxy_jump: str | None = None) -> str:
        lines = [
            f"Host {alias or self.name}",
            "    HostName 127.0.0.1",
            f"    Port {self.port}",
            f"    User {self.user}",
            f"    IdentityFile {self.user_key}",
            "    IdentitiesOnly yes",
        ]
        if proxy_jump:
            lines.append(f"    ProxyJump {proxy_jump}")
        return "\n".join(lines) + "\n\n"

    # ----------------------------------------------------------------- lifecycle

    def start(self, timeout: float = 10.0) -> SshServer:
        if self.process is not None and self.process.poll() is None:
            return self
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        self._wait_listening(timeout)
        return self

    def _wait_listening(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd {self.name} exited ({self.process.returncode}): {self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"sshd {self.name} is not listening on {self.port}: {self.log_text()}")

    def stop(self, sessions: bool = True) -> None:
        """SIGKILL the listener by PID and reap it; with `sessions`, also SIGKILL the per-connection
        sshd processes it forked (as when the host goes down), so open links break."""
        if self.process is None:
            return
        children = _descendants(self.process.pid) if sessions else []
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process = None
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    kill = stop

    def session_pids(self) -> list[int]:
        """The per-connection sshd processes (and what they run) under the listener."""
        return _descendants(self.process.pid) if self.process is not None else []

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def __enter__(self) -> SshServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SshEnv:
    """Servers plus the client side: a known_hosts file and an ssh config with an alias per server."""

    def __init__(self, base: Path) -> None:
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.servers: dict[str, SshServer] = {}
        self.known_hosts = base / "known_hosts"
        self.ssh_config = base / "ssh_config"
        self.known_hosts.write_text("")
        self.ssh_config.write_text("")

    def add(
        self,
        name: str,
        proxy_jump: str | None = None,
        trusted: bool = True,
        extra_config: tuple[str, ...] = (),
    ) -> SshServer:
        server = SshServer(self.base, name, extra_config=extra_config).start()
        self.servers[name] = server
        if trusted:
            with open(self.known_hosts, "a") as out:
                out.write(server.known_hosts_line())
        with open(self.ssh_config, "a") as out:
            out.write(server.config_block(name, proxy_jump))
        return server

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()
