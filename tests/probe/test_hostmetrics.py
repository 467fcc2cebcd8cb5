"""The host's metrics in every sample (docs/PROTOCOL.md `sample.host`): CPU %, load, RAM, swap, uptime,
read from /proc by a real probe, and from made-up /proc files for the edges."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from gputui.probe.hostmetrics import HostMetrics, bounded, parse_meminfo, parse_stat
from gputui.probe.wire import HOST_LIMITS
from tests.support.probeproc import ProbeProcess

STAT = (
    "cpu  {user} 0 {system} {idle} 0 0 0 0 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\ncpu1 1 0 1 1 0 0 0 0 0 0\nintr 1\n"
)
MEMINFO = (
    "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    12000000 kB\n"
    "Buffers:          100000 kB\nSwapCached:            0 kB\nSwapTotal:        2000000 kB\n"
    "SwapFree:         1500000 kB\n"
)


def fake_proc(root: Path, user: int = 100, system: int = 100, idle: int = 800) -> Path:
    root.mkdir(exist_ok=True)
    (root / "stat").write_text(STAT.format(user=user, system=system, idle=idle))
    (root / "meminfo").write_text(MEMINFO)
    (root / "loadavg").write_text("3.52 2.10 1.00 2/467 12345\n")
    (root / "uptime").write_text("273600.25 500000.00\n")
    return root


def test_every_metric_from_proc_files(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    metrics = HostMetrics(str(proc))
    # The same file written again (the kernel makes /proc/stat anew on every read): 300 of the
    # next 400 ticks busy.
    fake_proc(proc, user=300, system=200, idle=900)
    got = metrics.read()
    assert got == {
        "cpu_percent": 75.0,
        "cpus": 2,
        "load1": 3.52,
        "load5": 2.10,
        "load15": 1.00,
        "memory_total": 16000000 * 1024,
        "memory_used": 4000000 * 1024,  # MemTotal - MemAvailable, as `free` counts it
        "swap_total": 2000000 * 1024,
        "swap_used": 500000 * 1024,
        "uptime": 273600.25,
    }
    assert metrics.read()["cpu_percent"] == 75.0  # no tick since: the same figure, not null
    metrics.close()


def test_the_first_reading_has_no_cpu_percent_and_a_counter_that_goes_back_resets(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", user=1000, system=1000, idle=1000)
    metrics = HostMetrics(str(proc))
    fake_proc(proc, user=10, system=10, idle=10)  # went back (a VM restored): no figure from that
    assert metrics.read()["cpu_percent"] is None
    fake_proc(proc, user=20, system=10, idle=20)
    assert metrics.read()["cpu_percent"] == 50.0


def test_unreadable_or_garbled_files_are_null_never_an_error(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_bytes(b"cpu  x y z\n\x00\xff")
    (proc / "meminfo").write_bytes(b"MemTotal: lots kB\nMemAvailable: 99999999999 kB\n")
    (proc / "loadavg").write_bytes(b"nan nan nan")
    # no uptime file at all
    got = HostMetrics(str(proc)).read()
    assert got == dict.fromkeys(HOST_LIMITS)
    assert HostMetrics(str(tmp_path / "nowhere")).read() == dict.fromkeys(HOST_LIMITS)


@pytest.mark.parametrize(
    ("files", "expect"),
    [
        # Partly readable: each figure stands alone.
        ({"loadavg": b"1.50 garbage 0.25 1/2 3\n"}, {"load1": 1.5, "load5": None, "load15": 0.25}),
        ({"loadavg": b"-1 -2 -3 1/2 3\n"}, {"load1": None, "load5": None, "load15": None}),
        ({"loadavg": b"1e300 inf 2000000 1/2 3\n"}, {"load1": None, "load5": None, "load15": None}),
        ({"loadavg": b""}, {"load1": None, "load5": None, "load15": None}),
        ({"uptime": b"-5.0 1.0\n"}, {"uptime": None}),
        ({"uptime": b"99999999999999999999 1\n"}, {"uptime": None}),
        # Free over total (a torn read), totals past any real machine, negatives.
        (
            {"meminfo": b"MemTotal: 100 kB\nMemAvailable: 50 kB\nSwapTotal: 10 kB\nSwapFree: 20 kB\n"},
            {"memory_total": 102400, "memory_used": 51200, "swap_total": 10240, "swap_used": None},
        ),
        (
            {"meminfo": b"MemTotal: 99999999999999999999 kB\nMemAvailable: 1 kB\nSwapTotal: -4 kB\n"},
            {"memory_total": None, "memory_used": None, "swap_total": None, "swap_used": None},
        ),
        # /proc/stat cut short, or with a negative counter: no CPU figure, the CPU count still read.
        ({"stat": b"cpu  1 2\ncpu0 1 2\n"}, {"cpu_percent": None, "cpus": 1}),
        ({"stat": b"cpu  -100 0 -100 -800 0 0 0 0 0 0\n"}, {"cpu_percent": None, "cpus": None}),
    ],
)
def test_bad_proc_content_is_null_field_by_field(tmp_path: Path, files: dict, expect: dict) -> None:
    proc = fake_proc(tmp_path / "proc")
    for name, data in files.items():
        (proc / name).write_bytes(data)
    metrics = HostMetrics(str(proc))
    got = metrics.read()
    metrics.close()
    assert set(got) == set(HOST_LIMITS)
    for name, value in expect.items():
        assert got[name] == value, name
    untouched = fake_proc_expected()
    for name in set(HOST_LIMITS) - set(expect) - {"cpu_percent"}:
        assert got[name] == untouched[name], name


def fake_proc_expected() -> dict:
    return {
        "cpus": 2,
        "load1": 3.52,
        "load5": 2.10,
        "load15": 1.00,
        "memory_total": 16000000 * 1024,
        "memory_used": 4000000 * 1024,
        "swap_total": 2000000 * 1024,
        "swap_used": 500000 * 1024,
        "uptime": 273600.25,
    }


def test_a_directory_or_unreadable_file_in_place_of_a_proc_file_is_null(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    (proc / "meminfo").unlink()
    (proc / "meminfo").mkdir()  # EISDIR on read
    (proc / "stat").unlink()
    os.symlink(proc / "nowhere", proc / "stat")  # ENOENT on open
    got = HostMetrics(str(proc)).read()
    assert got["memory_total"] is None and got["cpu_percent"] is None and got["cpus"] is None
    assert got["load1"] == 3.52 and got["uptime"] == 273600.25


def test_available_over_total_is_no_used_figure() -> None:
    mem = parse_meminfo(b"MemTotal: 10 kB\nMemAvailable: 20 kB\n")
    assert mem == {"mem_total": 10240, "mem_available": 20480}


def test_parse_stat_counts_online_cpus_and_leaves_guest_time_out() -> None:
    # guest (9th field) is already in user: a total that counted it twice would read too idle.
    ticks, cpus = parse_stat(b"cpu  10 0 10 80 0 0 0 0 50 0\ncpu0 1\ncpu1 1\ncpu2 1\n")
    assert ticks == (20, 100) and cpus == 3


@pytest.mark.parametrize("value", [-1, math.nan, math.inf, True, "12", None, [1], 1e300, 2**70])
def test_values_outside_the_wire_limits_are_null(value: object) -> None:
    record = dict.fromkeys(HOST_LIMITS, value)
    assert bounded(record) == dict.fromkeys(HOST_LIMITS)


def test_int_fields_take_no_float_and_a_percent_stops_at_100() -> None:
    assert bounded({"cpu_percent": 100.5})["cpu_percent"] is None
    assert bounded({"cpus": 4.0, "memory_total": 1.5})["cpus"] is None
    assert bounded({"cpus": 4})["cpus"] == 4


def _meminfo_kib(name: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise AssertionError(name)


def test_a_real_probe_sends_this_hosts_metrics_in_every_sample() -> None:
    probe = ProbeProcess("--interval", "0.2")
    try:
        assert probe.read()["type"] == "hello"
        samples = [probe.read() for _ in range(3)]
    finally:
        probe.close()
    for sample in samples:
        host = sample["host"]
        assert set(host) == set(HOST_LIMITS)
        assert host["memory_total"] == _meminfo_kib("MemTotal") * 1024
        assert 0 <= host["memory_used"] <= host["memory_total"]
        assert host["swap_total"] == _meminfo_kib("SwapTotal") * 1024
        online = sum(
            1
            for line in Path("/proc/stat").read_text().splitlines()
            if line[:3] == "cpu" and line[3:4].isdigit()
        )
        assert host["cpus"] == online
        assert host["uptime"] > 0 and host["load1"] >= 0 and host["load5"] >= 0 and host["load15"] >= 0
        assert [host["load1"], host["load5"], host["load15"]] == pytest.approx(
            [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]], abs=1.0
        )
        assert sample["cost_ms"]["host"] >= 0
    # The first reading is taken when the probe starts: every sample has a CPU figure.
    assert all(0 <= s["host"]["cpu_percent"] <= 100 for s in samples)
    assert samples[-1]["host"]["uptime"] > samples[0]["host"]["uptime"]


def test_the_probe_keeps_four_descriptors_open_for_them_and_no_more(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    before = len(os.listdir("/proc/self/fd"))
    metrics = HostMetrics(str(proc))
    for _ in range(50):
        metrics.read()
    assert len(os.listdir("/proc/self/fd")) == before + 4
    metrics.close()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_first_sample_within_the_first_tick_has_the_average_since_boot(tmp_path: Path) -> None:
    """The probe's first sample can come before /proc/stat's counters move (10 ms): its CPU figure
    is the average since boot, not missing; the next reading after a tick is the interval's."""
    proc = fake_proc(tmp_path / "proc", user=100, system=100, idle=800)
    metrics = HostMetrics(str(proc))
    assert metrics.read()["cpu_percent"] == 20.0  # no tick since: 200 busy of 1,000 since boot
    fake_proc(proc, user=300, system=200, idle=900)
    assert metrics.read()["cpu_percent"] == 75.0  # 300 of the next 400 ticks
