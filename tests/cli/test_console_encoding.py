"""`gputui clean` on an output that cannot take every character (an ASCII locale, PYTHONIOENCODING):
what it cannot take is written as an escape, and a cut's `…` as `...`, so one host's name or one
probe mark never loses the rest of the plan (the stream's guard drops every line after a failed
write)."""

from __future__ import annotations

import io

from gputui.cli.console import Console


def test_text_an_ascii_stream_cannot_take_is_escaped_and_the_lines_after_it_are_kept() -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii", write_through=True)
    con = Console(out=out, err=io.StringIO(), stdin=io.StringIO(), json=False)
    con.say("   4121  jos\u00e9  python /\u2026/kernels/launcher.py --lr 3e-4 --epo\u2026  (uses GPU 0)")
    con.say("   stages: SIGTERM -> wait up to 5 s")
    text = raw.getvalue().decode("ascii")
    assert text.splitlines() == [
        "   4121  jos\\xe9  python /.../kernels/launcher.py --lr 3e-4 --epo...  (uses GPU 0)",
        "   stages: SIGTERM -> wait up to 5 s",
    ]
    con.report("/tmp/log")
    assert con.out_guard.problem() is None


def test_a_utf8_stream_gets_the_text_as_it_is() -> None:
    out = io.StringIO()
    con = Console(out=out, err=io.StringIO(), stdin=io.StringIO(), json=False)
    con.say("jos\u00e9 \u65e5\u672c /\u2026/x.py")
    assert out.getvalue() == "jos\u00e9 \u65e5\u672c /\u2026/x.py\n"
