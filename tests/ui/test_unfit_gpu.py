"""A GPU with a problem at rank "ecc" or worse (gputui/views/problems.py RANKS: an error, uncorrected
ECC errors, a row remap pending or failed, a page retirement pending) is never free: not marked free
in the GPU or the fleet table, not counted free, not matched by the filter's `free`, and never
ready for `wait` or `pick`, whoever holds it. With no holder its Holders cell says "no holder" in the
warning style, not "✓ free" beside "ECC 1".

The "preflight" sim scenario's GPU 3 has an uncorrected ECC error and a row remap pending and no
process: GPU 0 is free, GPU 1 holds orphaned memory, GPU 2 is hot and throttling (a lesser problem:
free) and GPU 3 is not.
"""

from __future__ import annotations

from pathlib import Path

from gputui.config.file import HostSpec
from gputui.ui import GpuTuiApp
from gputui.ui.widgets.fleet_table import fleet_row_key
from gputui.views.problems import RANKS, gpu_free, gpu_problems, gpu_subject, host_state
from gputui.views.readiness import Conditions, unready
from tests.support.apps import live_app
from tests.support.pilot import redrawn, wait_for

HOST = "p"
ECC = 3


def preflight_app(tmp_path: Path) -> GpuTuiApp:
    spec = HostSpec(name=HOST, reader="sim", sim_scenario="preflight", sim_seed=9)
    return live_app(tmp_path, spec, operator="root")


async def test_a_gpu_with_ecc_errors_is_never_free(tmp_path: Path) -> None:
    app = preflight_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        view = app.fleet.view(HOST)
        await wait_for(pilot, lambda: view.sample is not None and len(view.preflight) == 4, 60)
        main = app._main
        assert main is not None
        main.select_host(HOST)
        await redrawn(pilot)
        table = main.gpu_table
        row = table.rows_data()[str(ECC)]
        holders = row["holders"]
        assert holders.plain.startswith("no holder") and "free" not in holders.plain, holders.plain
        warn = table.style_of("gpu--warn")
        assert holders.get_style_at_offset(app.console, 0) == warn
        assert row["gpu"].style != table.style_of("gpu--free")
        assert "ECC" in holders.plain  # its flag still says why
        assert table.rows_data()["0"]["holders"].plain == "✓ free"  # a healthy idle GPU still is
        assert table.rows_data()["2"]["holders"].plain.startswith("✓ free")  # throttling is lesser
        assert table.rows_data()["all"]["name"].plain == "4 GPUs, 2 free"
        main.select_host(None)
        await redrawn(pilot)
        fleet = main.fleet_table.rows_data()[fleet_row_key(HOST, ECC)]
        assert "ECC" in fleet["state"].plain, fleet["state"].plain
        assert "free" not in fleet["holders"].plain and fleet["holders"].plain.startswith("no holder")
        # The rule, for every GPU: a problem at rank "ecc" or worse and it is not free.
        sample = view.sample
        assert sample is not None
        state = host_state(view, 600.0)
        for gpu in sample.gpus:
            severe = [p for p in gpu_problems(view, sample, gpu) if p.rank <= RANKS["ecc"]]
            assert not (severe and gpu_free(view, gpu)), (gpu.index, severe)
            states = gpu_subject(view, state, gpu).states
            assert ("free" in states) == gpu_free(view, gpu), (gpu.index, states)
        assert [g.index for g in sample.gpus if gpu_free(view, g)] == [0, 2]
        # `wait` and `pick` judge it as the tables show it: not ready, and why.
        gpu = next(g for g in sample.gpus if g.index == ECC)
        reasons = unready(gpu, sample, Conditions(), view.preflight[ECC])
        assert [u.condition for u in reasons] == ["ecc"]
        assert "1 uncorrected ECC error" in reasons[0].words and "reset" in reasons[0].words
