"""The filter language's lists and GPU specs (gputui/views/filter.py): `user:alice,bob` matches
either, and `gpu:` reads the GPU SPECs `clean` and `wait` take (an index, HOST:INDEX, HOST:all, a
UUID or a prefix of one), so the command line's --user, --pid and --gpu are terms of the one
language the filter box reads."""

from __future__ import annotations

import pytest

from gputui.views.filter import FilterError, Subject, parse

UUID = "GPU-5a1b2c3d-0000-1111-2222-333344445555"
GPU = Subject(
    host="gpu017",
    users=frozenset({"alice", "1004"}),  # 1004: a uid with no passwd entry is shown by its number
    uids=frozenset({1001, 1004}),
    kinds=frozenset({"user"}),
    gpus=frozenset({3}),
    uuids=frozenset({UUID}),
    pids=frozenset({4121}),
    jobs=frozenset({"4100"}),
    states=frozenset({"live", "busy"}),
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("user:alice,bob", True),
        ("user:bob,ALICE", True),
        ("user:bob,carol", False),
        ("user:bob,al*", True),
        # A number is a uid: alice's, or one without a name.
        ("user:1001", True),
        ("user:1002", False),
        ("user:bob,1001", True),
        ("user:1004", True),
        ("user:100*", True),  # a pattern is of names: the nameless uid's
        ("user:4294967294", False),
        ("-user:bob,alice", False),
        ("pid:1,4121", True),
        ("pid:1,2", False),
        ("gpu:2,3", True),
        ("gpu:0,1", False),
        ("host:gpu001,gpu017", True),
        ("job:1,4100", True),
        ("kind:ghost,user", True),
        ("state:free,busy", True),
        ("state:free,down", False),
        # GPU specs as `clean --gpu` writes them.
        ("gpu:gpu017:3", True),
        ("gpu:GPU017:3", True),
        ("gpu:gpu017:2", False),
        ("gpu:gpu018:3", False),
        ("gpu:gpu017:all", True),
        ("gpu:gpu0*:all", True),
        ("gpu:gpu018:all", False),
        ("gpu:gpu018:1,gpu017:3", True),
        ("gpu:all", True),
        (f"gpu:{UUID}", True),
        ("gpu:gpu-5A1B", True),  # a prefix, in any case
        ("gpu:GPU-5a1c", False),
        ("gpu:GPU-5a1c,3", True),
    ],
)
def test_lists_and_gpu_specs(text: str, expected: bool) -> None:
    assert parse(text).matches(GPU) is expected, text


def test_a_longer_text_keeps_its_commas() -> None:
    """`cmd`, `model` and `container` are pieces of longer texts, where a comma is just a comma."""
    subject = Subject(commands=("python train.py --gpus 0,1",))
    assert parse("cmd:0,1").matches(subject)
    assert not parse("cmd:0,2").matches(subject)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("user:alice,", "an empty name in user:alice,"),
        ("pid:1,,2", "an empty name in pid:1,,2"),
        ("pid:1,x", "pid:x is no PID"),
        ("gpu:x2", "gpu:x2 is no GPU index, HOST:INDEX, HOST:all or UUID"),
        ("gpu:gpu017:x", "gpu:gpu017:x is no GPU index"),
        ("gpu::3", "gpu::3 is no GPU index"),
        ("kind:user,ghosts", "unknown kind 'ghosts'"),
        ("user:" + "9" * 20, "is no uid: a uid is below 4294967295"),
        ("user:4294967295", "is no uid"),
        ("user:alice,-1", "user:-1 is no user name or uid"),
    ],
)
def test_what_a_bad_list_says(text: str, says: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse(text)
    assert says in caught.value.message, caught.value.message
