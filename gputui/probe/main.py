"""`gputui probe`: the line loop. Samples every interval on stdout, takes records from stdin.

Stdin is read by a thread into a queue so the main thread can wait for "next record or next sample
time, whichever comes first" without polling. Plans run on the main thread: sampling pauses while a
plan runs and resumes right after its `done` event (the plan's own events carry the progress).
Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import argparse
import queue
import signal
import sys
import threading
import time
from typing import Any, BinaryIO, Dict, List, Optional  # noqa: F401  (type comments)

from .core import Probe
from .readers.base import Reader  # noqa: F401  (type comments)
from .wire import APP_TYPES, MAX_LINE, decode, encode, error

MIN_INTERVAL = 0.05
_EOF = object()


def make_reader(args):
    # type: (argparse.Namespace) -> Reader
    if args.reader == "sim":
        from .readers.sim import SimReader

        return SimReader(
            gpus=args.sim_gpus, scenario=args.sim_scenario, variant=args.sim_variant, seed=args.sim_seed
        )
    from .readers.nvml import NvmlReader

    return NvmlReader()


def parse_args(argv):
    # type: (Optional[List[str]]) -> argparse.Namespace
    p = argparse.ArgumentParser(prog="gputui probe", description="Stream GPU state as JSON lines.")
    p.add_argument("--reader", choices=("nvml", "sim"), default="nvml")
    p.add_argument("--read-only", action="store_true", help="refuse every kill plan")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--once", action="store_true", help="print hello and one sample, then exit")
    p.add_argument("--name", default=None, help="host name to report")
    p.add_argument("--sim-scenario", default="demo")
    p.add_argument("--sim-variant", type=int, default=0)
    p.add_argument("--sim-seed", type=int, default=0)
    p.add_argument("--sim-gpus", type=int, default=4)
    return p.parse_args(argv)


class Output(object):
    """Line writer shared by the loop and the kill engine; a closed stdout ends the probe."""

    def __init__(self, stream):
        # type: (BinaryIO) -> None
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, record):
        # type: (Dict[str, Any]) -> None
        data = encode(record)
        with self.lock:
            self.stream.write(data)
            self.stream.flush()


def _read_lines(stream, inbox):
    # type: (BinaryIO, Any) -> None
    """Feed stdin lines to the queue; an over-long line is cut off and reported, not buffered."""
    while True:
        line = stream.readline(MAX_LINE + 1)
        if not line:
            break
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            while True:  # drop the rest of the over-long line
                more = stream.readline(MAX_LINE)
                if not more or more.endswith(b"\n"):
                    break
            inbox.put(error("too-long", "line over %d bytes dropped" % MAX_LINE))
            continue
        if line.strip():
            inbox.put(line)
    inbox.put(_EOF)


class Loop(object):
    def __init__(self, probe, emit, interval):
        # type: (Probe, Output, float) -> None
        self.probe = probe
        self.emit = emit
        self.interval = max(MIN_INTERVAL, interval)
        probe.interval = self.interval
        self.running = True

    def handle(self, line):
        # type: (Any) -> None
        if isinstance(line, dict):  # an error record made by the reader thread
            self.emit(line)
            return
        record, problem = decode(line, APP_TYPES)
        if problem is not None:
            self.emit(problem)
            return
        assert record is not None  # decode returns a record or a problem, never neither
        kind = record["type"]
        if kind == "quit":
            self.running = False
        elif kind == "configure":
            interval = record.get("interval")
            if isinstance(interval, (int, float)) and interval > 0:
                self.interval = self.probe.interval = max(MIN_INTERVAL, float(interval))
            else:
                self.emit(error("bad-message", "configure needs a positive number 'interval'"))
        elif kind == "sample":
            self.emit(self.probe.sample(full=bool(record.get("full"))))
        elif kind == "plan":
            self.run_plan(record)

    def run_plan(self, record):
        # type: (Dict[str, Any]) -> None
        plan_id = record.get("id") if isinstance(record.get("id"), str) else None
        if self.probe.read_only:
            self.emit(error("read-only", "this probe runs read-only: plans are refused", plan_id))
            return
        if self.probe.reader_error is not None:
            self.emit(error("no-gpu", "no GPU reader: %s" % self.probe.reader_error.message, plan_id))
            return
        from .reaper import execute

        execute(self.probe, record, self.emit)

    def run(self, inbox):
        # type: (Any) -> None
        due = time.monotonic()
        while self.running:
            now = time.monotonic()
            if now >= due:
                self.emit(self.probe.sample())
                # Keep a steady rate; after a stall (a plan ran), start afresh instead of bursting.
                due = due + self.interval if due + self.interval > now else now + self.interval
                continue
            try:
                item = inbox.get(timeout=due - now)
            except queue.Empty:
                continue
            if item is _EOF:
                break
            self.handle(item)


def _exit_on_signal(signum, frame):
    # type: (int, Any) -> None
    # SystemExit unwinds through `finally`, so the reader (and a sim's processes) are closed.
    raise SystemExit(128 + signum)


def main(argv=None):
    # type: (Optional[List[str]]) -> int
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGHUP, _exit_on_signal)
    stdout = sys.stdout.buffer
    # Nothing else may write to the protocol stream: stray prints go to stderr.
    sys.stdout = sys.stderr
    emit = Output(stdout)
    probe = Probe(make_reader(args), read_only=args.read_only, hostname=args.name)
    probe.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        emit(probe.start())
        if args.once:
            emit(probe.sample(full=True))
            return 0
        inbox = queue.Queue()  # type: Any
        reader = threading.Thread(target=_read_lines, args=(sys.stdin.buffer, inbox), name="stdin")
        reader.daemon = True
        reader.start()
        Loop(probe, emit, args.interval).run(inbox)
        return 0
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    finally:
        probe.close()
        try:
            stdout.flush()
        except OSError:
            pass
