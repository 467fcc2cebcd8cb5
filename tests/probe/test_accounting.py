"""Where every byte of a GPU's memory went (gputui/probe/accounting.py), on hand-made records.

The same split on real processes through the sim is in tests/probe/test_probe_sim.py and, on a real
H200, in tests/gpu."""

from __future__ import annotations

from typing import Any

from gputui.probe.accounting import account, device_file
from gputui.probe.common import IDLE_SLACK

GiB = 1 << 30
PREFIX = "/dev/nvidia"


def gpu(used: int, baseline: int = 0, index: int = 0, minor: int | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "minor": index if minor is None else minor,
        "memory_used": used,
        "memory_baseline": baseline,
    }


def rec(pid: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "pid": pid,
        "kind": kind,
        "gpus": [],
        "links": [],
        "holds": [],
        "reason": None,
        "protected": None,
        **fields,
    }


def test_everything_listed_is_accounted_for():
    a = account(gpu(10 * GiB, baseline=0), {5: {0: 10 * GiB}}, {5: rec(5, "user", gpus=[0])}, PREFIX)
    assert a is not None
    assert a["processes"] == 10 * GiB and a["unaccounted"] == 0
    assert all(a[k] == 0 for k in ("ghost", "container", "hidden", "orphaned", "unknown", "unreported"))


def test_the_idle_baseline_and_the_slack_are_not_unaccounted():
    a = account(gpu((615 << 20) + (10 << 20), baseline=615 << 20), {}, {}, PREFIX)
    assert a is not None and a["baseline"] == 615 << 20 and a["unaccounted"] == 0
    assert IDLE_SLACK > (10 << 20)


def test_a_ghosts_memory_names_its_suspects():
    records = {
        7: rec(7, "ghost", reason="dead", gpus=[0], links=[8]),
        8: rec(8, "hidden", gpus=[0], links=[7]),
    }
    a = account(gpu(9 * GiB), {7: {0: 9 * GiB}}, records, PREFIX)
    assert a is not None and a["ghost"] == 9 * GiB and a["ghosts"] == [7] and a["suspects"] == [8]


def test_memory_listed_for_another_pid_namespace_is_a_containers():
    records = {
        40: rec(40, "ghost", reason="other-namespace", gpus=[0]),
        9001: rec(9001, "hidden", nspid=40, container="docker-3f2a", holds=["/dev/nvidia0"]),
    }
    a = account(gpu(4 * GiB), {40: {0: 4 * GiB}}, records, PREFIX)
    assert a is not None and a["container"] == 4 * GiB and a["containers"] == ["docker-3f2a"]


def test_memory_nobody_lists_held_by_hidden_holders_of_the_gpu():
    records = {3: rec(3, "hidden", gpus=[0], links=[2], holds=["/dev/nvidia0"])}
    a = account(gpu(2 * GiB), {}, records, PREFIX)
    assert a is not None and a["hidden"] == 2 * GiB and a["suspects"] == [3]


def test_memory_with_no_holder_but_monitors_is_orphaned():
    records = {
        1: rec(1, "monitor", holds=["/dev/nvidia0", "/dev/nvidiactl"], protected="monitor"),
        2: rec(2, "hidden", holds=["/dev/nvidia1"]),  # another GPU's file
    }
    a = account(gpu(int(2.1 * GiB)), {}, records, PREFIX)
    assert a is not None and a["orphaned"] == int(2.1 * GiB) and a["unaccounted"] == a["orphaned"]


def test_unattributed_holders_of_the_device_file_make_it_unknown_not_orphaned():
    records = {2: rec(2, "hidden", holds=["/dev/nvidia3"])}
    a = account(gpu(GiB, index=0, minor=3), {}, records, PREFIX)
    assert a is not None and a["unknown"] == GiB and a["suspects"] == [2]
    assert device_file(gpu(0, index=0, minor=3), PREFIX) == "/dev/nvidia3"  # the minor, not the index


def test_a_process_listed_without_a_figure_takes_the_rest():
    a = account(gpu(3 * GiB), {6: {0: None}}, {6: rec(6, "user", gpus=[0])}, PREFIX)
    assert a is not None and a["unreported"] == 3 * GiB and a["unreported_pids"] == [6] and a["orphaned"] == 0


def test_no_memory_figure_no_accounting():
    assert account({"index": 0, "memory_used": None}, {}, {}, PREFIX) is None


def test_memory_nobody_holds_is_orphaned_on_the_host_and_outside_from_a_container():
    """Issue 18, defect 3: not listed, no holder here. In the host's PID namespace nothing can hold
    it (orphaned: a reset frees it); inside a container, another guest or the host may."""
    on_host = account(gpu(4 * GiB), {}, {}, PREFIX)
    assert on_host is not None and on_host["orphaned"] == 4 * GiB and on_host["outside"] == 0
    inside = account(gpu(4 * GiB), {}, {}, PREFIX, foreign_pids=True)
    assert inside is not None and inside["outside"] == 4 * GiB and inside["orphaned"] == 0
    assert inside["unaccounted"] == 4 * GiB
    # A holder here that nothing attributes: unknown either way (it may hold it).
    holder = {9: rec(9, "hidden", reason="unattributed", holds=["/dev/nvidia0"])}
    inside = account(gpu(4 * GiB), {}, holder, PREFIX, foreign_pids=True)
    assert inside is not None and inside["unknown"] == 4 * GiB and inside["outside"] == 0


def test_a_process_nvml_lists_on_another_gpu_is_no_suspect_for_memory_nobody_is_listed_for():
    """Every CUDA process opens every /dev/nvidiaN. A user NVML lists on GPU 0 would be listed on
    GPU 1 too if it had memory there: it does not make GPU 1's memory "unknown" (and, inside a
    container, it does not hide that the memory is another guest's)."""
    user = {5: rec(5, "user", gpus=[0], holds=["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"])}
    on_host = account(gpu(2 * GiB, index=1), {5: {0: 8 * GiB}}, user, PREFIX)
    assert on_host is not None and on_host["orphaned"] == 2 * GiB and on_host["unknown"] == 0, on_host
    inside = account(gpu(2 * GiB, index=1), {5: {0: 8 * GiB}}, user, PREFIX, foreign_pids=True)
    assert inside is not None and inside["outside"] == 2 * GiB and inside["suspects"] == [], inside
