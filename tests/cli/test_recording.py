"""Recordings (gputui/recording/format.py) and the commands that read them: `gputui snapshot --replay FILE
--at TIME` and `gputui --replay FILE`. A recording is untrusted input like any host: whatever is
wrong with it gives one line and exit 2, never a traceback; a file cut short is read to its last
whole entry. The round trip on the live demo is tests/cli/test_record.py."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gputui.recording.format import (
    MAX_ENTRY,
    MAX_TEXT,
    Header,
    RecordingError,
    RecordingReader,
    RecordingWriter,
    clock_words,
    parse_at,
    state_at,
)
from tests.support.paths import FIXTURES
from tests.support.recfile import START, Clock, demo_recording, fixture, gputui, gzip_lines, lines_of


def entries(path: Path) -> list[tuple[float, str, str, str | None]]:
    with RecordingReader(path) as reader:
        return [(e.t, e.host, e.kind, e.record.get("type")) for e in reader.entries()]


def only_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr
    assert len(lines) == 1, stderr
    return lines[0]


# -- the format ----------------------------------------------------------------------------------


def test_every_entry_has_its_host_and_time_and_the_header_its_version(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=3)
    with gzip.open(path, "rt") as f:
        header, *rest = (json.loads(line) for line in f)
    assert header["gputui_recording"] == 2 and header["hosts"] == ["demo-a", "demo-b"]
    assert header["started"] == START and isinstance(header["utc_offset"], int)
    assert all(isinstance(e["t"], float | int) and isinstance(e["host"], str) for e in rest)
    got = entries(path)
    samples = [(t, host) for t, host, kind, typ in got if typ == "sample"]
    assert samples == [(START + 1 + i, h) for i in range(3) for h in ("demo-a", "demo-b")]
    assert got[-1][1:3] == ("", "end")
    assert os.stat(path).st_mode & 0o777 == 0o600  # command lines and user names: the owner's


def test_a_recording_is_never_written_over(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    path.write_text("mine")
    with pytest.raises(RecordingError, match="never written over"):
        RecordingWriter(path, ["a"], interval=1.0)
    assert path.read_text() == "mine"
    r = gputui("record", str(path), "--demo", "--seconds", "1")
    assert r.returncode == 2 and "never written over" in only_line(r.stderr)
    assert path.read_text() == "mine"


def test_the_cap_holds_and_the_capped_file_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    writer = demo_recording(path, seconds=100, max_bytes=64 << 10, close=False)
    assert writer.full and writer.entries < 2 + 2 + 200  # it stopped before the last samples
    writer.close("cap")
    assert path.stat().st_size <= 64 << 10
    with RecordingReader(path) as reader:
        got = list(reader.entries())
        assert not reader.truncated and reader.ended is not None
        assert reader.ended.record == {"reason": "cap", "entries": writer.entries}
    assert len(got) == writer.entries + 1


def test_gputui_record_stops_at_its_cap_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    r = gputui(
        "record", str(path), "--demo", "--interval", "0.1", "--max-bytes", "64KiB", "--seconds", "300",
        "--log", str(tmp_path / "audit.jsonl"), timeout=400,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert "reached its size cap of 64 KiB: recording stopped (--max-bytes SIZE records more)" in r.stderr
    assert "Traceback" not in r.stderr
    assert path.stat().st_size <= 64 << 10
    with RecordingReader(path) as reader:
        kinds = [e.record.get("type") for e in reader.entries() if e.kind == "probe"]
        assert reader.ended is not None and reader.ended.record["reason"] == "cap"
    assert kinds.count("sample") >= 4 and "hello" in kinds


def test_a_file_cut_short_reads_to_its_last_whole_entry(tmp_path: Path) -> None:
    whole = tmp_path / "whole.gz"
    demo_recording(whole, seconds=10)
    data = whole.read_bytes()
    cut = tmp_path / "cut.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])  # a recorder killed mid-way: no end line, no trailer
    with RecordingReader(cut) as reader:
        got = list(reader.entries())
        assert reader.truncated and reader.ended is None
    assert 0 < len(got) < len(entries(whole))
    last = got[-1].t
    inside = gputui("snapshot", "--replay", str(cut), "--at", f"+{last - START:g}", "--json")
    assert inside.returncode == 0, inside.stderr
    assert "is cut short after" in only_line(inside.stderr)
    assert json.loads(inside.stdout)["time"] == last
    past = gputui("snapshot", "--replay", str(cut), "--at", "+9.5")
    assert past.returncode == 2 and past.stdout == ""
    assert "it is cut short at" in past.stderr.splitlines()[-1]
    assert "Traceback" not in past.stderr


# -- --at ------------------------------------------------------------------------------------------


def header(offset: int = 3600, started: float = START) -> Header:
    return Header(started=started, utc_offset=offset, hosts=("a",), interval=1.0)


def test_at_forms() -> None:
    h = header()  # started 02:54:00 on 2025-12-01 at UTC+1
    assert clock_words(START, h) == "2025-12-01 02:54:00"
    assert parse_at("+90", h) == START + 90
    assert parse_at("+1.5", h) == START + 1.5
    assert parse_at("02:55", h) == START + 60
    assert parse_at("02:55:30", h) == START + 90
    assert parse_at("2025-12-01T02:56:00", h) == START + 120  # no offset: the recording's clock
    assert parse_at("2025-12-01 01:56:00+00:00", h) == START + 120
    assert parse_at("00:10", h) == START + 21 * 3600 + 16 * 60  # before the start's time of day: the next day
    for bad in ("", "25:00", "2:61", "+", "+-3", "+1e9999", "tomorrow", "02:55:30:1", "+nan", "١٢:٠٠"):
        with pytest.raises(ValueError):
            parse_at(bad, h)


def test_snapshot_at_is_the_last_sample_at_or_before(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=10)
    with RecordingReader(path) as reader:
        h = reader.header
    seqs = {"demo-a": [r["seq"] for r in fixture("demo-a")[1:11]]}

    def seq_at(at: str) -> int:
        r = gputui("snapshot", "--replay", str(path), "--at", at, "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        (a,) = [x for x in doc["hosts"] if x["name"] == "demo-a"]
        with RecordingReader(path) as reader:
            state = state_at(reader, doc["time"])
        # The document adds what no one sample says (the idle-holder streak: gputui/fleet/idle.py).
        idle = ("idle_since", "idle_seconds", "idle_holder")
        shown = [{k: v for k, v in p.items() if k not in idle} for p in a["processes"]]
        assert shown == state.hosts["demo-a"].sample["processes"]  # type: ignore[index]
        return state.hosts["demo-a"].sample["seq"]  # type: ignore[index]

    assert seq_at("+3") == seqs["demo-a"][2]  # a sample at +3 exactly
    assert seq_at("+3.99") == seqs["demo-a"][2]
    assert seq_at(clock_words(START + 5, h, date=False)) == seqs["demo-a"][4]
    iso = dt.datetime.fromtimestamp(START + 7, dt.timezone.utc).isoformat()
    assert seq_at(iso) == seqs["demo-a"][6]
    text = gputui("snapshot", "--replay", str(path), "--at", "+5", "demo-b")
    assert text.returncode == 0 and text.stdout.startswith("== demo-b") and "== demo-a" not in text.stdout
    assert "at 2025-12-01" in only_line(text.stderr) or "+0:05 into the recording" in text.stderr
    early = gputui("snapshot", "--replay", str(path), "--at", "+0.5", "--json")
    assert early.returncode == 1  # the hellos are in, no sample yet: down, as a live snapshot says
    for host in json.loads(early.stdout)["hosts"]:
        assert host["status"] == "down" and "no sample recorded by" in host["message"]
    for at in ("+10.6", "01:00", "2025-11-30T02:00"):  # after the end; the next day's; before the start
        r = gputui("snapshot", "--replay", str(path), "--at", at)
        assert r.returncode == 2 and r.stdout == "", r.stderr
        assert "is not in" in only_line(r.stderr) or "is before" in only_line(r.stderr)


def test_a_host_down_at_that_moment_is_down_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    writer = demo_recording(path, seconds=3, close=False)
    clock = writer.clock
    assert isinstance(clock, Clock)
    clock.now = START + 3.5
    writer.write(
        "demo-b", "status", {"status": "down", "reason": "unreachable", "detail": "no route to host"}
    )
    clock.now = START + 4
    writer.write("demo-a", "probe", fixture("demo-a")[4])
    writer.close("seconds")
    r = gputui("snapshot", "--replay", str(path), "--at", "+4", "--json")
    assert r.returncode == 1  # as `gputui snapshot` with a host down
    hosts = {h["name"]: h for h in json.loads(r.stdout)["hosts"]}
    assert hosts["demo-a"]["status"] == "live"
    assert (hosts["demo-b"]["status"], hosts["demo-b"]["reason"], hosts["demo-b"]["message"]) == (
        "down",
        "unreachable",
        "no route to host",
    )
    before = gputui("snapshot", "--replay", str(path), "--at", "+3.4", "--json")
    assert before.returncode == 0 and all(h["status"] == "live" for h in json.loads(before.stdout)["hosts"])


# -- hostile files ------------------------------------------------------------------------------------


def _recorded(tmp_path: Path) -> list[bytes]:
    good = tmp_path / "good.gz"
    demo_recording(good, seconds=3)
    return lines_of(good)


def garbage_line(tmp_path: Path, path: Path) -> None:
    lines = _recorded(tmp_path)
    gzip_lines(path, [*lines[:3], b"\x00\xffnot json at all\n", *lines[3:]])


def line_of_100_mb(tmp_path: Path, path: Path) -> None:
    lines = _recorded(tmp_path)
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(lines[0])
        block = b"a" * (1 << 20)
        for _ in range(100):
            f.write(block)
        f.write(b"\n")


def wrong_version(tmp_path: Path, path: Path) -> None:
    lines = _recorded(tmp_path)
    head = json.loads(lines[0])
    head["gputui_recording"] = 3
    gzip_lines(path, [json.dumps(head).encode() + b"\n", *lines[1:]])


def corrupt_stream(tmp_path: Path, path: Path) -> None:
    good = tmp_path / "good.gz"
    demo_recording(good, seconds=3)
    data = bytearray(good.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    path.write_bytes(bytes(data))


def cut_in_its_header(tmp_path: Path, path: Path) -> None:
    good = tmp_path / "good.gz"
    demo_recording(good, seconds=3)
    path.write_bytes(good.read_bytes()[:40])


def not_a_recording(tmp_path: Path, path: Path) -> None:
    path.write_bytes((FIXTURES / "demo-a.jsonl").read_bytes()[:5000])


def unknown_host(tmp_path: Path, path: Path) -> None:
    lines = _recorded(tmp_path)
    entry = json.loads(lines[3])
    entry["host"] = "\x1b]0;pwned\x07"
    gzip_lines(path, [*lines[:3], json.dumps(entry).encode() + b"\n", *lines[4:]])


def deep_nesting(tmp_path: Path, path: Path) -> None:
    lines = _recorded(tmp_path)
    gzip_lines(path, [*lines[:2], b"[" * 100_000 + b"]" * 100_000 + b"\n"])


def empty(tmp_path: Path, path: Path) -> None:
    path.write_bytes(b"")


def a_directory(tmp_path: Path, path: Path) -> None:
    path.mkdir()


def a_fifo(tmp_path: Path, path: Path) -> None:
    os.mkfifo(path)


HOSTILE: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "garbage line": (garbage_line, "line 4: the entry is not JSON"),
    "a line of 100 MB": (line_of_100_mb, "line 2 is longer than 3 MiB"),
    "wrong version": (wrong_version, "recording format 3; this gputui reads formats 1 to 2"),
    # Zeroed bytes in a deflate stream: an error of the stream, or lines of garbage, as they fall.
    "corrupt compressed stream": (corrupt_stream, "a corrupt compressed stream|the entry is not JSON"),
    "cut in its header": (cut_in_its_header, "cut short before its header"),
    "not a recording": (not_a_recording, "is not a gputui recording"),
    "a host the header does not list": (unknown_host, "host '\\x1b]0;pwned\\x07' is not one of the header's"),
    "nested too deeply": (deep_nesting, "line 3: the entry nested too deeply"),
    "empty": (empty, "is empty: not a gputui recording"),
    "a directory": (a_directory, "is not a regular file"),
    "a FIFO": (a_fifo, "is not a regular file"),
}


# What is wrong with the file as a whole, or with its header: found before anything is shown.
FILE_CASES = ("wrong version", "cut in its header", "not a recording", "empty", "a directory", "a FIFO")


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_bad_file_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    make, words = HOSTILE[case]
    path = tmp_path / "bad.gz"
    make(tmp_path, path)
    r = gputui("snapshot", "--replay", str(path), "--at", "+2.5")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stdout == ""
    line = only_line(r.stderr)
    assert line.startswith("gputui: ") and any(w in line for w in words.split("|")), line
    assert "\x1b" not in line and "\x07" not in line
    if case in FILE_CASES:
        # The dashboard says the same before it looks for a terminal (there is none here). A damaged
        # entry further in stops a replay where it is (tests/ui/test_replay_app.py).
        ui = gputui("--replay", str(path))
        assert ui.returncode == 2 and only_line(ui.stderr) == line


def test_control_characters_in_names_are_shown_literally(tmp_path: Path) -> None:
    evil = "gpu\x1b[2J\x1b]0;pwned\x07-9"
    path = tmp_path / "r.gz"
    clock = Clock()
    writer = RecordingWriter(path, [evil], interval=1.0, clock=clock)
    hello, sample = fixture("demo-a")[0], dict(fixture("demo-a")[1])
    hello = dict(hello, host=dict(hello["host"], hostname="box\x1b[31m\x9b"))
    proc = dict(
        sample["processes"][0], name="x\x1b[5m", command=["python", "\x1b]8;;http://evil\x07click", "\u202e"]
    )
    sample["processes"] = [proc, *sample["processes"][1:]]
    writer.write(evil, "probe", hello)
    clock.now += 1
    writer.write(evil, "probe", sample)
    clock.now += 1
    writer.close("seconds")
    text = gputui("snapshot", "--replay", str(path), "--at", "+1")
    assert text.returncode == 0, text.stderr
    for out in (text.stdout, text.stderr):
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\u202e" not in out
    assert "== gpu\\e[2J\\e]0;pwned\\x07-9" in text.stdout
    assert "box\\e[31m\\x9b" in text.stdout
    assert "\\e]8;;http://evil\\x07click" in text.stdout and "\\u202e" in text.stdout
    doc = gputui("snapshot", "--replay", str(path), "--at", "+1", "--json")
    assert doc.returncode == 0 and "\x1b" not in doc.stdout
    assert json.loads(doc.stdout)["hosts"][0]["name"] == evil  # the JSON keeps the name (escaped)
    missing = gputui("snapshot", "--replay", str(path), "--at", "+1", "other\x1b[1m")
    assert missing.returncode == 2 and "other\\e[1m is not in" in only_line(missing.stderr)


def test_a_probe_record_that_fails_the_wire_checks_is_the_error_a_probe_line_would_be(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    clock = Clock()
    writer = RecordingWriter(path, ["a"], interval=1.0, clock=clock)
    writer.write("a", "probe", fixture("demo-a")[0])
    clock.now += 1
    writer.write("a", "probe", dict(fixture("demo-a")[1], v=7))
    writer.close("seconds")
    with RecordingReader(path) as reader:
        got = [e.record for e in reader.entries() if e.kind == "probe"]
    assert got[1]["type"] == "error" and got[1]["code"] == "bad-version"
    r = gputui("snapshot", "--replay", str(path), "--at", "+1", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["hosts"][0]["status"] == "down"


def test_usage(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=2)
    for args, words in (
        (["snapshot", "--at", "+1"], "--at TIME reads a recording"),
        (["snapshot", "--replay", str(path), "--demo"], "does not combine with --demo"),
        (["snapshot", "--replay", str(path), "--at", "soon"], "--at 'soon' is no time"),
        (["--replay", str(path), "demo-a"], "--replay shows a recording: it takes no HOST"),
    ):
        r = gputui(*args)
        assert r.returncode == 2 and words in only_line(r.stderr), (args, r.stderr)
    assert MAX_ENTRY > 3 << 20


@pytest.mark.parametrize(
    "at",
    [
        "+99999999999999999999",  # past what a time_t holds: OverflowError
        "+300000000000",  # past the year 9999: ValueError
        "+253402300799",
        "9999-12-31T23:59:59-14:00",
        "0001-01-01T00:00:00+14:00",  # before 1970: no recording's
    ],
)
def test_a_moment_no_clock_of_a_recording_reaches_is_not_in_it(tmp_path: Path, at: str) -> None:
    """A moment past any recorder's clock (or before 1970) is refused as any moment outside the
    recording: one line, exit 2, as text or JSON, never a traceback."""
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=2)
    with RecordingReader(path) as reader, pytest.raises(ValueError, match="is not in any recording"):
        parse_at(at, reader.header)
    for json_or_not in ([], ["--json"]):
        r = gputui("snapshot", "--replay", str(path), f"--at={at}", *json_or_not)
        assert r.returncode == 2 and r.stdout == "", r.stderr
        assert "is not in any recording" in only_line(r.stderr)


# -- long text in a damaged recording is cut with a mark ----------------------------------------------


def _written(tmp_path: Path) -> list[bytes]:
    """A small recording of demo-a (its hello and a sample), written with a fixed clock."""
    path = tmp_path / "small.gz"
    clock = Clock()
    writer = RecordingWriter(path, ["demo-a"], interval=1.0, clock=clock)
    for record in fixture("demo-a")[:2]:
        clock.now += 1
        writer.write("demo-a", "probe", record)
    writer.close("seconds")
    return lines_of(path)


def _with_entry(lines: list[bytes], **changes: object) -> list[bytes]:
    entry = json.loads(lines[2]) | changes
    return [*lines[:2], json.dumps(entry).encode() + b"\n", *lines[3:]]


LONG = "x" * 200
LONG_TEXT: dict[str, tuple[Callable[[list[bytes]], list[bytes]], str]] = {
    "a recording format": (
        lambda lines: [json.dumps(json.loads(lines[0]) | {"gputui_recording": LONG}).encode() + b"\n"],
        "recording format 'xxx",
    ),
    "its writer": (
        lambda lines: [
            json.dumps(json.loads(lines[0]) | {"gputui_recording": 9, "created_by": LONG}).encode() + b"\n"
        ],
        "(written by xxx",
    ),
    "a kind": (lambda lines: _with_entry(lines, kind=LONG), "unknown kind 'xxx"),
    "a host": (lambda lines: _with_entry(lines, host=LONG), "host 'xxx"),
    "a host status": (
        lambda lines: _with_entry(lines, kind="status", record={"status": LONG}),
        "unknown host status 'xxx",
    ),
}


@pytest.mark.parametrize("case", list(LONG_TEXT))
def test_long_text_of_a_damaged_recording_is_cut_with_a_mark(tmp_path: Path, case: str) -> None:
    """A recording's format, writer, kind, host or status quoted in the one line that refuses it was
    sliced at 40 or 60 characters with no mark: it read as if it were the whole value."""
    make, words = LONG_TEXT[case]
    path = tmp_path / "bad.gz"
    gzip_lines(path, make(_written(tmp_path)))
    r = gputui(
        "snapshot", "--replay", str(path), "--at", "+1", env=dict(os.environ, PYTHONIOENCODING="utf-8")
    )
    assert r.returncode == 2, (r.returncode, r.stderr)
    line = only_line(r.stderr)
    assert words in line and LONG not in line, line
    assert "x\u2026" in line, line  # cut, and the cut marked


def test_a_long_status_detail_is_kept_shortened_with_a_mark(tmp_path: Path) -> None:
    """A host's status detail (why it is down: an SSH error, a source's words) read back from a
    recording was sliced at MAX_TEXT characters with no mark; it now ends in "…" where cut, kept as
    it was written otherwise (escaped where it is shown)."""
    path = tmp_path / "status.gz"
    clock = Clock()
    writer = RecordingWriter(path, ["demo-a"], interval=1.0, clock=clock)
    clock.now += 1
    detail = "ssh: \\ " + "y" * 2000
    writer.write("demo-a", "status", {"status": "down", "reason": "unreachable", "detail": detail})
    writer.close("seconds")
    with RecordingReader(path) as reader:
        [entry] = [e for e in reader.entries() if e.kind == "status"]
    shown = entry.record["detail"]
    assert len(shown) == MAX_TEXT and shown.endswith("y\u2026") and shown.startswith("ssh: \\ y")
