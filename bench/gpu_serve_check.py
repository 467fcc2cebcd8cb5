#!/usr/bin/env python3
"""`gputui serve` on a real GPU host: the hub sees a CUDA job, serves it, and stops it for an operator.

    python3 bench/gpu_serve_check.py

Starts a CUDA job of its own (PyTorch: 4 GiB on GPU 0, held), then `gputui serve local
--allow-actions --tokens FILE` on a free loopback port with an operator's token made by
`gputui serve --new-token`, and checks, printing one line each:
1. /api/v1/snapshot lists the job's PID as a holder of GPU 0, with its memory;
2. /metrics has the GPU's memory series; /-/ready is 200;
3. `gputui snapshot --hub URL --json` (a terminal attached to the hub) lists the same PID;
4. the events stream carries a sample of the host within 2 s;
5. POST /api/v1/actions (the operator's token) stops the job on the hub's side: the job's process is
   gone, the GPU's memory came back (the hub's next samples), and the hub's audit log names the operator;
6. a viewer's token is refused (403).
Every process it starts is ended by PID. Exit 0 when every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

JOB = (
    "import torch, time\n"
    "x = torch.empty(4 << 30, dtype=torch.uint8, device='cuda:0')\n"
    "torch.cuda.synchronize()\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, token: str | None = None, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def new_token(name: str, role: str, env: dict[str, str]) -> tuple[str, str]:
    made = subprocess.run(
        [sys.executable, "-m", "gputui", "serve", "--new-token", name, "--role", role],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    lines = made.stdout.splitlines()
    return lines[1].strip(), lines[3].strip()


def holders(document: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {p["pid"]: p for h in document["hosts"] for p in h.get("processes") or []}


def gpu0_used(document: dict[str, Any]) -> int:
    return int(next(g for g in document["hosts"][0]["gpus"] if g["index"] == 0)["memory_used"])


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="gputui-serve-gpu-"))
    env = dict(os.environ, XDG_STATE_HOME=str(scratch / "state"))
    results: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        results.append((name, ok, detail))
        print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}", flush=True)

    job = subprocess.Popen([sys.executable, "-c", JOB], stdout=subprocess.PIPE, text=True)
    hub = None
    try:
        assert job.stdout is not None
        check("a CUDA job holds 4 GiB on GPU 0", job.stdout.readline().strip() == "ready", f"pid {job.pid}")
        alice, alice_line = new_token("alice", "operator", env)
        bob, bob_line = new_token("bob", "viewer", env)
        (scratch / "tokens").write_text(alice_line + "\n" + bob_line + "\n")
        port = free_port()
        url = f"http://127.0.0.1:{port}/"
        hub = subprocess.Popen(
            [sys.executable, "-m", "gputui", "serve", "local", "--listen", f"127.0.0.1:{port}",
             "--allow-actions", "--tokens", str(scratch / "tokens")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        t0 = time.monotonic()
        status = 0
        while time.monotonic() - t0 < 60 and status != 200:
            time.sleep(0.2)
            try:
                status, _ = get(url + "-/ready")
            except OSError:
                status = 0
        check("/-/ready 200", status == 200, f"after {time.monotonic() - t0:.1f} s")
        code, body = get(url + "api/v1/snapshot", alice)
        document = json.loads(body) if code == 200 else {"hosts": []}
        held = holders(document).get(job.pid)
        memory = (held or {}).get("gpu_memory") or {}
        check(
            "snapshot: the job holds GPU 0",
            held is not None and int(memory.get("0", 0)) >= 4 << 30,
            str(memory),
        )
        code, body = get(url + "metrics", alice)
        check(
            "/metrics: GPU memory series",
            code == 200 and b"gputui_gpu_memory_used_bytes" in body,
            f"{len(body)} bytes",
        )
        attached = subprocess.run(
            [sys.executable, "-m", "gputui", "snapshot", "--hub", url.rstrip("/"), "--json"],
            capture_output=True, text=True, env=dict(env, GPUTUI_HUB_TOKEN=bob), timeout=120,
        )  # fmt: skip
        seen = holders(json.loads(attached.stdout)) if attached.stdout.strip() else {}
        check("snapshot --hub: the job's PID", job.pid in seen, f"exit {attached.returncode}")
        request = urllib.request.Request(url + "api/v1/events", headers={"Authorization": f"Bearer {bob}"})
        with urllib.request.urlopen(request, timeout=30) as stream:
            t0 = time.monotonic()
            got = b""
            while b"event: sample" not in got and time.monotonic() - t0 < 10:
                got += stream.read1(65536)
            state_s = time.monotonic() - t0
            got = b""
            t1 = time.monotonic()
            while b"event: sample" not in got and time.monotonic() - t1 < 10:
                got += stream.read1(65536)
            check("events: the next sample within 2 s", time.monotonic() - t1 <= 2.0,
                  f"state {state_s:.2f} s, next sample {time.monotonic() - t1:.2f} s")  # fmt: skip
        start = held.get("start_time") if held else None
        action = {
            "host": "local",
            "scope": "pids",
            "gpus": [],
            "targets": [[job.pid, start]],
            "ladder": "term",
        }
        code, body = get(url + "api/v1/actions", bob, action)
        check("a viewer's action is refused", code == 403, f"{code} {body[:80]!r}")
        before = gpu0_used(document)
        t0 = time.monotonic()
        code, body = get(url + "api/v1/actions", alice, action)
        check("the operator's action is taken", code == 200, f"{code} {body[:200]!r}")
        gone_after = None
        while time.monotonic() - t0 < 60:
            if job.poll() is not None:
                gone_after = time.monotonic() - t0
                break
            time.sleep(0.02)
        check(
            "the job's process is gone", gone_after is not None, f"{gone_after or -1:.2f} s after the request"
        )
        after = before
        while time.monotonic() - t0 < 60:
            code, body = get(url + "api/v1/snapshot", alice)
            after = gpu0_used(json.loads(body))
            if before - after >= 4 << 30:
                break
            time.sleep(0.2)
        check("GPU 0's memory came back (hub's samples)", before - after >= 4 << 30,
              f"{before >> 20} MiB -> {after >> 20} MiB, {time.monotonic() - t0:.2f} s")  # fmt: skip
        records = []  # the hub's audit log: under its state directory (XDG_STATE_HOME, set above)
        for path in Path(env["XDG_STATE_HOME"]).rglob("*.jsonl"):
            records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        named = {r.get("operator") for r in records}
        check(
            "the hub's audit log names the operator",
            "alice" in named,
            f"{len(records)} records, operators {named}",
        )
    finally:
        for process in (hub, job):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if hub is not None and hub.stderr is not None:
            print("hub stderr:", hub.stderr.read()[-2000:])
    failed = [name for name, ok, _ in results if not ok]
    print(
        f"{len(results) - len(failed)}/{len(results)} checks passed"
        + (f"; failed: {failed}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
