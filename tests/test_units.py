"""gputui.units: numbers for people, shared by the CLI and the dashboard."""

from __future__ import annotations

import pytest

from gputui.units import GIB, MIB, fmt_bytes, fmt_bytes_of, fmt_percent


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (0, "0 B"),  # one way to write zero: the number 0 and its unit
        (512, "512 B"),
        (12 * 1024, "12.0 KiB"),
        (615 * MIB, "615 MiB"),
        (int(40.5 * MIB), "40.5 MiB"),
        (40 * GIB, "40.0 GiB"),
        (int(99.97 * GIB), "100 GiB"),  # rounds up into the next width, not to "100.0"
        (150754820096, "140 GiB"),  # an H200
        (4 * 150754820096, "562 GiB"),  # four of them: GiB, named as such
        (1023 * MIB + 1000 * 1024, "1.0 GiB"),  # 1024 MiB is written as GiB
        (8 * 150754820096, "1123 GiB"),  # GiB is the largest unit: GPU memory is read in GiB
    ],
)
def test_fmt_bytes_names_its_unit(value: int | None, text: str) -> None:
    assert fmt_bytes(value) == text


@pytest.mark.parametrize(
    ("used", "total", "text"),
    [
        (int(59.7 * GIB), 150754820096, "59.7/140 GiB"),
        (0, 150754820096, "0/140 GiB"),
        (600 * MIB, 150754820096, "600 MiB/140 GiB"),  # never "0.6" of a unit it is not in
        (None, 150754820096, "-"),
    ],
)
def test_fmt_bytes_of_shares_the_unit(used: int | None, total: int | None, text: str) -> None:
    assert fmt_bytes_of(used, total) == text


def test_fmt_percent_zero() -> None:
    assert fmt_percent(0.0) == "0%" and fmt_percent(None) == "-"
