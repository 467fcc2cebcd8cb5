"""MIG and MPS fields of the wire records (gputui/model/): typed, and hostile values cost only
themselves (a bad instance is dropped, a bad id or size is None), never the record."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.model import Gpu, MigInstance, MigPlace, Proc

GiB = 1 << 30


def gpu(**fields: Any) -> Gpu:
    parsed = Gpu.from_wire({"index": 0, **fields})
    assert parsed is not None
    return parsed


def proc(**fields: Any) -> Proc:
    parsed = Proc.from_wire({"pid": 4121, "start_time": 1, "kind": "user", **fields})
    assert parsed is not None
    return parsed


def test_instances_parse_and_read_as_gi_dot_ci() -> None:
    g = gpu(
        mig_instances=[
            {"gi": 1, "ci": 0, "uuid": "MIG-a", "name": "NVIDIA H200 MIG 3g.71gb",
             "memory_total": 71 * GiB, "memory_used": 40 * GiB},
            {"gi": 2, "ci": None, "uuid": None, "name": None, "memory_total": None, "memory_used": None},
        ]
    )  # fmt: skip
    assert g.mig_instances == (
        MigInstance(1, 0, "MIG-a", "NVIDIA H200 MIG 3g.71gb", 71 * GiB, 40 * GiB),
        MigInstance(2, None),
    )
    assert [i.label for i in g.mig_instances] == ["1.0", "2.?"]


@pytest.mark.parametrize("value", [None, False, 0, "on", {"gi": 1}, 1.5])
def test_mig_off_or_nonsense_is_none(value: Any) -> None:
    assert gpu(mig_instances=value).mig_instances is None
    assert gpu().mig_instances is None  # an older probe says nothing


def test_hostile_instances_cost_only_themselves() -> None:
    g = gpu(
        mig_instances=[
            "x", None, [], {"gi": -1}, {"gi": True}, {"gi": 1.0}, {"gi": "1"}, {"gi": 0xFFFFFFFF},
            {"gi": 2, "ci": -3, "memory_total": -1, "memory_used": float("nan"), "uuid": 7,
             "name": "\x1b[31mred\x07"},
            *({"gi": 3} for _ in range(500)),
        ]
    )  # fmt: skip
    assert g.mig_instances is not None
    first, *rest = g.mig_instances
    assert first == MigInstance(2, None, None, "\\e[31mred\\x07", None, None)
    assert len(rest) < 64  # bounded
    assert gpu(mig_instances=[{"gi": 0, "ci": 0}]).mig_instances == (MigInstance(0, 0),)  # 0 is an id


def test_a_process_places_and_mps_role() -> None:
    p = proc(
        gpus=[0, 1],
        mig=[{"gpu": 0, "gi": 1, "ci": 0}, {"gpu": 0, "gi": 1, "ci": 0}, {"gpu": 1, "gi": 2, "ci": None}],
        mps="client",
    )
    assert p.mig == (MigPlace(0, 1, 0), MigPlace(1, 2, None))  # duplicates once
    assert [m.label for m in p.mig] == ["0:1.0", "1:2.?"]
    assert p.mig_on(0) == (MigPlace(0, 1, 0),) and p.mig_on(3) == ()
    assert p.mps == "client"
    assert proc(mps="server").mps == "server" and proc(mps="control").mps == "control"


@pytest.mark.parametrize("mps", ["Server", "root", "", 1, True, None, ["server"], {"server": 1}])
def test_hostile_mps_roles_are_none(mps: Any) -> None:
    assert proc(mps=mps).mps is None


@pytest.mark.parametrize(
    "mig",
    [None, "0:1.0", {"gpu": 0, "gi": 1}, [None, 3, "x", [0, 1, 0]], [{"gpu": -1, "gi": 1}],
     [{"gpu": 0, "gi": -1}], [{"gpu": 0}], [{"gpu": True, "gi": 1}], [{"gpu": 0, "gi": 1 << 40}],
     [{"gpu": 5000, "gi": 1}]],
)  # fmt: skip
def test_hostile_places_are_dropped(mig: Any) -> None:
    assert proc(mig=mig).mig == ()


def test_places_are_bounded() -> None:
    many = [{"gpu": 0, "gi": i, "ci": 0} for i in range(10_000)]
    assert 0 < len(proc(mig=many).mig) <= 64
