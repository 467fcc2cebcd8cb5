"""SshLink against real OpenSSH servers on 127.0.0.1 (tests/support/sshd.py), with the real probe."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gputui.config.file import HostSpec
from gputui.transport.base import TransportError
from gputui.transport.bootstrap import STAGE1
from gputui.transport.ssh import SshLink
from tests.support.hosts import probe_host
from tests.support.pythons import OLD_PYTHONS, PYTHON38
from tests.support.sshd import SSH_KEYGEN, SshEnv, keygen

pytestmark = pytest.mark.ssh


def link_for(env: SshEnv, spec: HostSpec, **options: object) -> SshLink:
    options.setdefault("interval", 0.1)
    options.setdefault("connect_timeout", 10)
    return SshLink(spec, known_hosts=env.known_hosts, ssh_config=env.ssh_config, **options)  # type: ignore[arg-type]


async def failure_of(link: SshLink) -> TransportError:
    with pytest.raises(TransportError) as caught:
        await link.open()
    assert await link.recv() is None  # a failed link is closed
    return caught.value


async def samples(link: SshLink, count: int) -> list[dict]:
    got = []
    while len(got) < count:
        record = await asyncio.wait_for(link.recv(), 60)
        assert record is not None, link.failure
        if record["type"] == "sample":
            got.append(record)
    return got


async def until_end(link: SshLink) -> None:
    """Read (samples already in flight) until the stream ends."""
    while await link.recv() is not None:
        pass


def fingerprint(server) -> str:
    out = subprocess.run(
        [SSH_KEYGEN, "-l", "-E", "sha256", "-f", f"{server.host_key}.pub"], capture_output=True, text=True
    )
    return out.stdout.split()[1]


# ------------------------------------------------------------------------- streaming


async def test_hello_and_samples_over_ssh(ssh_env):
    ssh_env.add("gpu-a")
    link = link_for(ssh_env, probe_host("gpu-a", address="gpu-a"))
    started = time.monotonic()
    await link.open()
    elapsed = time.monotonic() - started
    try:
        assert link.hello is not None and link.hello["type"] == "hello"
        assert link.hello["read_only"] is False
        assert link.route == ["gpu-a"]
        got = await samples(link, 3)
        assert [s["seq"] for s in got] == sorted(s["seq"] for s in got)
        # The same channel carries app records: ask for one sample now.
        await link.send({"type": "configure", "v": 1, "interval": 30})
        await link.send({"type": "sample", "v": 1, "full": True})
        await samples(link, 1)
    finally:
        await link.close()
    assert link.failure is None
    print(f"time to first hello over loopback ssh (pynvml shipped): {elapsed:.3f} s")
    await link.close()  # idempotent


async def test_close_ends_the_remote_probe(ssh_env):
    server = ssh_env.add("gpu-a")
    link = link_for(ssh_env, probe_host("gpu-a", address="gpu-a"))
    await link.open()
    remote_pid = link.hello["pid"]
    assert remote_pid in server.session_pids()
    await link.close()
    deadline = time.monotonic() + 5
    while _alive(remote_pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _alive(remote_pid)


async def test_the_probe_reads_as_what_it_is_in_ps(ssh_env):
    # On a shared host, `ps` and htop show the probe's command line: one short line that names
    # gputui, not the 3 KB bootstrap (its program comes on stdin).
    ssh_env.add("gpu-a")
    link = link_for(ssh_env, probe_host("gpu-a", address="gpu-a"))
    await link.open()
    try:
        with open(f"/proc/{link.hello['pid']}/cmdline", "rb") as f:
            argv = f.read().rstrip(b"\0").split(b"\0")
    finally:
        await link.close()
    assert argv[1:3] == [b"-c", STAGE1.encode()] and argv[3] == b"gputui-probe", argv
    assert len(b" ".join(argv)) < 220 and b"\n" not in b"".join(argv)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


async def test_python38_remote(ssh_env):
    if not PYTHON38.exists():
        pytest.skip(f"{PYTHON38} is not installed")
    ssh_env.add("old")
    link = link_for(ssh_env, probe_host("old", address="old", python=str(PYTHON38)))
    await link.open()
    try:
        assert link.hello["host"]["python"].startswith("3.8.")
        await samples(link, 2)
    finally:
        await link.close()


async def test_read_only_host_refuses_plans(ssh_env):
    ssh_env.add("ro")
    link = link_for(ssh_env, probe_host("ro", address="ro", read_only=True), interval=30)
    await link.open()
    try:
        assert link.hello["read_only"] is True
        await link.send({"type": "plan", "v": 1, "id": "p7", "targets": []})
        while True:
            record = await asyncio.wait_for(link.recv(), 60)
            assert record is not None
            if record["type"] == "error":
                break
        assert record["code"] == "read-only" and record["plan"] == "p7"
    finally:
        await link.close()


async def test_plain_address_user_and_port(ssh_env):
    # No ssh config alias: address, port, user and the key come from the spec and the arguments.
    server = ssh_env.add("direct")
    spec = probe_host("direct", address="127.0.0.1", port=server.port, user=server.user)
    link = SshLink(
        spec, known_hosts=ssh_env.known_hosts, ssh_config=os.devnull, client_keys=[server.user_key]
    )
    await link.open()
    await link.close()
    assert link.hello is not None


# ------------------------------------------------------------------------- host keys


async def test_unknown_host_key_is_refused_with_fingerprint(ssh_env):
    server = ssh_env.add("stranger", trusted=False)
    error = await failure_of(link_for(ssh_env, probe_host("stranger", address="stranger")))
    assert error.reason == "host-key-unknown"
    assert fingerprint(server) in error.message and fingerprint(server).startswith("SHA256:")
    assert f"ssh-keyscan -p {server.port} -t ed25519 127.0.0.1 >> {ssh_env.known_hosts}" in error.message


async def test_no_known_hosts_file_trusts_nothing(ssh_env, tmp_path):
    ssh_env.add("gpu-a")
    link = SshLink(
        probe_host("gpu-a", address="gpu-a"), known_hosts=tmp_path / "absent", ssh_config=ssh_env.ssh_config
    )
    assert (await failure_of(link)).reason == "host-key-unknown"


async def test_config_cannot_turn_host_key_checking_off(ssh_env):
    ssh_env.add("gpu-a")
    with open(ssh_env.ssh_config, "a") as out:
        out.write("Host *\n    UserKnownHostsFile none\n    StrictHostKeyChecking no\n")
    # known_hosts from the config (none): asyncssh would then check nothing; SshLink falls back to
    # ~/.ssh/known_hosts, which does not know this server.
    link = SshLink(probe_host("gpu-a", address="gpu-a"), ssh_config=ssh_env.ssh_config)
    assert (await failure_of(link)).reason == "host-key-unknown"


async def test_changed_host_key_is_refused(ssh_env, tmp_path):
    server = ssh_env.add("moved")
    other = keygen(tmp_path / "other_host_key", "impostor")
    kind, data = other.with_suffix(".pub").read_text().split()[:2]
    ssh_env.known_hosts.write_text(f"[127.0.0.1]:{server.port} {kind} {data}\n")
    error = await failure_of(link_for(ssh_env, probe_host("moved", address="moved")))
    assert error.reason == "host-key-changed"
    assert fingerprint(server) in error.message
    assert f"ssh-keygen -R '[127.0.0.1]:{server.port}'" in error.message


# ------------------------------------------------------------------------- authentication


async def test_wrong_user_key_is_auth_failed(ssh_env, tmp_path):
    server = ssh_env.add("locked")
    stranger_key = keygen(tmp_path / "not_authorized", "nobody")
    spec = probe_host("locked", address="127.0.0.1", port=server.port, user=server.user)
    link = SshLink(spec, known_hosts=ssh_env.known_hosts, ssh_config=os.devnull, client_keys=[stranger_key])
    error = await failure_of(link)
    assert error.reason == "auth-failed"
    assert "auth failed" in error.message


async def test_encrypted_key_without_agent_is_passphrase_needed(ssh_env, tmp_path):
    server = ssh_env.add("secret")
    key = keygen(tmp_path / "encrypted_key", "locked", passphrase="correct horse")
    server.authorized_keys.write_text(key.with_suffix(".pub").read_text())
    with open(ssh_env.ssh_config, "a") as out:
        out.write(
            f"Host secret-alias\n    HostName 127.0.0.1\n    Port {server.port}\n"
            f"    IdentityFile {key}\n    IdentitiesOnly yes\n"
        )
    # From the ssh config (asyncssh skips the encrypted key; the server then refuses us)...
    error = await failure_of(link_for(ssh_env, probe_host("secret", address="secret-alias")))
    assert error.reason == "passphrase-needed"
    assert f"ssh-add {key}" in error.message
    # ...and given directly.
    spec = probe_host("secret", address="127.0.0.1", port=server.port)
    link = SshLink(spec, known_hosts=ssh_env.known_hosts, ssh_config=os.devnull, client_keys=[key])
    assert (await failure_of(link)).reason == "passphrase-needed"


async def test_default_keys_and_files_under_home(ssh_env, tmp_path, monkeypatch):
    # No ssh config, no key or known_hosts given: ~/.ssh/id_* and ~/.ssh/known_hosts are used.
    server = ssh_env.add("home")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    spec = probe_host("home", address="127.0.0.1", port=server.port, user=server.user)
    error = await failure_of(SshLink(spec))
    assert error.reason == "host-key-unknown" and ">> ~/.ssh/known_hosts" in error.message
    (home / ".ssh" / "known_hosts").write_text(server.known_hosts_line())
    key = keygen(home / ".ssh" / "id_ed25519", "home", passphrase="secret words")
    server.authorized_keys.write_text(key.with_suffix(".pub").read_text())
    error = await failure_of(SshLink(spec))
    assert error.reason == "passphrase-needed" and "ssh-add ~/.ssh/id_ed25519" in error.message
    key.unlink()
    key.with_suffix(".pub").unlink()
    key = keygen(home / ".ssh" / "id_ed25519", "home")
    server.authorized_keys.write_text(key.with_suffix(".pub").read_text())
    link = SshLink(spec)
    await link.open()
    await link.close()


async def test_unreachable(ssh_env):
    server = ssh_env.add("gone")
    server.stop()
    error = await failure_of(link_for(ssh_env, probe_host("gone", address="gone")))
    assert error.reason == "unreachable"
    assert "connection refused" in error.message


async def test_unresolvable_host_is_unreachable(ssh_env):
    spec = probe_host("nowhere", address="no-such-host.invalid")
    error = await failure_of(link_for(ssh_env, spec, connect_timeout=5))
    assert error.reason == "unreachable"


# ------------------------------------------------------------------------- the remote interpreter


async def test_missing_python_is_no_python(ssh_env):
    ssh_env.add("bare")
    error = await failure_of(
        link_for(ssh_env, probe_host("bare", address="bare", python="/nonexistent/python3"))
    )
    assert error.reason == "no-python"
    assert "/nonexistent/python3" in error.message


async def test_old_python_is_no_python(ssh_env):
    old = [p for p in OLD_PYTHONS if p.exists()]
    if not old:
        pytest.skip("no Python older than 3.8 installed")
    ssh_env.add("ancient")
    error = await failure_of(link_for(ssh_env, probe_host("ancient", address="ancient", python=str(old[0]))))
    assert error.reason == "no-python"
    assert "3.8 or newer" in error.message


async def test_remote_text_never_reaches_a_shell(ssh_env, tmp_path):
    ssh_env.add("gpu-a")
    marker = tmp_path / "pwned"
    spec = probe_host(f"x$(touch {marker})", address="gpu-a", python=f"python3; touch {marker}")
    error = await failure_of(link_for(ssh_env, spec))
    assert error.reason == "no-python"
    assert not marker.exists()


# ------------------------------------------------------------------------- sudo and wrap


def _fake_sudo(bin_dir: Path, log: Path, refuse: bool = False) -> None:
    """A `sudo` that logs its arguments and runs the rest without -n (the real one may be absent)."""
    bin_dir.mkdir(exist_ok=True)
    body = 'echo "sudo: a password is required" >&2; exit 1' if refuse else 'shift; exec "$@"'
    (bin_dir / "sudo").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {log}\n{body}\n')
    (bin_dir / "sudo").chmod(0o755)


@pytest.mark.parametrize("refuse", [False, True], ids=["nopasswd", "password-required"])
async def test_sudo_runs_the_probe_with_sudo_n(ssh_env, tmp_path, refuse):
    bin_dir, log = tmp_path / "bin", tmp_path / "sudo.log"
    _fake_sudo(bin_dir, log, refuse)
    path = f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"
    ssh_env.add("admin", extra_config=(f"SetEnv PATH={path}",))
    link = link_for(ssh_env, probe_host("admin", address="admin", sudo=True))
    if refuse:
        error = await failure_of(link)
        assert error.reason == "auth-failed" and "sudo -n needs a password" in error.message
    else:
        await link.open()
        await link.close()
    assert log.read_text().splitlines()[:3] == ["-n", "python3", "-c"]


async def test_wrap_is_split_and_quoted(ssh_env, tmp_path):
    ssh_env.add("host")
    record = tmp_path / "wrapped"
    wrapper = tmp_path / "in container"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\nshift 2\nexec "$@"\n')
    wrapper.chmod(0o755)
    spec = probe_host("host", address="host", wrap=f"'{wrapper}' --ct '129 $HOME'")
    link = link_for(ssh_env, spec)
    await link.open()
    await link.close()
    assert record.read_text().splitlines()[:3] == ["--ct", "129 $HOME", "python3"]


# ------------------------------------------------------------------------- jump hosts


async def test_proxyjump_from_ssh_config(ssh_env):
    ssh_env.add("bastion")
    ssh_env.add("inner", proxy_jump="bastion")
    link = link_for(ssh_env, probe_host("inner", address="inner"))
    await link.open()
    try:
        assert link.route == ["bastion", "inner"]
        await samples(link, 1)
    finally:
        await link.close()


async def test_proxyjump_from_host_spec(ssh_env):
    ssh_env.add("bastion")
    ssh_env.add("inner")
    link = link_for(ssh_env, probe_host("inner", address="inner", jump="bastion"))
    await link.open()
    await link.close()
    assert link.route == ["bastion", "inner"]


async def test_jump_host_errors_say_which_hop(ssh_env):
    bastion = ssh_env.add("bastion", trusted=False)
    ssh_env.add("inner", proxy_jump="bastion")
    error = await failure_of(link_for(ssh_env, probe_host("inner", address="inner")))
    assert error.reason == "host-key-unknown"
    assert "bastion" in error.message and fingerprint(bastion) in error.message
    bastion.stop()
    error = await failure_of(link_for(ssh_env, probe_host("inner", address="inner")))
    assert error.reason == "unreachable" and "bastion" in error.message


async def test_unknown_key_behind_a_jump_gives_the_exact_line(ssh_env):
    ssh_env.add("bastion")
    inner = ssh_env.add("inner", proxy_jump="bastion", trusted=False)
    error = await failure_of(link_for(ssh_env, probe_host("inner", address="inner")))
    assert error.reason == "host-key-unknown"
    assert f"echo '[127.0.0.1]:{inner.port} {inner.host_public_key}" in error.message


# ------------------------------------------------------------------------- a link that dies


async def test_silent_peer_is_noticed_by_keepalive(ssh_env):
    server = ssh_env.add("flaky")
    link = link_for(
        ssh_env,
        probe_host("flaky", address="flaky"),
        interval=30,
        keepalive_interval=0.3,
        keepalive_count_max=2,
    )
    await link.open()
    stopped = server.session_pids()
    try:
        for pid in stopped:  # the host freezes: no FIN, no RST, nothing
            os.kill(pid, signal.SIGSTOP)
        # Nothing but the keepalive can end this link (no FIN, no RST, samples 30 s apart):
        # that it ends, unreachable, is the behaviour; the deadline is only for a busy machine.
        await asyncio.wait_for(until_end(link), 60)
        assert link.failure is not None and link.failure.reason == "unreachable"
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        await link.close()


async def test_server_restart_on_the_same_port(ssh_env):
    server = ssh_env.add("phoenix")
    spec = probe_host("phoenix", address="phoenix")
    link = link_for(ssh_env, spec, interval=30)
    await link.open()
    port = server.port
    server.stop()  # listener and sessions: the open link breaks
    await asyncio.wait_for(until_end(link), 60)
    assert link.failure is not None and link.failure.reason == "unreachable", link.failure
    await link.close()
    server.start()
    assert server.port == port
    again = link_for(ssh_env, spec)
    await again.open()
    await again.close()
