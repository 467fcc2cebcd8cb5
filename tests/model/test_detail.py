"""The records of the process detail and the tree: typed at the edge, every field on its own."""

from gputui.model import Ancestor, DeviceFd, Parent, ProcDetail, Sample


def test_a_detail_is_parsed_field_by_field_and_made_printable():
    detail = ProcDetail.from_wire(
        {
            "pid": 4121,
            "start_time": 99,
            "result": "ok",
            "command": ["python", "\x1b[31mred", 7, None],
            "cwd": "/home/\x07a",
            "exe": 5,
            "user": "[b]alice",
            "threads": -3,
            "started": float("nan"),
            "elapsed": 12.5,
            "rss": -1,
            "nspid": [4121, "x", 0, 17],
            "cgroup": ["0::/user.slice", {"a": 1}],
            "fds": [{"fd": 3, "path": "/dev/nvidiactl"}, {"fd": -1, "path": "/dev/x"}, "junk", {"fd": 4}],
            "fds_more": "many",
            "parents": [{"pid": 4100, "start_time": 5, "name": "bash\x1b"}, {"pid": 0}, 3],
            "parents_end": "init",
            "unreadable": {"cwd": "permission denied", "x": 3},
        }
    )
    assert detail is not None and detail.ok and not detail.gone
    assert detail.command == ("python", "\\e[31mred")
    assert detail.cwd == "/home/\\x07a" and detail.exe is None and detail.user == "[b]alice"
    assert detail.threads is None and detail.started is None and detail.elapsed == 12.5 and detail.rss is None
    assert detail.nspid == (4121, 17) and detail.cgroup == ("0::/user.slice",)
    assert detail.fds == (DeviceFd(3, "/dev/nvidiactl"),) and detail.fds_more == 0
    assert detail.parents == (Ancestor(4100, 5, "bash\\e"),)
    assert detail.unreadable == {"cwd": "permission denied"}


def test_a_detail_without_a_pid_is_none_and_an_unknown_result_is_refused():
    assert ProcDetail.from_wire({"pid": "1", "result": "ok"}) is None
    odd = ProcDetail.from_wire({"pid": 3, "start_time": 1, "result": "yes"})
    assert odd is not None and odd.result == "refused" and not odd.ok
    gone = ProcDetail.from_wire({"pid": 3, "start_time": 1, "result": "pid-reused", "message": "another"})
    assert gone is not None and gone.gone and gone.message == "another"


def test_a_samples_parents_are_typed_and_bad_ones_dropped():
    sample = Sample.from_wire(
        {
            "seq": 1,
            "time": 1.0,
            "gpus": [],
            "processes": [],
            "parents": [
                {
                    "pid": 4100,
                    "start_time": 7,
                    "ppid": 1,
                    "name": "torchrun",
                    "command": ["torchrun", "x.py"],
                },
                {"pid": -2},
                "junk",
                {"pid": 4200, "user": "\x1b]0;x"},
            ],
        }
    )
    assert sample.parents == (
        Parent(pid=4100, start_time=7, ppid=1, name="torchrun", command=("torchrun", "x.py")),
        Parent(pid=4200, user="\\e]0;x"),
    )
    assert Sample.from_wire({"parents": "no"}).parents == ()
