"""Elapsed at a resolution that holds still: whole seconds below a minute, then minutes (`7m`), hours
and minutes, days and hours. A probe's delta carries a process's age once it moved by a second and a
hundredth of itself, and the table is drawn every few seconds: `7m05s` became `7m09s` between two
refreshes, and two processes started a few seconds apart swapped places in a sort by Elapsed as their
ages were carried in turn. Sorted, what looks the same ties, and ties go by PID: the order holds."""

from __future__ import annotations

import copy
from typing import Any

from gputui.text.units import fmt_elapsed
from tests.support.apps import build_app, recording
from tests.support.demopids import demo_pid
from tests.support.pilot import redrawn, settle

# demo-a's vllm server, embedding server, benchmark and notebook kernel
VLLM, EMBED, BENCH, NOTEBOOK = (
    str(demo_pid(s)) for s in ("vllm_serve.py", "serve_embed.py", "bench.py", "notebook_kernel.py")
)
PIDS = (VLLM, EMBED, BENCH, NOTEBOOK)


def aged(ages: dict[str, float]) -> list[dict[str, Any]]:
    """demo-a's recording with these processes' ages in every sample."""
    records = copy.deepcopy(list(recording("demo-a")))
    for record in records:
        for proc in record.get("processes", ()) if record["type"] == "sample" else ():
            if str(proc["pid"]) in ages:
                proc["elapsed"] = ages[str(proc["pid"])]
    return records


async def sorted_by_elapsed(ages: dict[str, float]) -> list[tuple[str, str]]:
    """(PID, Elapsed) of demo-a's user processes, in the process table sorted by Elapsed."""
    app = build_app(("demo-a",), records={"demo-a": aged(ages)})
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        main = app._main
        assert main is not None
        main.select_host("demo-a")
        await redrawn(pilot)
        table = main.proc_table
        table.sort_by("elapsed", reverse=True)
        await redrawn(pilot)
        keys = [table.coordinate_to_cell_key((i, 0)).row_key.value or "" for i in range(table.row_count)]
        rows = [(k.partition(":")[0], table.rows_data()[k]["elapsed"].plain) for k in keys]
        return [r for r in rows if r[0] in PIDS]


async def test_elapsed_holds_still_and_its_sort_does_not_reshuffle() -> None:
    # Two refreshes: the vllm server's and the embedding server's ages (started 4 s apart) each
    # carried in turn.
    before = await sorted_by_elapsed({VLLM: 428.9, EMBED: 425.3, BENCH: 3725.0, NOTEBOOK: 30.2})
    after = await sorted_by_elapsed({VLLM: 428.9, EMBED: 429.4, BENCH: 3729.6, NOTEBOOK: 34.9})
    tied = [(pid, "7m") for pid in sorted((VLLM, EMBED), key=int)]  # ties by PID
    assert before == [(BENCH, "1h02m"), *tied, (NOTEBOOK, "30s")]
    assert after == [(BENCH, "1h02m"), *tied, (NOTEBOOK, "34s")]


def test_each_resolution() -> None:
    assert [fmt_elapsed(s) for s in (None, 0.4, 59.9, 60.0, 3599.0, 3600.0, 86399.0, 86400.0, 200000.0)] == [
        "-", "0s", "59s", "1m", "59m", "1h00m", "23h59m", "1d00h", "2d07h",
    ]  # fmt: skip
