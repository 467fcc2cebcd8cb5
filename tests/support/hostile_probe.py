"""A hostile probe: speaks the probe protocol (docs/PROTOCOL.md) with the worst it can put in it.

Shipped through the real bootstrap as the entry module (tests/support/hostile.py builds the payload), or run
by hand: `python tests/support/hostile_probe.py --mode escapes` writes its lines on stdout and reads records
on stdin. Stdlib only. It never touches a process: its PIDs are made up, and it "runs" plans by
writing events.

Modes (--mode):
  good      a well-behaved probe: the baseline the others are measured against
  escapes   ESC sequences (OSC 52 clipboard writes, CSI 2J), C1 controls, bidi overrides, zero-width
            characters, NUL and Rich markup in every string field of hello, sample, event, error
  numbers   NaN, Infinity, -Infinity as bare tokens (samples the wire refuses), and negatives, 1e308
            and huge integers (samples it takes) in every numeric field (--variant 1: only the
            former, 2: only the latter)
  types     the wrong type in every field: lists for strings, strings for numbers, objects for
            lists, null
  huge      15,000 processes in one sample (--compact: small records, under the line limit;
            otherwise full records, over it)
  flood     error lines as fast as the pipe takes them; a plan is answered with a flood of its events
  silence   hello and then nothing (--after hello); or good samples until a plan, `accepted`, and
            then nothing, forever (--after plan)
  nested    lines of 100,000 "[" and records nested deeper than any record needs
  forged    good samples; any plan is answered with a `done` that claims clean and names PIDs that
            were not in the plan
  hugeline  lines over 1 MiB (a sample, and a line with no newline for a long while)
  slow      good samples, each trickled at --rate bytes per second
  gpus      good samples but for their GPU list: --variant 0: no GPU at all; 1: every GPU record
            unparsable (an index that is no number); 2: GPU 0 and a record without an index; 3: GPU 0
            twice (different figures) and GPU 1
  deltas    delta samples (docs/PROTOCOL.md "Delta samples"; its hello says it can): a whole sample,
            then one garbled delta an interval (bad_deltas: each would drop the GPU user if taken),
            then a good one (DELTA_SEQ: the hidden holder gone, GPU 0 at 77 %) and empty deltas after
            it; a `whole` request is answered at once with a whole sample (WHOLE_SEQ)

Samples the wire must refuse carry a `seq` >= BAD_SEQ; with --mix, good samples (seq < BAD_SEQ) go
in between, so a test can tell that the host was only ever shown live on good ones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

MODES = (
    "good",
    "escapes",
    "numbers",
    "types",
    "huge",
    "flood",
    "silence",
    "nested",
    "forged",
    "hugeline",
    "slow",
    "gpus",
    "deltas",
)
BAD_SEQ = 1_000_000
WHOLE_SEQ = 500  # the whole sample that answers the app's `whole` request (deltas mode)
DELTA_SEQ = 600  # the first good delta (deltas mode)
MAX_LINE = 1 << 20
USER_PID, USER_START = 4121, 123456  # the made-up GPU user every good sample lists
HIDDEN_PID, HIDDEN_START = 4122, 123460
FORGED_PIDS = (1, 999_999, 31337)  # named by the forged verdict; never in a plan built from our samples

# Every hostile string: OSC 52 (write the clipboard), CSI 2J (clear the screen), a raw C1 CSI and
# NEL, bidi overrides and isolates, zero-width characters, NUL, DEL, CR, and Rich markup.
NASTY = (
    "\x1b]52;c;cm0gLXJmIH4=\x07"
    "\x1b[2J\x1b[H"
    "\x9b31m\x85"
    "\u202eevil\u202c\u2066iso\u2069"
    "\u200b\u200d\ufeff"
    "\x00\x7f\r"
    "[bold red]markup[/bold red][link=file:///etc/passwd]x[/link]"
)
HUGE_INT = 10**4000  # 4001 digits: Python's json takes up to 4300
HOSTILE_NUMBERS = (-1, -(2**63), 2**64, 10**30, HUGE_INT, 1e308, -1e308, 5e-324)
REFUSED_NUMBERS = (float("nan"), float("inf"), float("-inf"))


class Out:
    """Writes lines to the real stdout; several threads may write."""

    def __init__(self) -> None:
        self.stream = sys.stdout.buffer
        self.lock = threading.Lock()
        self.sent = 0

    def raw(self, data: bytes) -> None:
        with self.lock:
            self.stream.write(data)
            self.stream.flush()
            self.sent += 1

    def record(self, record: dict, ascii_only: bool = True) -> None:
        self.raw(line(record, ascii_only))


def line(record: dict, ascii_only: bool = True) -> bytes:
    # allow_nan: NaN and Infinity go out as the bare tokens a careless probe would write.
    return (json.dumps(record, ensure_ascii=ascii_only, allow_nan=True) + "\n").encode(
        "utf-8", "surrogatepass"
    )


# -- well-formed records ---------------------------------------------------------------------------


def hello(read_only: bool = False) -> dict:
    return {
        "type": "hello",
        "v": 1,
        "probe_version": "0.1.0",
        "pid": os.getpid(),
        "read_only": read_only,
        "reader": "sim",
        "capabilities": [] if read_only else ["plan"],
        "host": {
            "hostname": "hostile",
            "kernel": "6.0.0",
            "driver_version": "580.0",
            "nvml_version": "13.580",
            "cuda_driver_version": 13000,
            "python": "3.8.18",
            "uid": 0,
            "in_container": False,
            "clock_ticks": 100,
        },
        "error": None,
    }


def gpu(index: int, used: int = 0) -> dict:
    return {
        "index": index,
        "minor": index,
        "uuid": f"GPU-0000000{index}-hostile",
        "name": "NVIDIA H200 (hostile)",
        "memory_total": 150754820096,
        "memory_used": used,
        "memory_reserved": 644874240,
        "memory_baseline": 0,
        "memory_version": 2,
        "util_gpu": 50,
        "util_mem": 10,
        "temperature": 40,
        "power_draw": 100.5,
        "power_limit": 700.0,
        "persistence": True,
        "error": None,
    }


def proc(pid: int, start: int, kind: str, gpus: list, memory: int = 0, **fields) -> dict:
    record = {
        "pid": pid,
        "start_time": start,
        "name": "python",
        "command": ["python", "train.py", "--steps", "100"],
        "user": "alice",
        "uid": 1000,
        "state": "S",
        "ppid": 4100,
        "pgid": pid,
        "sid": 4100,
        "cpu_percent": 98.5,
        "rss": 1234567,
        "elapsed": 35.2,
        "holds": ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"],
        "gpu_memory": {str(g): memory for g in gpus} if kind == "user" else {},
        "gpus": gpus,
        "kind": kind,
        "reason": None if kind == "user" else "pgid",
        "links": [] if kind == "user" else [USER_PID],
        "protected": None,
        "nspid": None,
        "container": None,
    }
    record.update(fields)
    return record


def host_metrics() -> dict:
    """The sample's `host` object (docs/PROTOCOL.md): every other mode bends its numbers and types."""
    return {
        "cpu_percent": 37.5,
        "cpus": 64,
        "load1": 12.25,
        "load5": 10.5,
        "load15": 9.75,
        "memory_total": 2 << 40,
        "memory_used": 1 << 40,
        "swap_total": 8 << 30,
        "swap_used": 1 << 30,
        "uptime": 864000.5,
    }


def sample(seq: int, processes: list | None = None) -> dict:
    if processes is None:
        processes = [
            proc(USER_PID, USER_START, "user", [0], 9 << 30),
            proc(HIDDEN_PID, HIDDEN_START, "hidden", [0], links=[USER_PID]),
        ]
    return {
        "type": "sample",
        "v": 1,
        "seq": seq,
        "time": time.time(),
        "gpus": [gpu(0, 9 << 30), gpu(1)],
        "processes": processes,
        "host": host_metrics(),
        "scan": {"full": True, "age": 5.0, "worst_age": 30.0, "unreadable": 0},
        "cost_ms": {"reader": 0.2, "holders": 0.8, "total": 1.3},
    }


def event(plan: str, stage: str, result: str | None, **fields) -> dict:
    record = {
        "type": "event",
        "v": 1,
        "plan": plan,
        "time": time.time(),
        "stage": stage,
        "pid": None,
        "start_time": None,
        "gpu": None,
        "signal": None,
        "result": result,
        "message": f"{stage} {result}",
        "data": {"elapsed_ms": 1.0},
    }
    record.update(fields)
    return record


def done(plan: str, targets: list, clean: bool = True) -> dict:
    processes = [
        {
            "pid": pid,
            "start_time": start,
            "result": "exited",
            "why": "exited after SIGTERM",
            "signals": ["SIGTERM"],
        }
        for pid, start in targets
    ]
    gpus = {
        "0": {"result": "clean", "memory_before": 9 << 30, "memory_after": 0, "held_by": [], "ghosts": []}
    }
    data = {"clean": clean, "gpus": gpus, "processes": processes, "refused": [], "elapsed_ms": 130.0}
    return event(plan, "done", "clean" if clean else "not-clean", data=data)


def error(code: str, message: str, plan: str | None = None) -> dict:
    return {"type": "error", "v": 1, "code": code, "message": message, "plan": plan}


def bad_deltas(base: int) -> list[dict]:
    """Deltas the app must refuse whole (`base`: the seq of the whole sample it holds); each would
    drop the GPU user if it were taken."""
    drop = {"processes": [[USER_PID, USER_START]]}
    user = {"pid": USER_PID, "start_time": USER_START, "kind": "monitor"}
    head = {"type": "sample", "v": 1, "time": time.time()}
    return [
        dict(head, delta=base + 1, gone=drop),  # follows a sample the app never got (a lost line)
        dict(head, delta=str(base), gone=drop),  # the base's seq as a string
        dict(head, delta=True, gone=drop),  # true == 1 in Python
        dict(head, delta=base, gone=drop, gpus={"0": {"util_gpu": 1}}),  # gpus not a list
        dict(head, delta=base, gone=drop, gpus=[{"util_gpu": 1}]),  # a GPU without its index
        dict(head, delta=base, gone=drop, gpus=[{"index": "0", "util_gpu": 1}]),  # an index as text
        dict(head, delta=base, gone=drop, processes=[{"pid": "x"}]),  # a process without its key
        dict(head, delta=base, processes=[user, user]),  # one process twice
        dict(head, delta=base, gone=[[USER_PID, USER_START]]),  # gone not an object
        dict(head, delta=base, gone={"processes": [[USER_PID]]}),  # not [pid, start time]
        dict(head, delta=base, gone={"processes": [USER_PID, USER_START]}),
        dict(head, delta=base, gone={"gpus": ["0"]}),
    ]


# -- making records hostile ------------------------------------------------------------------------


def every_string(value, make):
    """`value` with every string in it (keys of gpu_memory included) replaced by make(old)."""
    if isinstance(value, str):
        return make(value)
    if isinstance(value, list):
        return [every_string(v, make) for v in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("type", "v"):
                out[key] = item  # the record must still be a record
            elif key == "gpu_memory" and isinstance(item, dict):
                out[key] = {make(k): every_string(v, make) for k, v in item.items()}
            else:
                out[key] = every_string(item, make)
        return out
    return value


def every_number(value, numbers, at=None):
    """`value` with every number in it (bools kept) replaced by numbers cycled; `seq` is kept."""
    at = at if at is not None else [0]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        at[0] += 1
        return numbers[at[0] % len(numbers)]
    if isinstance(value, list):
        return [every_number(v, numbers, at) for v in value]
    if isinstance(value, dict):
        return {k: (v if k in ("seq", "v") else every_number(v, numbers, at)) for k, v in value.items()}
    return value


def nasty(text: str) -> str:
    return text + NASTY


def wrong_types(record: dict) -> list[dict]:
    """Variants of `record`, each with one kind of wrong type in every field but type and v."""
    replacements = [
        lambda v: [v] if not isinstance(v, list) else {"0": v},  # lists for scalars, objects for lists
        lambda v: "12" if isinstance(v, (int, float)) and not isinstance(v, bool) else ["x"],
        lambda v: None,
        lambda v: {"x": [1, 2]},
        lambda v: 1 if isinstance(v, (str, list, dict)) else "true",
    ]
    out = []
    for replace in replacements:
        out.append({k: (v if k in ("type", "v") else replace(v)) for k, v in record.items()})
        # And one level down: every field of the host facts, each GPU, each process.
        nested = {}
        for key, value in record.items():
            if isinstance(value, dict) and key not in ("type", "v"):
                nested[key] = {k: replace(v) for k, v in value.items()}
            elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                nested[key] = [{k: replace(v) for k, v in item.items()} for item in value]
            else:
                nested[key] = value
        out.append(nested)
    return out


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# -- the probe -------------------------------------------------------------------------------------


class Hostile:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Out()
        self.seq = 0
        self.bad_seq = BAD_SEQ
        self.plans: list[dict] = []
        self.plan_ready = threading.Condition()
        self.quit = threading.Event()
        self.silent = threading.Event()

    # -- reading ---------------------------------------------------------------------------------

    def read_stdin(self) -> None:
        for raw in sys.stdin.buffer:
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            kind = record.get("type")
            if kind == "quit":
                break
            if kind == "sample" and record.get("whole") is True and self.args.mode == "deltas":
                self.send_whole(WHOLE_SEQ)  # (a resync: once the garbled deltas are all sent)
            if kind == "plan":
                with self.plan_ready:
                    self.plans.append(record)
                    self.plan_ready.notify_all()
                if not self.silent.is_set():
                    threading.Thread(target=self.answer, args=(record,), daemon=True).start()
        self.quit.set()
        with self.plan_ready:
            self.plan_ready.notify_all()

    # -- writing ---------------------------------------------------------------------------------

    def good(self) -> dict:
        self.seq += 1
        return sample(self.seq)

    def bad(self, record: dict) -> dict:
        self.bad_seq += 1
        return dict(record, seq=self.bad_seq)

    def every_interval(self, body) -> None:
        while not self.quit.is_set():
            if not self.silent.is_set():
                body()
            self.quit.wait(self.args.interval)

    def run(self) -> int:
        reader = threading.Thread(target=self.read_stdin, daemon=True)
        reader.start()
        mode = self.args.mode
        getattr(self, "mode_" + mode)()
        return 0

    def mixed(self, bad_lines) -> None:
        """Each interval: the next bad line, then (with --mix) a good sample."""
        state = {"i": 0}

        def body() -> None:
            items = bad_lines()
            self.out.raw(items[state["i"] % len(items)])
            state["i"] += 1
            if self.args.mix:
                self.out.record(self.good())

        self.every_interval(body)

    def mode_good(self) -> None:
        self.out.record(hello())
        self.every_interval(lambda: self.out.record(self.good()))

    # -- deltas ----------------------------------------------------------------------------------

    def send_whole(self, seq: int) -> None:
        with self.out.lock:
            self.base = seq
        self.out.record(sample(seq))

    def mode_deltas(self) -> None:
        self.base = 0
        self.out.record(dict(hello(), capabilities=["plan", "delta"]))
        self.send_whole(1)
        state = {"i": 0}

        def body() -> None:
            i = state["i"]
            state["i"] += 1
            bad = bad_deltas(self.base)
            if i < len(bad):
                self.out.record(self.bad(bad[i]))
                return
            if self.base != WHOLE_SEQ and self.base < DELTA_SEQ:
                return  # waits for the app's `whole` request
            seq = max(DELTA_SEQ, self.base + 1)
            delta = {"type": "sample", "v": 1, "seq": seq, "time": time.time(), "delta": self.base}
            if seq == DELTA_SEQ:
                delta.update(
                    gone={"processes": [[HIDDEN_PID, HIDDEN_START]]}, gpus=[{"index": 0, "util_gpu": 77}]
                )
            with self.out.lock:
                self.base = seq
            self.out.record(delta)

        self.every_interval(body)

    def mode_escapes(self) -> None:
        self.out.record(every_string(hello(), nasty))
        flip = [False]

        def body() -> None:
            flip[0] = not flip[0]
            record = every_string(self.good(), nasty)
            # The GPU user keeps a real kind and memory key, so that it is drawn as one (memory,
            # GPU column); the others have a hostile kind and memory keys as well.
            record["processes"][0].update(kind="user", gpu_memory={"0": 9 << 30})
            # ensure_ascii off: the C1 and bidi characters travel raw, as UTF-8.
            self.out.record(record, ascii_only=flip[0])
            self.out.record(every_string(error("bad-json", "x", None), nasty))
            self.out.record(every_string(event("plan-x", "signal", "sent"), nasty))

        self.every_interval(body)

    def mode_numbers(self) -> None:
        """--variant 0: both kinds of sample; 1: only those the wire refuses; 2: only valid ones."""
        self.out.record(hello())
        variant = self.args.variant

        def body() -> None:
            if variant in (0, 1):  # refused by the wire: NaN and the infinities as bare tokens
                self.out.record(self.bad(every_number(sample(0), REFUSED_NUMBERS)))
            if variant in (0, 2):  # taken by the wire: strange but valid JSON numbers, a good seq
                self.seq += 1
                self.out.record(dict(every_number(sample(0), HOSTILE_NUMBERS), seq=self.seq))
            if self.args.mix:
                self.out.record(self.good())

        self.every_interval(body)

    def mode_types(self) -> None:
        """--variant N >= 0: the Nth wrong-typed hello (wrong_types), then wrong-typed samples,
        events and errors; --variant -1: a good hello, then the same."""
        variants = wrong_types(hello())
        self.out.record(variants[self.args.variant % len(variants)] if self.args.variant >= 0 else hello())
        state = {"i": 0}

        def body() -> None:
            self.seq += 1
            records = wrong_types(sample(self.seq))
            record = records[state["i"] % len(records)]
            state["i"] += 1
            self.out.record(dict(record, type="sample", v=1))
            for other in wrong_types(event("plan-x", "signal", "sent")) + wrong_types(error("busy", "x")):
                self.out.record(other)
            if self.args.mix:
                self.out.record(self.good())

        self.every_interval(body)

    def mode_huge(self) -> None:
        self.out.record(hello())
        count = self.args.count
        if self.args.compact:
            processes = [{"pid": 10_000 + i, "kind": "hidden"} for i in range(count)]
        else:
            processes = [proc(10_000 + i, i, "hidden", []) for i in range(count)]
        data = None

        def body() -> None:
            nonlocal data
            if self.args.compact:
                self.seq += 1
                self.out.record(sample(self.seq, processes))
            else:
                if data is None:
                    data = line(self.bad(sample(0, processes)))
                self.out.raw(data)
            if self.args.mix:
                self.out.record(self.good())

        self.every_interval(body)

    def mode_flood(self) -> None:
        """--variant 0: error lines as fast as it can write; 1: events of a plan nobody runs."""
        self.out.record(hello())
        self.out.record(self.good())
        if self.args.variant == 1:
            flood = line(event("no-such-plan", "signal", "sent", message="SIGTERM -> 1 " + "x" * 40))
        else:
            flood = line(error("busy", "flood " * 10))
        while not self.plans and not self.quit.is_set():
            self.out.raw(flood)
        self.quit.wait()  # a plan came: answer() floods its events

    def mode_silence(self) -> None:
        self.out.record(hello())
        if self.args.after == "hello":
            self.quit.wait()
            return
        self.every_interval(lambda: self.out.record(self.good()))

    def mode_nested(self) -> None:
        self.out.record(hello())
        lines = [
            deep(100_000) + b"\n",
            b'{"type":"sample","v":1,"seq":%d,"gpus":' % (BAD_SEQ + 1) + deep(100_000) + b"}\n",
            b'{"type":"sample","v":1,"seq":%d,"gpus":' % (BAD_SEQ + 2) + deep(500) + b"}\n",
            b'{"type":"event","v":1,"plan":"plan-x","stage":"done","data":' + deep(900) + b"}\n",
            b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"\n",
        ]
        self.mixed(lambda: lines)

    def mode_forged(self) -> None:
        self.mode_good()

    def mode_hugeline(self) -> None:
        self.out.record(hello())
        big = self.bad(sample(0, [proc(10_000 + i, i, "hidden", []) for i in range(2500)]))
        over = line(big)
        assert len(over) > MAX_LINE + 1
        # A line that is over the limit only by the newline's byte plus one, and one with no newline
        # for 3 MiB.
        edge = json.dumps(self.bad(sample(0))).encode()
        edge = edge[:-1] + b" " * (MAX_LINE + 1 - len(edge)) + b"}\n"
        endless = b"x" * (3 << 20) + b"\n"
        self.mixed(lambda: [over, edge, endless])

    def mode_slow(self) -> None:
        self.out.record(hello())
        rate = self.args.rate

        def body() -> None:
            data = line(self.good())
            with self.out.lock:
                for i in range(0, len(data), 10):
                    if self.quit.is_set():
                        return
                    self.out.stream.write(data[i : i + 10])
                    self.out.stream.flush()
                    time.sleep(10 / rate)

        self.every_interval(body)

    def mode_gpus(self) -> None:
        self.out.record(hello())
        variant = self.args.variant

        def body() -> None:
            record = self.good()
            if variant == 0:
                record.update(gpus=[], processes=[])
            elif variant == 1:
                record.update(gpus=[dict(gpu(0), index="zero"), dict(gpu(1), index=None)], processes=[])
            elif variant == 2:
                nameless = gpu(1)
                del nameless["index"]
                record["gpus"] = [gpu(0, 9 << 30), nameless]
            else:
                record["gpus"] = [gpu(0, 9 << 30), gpu(0), gpu(1)]
            self.out.record(record)

        self.every_interval(body)

    # -- plans -----------------------------------------------------------------------------------

    def answer(self, plan: dict) -> None:
        plan_id = plan.get("id") if isinstance(plan.get("id"), str) else "?"
        targets = [
            (t.get("pid"), t.get("start_time")) for t in plan.get("targets") or [] if isinstance(t, dict)
        ]
        mode = self.args.mode
        if mode == "silence":
            self.out.record(event(plan_id, "accepted", "accepted"))
            self.silent.set()  # no sample, no event, ever again
            return
        if mode == "forged":
            self.out.record(event(plan_id, "accepted", "accepted"))
            forged = [(pid, 1) for pid in FORGED_PIDS]
            self.out.record(done(plan_id, forged, clean=True))
            return
        if mode == "flood":
            flood = line(event(plan_id, "wait", "exited", pid=USER_PID, start_time=USER_START))
            while not self.quit.is_set():
                self.out.raw(flood)
            return
        if mode == "escapes":
            for record in (event(plan_id, "accepted", "accepted"), done(plan_id, targets, clean=False)):
                hostile = every_string(record, nasty)
                hostile["plan"] = plan_id  # routed to the plan, everything else hostile
                self.out.record(hostile)
            return
        if mode == "numbers":
            self.out.record(every_number(event(plan_id, "accepted", "accepted"), HOSTILE_NUMBERS))
            self.out.record(every_number(done(plan_id, targets, clean=False), HOSTILE_NUMBERS))
            return
        if mode == "types":
            for record in wrong_types(done(plan_id, targets, clean=False)):
                self.out.record(dict(record, plan=plan_id, stage="done"))
            return
        self.out.record(event(plan_id, "accepted", "accepted"))
        self.out.record(done(plan_id, targets, clean=False))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="hostile_probe")
    p.add_argument("--mode", choices=MODES, required=True)
    p.add_argument("--interval", type=float, default=0.2)
    p.add_argument("--mix", action="store_true", help="good samples between the bad lines")
    p.add_argument("--variant", type=int, default=0, help="types: which wrong-typed hello")
    p.add_argument("--count", type=int, default=15_000, help="huge: processes per sample")
    p.add_argument("--compact", action="store_true", help="huge: small records, under the line limit")
    p.add_argument("--after", choices=("hello", "plan"), default="hello", help="silence: when")
    p.add_argument("--rate", type=float, default=200.0, help="slow: bytes per second")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return Hostile(args).run()
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the stdin thread may still hold its lock: no interpreter shutdown
