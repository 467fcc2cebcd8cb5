"""The app's view of a sample's jobs (gputui.model.Job, Proc.job) and of `outside` memory: each
field checked on its own, a record that cannot be named or stopped refused, bounded, as every other
parser of a probe's records. A probe is not trusted (docs/PROTOCOL.md "Jobs")."""

from __future__ import annotations

from typing import Any

from gputui.model import HostFacts, Job, MemoryAccount, Proc, Sample
from gputui.probe.jobs import MAX_JOB_PROCESSES, MAX_JOBS, MAX_MEMBERS
from gputui.text.words import part_words, unaccounted_words

GiB = 1 << 30


def job(**fields: Any) -> dict[str, Any]:
    record = {
        "id": "4100",
        "root": 4100,
        "root_start": 123400,
        "name": "torchrun",
        "command": ["torchrun", "--nproc-per-node", "2", "train.py"],
        "user": "alice",
        "uid": 1000,
        "state": "S",
        "ppid": 3990,
        "boundary": "shell",
        "members": [4121, 4122],
        "processes": [[4100, 123400], [4121, 123456], [4122, 123457]],
        "gpus": [0, 1],
        "memory": 18 * GiB,
        "slurm_job": None,
        "container": None,
        "unit": None,
    }
    record.update(fields)
    return record


def test_a_job_record_is_parsed_field_by_field():
    parsed = Job.from_wire(job(slurm_job="4711", container="lxc/129", unit="vllm.service"))
    assert parsed is not None
    assert parsed.id == "4100" and parsed.root == 4100 and parsed.key == (4100, 123400)
    assert parsed.members == (4121, 4122) and parsed.gpus == (0, 1) and parsed.memory == 18 * GiB
    assert parsed.processes == ((4100, 123400), (4121, 123456), (4122, 123457))
    assert parsed.command_line == "torchrun --nproc-per-node 2 train.py"
    assert parsed.where == "slurm 4711, container lxc/129, unit vllm.service"
    assert parsed.describe()["processes"] == [[4100, 123400], [4121, 123456], [4122, 123457]]
    assert parsed.describe()["members"] == [4121, 4122] and parsed.describe()["unit"] == "vllm.service"


def test_a_job_is_described_in_the_wire_order_its_identity_first():
    """`snapshot --json` documents a job's keys in this order (gputui/views/report.py), the fields
    it shares with every process record (model.ProcessFacts) after the job's identity."""
    parsed = Job.from_wire(job())
    assert parsed is not None
    assert list(parsed.describe()) == list(job())
    assert parsed.describe() == {**job(), "command": list(job()["command"])}


def test_a_job_that_cannot_be_named_or_stopped_is_refused():
    for bad in ({"id": None}, {"id": ""}, {"id": "x" * 65}, {"id": "41 00"}, {"id": "41\x1b[2J"}, {"id": 4100},
                {"root": None}, {"root": 0}, {"root": -1}, {"root": True}, {"root": "4100"}, {"root": 1 << 40}):  # fmt: skip
        assert Job.from_wire(job(**bad)) is None, bad
    assert Job.from_wire("a job") is None and Job.from_wire(None) is None


def test_a_bad_field_costs_that_field_only():
    parsed = Job.from_wire(
        job(
            root_start=-5,
            memory=float("nan"),
            uid="root",
            boundary="cgroup-escape",
            members=[4121, "4122", None, -3, 4121, True],
            processes=[[4100, 1], [4121], "x", [None, 3], [4122, -1], [4100, 1]],
            gpus=[1, 0, "2", -1, 1],
            command="torchrun",
            slurm_job=4711,
            container=["lxc/129"],
            unit="\x1b]0;pwned\x07vllm.service",
        )
    )
    assert parsed is not None
    assert parsed.root_start is None and parsed.memory is None and parsed.uid is None
    assert parsed.boundary is None and parsed.members == (4121,) and parsed.gpus == (0, 1)
    assert parsed.processes == ((4100, 1), (4122, None)) and parsed.command == ()
    assert parsed.slurm_job is None and parsed.container is None
    assert parsed.unit is not None and "\x1b" not in parsed.unit and "\x07" not in parsed.unit


def test_jobs_are_bounded_and_an_id_taken_twice_is_refused():
    many = [job(id=str(5000 + i), root=5000 + i) for i in range(MAX_JOBS + 10)]
    sample = Sample.from_wire({"seq": 1, "gpus": [], "processes": [], "jobs": many, "jobs_omitted": 3})
    assert len(sample.jobs) == MAX_JOBS and sample.jobs_omitted == 10 + 3
    huge = job(members=list(range(1, 5000)), processes=[[p, p] for p in range(1, 5000)])
    parsed = Job.from_wire(huge)
    assert parsed is not None and len(parsed.members) == MAX_MEMBERS
    assert len(parsed.processes) == MAX_JOB_PROCESSES
    twice = Sample.from_wire(
        {"seq": 1, "gpus": [], "processes": [], "jobs": [job(), job(root=4200), job(id="7", root=7), "x"]}
    )
    assert [j.id for j in twice.jobs] == ["7"]  # which "4100" is meant cannot be told
    assert Sample.from_wire({"seq": 1, "gpus": [], "processes": [], "jobs": {"id": "1"}}).jobs == ()


def test_a_process_names_its_job_and_the_sample_finds_it():
    proc = {"pid": 4121, "start_time": 123456, "kind": "user", "gpus": [0], "job": "4100"}
    sample = Sample.from_wire({"seq": 1, "gpus": [], "processes": [proc], "jobs": [job()]})
    [p] = sample.processes
    assert p.job == "4100" and sample.job_of(p) is sample.jobs[0] and sample.job("nope") is None
    for bad in (4100, "", "a b", None, "\x1b"):
        parsed = Proc.from_wire(dict(proc, job=bad))
        assert parsed is not None and parsed.job is None, bad
    older = Proc.from_wire({"pid": 5, "start_time": 1, "kind": "user"})  # a probe before jobs
    assert older is not None and older.job is None


def test_outside_memory_is_its_own_part_in_the_app_and_in_words():
    books = MemoryAccount.from_wire({"processes": 12 * GiB, "outside": 30 * GiB, "orphaned": 0})
    assert books is not None and books.outside == 30 * GiB and books.unaccounted == 30 * GiB
    assert books.parts() == [("processes", 12 * GiB), ("outside", 30 * GiB)]
    words = part_words(books, "outside")
    assert words.startswith("30.0 GiB used outside this container: another container or the host")
    assert "orphaned" not in unaccounted_words(books) and "reset" not in unaccounted_words(books)
    assert MemoryAccount.from_wire({"outside": "a lot"}).unaccounted == 0  # type: ignore[union-attr]
    facts = HostFacts.from_hello({"host": {"hostname": "guest", "host_pid_namespace": False}})
    assert facts.host_pid_namespace is False
    assert HostFacts.from_hello({"host": {"hostname": "old"}}).host_pid_namespace is None
    assert HostFacts.from_hello({"host": {"host_pid_namespace": "no"}}).host_pid_namespace is None
