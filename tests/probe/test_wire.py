"""Protocol lines: anything malformed becomes an error record, never an exception."""

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.probe.main import FD_CAP
from gputui.probe.wire import MAX_DEPTH, MAX_LINE, decode, encode
from gputui.transport.bootstrap import RecordStream
from tests.support.probeproc import ProbeProcess


def test_round_trip_escapes_control_characters():
    line = encode({"type": "sample", "name": "\x1b[31mred\x07"})
    assert b"\x1b" not in line and line.endswith(b"\n")
    record, err = decode(line)
    assert err is None and record["name"] == "\x1b[31mred\x07" and record["v"] == 1


def test_bad_lines_give_error_records():
    cases = {
        b"{not json": "bad-json",
        b"[1, 2]": "bad-json",
        b'{"type": "plan", "v": 2}': "bad-version",
        b'{"type": "plan"}': "bad-version",
        b'{"type": "launch", "v": 1}': "bad-message",
        b"\xff\xfe": "bad-json",
        b"x" * (MAX_LINE + 1): "too-long",
    }
    for line, code in cases.items():
        record, err = decode(line, ("plan", "quit"))
        assert record is None and err["code"] == code and err["type"] == "error"


def test_probe_answers_bad_lines_with_errors_and_keeps_running():
    """The real probe process, fed garbage, an oversized line and a wrong version, then a sample."""
    probe = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui.probe",
            "--reader",
            "sim",
            "--sim-scenario",
            "empty",
            "--interval",
            "60",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        lines = [
            b"garbage\n",
            b'{"type": "sample", "v": 9}\n',
            b"y" * (MAX_LINE + 10) + b"\n",
            b'{"type": "configure", "v": 1, "interval": "fast"}\n',
            b'{"type": "sample", "v": 1, "full": true}\n',
        ]
        probe.stdin.write(b"".join(lines))
        probe.stdin.flush()
        seen = []
        while len(seen) < 10:
            record = json.loads(probe.stdout.readline())
            seen.append(record["type"] if record["type"] != "error" else record["code"])
            if seen.count("sample") == 2:  # the first sample at start, then the one asked for
                break
        assert seen[0] == "hello"
        assert {"bad-json", "bad-version", "too-long", "bad-message"} <= set(seen)
        probe.stdin.write(b'{"type": "quit", "v": 1}\n')
        probe.stdin.flush()
        assert probe.wait(timeout=10) == 0
    finally:
        if probe.poll() is None:
            probe.kill()
        probe.wait()


# -- hostile lines (adversarial review) -----------------------------------------------------------


def test_deep_nesting_is_an_error_record_not_a_recursion_error():
    for line in (b"[" * 100_000, b'{"a":' * 100_000, b'{"type":"sample","v":1,"gpus":' + b"[" * 100_000):
        record, err = decode(line, ("sample",))
        assert record is None and err["code"] == "bad-json", err


def test_nesting_that_json_accepts_but_no_record_needs_is_refused():
    deep = b'{"type":"event","v":1,"data":' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"}"
    record, err = decode(deep, ("event",))
    assert record is None and err["code"] == "bad-json" and "deep" in err["message"]
    ok = b'{"type":"event","v":1,"data":' + b"[" * (MAX_DEPTH - 2) + b"]" * (MAX_DEPTH - 2) + b"}"
    record, err = decode(ok, ("event",))
    assert err is None and record["type"] == "event"


@pytest.mark.parametrize("version", ["true", "1.0", '"1"', "[1]", "null"])
def test_version_must_be_the_integer_1(version):
    record, err = decode(b'{"type":"quit","v":%s}' % version.encode(), ("quit",))
    assert record is None and err["code"] == "bad-version", err


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_numbers_json_does_not_have_are_refused(number):
    record, err = decode(b'{"type":"sample","v":1,"time":%s}' % number.encode(), ("sample",))
    assert record is None and err["code"] == "bad-json", err


def test_a_long_number_out_of_range_is_cut_with_a_mark():
    """A float beyond the range, written long, is quoted in the refusal cut at 40 characters: it was
    sliced there with no mark, and read as the whole number."""
    number = "1" + "0" * 400 + ".5"
    record, err = decode(b'{"type":"sample","v":1,"time":%s}' % number.encode(), ("sample",))
    assert record is None and err["code"] == "bad-json", err
    assert "1" + "0" * 38 + "\u2026 is out of a float's range" in err["message"], err
    short = decode(b'{"type":"sample","v":1,"time":1e400}', ("sample",))[1]
    assert short is not None and "1e400 is out of a float's range" in short["message"], short


def test_huge_integer_is_refused_not_raised():
    record, err = decode(b'{"type":"sample","v":1,"seq":' + b"9" * 5000 + b"}", ("sample",))
    assert (record, err["code"]) == (None, "bad-json")


def test_encode_writes_null_for_numbers_json_does_not_have():
    line = encode({"type": "sample", "gpus": [{"power_draw": float("nan"), "x": [float("inf"), 1.5]}]})
    record, err = decode(line, ("sample",))
    assert err is None and record["gpus"] == [{"power_draw": None, "x": [None, 1.5]}]


def padded(record: bytes, size: int) -> bytes:
    """A JSON object of exactly `size` bytes (JSON allows spaces before the closing brace)."""
    assert record.endswith(b"}")
    return record[:-1] + b" " * (size - len(record)) + b"}"


def test_the_limit_is_on_the_record_not_its_newline():
    exact = padded(b'{"type":"quit","v":1}', MAX_LINE)
    for line in (exact, exact + b"\n"):
        record, err = decode(line, ("quit",))
        assert err is None and record["type"] == "quit", err
    over = padded(b'{"type":"quit","v":1}', MAX_LINE + 1)
    for line in (over, over + b"\n"):
        assert decode(line, ("quit",))[1]["code"] == "too-long"


def chunked(data: bytes, chunk: int):
    """A read(n) over `data` that returns at most `chunk` bytes at a time."""
    at = 0

    async def read(n: int) -> bytes:
        nonlocal at
        start, at = at, at + min(n, chunk)
        return data[start:at]

    return read


async def test_app_side_reader_agrees_on_the_limit():
    """RecordStream (the app's line splitter) keeps a record of exactly MAX_LINE bytes and drops one
    byte more, whatever the chunking."""
    exact = padded(b'{"type":"sample","v":1,"seq":1}', MAX_LINE)
    over = padded(b'{"type":"sample","v":1,"seq":2}', MAX_LINE + 1)
    data = exact + b"\n" + over + b"\n" + exact + b"\n"
    for chunk in (1 << 16, 1000, MAX_LINE, MAX_LINE + 1):
        stream = RecordStream(chunked(data, chunk))
        got = [await stream.next_record() for _ in range(4)]
        assert [r["seq"] if r and r["type"] == "sample" else r and r["code"] for r in got] == [
            1,
            "too-long",
            1,
            None,
        ], chunk


def test_probe_takes_a_record_of_exactly_max_line_bytes():
    probe = ProbeProcess("--interval", "3600")
    try:
        assert probe.read()["type"] == "hello"
        probe.read()  # the first sample
        probe.send(padded(b'{"type":"sample","v":1,"full":true}', MAX_LINE))
        probe.send(padded(b'{"type":"sample","v":1,"full":true}', MAX_LINE + 1))
        probe.send(b'{"type":"sample","v":1}')
        got = [r["type"] if r["type"] != "error" else r["code"] for r in (probe.read() for _ in range(3))]
        assert got == ["sample", "too-long", "sample"]
        assert probe.quit()[0] == 0
    finally:
        probe.close()


@pytest.mark.parametrize(
    "value", ["1e10", "1e308", "Infinity", "-Infinity", "NaN", "0.07", "0", "-1", "true", "3601", '"1"']
)
def test_probe_refuses_an_interval_out_of_bounds_and_keeps_running(value):
    """1e10 was taken and then crashed the probe (OverflowError in the queue wait) at its next sample;
    0.07 was raised to 0.05; `true` was one second."""
    probe = ProbeProcess("--interval", "0.2")
    try:
        assert probe.read()["type"] == "hello"
        probe.send(b'{"type":"configure","v":1,"interval":%s}' % value.encode())
        errors = [r for r in probe.read_until(lambda r: r["type"] == "error")]
        assert errors[-1]["code"] in ("bad-message", "bad-json"), errors[-1]
        # Still sampling at its old rate, past the moment the bad interval would have struck.
        seq = probe.read_until(lambda r: r["type"] == "sample")[-1]["seq"]
        more = probe.read_until(lambda r: r["type"] == "sample" and r["seq"] >= seq + 3)
        assert all(r["type"] == "sample" for r in more)
        probe.send(b'{"type":"configure","v":1,"interval":3600}')
        probe.send(b'{"type":"sample","v":1}')
        probe.read_until(lambda r: r["type"] == "sample" and r["scan"]["age"] > 100)
        code, stderr = probe.quit()
        assert code == 0 and "Traceback" not in stderr, stderr
    finally:
        probe.close()


def test_configure_preflight_every_takes_effect_and_a_bad_value_changes_nothing():
    """`preflight_every` was documented and sent by `gputui wait`, and the probe ignored it."""
    probe = ProbeProcess("--interval", "0.1")
    try:
        assert probe.read()["type"] == "hello"

        def with_preflight(record: dict) -> bool:
            return all(g.get("preflight") is not None for g in record["gpus"])

        probe.send(b'{"type":"configure","v":1,"preflight_every":1}')  # no interval: fine
        seq = probe.read_until(lambda r: r["type"] == "sample")[-1]["seq"]
        samples = probe.read_until(lambda r: r["type"] == "sample" and r["seq"] >= seq + 4)
        assert all(with_preflight(r) for r in samples[-3:]), [r["seq"] for r in samples if with_preflight(r)]
        probe.send(b'{"type":"configure","v":1,"preflight_every":0,"proc_util_every":true}')
        errors = probe.read_until(lambda r: r["type"] == "error")
        assert "proc_util_every" in errors[-1]["message"]
        seq = probe.read_until(lambda r: r["type"] == "sample")[-1]["seq"]
        samples = probe.read_until(lambda r: r["type"] == "sample" and r["seq"] >= seq + 4)
        assert not any(with_preflight(r) for r in samples[-3:])  # the good setting beside it applied
        probe.send(b'{"type":"configure","v":1}')
        assert "nothing to change" in probe.read_until(lambda r: r["type"] == "error")[-1]["message"]
        code, stderr = probe.quit()
        assert code == 0 and "Traceback" not in stderr, stderr
    finally:
        probe.close()


@pytest.mark.parametrize(
    "options",
    [
        ["--interval", "0.05"],
        ["--interval", "nan"],
        ["--interval", "inf"],
        ["--interval", "1e10"],
        ["--interval", "-1"],
        ["--interval", "fast"],
        ["--sim-scenario", "nope"],
        ["--sim-gpus", "0"],
        ["--sim-gpus", "65"],
        ["--sim-gpus", "²"],
    ],
)
def test_probe_options_out_of_bounds_are_a_usage_error(options):
    run = subprocess.run(
        [sys.executable, "-m", "gputui.probe", "--reader", "sim", *options],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr and "usage: gputui probe" in run.stderr
    assert run.stdout == ""


def test_probe_raises_its_open_file_limit_to_the_hard_limit():
    """A plan opens one pidfd per target: the 1,024 of a common soft limit ran out."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    low = 64
    if hard != resource.RLIM_INFINITY and hard <= low:
        pytest.skip(f"the hard limit here is {hard}")

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))

    probe = ProbeProcess("--interval", "3600", preexec_fn=lower)
    try:
        assert probe.read()["type"] == "hello"
        limits = Path(f"/proc/{probe.proc.pid}/limits").read_text()
        line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
        now_soft, now_hard = line.split()[3:5]
        want = FD_CAP if hard == resource.RLIM_INFINITY else min(hard, FD_CAP)
        assert (now_soft, now_hard) == (
            str(want),
            "unlimited" if hard == resource.RLIM_INFINITY else str(hard),
        )
        assert probe.quit()[0] == 0
    finally:
        probe.close()


def test_a_record_the_probe_cannot_handle_is_answered_not_fatal():
    """Whatever a plan record holds, the probe answers and keeps running."""
    probe = ProbeProcess("--interval", "3600")
    try:
        assert probe.read()["type"] == "hello"
        probe.read()
        for plan in (
            b'{"type":"plan","v":1,"id":"x","targets":"all"}',
            b'{"type":"plan","v":1,"id":["x"],"targets":[{"pid":"1"}],"gpus":{"0":1}}',
            b'{"type":"plan","v":1,"id":"y","targets":[],"gpus":[99999999999999999999]}',
            b'{"type":"plan","v":1,"id":"z","term_timeout":1e308,"verify_timeout":-1}',
        ):
            probe.send(plan)
            answer = probe.read_until(lambda r: r["type"] == "error" or r.get("stage") == "done")[-1]
            assert answer["type"] == "error", answer
        probe.send(b'{"type":"sample","v":1}')
        assert probe.read_until(lambda r: r["type"] == "sample")
        code, stderr = probe.quit()
        assert code == 0 and "Traceback" not in stderr, stderr
    finally:
        probe.close()
