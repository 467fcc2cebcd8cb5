#!/usr/bin/env python3
"""Drive the real dashboard on a real GPU host, headless, and save what it shows.

    python scripts/real_gpu_check.py OUTDIR

Starts CUDA jobs with PyTorch on GPU 0 (a busy one, and the ghost scenario of GPU_FACTS.md: a parent
killed while its forked child keeps the memory), runs `gputui` on this host through the real local
transport and probe (nvml reader) inside Textual's headless driver, waits for samples, saves
screenshots (main screen, the GPU view of GPU 0, a process's detail, then after selecting "free
GPU 0" the plan dialog, then the action log
after confirming) and prints the visible process rows. Ends every process it started, by PID.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.api import HostSpec
from gputui.api import fleet as build_fleet
from gputui.ui import make_app
from tests.support.cudajob import CudaJob


async def session(out: Path, spec: HostSpec) -> None:
    fleet = build_fleet([spec], interval=0.5)
    app = make_app(fleet, interval=0.5, log_path=str(out / "actions.jsonl"))
    async with app.run_test(size=(150, 42)) as pilot:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            fleet.hosts[0].sample is None or len(fleet.hosts[0].history.get(0, [1]).util) < 4
        ):
            await pilot.pause(0.2)
        await pilot.pause(1.0)
        app.save_screenshot(str(out / "real-gpu-main.svg"))
        view = fleet.hosts[0]
        print("host:", view.name, view.status, view.facts.driver_version if view.facts else None)
        for gpu in view.sample.gpus:
            print(
                f"  GPU{gpu.index} {gpu.name} used={gpu.memory_used} util={gpu.util_gpu} free={view.sample.gpu_is_free(gpu)}"
            )
        for p in view.sample.processes:
            print(
                f"  {p.pid:>7} {p.kind:<8} gpus={list(p.gpus)} mem={p.gpu_bytes} reason={p.reason} links={list(p.links)} {p.command_line[:60]}"
            )
        # The detail views: the GPU view of GPU 0 (`i`), then the process detail (`d`) of the process
        # table's first row (the busy job's SM% is there once the probe has read it).
        await pilot.press("down")
        await pilot.pause(0.3)
        await pilot.press("i")
        await pilot.pause(1.0)
        app.save_screenshot(str(out / "real-gpu-gpu-view.svg"))
        print("GPU view:", type(app.screen).__name__)
        await pilot.press("escape")
        await pilot.pause(0.3)
        main = app._main
        if main is not None:
            for p in view.sample.processes:
                if p.gpu_util:
                    print(f"  per-process utilization: {p.pid} {dict(p.gpu_util)}")
            main.proc_table.focus()
            await pilot.press("d")
            await pilot.pause(1.5)
            if app.screen is not main:
                app.save_screenshot(str(out / "real-gpu-process-detail.svg"))
                print("process detail:", type(app.screen).__name__)
                await pilot.press("escape")
                await pilot.pause(0.3)
            main.gpu_table.focus()
            await pilot.pause(0.3)
        # Free GPU 0 through the UI: the GPU table's cursor is on GPU 0; `f` (free this GPU) opens
        # the plan dialog, ctrl+k confirms.
        await pilot.press("f")
        await pilot.pause(0.5)
        app.save_screenshot(str(out / "real-gpu-plan.svg"))
        await pilot.press("ctrl+k")
        t0 = time.monotonic()
        while time.monotonic() - t0 < 20:
            await pilot.pause(0.2)
            s = view.sample
            if s and all(s.gpu_is_free(g) for g in s.gpus if g.index == 0):
                break
        await pilot.pause(1.0)
        app.save_screenshot(str(out / "real-gpu-after.svg"))
        print(f"GPU 0 free after {time.monotonic() - t0:.2f} s (as seen by the app's samples)")
        await pilot.press("q")


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    if "--sim" in sys.argv:  # a dry run of this script on simulated GPUs
        asyncio.run(session(out, HostSpec(name="local", reader="sim", sim_scenario="demo")))
        return 0
    plain = CudaJob(3, busy=True)  # matrix multiplies: per-process utilization has a figure
    ghost = CudaJob(2, fork=True)
    ghost.kill_parent()  # NVML lists a dead PID; the forked child holds the memory
    try:
        asyncio.run(session(out, HostSpec(name="local")))
    finally:
        ghost.stop()
        plain.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
