"""The GPU record's `topology` on real NVML (gputui/probe/readers/nvml.py _read_topology): one entry
per other GPU of the host, each pair the same both ways, and where nvidia-smi is installed the same
link `nvidia-smi topo -m` prints (NV# nvlink, PIX switch, PXB switches, PHB bridge, NODE node, SYS
system). A one-GPU host has an empty topology (no peer), not null."""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest

from gputui.model.gpus import Gpu
from gputui.probe.common import TOPOLOGY_LEVELS
from gputui.probe.core import Probe
from gputui.probe.readers.nvml import NvmlReader
from gputui.views.pick import closest

SMI_WORDS = {"PIX": "switch", "PXB": "switches", "PHB": "bridge", "NODE": "node", "SYS": "system"}


def smi_topology() -> dict[tuple[int, int], str] | None:
    """`nvidia-smi topo -m`'s matrix of GPU pairs in TOPOLOGY_LEVELS' words; None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60).stdout
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # it colours its header on a terminal
    lines = [line.split() for line in text.splitlines() if line.strip()]
    header = [w for w in lines[0] if re.fullmatch(r"GPU\d+", w)]
    out = {}
    for row in lines[1:]:
        if not row or not re.fullmatch(r"GPU\d+", row[0]):
            continue
        a = int(row[0][3:])
        for column, cell in zip(header, row[1 : 1 + len(header)], strict=False):
            b = int(column[3:])
            if a != b:
                out[a, b] = "nvlink" if cell.startswith("NV") else SMI_WORDS.get(cell, cell)
    return out


def test_topology_is_read_once_for_every_pair_and_agrees_with_nvidia_smi():
    reader = NvmlReader()
    started = time.perf_counter()
    probe = Probe(reader)
    hello = probe.start()
    opened = time.perf_counter() - started
    try:
        assert hello["error"] is None
        records = probe.sample(full=True)["gpus"]
        indexes = [g["index"] for g in records]
        links: dict[tuple[int, int], str] = {}
        for g in records:
            topo = g["topology"]
            assert isinstance(topo, dict), f"GPU {g['index']}: no topology from NVML ({topo!r})"
            assert sorted(int(k) for k in topo) == [i for i in indexes if i != g["index"]], topo
            assert set(topo.values()) <= set(TOPOLOGY_LEVELS), topo
            links.update({(g["index"], int(peer)): level for peer, level in topo.items()})
            decoded = Gpu.from_wire(g)
            assert decoded is not None and len(decoded.topology or ()) == len(topo)
        assert all(links[b, a] == level for (a, b), level in links.items()), links  # both ways alike
        print(f"{len(indexes)} GPUs, links {sorted(links.items())}; probe start {opened * 1e3:.1f} ms")
        smi = smi_topology()
        if smi is None:
            pytest.skip("no nvidia-smi to compare with")
        # nvidia-smi says NV# only where NVLink joins the pair; NVML's P2P over NVLink agrees.
        assert {k: v for k, v in smi.items() if k in links} == links
        gpus = [Gpu.from_wire(g) for g in records]
        if len(gpus) >= 2:
            pair = closest([g for g in gpus if g is not None], 2)
            best = min(TOPOLOGY_LEVELS.index(level) for level in links.values())
            assert TOPOLOGY_LEVELS.index(links[pair[0].index, pair[1].index]) == best
    finally:
        probe.close()
