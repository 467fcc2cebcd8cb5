"""Protocol lines: anything malformed becomes an error record, never an exception."""

import json
import subprocess
import sys

from gputui.probe.wire import MAX_LINE, decode, encode


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
