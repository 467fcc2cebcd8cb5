"""A process's environment, read by the probe when the detail screen asks (`e`; issue 19, item 12):
only for the probe's own user's processes or by root, as /proc itself allows; secret-looking values
sent only when asked again; bounded, so the answer always fits one line.

Real processes this test starts and reaps (its own sleepers), and a sim probe it ends.
"""

import json
import os
import sys

from gputui.probe.detail import (
    MAX_ENVIRON_BYTES,
    MAX_ENVIRON_VARS,
    describe,
    environ_refusal,
    secret_looking,
)
from gputui.probe.procfs import read_stat
from gputui.probe.wire import MAX_LINE, encode
from tests.support.sleepers import end, sleeper


def ask(probe, pid, start, **options):
    return probe.detail({"type": "detail", "v": 1, "pid": pid, "start_time": start, "id": "e1", **options})


def env_of(answer):
    return {e["name"]: e for e in answer["environ"]}


ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin"),
    "PLAIN": "hello world",
    "GPUTUI_TEST_TOKEN": "s3cret-token-value",
    "db_password": "hunter2-value",
    "DATABASE_URL": "postgres://alice:pw-in-url@db.example/prod",
    "ESCAPES": "\x1b[31mred\x07",
}


def test_the_environment_is_read_when_asked_and_secrets_only_when_asked_again(sim_probe):
    probe, _ = sim_probe()
    proc = sleeper(env=ENV)
    try:
        start = read_stat(proc.pid).start_time
        plain = ask(probe, proc.pid, start)
        masked = ask(probe, proc.pid, start, environ=True)
        revealed = ask(probe, proc.pid, start, environ=True, secrets=True)
    finally:
        end(proc)
    assert "environ" not in plain  # not asked: not read
    env = env_of(masked)
    assert env["PLAIN"] == {"name": "PLAIN", "value": "hello world", "secret": False}
    assert env["ESCAPES"]["value"] == "\x1b[31mred\x07"  # sent as it is; the app escapes it
    for name in ("GPUTUI_TEST_TOKEN", "db_password", "DATABASE_URL"):
        assert env[name]["secret"] is True and env[name]["value"] is None, name
    text = json.dumps(masked)
    assert "s3cret" not in text and "hunter2" not in text and "pw-in-url" not in text
    env = env_of(revealed)
    assert env["GPUTUI_TEST_TOKEN"] == {
        "name": "GPUTUI_TEST_TOKEN",
        "value": "s3cret-token-value",
        "secret": True,
    }
    assert env["DATABASE_URL"]["value"].endswith("@db.example/prod")
    assert [e["name"] for e in masked["environ"]] == list(ENV)  # in the process's own order
    assert masked["environ_more"] == 0 and masked["environ_cut"] is False


def test_a_huge_environment_is_cut_visibly_and_still_fits_one_line(sim_probe):
    probe, _ = sim_probe()
    env = {f"VAR_{i:04d}".encode(): b"\xff" * 150 for i in range(1000)}  # 150 KiB, not UTF-8
    args = ["é" * 5000] + [f"--arg{i}" for i in range(400)]  # the biggest command line too
    proc = sleeper(*args, env=env)
    try:
        answer = ask(probe, proc.pid, read_stat(proc.pid).start_time, environ=True, secrets=True)
    finally:
        end(proc)
    assert answer["result"] == "ok"
    assert 0 < len(answer["environ"]) <= MAX_ENVIRON_VARS and answer["environ_cut"] is True
    assert sum(len(e["name"]) + len(e["value"] or "") for e in answer["environ"]) <= MAX_ENVIRON_BYTES
    assert answer["environ"][0]["value"] == "\ufffd" * 150  # undecodable bytes, replaced
    assert len(encode(answer)) < MAX_LINE


def test_another_users_environment_is_read_only_by_root():
    proc = sleeper(env=ENV)
    try:
        start = read_stat(proc.pid).start_time
        record = {"type": "detail", "v": 1, "pid": proc.pid, "start_time": start, "environ": True}
        other = describe(record, "/dev/nvidia", os.getpid(), set(), euid=os.geteuid() + 4242)
    finally:
        end(proc)
    assert other["result"] == "ok" and "environ" not in other
    assert "only its own user or root" in other["unreadable"]["environ"]
    # The rule itself: root reads every process; another user only its own (every uid its own).
    assert environ_refusal((1000, 1000, 1000, 1000), 0) is None
    assert environ_refusal((1000, 1000, 1000, 1000), 1000) is None
    assert environ_refusal((1000, 0, 1000, 1000), 1000) is not None  # a setuid program
    assert environ_refusal(None, 1000) is not None  # its owner unknown: not read


def test_what_looks_secret() -> None:
    for name in ("GITHUB_TOKEN", "aws_secret_access_key", "API_KEY", "PGPASSWORD", "MYSQL_PWD", "PASSWD",
                 "HF_AUTH", "SESSION_COOKIE", "GOOGLE_APPLICATION_CREDENTIALS", "WANDB_API_KEY"):  # fmt: skip
        assert secret_looking(name, "x"), name
    for name in ("PATH", "HOME", "CUDA_VISIBLE_DEVICES", "LANG", "PYTHONPATH"):
        assert not secret_looking(name, "/usr/bin"), name
    assert secret_looking("DATABASE_URL", "postgres://u:p@h/db")  # a password in a URL
    assert not secret_looking("HOMEPAGE", "https://example.org/a:b")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run with pytest")
