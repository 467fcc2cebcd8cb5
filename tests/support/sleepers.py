"""Processes of the test's own that sleep until it ends them, for reading a process in full (the
probe's `detail`, the dashboard's environment view). The test reaps each one itself."""

import subprocess
import sys
import time


def sleeper(*args, **popen):
    """A process of our own that sleeps until the test kills it (the test reaps it)."""
    code = "import sys, time; sys.stdin.read(); time.sleep(0)"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, **popen)
    # Popen returns when exec closed its error pipe, which the kernel does before it sets the new
    # image's argument area: /proc/PID/cmdline can read empty for a moment after. Wait it out.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            if f.read():
                break
        time.sleep(0.005)
    return proc


def end(proc):
    proc.stdin.close()
    proc.wait(timeout=10)
