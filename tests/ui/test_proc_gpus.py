"""The process table says which GPU (issue 12, defect 4): a GPU column, and the memory of the GPU
in view (a process on GPUs 0 and 1 shows 118 GiB there, and 236 GiB with `0,1` on the host's view)."""

from __future__ import annotations

import pytest

from gputui.text.units import index_runs
from tests.support.apps import build_app
from tests.support.demopids import demo_pid
from tests.support.pilot import redrawn, screen_text, settle

VLLM = str(
    demo_pid("vllm_serve.py")
)  # the demo's vllm server: tensor parallel on GPUs 0 and 1, 118 GiB on each


def row_text(main: object, pid: str) -> dict[str, str]:
    table = main.proc_table  # type: ignore[attr-defined]
    key = next(k for k in table.rows_data() if k.startswith(f"{pid}:"))
    return {column.value: table.get_cell(key, column.value).plain for column in table.columns}


@pytest.mark.parametrize("size", [(80, 24), (120, 36), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_gpu_column_and_memory_of_the_gpu_in_view(size: tuple[int, int]) -> None:
    app = build_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app._main
        main.select_host("demo-a")
        await redrawn(pilot)
        row = row_text(main, VLLM)
        assert row["gpu"] == "0,1"
        assert row["mem"] == "236 GiB"  # the whole host: its total, over the GPUs it lists
        assert "all GPUs · memory: total on its GPUs" in main.proc_table.border_title

        for gpu in (0, 1):
            main.gpu_table.move_to(str(gpu))
            await redrawn(pilot)
            row = row_text(main, VLLM)
            assert row["gpu"] == "0,1" and row["mem"] == "118 GiB"
            assert f"GPU {gpu} · memory on GPU {gpu}" in main.proc_table.border_title
            # The GPU in view stands out in the list.
            key = next(k for k in main.proc_table.rows_data() if k.startswith(f"{VLLM}:"))
            cell = main.proc_table.get_cell(key, "gpu")
            here = [cell.plain[s.start : s.end] for s in cell.spans if "underline" in str(s.style)]
            assert here == [str(gpu)]
        text = screen_text(app)
        assert "GPU" in text and "118 GiB" in text


def test_index_runs() -> None:
    def plain(indexes: list[int]) -> str:
        return ",".join(text for text, _ in index_runs(indexes))

    assert plain([1, 0]) == "0,1"
    assert plain([0, 1, 2, 3]) == "0-3"
    assert plain([7, 0, 2, 3, 4]) == "0,2-4,7"
    assert plain([]) == ""
