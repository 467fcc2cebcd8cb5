"""Demos told apart: each live demo has a name (`--name` of `gputui demo`, GPUTUI_DEMO_NAME for every
command; by default one per installation), runs in a directory of its own, and `demo stop` ends that
one only, saying which. A command never attaches to a demo that another installation started without
saying so.

Real `gputui` commands on real demos in the test's own XDG_RUNTIME_DIR and TMPDIR (the `live` fixture,
tests/cli/conftest.py, checks at the end that no process of them is left); daemons are told apart by
their PIDs and start times.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gputui.probe.readers.sim import start_time
from tests.support.livedemo import Live, below
from tests.support.paths import REPO
from tests.support.simprobe import alive

pytestmark = pytest.mark.timeout(600)


def named(live: Live, name: str | None, **more: str) -> dict[str, str]:
    env = dict(live.env, **more)
    if name is None:
        env.pop("GPUTUI_DEMO_NAME", None)
    else:
        env["GPUTUI_DEMO_NAME"] = name
    return env


def status(live: Live, env: dict[str, str]) -> dict[str, Any]:
    r = live.gputui("demo", "status", "--json", env=env)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    if doc["running"]:  # the fixture's check covers every process of it
        live.seen |= {(doc["pid"], start_time(doc["pid"]))} | below(doc["pid"])
    return doc


def stop(live: Live, env: dict[str, str]) -> None:
    status(live, env)
    live.gputui("demo", "stop", env=env)


def test_two_named_demos_run_apart_and_stopping_one_leaves_the_other(live: Live) -> None:
    alpha, beta = named(live, "alpha"), named(live, None)
    try:
        first = live.gputui("demo", "start", env=alpha)
        assert first.returncode == 0 and "'alpha'" in first.stdout, first.stdout + first.stderr
        second = live.gputui("demo", "start", "--name", "beta", env=beta)
        assert second.returncode == 0 and "'beta'" in second.stdout, second.stdout + second.stderr
        a, b = status(live, alpha), status(live, named(live, "beta"))
        assert a["running"] and b["running"] and a["pid"] != b["pid"]
        assert (a["name"], b["name"]) == ("alpha", "beta") and a["directory"] != b["directory"]
        a_daemon, b_daemon = (a["pid"], start_time(a["pid"])), (b["pid"], start_time(b["pid"]))
        # Every --demo command of beta's shell attaches to beta's sims.
        snap = live.gputui("snapshot", "--demo", "demo-a", "--json", env=named(live, "beta"))
        assert snap.returncode == 0, snap.stderr
        assert "another installation" not in snap.stderr
        # Stopping alpha says which demo it stops, and beta's daemon runs on.
        stopped = live.gputui("demo", "stop", env=alpha)
        assert stopped.returncode == 0, stopped.stderr
        assert f"stopped the demo 'alpha' (PID {a['pid']}, in {a['directory']})" in stopped.stdout
        assert not alive(*a_daemon)
        assert alive(*b_daemon) and status(live, named(live, "beta"))["pid"] == b["pid"]
        # The default demo (this installation's) is neither of them.
        default = status(live, named(live, None))
        assert not default["running"] and default["name"] not in ("alpha", "beta")
        again = live.gputui("demo", "stop", env=alpha)
        assert again.returncode == 0 and "the demo 'alpha' is not running" in again.stdout
    finally:
        stop(live, alpha)
        stop(live, named(live, "beta"))


def test_a_demo_of_another_installation_is_never_attached_to_without_a_word(
    live: Live, tmp_path: Path
) -> None:
    # A second checkout of gputui: the same code in another directory, its own installation.
    other = tmp_path / "checkout"
    shutil.copytree(REPO / "gputui", other / "gputui", ignore=shutil.ignore_patterns("__pycache__"))
    mine = named(live, None)
    theirs = dict(named(live, None), PYTHONPATH=str(other))

    other_gputui = live.gputui  # with PYTHONPATH naming the other checkout: its gputui runs

    shared_mine, shared_theirs = (
        dict(mine, GPUTUI_DEMO_NAME="shared"),
        dict(theirs, GPUTUI_DEMO_NAME="shared"),
    )
    try:
        started = live.gputui("demo", "start", env=mine)
        assert started.returncode == 0, started.stderr
        # By default each installation has its own demo: the other checkout's is not running.
        assert status(live, mine)["running"]
        theirs_status = other_gputui("demo", "status", "--json", env=theirs)
        assert theirs_status.returncode == 1 and not json.loads(theirs_status.stdout)["running"]
        # Under one name, the other checkout's command attaches, and says on stderr whose demo it is.
        assert live.gputui("demo", "start", env=shared_mine).returncode == 0
        snap = other_gputui("snapshot", "--demo", "demo-b", "--json", env=shared_theirs)
        assert snap.returncode == 0, snap.stderr
        assert "the demo 'shared' was started by another installation" in snap.stderr, snap.stderr
        assert str(REPO / "gputui") in snap.stderr
        text = other_gputui("demo", "status", env=shared_theirs)
        assert "another installation" in text.stdout and str(REPO / "gputui") in text.stdout, text.stdout
    finally:
        stop(live, mine)
        stop(live, shared_mine)


def test_a_bad_demo_name_is_one_line_and_exit_2(live: Live) -> None:
    for args, env in (
        (("demo", "status", "--name", "../x"), live.env),
        (("demo", "stop"), named(live, "a b\x1b[31m")),
        (("snapshot", "--demo"), named(live, "-x")),
    ):
        r = live.gputui(*args, env=env)
        assert r.returncode == 2, r.stdout + r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stderr and "\x1b" not in r.stderr, r.stderr
        assert "demo name" in lines[0]
