"""A host's CPU and memory, and its processes' GPU memory, SM, CPU and RSS, kept in bounded rings
from the samples it sends (gputui/fleet/history.py); a large fleet keeps processes' only for the
hosts whose processes were looked at last."""

from __future__ import annotations

from gputui.fleet.fleet import FOLLOWED, PROCESS_HOSTS, Fleet
from gputui.fleet.session import PROCS_KEPT, HostView
from gputui.model import Sample
from tests.support.samples import GiB, gpu, proc


def sample_at(seq: int, cpu: float, used: int, procs: list[dict[str, object]]) -> Sample:
    return Sample.from_wire(
        {
            "seq": seq,
            "time": 1_800_000_000.0 + seq,
            "gpus": [gpu(0, 10 * GiB)],
            "processes": procs,
            "host": {"cpu_percent": cpu, "cpus": 8, "memory_total": 100 * GiB, "memory_used": used},
            "scan": {"full": True, "age": 0.0, "unreadable": 0},
        }
    )


def test_a_hosts_samples_fill_its_cpu_and_memory_and_its_processes_rings():
    view = HostView(name="h")
    for seq in range(1, 4):
        user = proc(100, "user", gpus=[0], gpu_memory={"0": seq * GiB}, cpu_percent=10.0 * seq, rss=seq * GiB)
        hidden = proc(108, "hidden", gpus=[0], reason="pgid", links=[100], cpu_percent=1.0)
        view.record(sample_at(seq, 20.0 * seq, 25 * seq * GiB, [user, hidden]))
    assert view.host_history.cpu == [20.0, 40.0, 60.0]
    assert view.host_history.memory == [25.0, 50.0, 75.0]
    ring = view.processes.get((100, 1100))
    assert ring is not None
    assert ring.gpu_memory == [GiB, 2 * GiB, 3 * GiB]
    assert ring.cpu == [10.0, 20.0, 30.0] and ring.rss == [GiB, 2 * GiB, 3 * GiB]
    hidden_ring = view.processes.get((108, 1108))
    assert hidden_ring is not None and hidden_ring.gpu_memory == [None] * 3  # holds no listed memory


def test_a_host_keeps_at_most_procs_kept_processes_rings():
    view = HostView(name="h")
    many = [proc(1000 + i, "user", gpus=[0], gpu_memory={"0": (i + 1) * GiB}) for i in range(PROCS_KEPT + 9)]
    view.record(sample_at(1, 1.0, GiB, many))
    assert len(view.processes) == PROCS_KEPT
    assert view.processes.get((1000, 2000)) is None  # the smallest holder is the one left out
    last = PROCS_KEPT + 8
    assert view.processes.get((1000 + last, 2000 + last)) is not None


def test_a_large_fleet_keeps_processes_history_only_for_the_hosts_followed_last():
    fleet = Fleet()
    small = [fleet.add(f"h{i}", lambda: None) for i in range(PROCESS_HOSTS)]  # type: ignore[arg-type, return-value]
    assert all(v.keep_processes for v in small)
    fleet.add("one-too-many", lambda: None)  # type: ignore[arg-type, return-value]
    assert not any(v.keep_processes for v in fleet.hosts)
    for i in range(FOLLOWED + 1):
        fleet.follow(f"h{i}")
    kept = [v.name for v in fleet.hosts if v.keep_processes]
    assert kept == [f"h{i}" for i in range(1, FOLLOWED + 1)]
    fleet.follow("no-such-host")  # ignored
    assert [v.name for v in fleet.hosts if v.keep_processes] == kept
