"""`gputui snapshot` on an output that cannot take every character (PYTHONIOENCODING=ascii, an ASCII
locale): it writes what the encoding takes (`...` for a cut's mark, an escape for any other
character) and exits with its own outcome; it never calls such a stream closed (exit 1)."""

from __future__ import annotations

import io
import os
from pathlib import Path

from gputui.cli.streams import Guarded, as_text
from tests.support.recfile import demo_recording, gputui


def test_a_snapshot_to_an_ascii_stdout_is_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "r.gz"
    demo_recording(path, seconds=3)
    utf8 = gputui("snapshot", "--replay", str(path), env=dict(os.environ, PYTHONIOENCODING="utf-8"))
    assert utf8.returncode == 0 and "·" in utf8.stdout, utf8.stderr  # the text holds such characters
    done = gputui("snapshot", "--replay", str(path), env=dict(os.environ, PYTHONIOENCODING="ascii"))
    assert done.returncode == 0, done.stderr
    assert "closed" not in done.stderr and "not written whole" not in done.stderr, done.stderr
    assert done.stdout.isascii() and "\\xb7" in done.stdout
    assert len(done.stdout.splitlines()) == len(utf8.stdout.splitlines())


def test_a_guarded_stream_writes_what_its_encoding_takes() -> None:
    raw = io.BytesIO()
    guard = Guarded(io.TextIOWrapper(raw, encoding="ascii", write_through=True), "stdout")
    print("demo-a \u00b7 4 GPUs /\u2026/x.py", file=as_text(guard))
    print("next line", file=as_text(guard))
    assert guard.problem() is None
    assert raw.getvalue().decode("ascii").splitlines() == ["demo-a \\xb7 4 GPUs /.../x.py", "next line"]
