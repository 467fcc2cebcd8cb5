"""The SSH transport: one asyncssh connection and one session channel per host, agentless.

The channel runs `[sudo -n] [wrap...] python3 -c STAGE1 gputui-probe` (one short line); the bootstrap (the probe
and, for hosts without one, pynvml) goes down that channel's stdin, then protocol lines both ways.

Host keys are always checked against known_hosts (checking cannot be switched off); an unknown or changed key
is refused with its fingerprint and what to run. Nothing prompts: no password or keyboard-interactive
auth, encrypted keys without an agent are reported as passphrase-needed. ProxyJump (from the host
spec or ~/.ssh/config) is connected here, hop by hop, with the same host key checks and keys:
asyncssh's own ProxyJump handling would use its defaults for the jump hosts.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shlex
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from gputui.config.file import ConfigError, HostSpec, parse_host_arg
from gputui.transport.base import TransportError
from gputui.transport.bootstrap import (
    Pipes,
    ProbeLink,
    boot_argv,
    build_payload,
    shell_command,
)
from gputui.transport.dial import Report, dialer
from gputui.transport.headstart import probe_argv
from gputui.transport.quiet import quiet_asyncssh_warnings

quiet_asyncssh_warnings()  # before asyncssh is imported: its modules warn as they load

import asyncssh  # noqa: E402
from asyncssh.config import SSHClientConfig  # noqa: E402

DEFAULT_CONFIG = Path("~/.ssh/config")
DEFAULT_KNOWN_HOSTS = (Path("~/.ssh/known_hosts"), Path("/etc/ssh/ssh_known_hosts"))
DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa", "id_ed25519_sk", "id_ecdsa_sk", "id_dsa")
MAX_JUMPS = 8  # hops, counting nested ProxyJump entries; more is a loop in the config


class _HostKeyCatcher(asyncssh.SSHClient):
    """Remembers the host key asyncssh could not verify (for the fingerprint); always refuses it."""

    def __init__(self) -> None:
        self.offered: tuple[str, str, int, asyncssh.SSHKey] | None = None

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        self.offered = (host, addr, port, key)
        return False


class _ChannelPipes(Pipes):
    def __init__(self, process: asyncssh.SSHClientProcess[bytes]) -> None:
        self.process = process
        self.lost: BaseException | None = None  # why the connection ended, if it broke

    async def read(self, size: int) -> bytes:
        return await self._guard(self.process.stdout.read(size))

    async def read_err(self, size: int) -> bytes:
        return await self._guard(self.process.stderr.read(size))

    async def _guard(self, reading: Any) -> bytes:
        try:
            return bytes(await reading)
        except (asyncssh.Error, OSError) as exc:
            self.lost = self.lost or exc
            return b""

    async def write(self, data: bytes) -> None:
        try:
            self.process.stdin.write(data)
            await self.process.stdin.drain()
        except (asyncssh.Error, OSError) as exc:
            raise TransportError("closed", f"the channel is closed ({exc})") from None

    def write_eof(self) -> None:
        try:
            self.process.stdin.write_eof()
        except (asyncssh.Error, OSError):
            pass

    async def wait(self, timeout: float) -> int | None:
        try:
            await asyncio.wait_for(asyncio.shield(self.process.wait_closed()), timeout)
        except asyncio.TimeoutError:
            return None
        return self.process.exit_status

    def abort(self) -> None:
        try:
            self.process.send_signal("KILL")  # servers without signal requests ignore it
        except (asyncssh.Error, OSError):
            pass
        # Closing the channel ends the probe anyway: its stdin reaches EOF, its stdout breaks.
        self.process.close()


class SshLink(ProbeLink):
    """A probe on a host reached over SSH.

    known_hosts: a path or list of paths (default: the ssh config's UserKnownHostsFile, else
    ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts); ssh_config: a path (default ~/.ssh/config);
    client_keys: key paths (default: the config's IdentityFile, else ~/.ssh/id_*) besides the agent;
    agent_path: () for $SSH_AUTH_SOCK, None for no agent."""

    def __init__(
        self,
        spec: HostSpec,
        *,
        known_hosts: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        ssh_config: str | os.PathLike[str] | None = None,
        client_keys: Sequence[str | os.PathLike[str]] | None = None,
        agent_path: Any = (),
        connect_timeout: float = 10.0,
        keepalive_interval: float = 5.0,
        keepalive_count_max: int = 3,
        interval: float | None = None,
        with_pynvml: bool = True,
        payload: bytes | None = None,
        hello_timeout: float = 30.0,
        close_timeout: float = 2.0,
    ) -> None:
        self.spec = spec
        self.label = spec.name
        self.python = spec.python or "python3"
        if payload is None:
            payload = build_payload(probe_argv(spec, interval), with_pynvml=with_pynvml)
        super().__init__(payload, hello_timeout, close_timeout)
        self._known_hosts_arg = known_hosts
        self._config_paths = _config_paths(ssh_config)
        self._client_keys = [str(Path(k).expanduser()) for k in client_keys] if client_keys else None
        self._agent_path = agent_path
        self.connect_timeout = connect_timeout
        self.keepalive_interval = keepalive_interval
        self.keepalive_count_max = keepalive_count_max
        self.route: list[str] = []  # the hops connected, jump hosts first, e.g. ["bastion", "gpu-a"]
        self._conns: list[asyncssh.SSHClientConnection] = []
        self._channel: _ChannelPipes | None = None
        self._report: Report | None = None

    def watch_phase(self, report: Report) -> None:
        """Call `report(phase, detail)` as each handshake is queued, connecting or backing off
        (gputui/transport/dial.py): the fleet shows it while the host is not live."""
        self._report = report

    # ----------------------------------------------------------------- connecting

    async def _start(self) -> Pipes:
        conn = await self._connect(self.spec.address, self.spec.port, self.spec.user, self.spec.jump, 0)
        argv = boot_argv(self.python, sudo=self.spec.sudo, wrap=self.spec.wrap_argv())
        try:
            process = await conn.create_process(shell_command(argv), encoding=None)
        except (asyncssh.Error, OSError) as exc:
            message = f"{self.label}: cannot open a session channel: {_why(exc)}"
            raise TransportError("unreachable", message) from None
        self._channel = _ChannelPipes(process)
        return self._channel

    async def _connect(
        self, host: str, port: int | None, user: str | None, jump: str | None, depth: int
    ) -> asyncssh.SSHClientConnection:
        """One hop, after the jump hosts in front of it (explicit, else ProxyJump from the config)."""
        config = self._host_config(host, user, port)
        hops = jump if jump is not None else config.get("ProxyJump")
        tunnel = None
        if isinstance(hops, str) and hops.strip() and hops.strip().lower() != "none":
            tunnel = await self._connect_jumps(hops, depth + 1)
        return await self._connect_one(host, port, user, tunnel, config, depth)

    async def _connect_jumps(self, hops: str, depth: int) -> asyncssh.SSHClientConnection:
        conn: asyncssh.SSHClientConnection | None = None
        for hop in (h.strip() for h in hops.split(",")):
            if depth + len(self.route) > MAX_JUMPS:
                message = f"{self.label}: more than {MAX_JUMPS} jump hosts (a ProxyJump loop?)"
                raise TransportError("unreachable", message)
            try:
                target = parse_host_arg(hop)
            except ConfigError as exc:
                raise TransportError("unreachable", f"{self.label}: bad jump host: {exc.message}") from None
            if conn is None:  # the first hop may itself be behind a ProxyJump of the config
                conn = await self._connect(target.address, target.port, target.user, None, depth)
            else:
                config = self._host_config(target.address, target.user, target.port)
                conn = await self._connect_one(target.address, target.port, target.user, conn, config, depth)
        assert conn is not None
        return conn

    async def _connect_one(
        self,
        host: str,
        port: int | None,
        user: str | None,
        tunnel: asyncssh.SSHClientConnection | None,
        config: SSHClientConfig,
        depth: int,
    ) -> asyncssh.SSHClientConnection:
        known_hosts, known_path = self._known_hosts(config)
        catcher = _HostKeyCatcher()
        hop = f"jump host {host}" if depth else host
        if self.route:
            hop += f" (via {' -> '.join(self.route)})"
        # One handshake slot per hop (dial.py): many links to one server do not exceed its MaxStartups.
        hostname = config.get("Hostname") or host
        real_port = port if port is not None else config.get("Port") or 22
        try:
            conn = await dialer().dial(
                f"{hostname}:{real_port}",
                lambda: asyncssh.connect(
                    host,
                    port if port is not None else (),
                    username=user if user is not None else (),
                    tunnel=tunnel,  # None: no ProxyJump from the config, it is already handled above
                    config=self._config_paths,
                    known_hosts=known_hosts,
                    client_factory=lambda: catcher,
                    client_keys=self._client_keys if self._client_keys is not None else (),
                    agent_path=self._agent_path,
                    passphrase=None,
                    password_auth=False,
                    kbdint_auth=False,
                    connect_timeout=self.connect_timeout,
                    login_timeout=self.connect_timeout,
                    keepalive_interval=self.keepalive_interval,
                    keepalive_count_max=self.keepalive_count_max,
                ),
                self._report,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise self._host_key_error(hop, catcher, known_hosts, known_path, port, exc) from None
        except asyncssh.PermissionDenied as exc:
            raise await self._auth_error(hop, user, config, exc) from None
        except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
            raise _key_error(self.label, exc) from None
        except (asyncio.TimeoutError, TimeoutError):
            raise TransportError(
                "unreachable", f"{self.label}: {hop} did not answer within {self.connect_timeout:g} s"
            ) from None
        except socket.gaierror as exc:
            message = f"{self.label}: cannot resolve {hop}: {exc.strerror}"
            raise TransportError("unreachable", message) from None
        except (OSError, asyncssh.Error) as exc:
            message = f"{self.label}: cannot connect to {hop}: {_why(exc)}"
            raise TransportError("unreachable", message) from None
        self._conns.append(conn)
        self.route.append(host)
        return conn

    def _host_config(self, host: str, user: str | None, port: int | None) -> SSHClientConfig:
        """The ssh config as it applies to one host (asyncssh's parser, as connect() uses it)."""
        try:
            config = SSHClientConfig.load(
                None,
                self._config_paths,
                False,
                False,
                False,
                getpass.getuser(),
                user if user is not None else (),
                host,
                port if port is not None else (),
            )
        except (asyncssh.ConfigParseError, OSError) as exc:
            raise TransportError("unreachable", f"{self.label}: bad ssh config: {exc}") from None
        # asyncssh types load() as returning the base SSHConfig; called on SSHClientConfig, it makes one.
        return cast(SSHClientConfig, config)

    def _known_hosts(self, config: SSHClientConfig) -> tuple[asyncssh.SSHKnownHosts, Path]:
        """The trusted keys for this hop, never "trust anything": missing files mean none is known.

        Returns the keys and the file a new key would be added to (for messages)."""
        if self._known_hosts_arg is not None:
            arg = self._known_hosts_arg
            paths = [Path(arg)] if isinstance(arg, str | os.PathLike) else [Path(p) for p in arg]
        else:
            # An empty UserKnownHostsFile ("none") would turn checking off in asyncssh: use ours then.
            # SSHConfig.get() returns object; asyncssh keeps these options as lists of str.
            user_files = cast("list[str]", config.get("UserKnownHostsFile") or [])
            global_files = cast("list[str]", config.get("GlobalKnownHostsFile") or [])
            paths = [Path(p) for p in [*user_files, *global_files]] or list(DEFAULT_KNOWN_HOSTS)
        paths = [p.expanduser() for p in paths]
        readable = [str(p) for p in paths if p.is_file()]
        try:
            known = asyncssh.read_known_hosts(readable) if readable else asyncssh.import_known_hosts("")
        except (OSError, ValueError) as exc:
            raise TransportError("unreachable", f"{self.label}: cannot read known_hosts: {exc}") from None
        return known, paths[0]

    # ----------------------------------------------------------------- explaining failures

    def _host_key_error(
        self,
        hop: str,
        catcher: _HostKeyCatcher,
        known: asyncssh.SSHKnownHosts,
        known_path: Path,
        port: int | None,
        exc: Exception,
    ) -> TransportError:
        if catcher.offered is None:  # revoked, or a certificate that did not validate
            message = f"{self.label}: the host key of {hop} is refused: {exc}"
            return TransportError("host-key-changed", message)
        host, addr, real_port, key = catcher.offered
        fingerprint = key.get_fingerprint("sha256")
        alg = key.get_algorithm()
        trusted = known.match(host, addr, real_port)[0]
        file = _tilde(known_path)
        hostport = host if real_port == 22 else f"[{host}]:{real_port}"
        if hostport not in (hop, host):
            hop = f"{hop} ({hostport})"
        if any(k.get_algorithm() == alg for k in trusted):
            return TransportError(
                "host-key-changed",
                f"{self.label}: the host key of {hop} has CHANGED: it now offers {alg} {fingerprint}. "
                "This can mean someone is intercepting the connection. If the host was reinstalled, "
                "check the new fingerprint out of band, then remove the old key with: "
                f"ssh-keygen -R {shlex.quote(hostport)} -f {_shell_path(file)}",
            )
        return TransportError(
            "host-key-unknown",
            f"{self.label}: unknown host key for {hop}: {alg} {fingerprint}. Check this fingerprint out "
            "of band (on the host: ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), then accept it with: "
            + _accept_command(host, real_port, alg, key, bool(self.route), file),
        )

    async def _auth_error(
        self, hop: str, user: str | None, config: SSHClientConfig, exc: Exception
    ) -> TransportError:
        login = user or config.get("User") or getpass.getuser()
        identity_files = cast("list[str] | None", config.get("IdentityFile"))  # asyncssh: a list of str
        encrypted = _encrypted_keys(self._client_keys or identity_files or _default_keys())
        if encrypted and not await self._agent_has_keys():
            names = ", ".join(_tilde(p) for p in encrypted)
            return TransportError(
                "passphrase-needed",
                f"{self.label}: the key {names} needs a passphrase and gputui never asks for one; "
                f"load it into an agent first (ssh-add {_shell_path(_tilde(encrypted[0]))}), "
                "in the shell that starts gputui",
            )
        return TransportError(
            "auth-failed",
            f"{self.label}: auth failed for {login}@{hop} ({_why(exc)}); "
            "check that one of your keys (or the agent's) is in that user's ~/.ssh/authorized_keys",
        )

    async def _agent_has_keys(self) -> bool:
        if self._agent_path is None or not (self._agent_path or os.environ.get("SSH_AUTH_SOCK")):
            return False
        try:
            agent = await asyncio.wait_for(asyncssh.connect_agent(self._agent_path or ()), 2.0)
        except (asyncssh.Error, OSError, asyncio.TimeoutError):
            return False
        if agent is None:
            return False
        try:
            return bool(await agent.get_keys())
        except (asyncssh.Error, OSError):
            return False
        finally:
            agent.close()
            await agent.wait_closed()

    async def _ended_late(self) -> TransportError:
        failure = await super()._ended_late()
        channel = self._channel
        if channel is not None and (channel.lost is not None or channel.process.exit_status is None):
            why = _why(channel.lost) if channel.lost else "the channel closed without an exit status"
            return TransportError("unreachable", f"{self.label}: connection lost ({why})")
        return failure

    # ----------------------------------------------------------------- closing

    async def _release(self) -> None:
        # Innermost first: the target host, then its jump hosts.
        while self._conns:
            conn = self._conns.pop()
            conn.close()
            try:
                await asyncio.wait_for(conn.wait_closed(), self.close_timeout)
            except (asyncio.TimeoutError, asyncssh.Error, OSError):
                pass


def _config_paths(ssh_config: str | os.PathLike[str] | None) -> list[str]:
    if ssh_config is not None:
        return [str(Path(ssh_config).expanduser())]
    default = DEFAULT_CONFIG.expanduser()
    return [str(default)] if default.is_file() else []


def _default_keys() -> list[str]:
    return [str(Path("~/.ssh", name).expanduser()) for name in DEFAULT_KEYS]


def _encrypted_keys(paths: Sequence[Any]) -> list[str]:
    """Which of these private key files exist and need a passphrase."""
    found = []
    for path in paths:
        if not isinstance(path, str | os.PathLike):
            continue
        file = Path(path).expanduser()
        if not file.is_file():
            continue
        try:
            asyncssh.read_private_key(str(file))
        except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
            if "passphrase" in str(exc).lower():
                found.append(str(file))
        except OSError:
            pass
    return found


def _key_error(label: str, exc: Exception) -> TransportError:
    if "passphrase" in str(exc).lower():
        return TransportError(
            "passphrase-needed",
            f"{label}: a key needs a passphrase and gputui never asks for one; "
            "load it into an ssh-agent first (ssh-add)",
        )
    return TransportError("auth-failed", f"{label}: cannot use a client key: {exc}")


def _accept_command(host: str, port: int, alg: str, key: asyncssh.SSHKey, jumped: bool, file: str) -> str:
    # ssh-keyscan cannot go through a jump host: then the exact line (the key just seen) is given.
    target = _shell_path(file)
    if not jumped:
        port_option = "" if port == 22 else f"-p {port} "
        keytype = alg.removeprefix("ssh-").removeprefix("ecdsa-sha2-")
        keytype = "ecdsa" if alg.startswith("ecdsa-") else keytype
        return f"ssh-keyscan {port_option}-t {keytype} {shlex.quote(host)} >> {target}"
    hostport = host if port == 22 else f"[{host}]:{port}"
    line = f"{hostport} {key.export_public_key('openssh').decode('ascii').strip()}"
    return f"echo {shlex.quote(line)} >> {target}"


def _tilde(path: Any) -> str:
    text = str(path)
    home = str(Path.home())
    return "~" + text[len(home) :] if text.startswith(home + os.sep) else text


def _shell_path(path: str) -> str:
    """A path for a command the user will paste: quoted, but a leading ~/ still expands."""
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:])
    return shlex.quote(path)


def _why(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, asyncssh.Error):
        return exc.reason or type(exc).__name__
    return str(exc) or type(exc).__name__
