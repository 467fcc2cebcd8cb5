"""Snapshot tests (pytest-textual-snapshot) of fixed screens: replayed recordings, a frozen clock.

Textual is pinned (8.2.8) so the SVGs do not drift. After a deliberate change to the look, run
`pytest tests/ui/test_snapshots.py --snapshot-update` and review the new SVGs before committing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.scenes import SCENES, THEMES


def _compare(snap_compare: Any, scene_name: str, theme: str) -> bool:
    scene = SCENES[scene_name]
    return snap_compare(scene.build(theme), terminal_size=scene.size, run_before=scene.run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_main_screen(snap_compare: Any, theme: str) -> None:
    assert _compare(snap_compare, "main", theme)


@pytest.mark.parametrize("theme", THEMES)
def test_help_screen(snap_compare: Any, theme: str) -> None:
    assert _compare(snap_compare, "help", theme)


@pytest.mark.parametrize("theme", THEMES)
def test_fleet_screen(snap_compare: Any, theme: str) -> None:
    assert _compare(snap_compare, "fleet", theme)


@pytest.mark.parametrize("theme", THEMES)
def test_plan_dialog(snap_compare: Any, theme: str) -> None:
    """f on a GPU with a ghost: its hidden holder is a target, the ghost left alone, sweep offered."""
    assert _compare(snap_compare, "plan", theme)


@pytest.mark.parametrize("theme", THEMES)
def test_gpu_view(snap_compare: Any, theme: str) -> None:
    """i on GPU 1: 2.1 GiB no process holds (orphaned), the reset offered; settings; history."""
    assert _compare(snap_compare, "gpu-view", theme)


@pytest.mark.parametrize("theme", THEMES)
def test_process_tree(snap_compare: Any, theme: str) -> None:
    """t on demo-a: the sim's session (a parent not in the list, dimmed) under the probe, its jobs
    under it, the ghost's hidden child tied to it (dashed), the zombie under its parent."""
    assert _compare(snap_compare, "tree", theme)


@pytest.mark.parametrize("theme", THEMES)
def test_host_metrics_header(snap_compare: Any, theme: str) -> None:
    """The host header line with the host's CPU, load, RAM, swap and uptime (demo-a: fixed figures)."""
    assert _compare(snap_compare, "host-metrics", theme)


@pytest.mark.parametrize("scene", ["jobs", "jobs-narrow", "jobs-wide"])
def test_jobs_view(snap_compare: Any, scene: str) -> None:
    """J on the "jobs" scenario: the launcher's row above its two ranks, the supervisor's above its
    worker, one-process jobs as their process's row; placed (120 and 200 columns): a Slurm job, a
    unit, and the Container column for the LXC and Docker jobs."""
    assert _compare(snap_compare, scene, "gputui-dark")


@pytest.mark.parametrize("theme", THEMES)
def test_plan_dialog_for_a_job(snap_compare: Any, theme: str) -> None:
    """X on the launcher's row: the job, its root first (no GPU), then each rank with its GPU and
    memory."""
    assert _compare(snap_compare, "plan-job", theme)


@pytest.mark.parametrize(
    "scene",
    [
        "host-metrics-narrow",
        "host-metrics-wide",
        "fleet-metrics-wide",
        "mib",
        "mib-narrow",
        "mib-wide",
        "mib-gpu-view",
        "paused",
    ],
)
def test_misc_screens(snap_compare: Any, scene: str) -> None:
    assert _compare(snap_compare, scene, "gputui-dark")


@pytest.mark.parametrize(
    "scene",
    [
        "tree-narrow",
        "tree-wide",
        "proc-detail",
        "proc-detail-narrow",
        "proc-detail-wide",
        "preflight",
        "gpu-view-narrow",
        "gpu-view-wide",
        "gpu-view-mig",
        "ghost",
        "filter",
        "narrow",
        "narrow-fleet",
        "no-driver",
        "plan-host",
        "plan-narrow",
        "mig",
        "mig-narrow",
        # demo-b went down 2 minutes ago: dimmed, "last seen 2m ago", counted neither busy nor free.
        "down",
        "down-narrow",
        "down-wide",
    ],
)
def test_other_screens(snap_compare: Any, scene: str) -> None:
    assert _compare(snap_compare, scene, "gputui-dark")
