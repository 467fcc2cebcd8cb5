"""gputui.text.units: numbers for people, shared by the CLI and the dashboard."""

from __future__ import annotations

import pytest

from gputui.text.units import (
    GIB,
    MIB,
    fmt_bytes,
    fmt_bytes_of,
    fmt_load,
    fmt_memory,
    fmt_memory_of,
    fmt_mib,
    fmt_mib_of,
    fmt_percent,
)


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


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (0, "0 MiB"),
        (MIB - 1, "0 MiB"),  # a part of a MiB is not counted, as in nvidia-smi
        (615 * MIB, "615 MiB"),
        (118234 * MIB + 12345, "118234 MiB"),  # no digit grouping: reads and greps as nvidia-smi's
        (150754820096, "143771 MiB"),  # an H200: 143771 MiB, where GiB says 140
    ],
)
def test_fmt_mib_is_exact_whole_mib(value: int | None, text: str) -> None:
    assert fmt_mib(value) == text
    assert fmt_memory(value, exact=True) == text


def test_fmt_memory_switches_between_gib_and_exact_mib() -> None:
    h200 = 150754820096
    assert fmt_memory(h200) == "140 GiB" and fmt_memory(h200, exact=True) == "143771 MiB"
    assert fmt_memory_of(61234 * MIB, h200) == "59.8/140 GiB"
    assert fmt_memory_of(61234 * MIB, h200, exact=True) == "61234/143771 MiB"
    assert fmt_mib_of(None, h200) == "-" and fmt_mib_of(0, h200) == "0/143771 MiB"


def test_fmt_load_reads_as_uptime_writes_it() -> None:
    assert fmt_load(None) == "-" and fmt_load(0.5) == "0.50" and fmt_load(12.254) == "12.25"


def test_host_metrics_words() -> None:
    from gputui.model import HostMetrics
    from gputui.text.words import host_metrics_parts

    m = HostMetrics(37.5, 64, 12.25, 10.1, 9.8, 2048 * GIB, 1024 * GIB, 8 * GIB, GIB, 864000.5)
    assert host_metrics_parts(m) == [
        "CPU 38% of 64 CPUs",
        "load 12.25 10.10 9.80",
        "RAM 1024/2048 GiB",
        "swap 1.0 GiB",
        "up 10d00h",
    ]
    assert host_metrics_parts(m, exact=True)[2:4] == ["RAM 1048576/2097152 MiB", "swap 1024 MiB"]
    assert host_metrics_parts(HostMetrics(swap_total=0, swap_used=0)) == ["no swap"]
    assert host_metrics_parts(HostMetrics()) == []
    assert host_metrics_parts(HostMetrics(load5=1.5)) == ["load - 1.50 -"]  # each in its place
