"""How close a host's GPUs are (a GPU record's `topology`, docs/PROTOCOL.md): read once by the NVML
reader (P2P over NVLink, else the PCIe common ancestor, on a fake pynvml: tests/gpu/test_topology_gpu.py
reads the real one), laid out by the sim as a PCIe server, decoded by the app field by field from
an untrusted probe, and what `gputui pick` makes of it (gputui/views/pick.py)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.model.gpus import Gpu, topology
from gputui.probe.common import TOPOLOGY_LEVELS
from gputui.probe.core import Probe
from gputui.probe.readers.nvml import NvmlReader
from gputui.probe.readers.sim.gpus import sim_topology
from gputui.views.pick import closest, link_of
from tests.support.fakenvml import NVMLError, fake_pynvml, load
from tests.support.fuzzing import FUZZ

NOT_SUPPORTED = 3


def two_gpus_as(nv: Any, level: int | None, nvlink: bool | None) -> Any:
    """The fake's two GPUs linked as given: `level` NVML's common ancestor (None: not supported),
    `nvlink` whether P2P over NVLink is OK (None: not supported)."""

    def ancestor(a: int, b: int) -> int:
        if level is None:
            raise NVMLError(NOT_SUPPORTED)
        return level

    def p2p(a: int, b: int, index: int) -> int:
        assert index == 2  # NVML_P2P_CAPS_INDEX_NVLINK
        if nvlink is None:
            raise NVMLError(NOT_SUPPORTED)
        return 0 if nvlink else 5

    nv.nvmlDeviceGetTopologyCommonAncestor = ancestor
    nv.nvmlDeviceGetP2PStatus = p2p
    return nv


@pytest.mark.parametrize(
    ("level", "nvlink", "read"),
    [
        (10, False, "switch"),
        (20, None, "switches"),
        (30, False, "bridge"),
        (40, False, "node"),
        (50, False, "system"),
        (0, False, "board"),
        (50, True, "nvlink"),
        (None, True, "nvlink"),
    ],
)
def test_the_nvml_reader_reads_each_pair_once_into_both_records(
    monkeypatch: pytest.MonkeyPatch, level: int | None, nvlink: bool | None, read: str
) -> None:
    monkeypatch.setitem(
        sys.modules, "pynvml", two_gpus_as(fake_pynvml(load("nvml_h200x2_idle.json")), level, nvlink)
    )
    probe = Probe(NvmlReader())
    probe.start()
    try:
        gpus = probe.sample(full=True)["gpus"]
        assert [g["topology"] for g in gpus] == [{"1": read}, {"0": read}]
        assert Gpu.from_wire(gpus[0]).topology == ((1, read),)  # type: ignore[union-attr]
    finally:
        probe.close()


def test_a_driver_that_tells_nothing_of_any_pair_sends_null(monkeypatch: pytest.MonkeyPatch) -> None:
    for nv in (
        two_gpus_as(fake_pynvml(load("nvml_h200x2_idle.json")), None, None),
        fake_pynvml(load("nvml_h200x2_idle.json")),
    ):
        monkeypatch.setitem(sys.modules, "pynvml", nv)
        reader = NvmlReader()
        reader.open()
        assert [g["topology"] for g in reader.read()[0]] == [None, None]
        assert Gpu.from_wire(reader.read()[0][0]).topology is None  # type: ignore[union-attr]


def test_the_sim_is_a_pcie_server_pairs_under_a_switch_fours_on_a_node() -> None:
    assert sim_topology(0, 4) == {"1": "switch", "2": "node", "3": "node"}
    assert sim_topology(5, 8) == {"0": "system", "1": "system", "2": "system", "3": "system", "4": "switch",
                                  "6": "node", "7": "node"}  # fmt: skip
    assert sim_topology(0, 1) == {}


def test_an_old_probe_without_the_field_and_bad_entries_are_taken_as_far_as_they_go() -> None:
    assert Gpu.from_wire({"index": 0}).topology is None  # type: ignore[union-attr]
    assert topology(None) is None and topology([["1", "nvlink"]]) is None and topology("nvlink") is None
    hostile = {"1": "nvlink", "-1": "node", "x": "node", "2": "NVLINK", "3": ["switch"], "٣": "node",
               "4": None, "99999": "node", "5": "system", "\x1b[2J": "switch"}  # fmt: skip
    assert topology(hostile) == ((1, "nvlink"), (5, "system"))


@FUZZ
@given(
    st.dictionaries(
        st.text(max_size=6), st.one_of(st.sampled_from(TOPOLOGY_LEVELS), st.text(), st.integers(), st.none())
    )
)
def test_topology_decoding_never_raises_and_keeps_only_what_it_can_name(value: dict[str, Any]) -> None:
    links = topology(value)
    assert links is not None and list(links) == sorted(set(links))
    assert all(0 <= peer <= 4095 and level in TOPOLOGY_LEVELS for peer, level in links)


def gpus_of(layout: int, ready: list[int], linked: bool = True) -> list[Gpu]:
    return [
        Gpu(
            index=i,
            topology=tuple((int(p), lv) for p, lv in sim_topology(i, layout).items()) if linked else None,
        )
        for i in ready
    ]


def indexes(gpus: tuple[Gpu, ...]) -> list[int]:
    return [g.index for g in gpus]


def test_the_closest_gpus_come_first_then_the_lowest_indexes() -> None:
    assert indexes(closest(gpus_of(8, [1, 2, 3]), 2)) == [2, 3]  # a switch, not 1-2 on one node
    assert indexes(closest(gpus_of(8, [0, 2, 4, 5, 7]), 2)) == [4, 5]
    assert indexes(closest(gpus_of(8, [3, 4, 5, 6]), 3)) == [4, 5, 6]  # one node, not across
    assert indexes(closest(gpus_of(8, [0, 1, 2, 3, 4, 5, 6, 7]), 4)) == [0, 1, 2, 3]
    assert indexes(closest(gpus_of(8, [6, 2, 5, 3], linked=False), 2)) == [2, 3]  # no topology
    assert indexes(closest(gpus_of(8, [6, 2]), 5)) == [2, 6]
    assert link_of(gpus_of(8, [2, 3])) == "switch" and link_of(gpus_of(8, [1, 2])) == "node"
    assert link_of(gpus_of(8, [3, 4])) == "system" and link_of(gpus_of(8, [3])) is None
    assert link_of(gpus_of(8, [2, 3], linked=False)) is None
    # One record that says less than its peer's: the peer's word counts.
    one_sided = [
        Gpu(index=0, topology=((1, "nvlink"),)),
        Gpu(index=1),
        Gpu(index=2, topology=((0, "switch"),)),
    ]
    assert indexes(closest(one_sided, 2)) == [0, 1] and link_of(one_sided[:2]) == "nvlink"


def test_a_large_host_is_chosen_from_at_once() -> None:
    """64 GPUs, 32 wanted: grown from each GPU with running distances, not every subset."""
    assert indexes(closest(gpus_of(64, list(range(64))), 32)) == list(range(32))
