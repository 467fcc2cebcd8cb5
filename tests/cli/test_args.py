"""Bad numbers on the command line and in the config: a clear message and exit status 2, never a
traceback (the real CLI, as a subprocess)."""

from __future__ import annotations

import pytest

from tests.support.cli import gputui


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "0", "1e10", "soon"])
def test_snapshot_timeout_out_of_range_is_a_usage_error(value):
    """nan, -1 and inf were taken: nan and -1 gave up at once, inf waited forever for a down host."""
    run = gputui("snapshot", "--demo", "--timeout", value)
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert "argument --timeout" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "0.05", "-1", "1e308"])
def test_ui_interval_out_of_bounds_is_a_usage_error(value):
    run = gputui("--demo", "--interval", value)
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert "argument --interval" in run.stderr and "Traceback" not in run.stderr


def test_config_interval_below_the_floor_is_refused_at_load(tmp_path):
    """interval = 0.07 passed the config's own floor (0.05) and then crashed `gputui --demo` with a
    ValueError from make_app."""
    path = tmp_path / "config.toml"
    path.write_text('theme = "dark"\ninterval = 0.07\n')
    run = gputui("--demo", "--config", str(path))
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert f"{path}:2:" in run.stderr and "interval" in run.stderr and "Traceback" not in run.stderr
