"""What every process record says of a process (gputui.model.process): one way to name it in words,
whichever record it is (a sample's process or parent, a job's root, a verdict, a plan's entry)."""

from __future__ import annotations

from gputui.model import Job, Parent, Proc, ProcessVerdict, Restart, brief_process


def test_a_process_is_named_by_its_command_else_its_name_else_a_placeholder():
    assert brief_process(("/opt/venv/bin/python", "train.py"), "python") == "python train.py"
    assert brief_process((), "kworker/0:1") == "[kworker/0:1]"
    assert brief_process((), None) == "?" and brief_process((), None, "-") == "-"
    # A command line that says nothing (an empty first word) is no better than none.
    assert brief_process(("",), "ghost") == "[ghost]"


def test_every_process_record_names_it_the_same_way():
    command, name = ("/usr/bin/python3", "-S", "serve.py"), "python3"
    records = [
        Proc(pid=5, start_time=1, kind="user", command=command, name=name),
        Parent(pid=4, command=command, name=name),
        Job(id="4", root=4, command=command, name=name),
    ]
    assert {r.command_line for r in records} == {"python3 -S serve.py"}
    said = [ProcessVerdict(pid=5, result="exited", command=command, name=name), Restart(pid=4, name=name)]
    assert [v.brief for v in said] == ["python3 -S serve.py", "[python3]"]
    assert Proc(pid=6, start_time=None, kind="zombie").command_line == "-"
