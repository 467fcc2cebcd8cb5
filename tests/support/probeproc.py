"""A real `gputui probe` subprocess for tests that talk to it line by line."""

from __future__ import annotations

import json
import subprocess
import sys


class ProbeProcess:
    """A real `gputui probe` subprocess on the sim (scenario "empty"); always reaped."""

    def __init__(self, *options: str, **popen: object) -> None:
        argv = [sys.executable, "-m", "gputui.probe", "--reader", "sim", "--sim-scenario", "empty"]
        self.proc = subprocess.Popen(
            [*argv, *options], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen
        )

    def send(self, *records: bytes) -> None:
        self.proc.stdin.write(b"".join(r if r.endswith(b"\n") else r + b"\n" for r in records))
        self.proc.stdin.flush()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, "the probe ended: " + self.proc.stderr.read().decode(errors="replace")[-2000:]
        return json.loads(line)

    def read_until(self, done) -> list[dict]:
        seen = []
        while not seen or not done(seen[-1]):
            seen.append(self.read())
        return seen

    def quit(self) -> tuple[int, str]:
        self.send(b'{"type":"quit","v":1}')
        _out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err.decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # this PID only: the probe we started
        self.proc.communicate()
