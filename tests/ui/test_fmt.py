"""Formatting helpers: untrusted text, meters, sparklines."""

from __future__ import annotations

from gputui.ui import fmt


def test_safe_escapes_control_and_invisible_characters() -> None:
    assert fmt.safe("[bold red]x") == "[bold red]x"  # markup is left alone: it is never parsed
    assert fmt.safe("a\x1b[31mb\x07") == "a\\e[31mb\\x07"
    assert fmt.safe("evil\u202etxt.exe") == "evil\\u202etxt.exe"  # a bidi override cannot flip it
    assert fmt.safe(None) == ""
    long = fmt.safe("x" * 1000, limit=10)
    assert len(long) == 10 and long.endswith("…")


def test_age() -> None:
    assert fmt.age(0.3) == "<1s" and fmt.age(12.4) == "12s" and fmt.age(600) == "10m"


def test_meter() -> None:
    assert fmt.meter(0.5, 8) == ("████", "····")
    filled, empty = fmt.meter(0.001, 8)
    assert filled == "▏" and len(filled + empty) == 8  # a little is never nothing
    assert fmt.meter(None, 4) == ("", "    ")
    assert fmt.meter(1.5, 4) == ("████", "")


def test_sparkline_has_a_fixed_window() -> None:
    assert fmt.sparkline([], 6, 120) == "      "
    line = fmt.sparkline([100.0] * 60, 6, 120)
    assert line == "   ███"  # half the window: grows from the right
    assert fmt.sparkline([0.0] * 200, 4, 120) == "▁▁▁▁"
    spike = [0.0] * 119 + [100.0]
    assert fmt.sparkline(spike, 4, 120)[-1] == "█"  # each cell shows its bucket's peak
