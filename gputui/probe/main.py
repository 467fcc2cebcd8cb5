"""`gputui probe`: the line loop. Samples every interval on stdout, takes records from stdin.

Stdin is read by a thread into a queue so the main thread can wait for "next record or next sample
time, whichever comes first" without polling. Plans run on the main thread; while one waits (for
its processes to exit, for NVML to show the memory back) it sends the loop's samples as they fall
due (`sample_if_due`), so the app sees the memory drain. A reset pauses sampling until it ends.
Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import argparse
import queue
import random
import signal
import sys
import threading
import time
from typing import Any, BinaryIO, Dict, List, Optional  # noqa: F401  (type comments)

from .core import Probe, fit_line
from .delta import SampleEncoder
from .readers.base import Reader  # noqa: F401  (type comments)
from .readers.scenarios import SCENARIOS
from .wire import APP_TYPES, MAX_LINE, decode, error, interval_problem, printable

_EOF = object()
MAX_SIM_GPUS = 64
# The most open files the probe asks for: more than a plan's targets (reaper.MAX_TARGETS), and a
# soft limit of a billion makes code that closes every possible fd (subprocess without /proc) crawl.
FD_CAP = 1 << 20
# What `configure` may change: the interval (seconds), in how many samples a reading slower than
# the sample is taken (0: only when a sample asks for it), and a whole sample in every `deltas`
# (the others as deltas, delta.py; 0: every sample whole).
CONFIGURABLE = ("interval", "preflight_every", "proc_util_every", "deltas")
MAX_EVERY = 100000


def make_reader(args):
    # type: (argparse.Namespace) -> Reader
    if args.reader == "sim":
        from .readers.sim.reader import SimReader

        # --sim-NAME is the reader's NAME; --sim-dir its base_dir, a sim to attach to
        sim = {name: getattr(args, "sim_" + name) for name in ("gpus", "scenario", "variant", "seed")}
        return SimReader(base_dir=args.sim_dir, attach=args.sim_dir is not None, **sim)
    from .readers.nvml import NvmlReader

    return NvmlReader()


def _interval(text):
    # type: (str) -> float
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number of seconds" % text) from None
    problem = interval_problem(value)
    if problem:
        raise argparse.ArgumentTypeError("%s %s" % (text, problem))
    return value


def _sim_gpus(text):
    # type: (str) -> int
    if not text.isascii() or not text.isdigit():  # "²".isdigit() is true, int("²") fails
        raise argparse.ArgumentTypeError("%r is not a number of GPUs" % text)
    if not 1 <= int(text) <= MAX_SIM_GPUS:
        raise argparse.ArgumentTypeError("%s GPUs: the sim has 1 to %d" % (text, MAX_SIM_GPUS))
    return int(text)


class _Parser(argparse.ArgumentParser):
    """argparse, with its messages escaped as every other message of gputui: an option or a value
    from the command line is shown literally, an ESC in it never reaches the terminal raw."""

    def error(self, message):
        # type: (str) -> Any
        self.print_usage(sys.stderr)
        self.exit(2, "%s: error: %s\n" % (self.prog, printable(message)))


def parse_args(argv):
    # type: (Optional[List[str]]) -> argparse.Namespace
    """The probe's options; a bad one is a usage message and exit status 2 (argparse)."""
    p = _Parser(
        prog="gputui probe",
        description="Stream GPU state as JSON lines.",
        epilog="exit codes: 0 its input closed or --once printed; 2 bad usage",
    )
    p.add_argument("--reader", choices=("nvml", "sim"), default="nvml")
    p.add_argument("--read-only", action="store_true", help="refuse every kill plan")
    p.add_argument("--interval", type=_interval, default=1.0, help="seconds between samples")
    p.add_argument("--once", action="store_true", help="print hello and one sample, then exit")
    p.add_argument("--name", default=None, help="host name to report")
    p.add_argument("--sim-scenario", choices=SCENARIOS, default="demo")
    p.add_argument("--sim-variant", type=int, default=0)
    p.add_argument("--sim-seed", type=int, default=0)
    p.add_argument(
        "--sim-gpus",
        type=_sim_gpus,
        default=None,
        help="1 to %d (default: 4; 8 for jobs and demo-b, demo variant 1)" % MAX_SIM_GPUS,
    )
    p.add_argument(
        "--sim-dir",
        default=None,
        metavar="DIR",
        help="attach to the sim another process runs at DIR (the live demo's) instead of making one",
    )
    return p.parse_args(argv)


def raise_fd_limit():
    # type: () -> None
    """Raise the soft limit on open files to the hard one (at most FD_CAP): a plan opens one pidfd
    per target, and the 1,024 of a common soft limit ran out."""
    try:
        import resource
    except ImportError:  # not a Unix
        return
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = FD_CAP if hard == resource.RLIM_INFINITY else min(hard, FD_CAP)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (OSError, ValueError):
        pass  # the probe runs with the limit it has


class Output(object):
    """Line writer shared by the loop and the kill engine; a closed stdout ends the probe."""

    def __init__(self, stream):
        # type: (BinaryIO) -> None
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, record):
        # type: (Dict[str, Any]) -> None
        self.line(fit_line(record))

    def line(self, data):
        # type: (bytes) -> None
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
        self.interval = interval  # checked by parse_args
        probe.interval = self.interval
        self.running = True
        self.inbox = None  # type: Any
        self.deferred = []  # type: List[Any]  # records that came while a plan ran: handled after it
        self.cancelled = {}  # type: Dict[str, str]  # plan id -> why the app cancelled it
        self.samples = SampleEncoder()  # whole samples until the app asks for deltas
        self.due = time.monotonic()  # when the next sample is to be sent
        probe.while_waiting = self.sample_if_due

    def send_sample(self, full=False, preflight=False, whole=False):
        # type: (bool, bool, bool) -> None
        record = self.probe.sample(full=full, preflight=preflight)
        self.emit.line(self.samples.line(record, whole=whole))
        for fault in self.probe.faults.take():
            self.emit(error("reader-fault", fault))

    def sample_if_due(self):
        # type: () -> float
        """Send a sample if one is due; the seconds until the next one is."""
        now = time.monotonic()
        if now >= self.due:
            self.send_sample()
            # Keep a steady rate; after a stall (a reset, a slow scan), start afresh, never burst.
            self.due = self.due + self.interval if self.due + self.interval > now else now + self.interval
        return self.due - time.monotonic()

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
            self.configure(record)
        elif kind == "sample":
            self.send_sample(
                full=record.get("full") is True,
                preflight=record.get("preflight") is True,
                whole=record.get("whole") is True,
            )
        elif kind in ("plan", "signal"):
            self.run_plan(record)
        elif kind == "cancel":
            pass  # for a plan that has ended already: nothing left to stop
        elif kind == "reset":
            from .run.reset import execute as reset  # here: a probe that never resets never loads it

            reset_id = record.get("id") if isinstance(record.get("id"), str) else None
            reset(self.probe, record, self.emit, lambda: self.stop_requested(reset_id))
            self.handle_deferred()
        elif kind == "detail":
            self.emit(self.probe.detail(record))

    def configure(self, record):
        # type: (Dict[str, Any]) -> None
        """Change what was asked, each setting on its own: a bad one is answered with an error and
        changes nothing; the good ones beside it still apply."""
        if not any(key in record for key in CONFIGURABLE):
            self.emit(error("bad-message", "configure: nothing to change (%s)" % ", ".join(CONFIGURABLE)))
            return
        if "interval" in record:
            interval = record["interval"]
            wrong = interval_problem(interval)
            if wrong is None and isinstance(interval, (int, float)):
                self.interval = self.probe.interval = float(interval)
            else:
                self.emit(
                    error("bad-message", "configure: 'interval' %s, not %s" % (wrong, _brief(interval)))
                )
        for key in CONFIGURABLE[1:]:
            if key not in record:
                continue
            value = record[key]
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_EVERY:
                if key == "deltas":  # the first whole sample at a place of its own (SampleEncoder.ask)
                    self.samples.ask(value, random.randrange(value) if value else 0)
                else:
                    setattr(self.probe, key, value)
            else:
                self.emit(
                    error(
                        "bad-message",
                        "configure: '%s' must be a whole number of samples from 0 to %d, not %s"
                        % (key, MAX_EVERY, _brief(value)),
                    )
                )

    def run_plan(self, record):
        # type: (Dict[str, Any]) -> None
        plan_id = record.get("id") if isinstance(record.get("id"), str) else None
        if self.probe.read_only:
            self.emit(error("read-only", "this probe runs read-only: plans are refused", plan_id))
            return
        if self.probe.reader_error is not None:
            self.emit(error("no-gpu", "no GPU reader: %s" % self.probe.reader_error.message, plan_id))
            return
        if record.get("type") == "signal":  # one signal to one process: no ladder, no verification
            from .run.signal_run import execute_signal  # here: a probe that only samples never loads it

            execute_signal(self.probe, record, self.emit)
        else:
            from .run.reaper import execute  # here: a probe that only samples never loads the kill run

            execute(self.probe, record, self.emit, lambda: self.stop_requested(plan_id))
        self.handle_deferred()

    def handle_deferred(self):
        # type: () -> None
        """What came in while a plan or a reset ran (stop_requested kept it), in its order."""
        deferred, self.deferred = self.deferred, []
        for item in deferred:
            if item is _EOF:
                self.running = False
            else:
                self.handle(item)

    def stop_requested(self, plan_id):
        # type: (Optional[str]) -> Optional[str]
        """While a plan (or a reset) runs: has the app cancelled it (its audit log failed)? The
        reason, or None. Reads what came in without waiting; everything but a cancel for this plan
        waits for the plan's end (a plan runs to its end, only its further steps can be stopped)."""
        while self.inbox is not None:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                break
            record = None
            if not isinstance(item, dict) and item is not _EOF:
                record, _ = decode(item, APP_TYPES)
            if (
                plan_id is not None
                and record is not None
                and record.get("type") == "cancel"
                and record.get("plan") == plan_id
            ):
                reason = record.get("reason")
                self.cancelled[plan_id] = reason if isinstance(reason, str) else "cancelled by the app"
            else:
                self.deferred.append(item)
        return self.cancelled.get(plan_id) if plan_id is not None else None

    def run(self, inbox):
        # type: (Any) -> None
        self.inbox = inbox
        self.due = time.monotonic()
        while self.running:
            left = self.sample_if_due()
            if left <= 0:
                continue
            try:
                item = inbox.get(timeout=left)
            except queue.Empty:
                continue
            if item is _EOF:
                break
            self.handle(item)


def _brief(value):
    # type: (Any) -> str
    """A received value in an error message: short, and never the whole of a large one."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return repr(value)[:40]


def _exit_on_signal(signum, frame):
    # type: (int, Any) -> None
    # SystemExit unwinds through `finally`, so the reader (and a sim's processes) are closed.
    raise SystemExit(128 + signum)


def main(argv=None):
    # type: (Optional[List[str]]) -> int
    args = parse_args(argv)
    raise_fd_limit()
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
            for fault in probe.faults.take():
                emit(error("reader-fault", fault))
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
