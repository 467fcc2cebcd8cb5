"""The charts of the process detail and the GPU view: one sample a cell, the newest at the right,
the scale's ends labelled, the time span under the axis (gputui/ui/widgets/chart.py)."""

from __future__ import annotations

import pytest

from gputui.ui.widgets.chart import Scale, chart, chart_lines, nice_top, span_words

PERCENT = Scale(100.0, lambda v: f"{v:.0f}%")


def test_the_newest_sample_is_at_the_right_and_a_full_one_fills_its_column() -> None:
    lines = chart_lines([100.0, 50.0, 0.0], [10.0, 11.0, 12.0], width=8, height=2, scale=PERCENT)
    assert lines[0] == "100% ┤     █  "
    assert lines[1] == "  0% ┤     ██ "
    assert lines[2] == "     └────────"
    assert lines[3] == "       -2s now"  # the span under the oldest sample, as near as fits
    assert len({len(line) for line in lines}) == 1  # every line as wide


def test_a_history_longer_than_the_chart_shows_its_last_width_samples() -> None:
    values = [0.0] * 50 + [100.0] * 10
    lines = chart_lines(values, [float(t) for t in range(60)], width=20, height=1, scale=PERCENT)
    assert lines[0].endswith("█" * 10) and lines[0].count("█") == 10
    assert "-19s" in lines[2]  # the span of the 20 samples shown, not of all 60


def test_missing_readings_are_gaps_and_a_small_one_still_shows() -> None:
    [row, _, _] = chart_lines([None, 0.5, None], [1.0, 2.0, 3.0], width=3, height=1, scale=PERCENT)
    assert row.endswith(" ▁ ")


def test_values_past_the_scale_stay_within_it() -> None:
    [top, bottom, _, _] = chart_lines([250.0, -5.0], [1.0, 2.0], width=2, height=2, scale=PERCENT)
    assert top.endswith("█ ") and bottom.endswith("█ ")


def test_the_styled_chart_says_what_the_lines_say() -> None:
    text = chart([10.0, 90.0], [0.0, 60.0], width=10, height=3, scale=PERCENT, style="red", axis="dim")
    assert text.plain.split("\n") == chart_lines([10.0, 90.0], [0.0, 60.0], 10, 3, PERCENT)
    assert "-1m00s" in text.plain or "-60s" in text.plain or "-1m" in text.plain


@pytest.mark.parametrize(
    ("peak", "floor", "top"),
    [
        (73.0, 0.0, 100.0),
        (3.1e9, 0.0, 5e9),
        (0.0, 0.0, 1.0),
        (120.0, 100.0, 200.0),
        (40.0, 100.0, 100.0),
        (2.2, 0.0, 2.5),
        (1.0, 0.0, 1.0),
    ],
)
def test_the_scale_top_is_a_round_number_at_or_above_the_peak(peak: float, floor: float, top: float) -> None:
    assert nice_top(peak, floor) == top


def test_the_span_words() -> None:
    assert span_words(0.4) == "now"
    assert span_words(45.0).startswith("-45")
