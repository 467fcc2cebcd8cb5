"""The dashboard's view state without Textual: what the operator chose (host, filters, pause, the
process followed, the selection) as plain values, changed by the same calls the screen makes."""

from __future__ import annotations

import pytest

from gputui.fleet.session import HostView
from gputui.model import Proc
from gputui.ui.state import DashboardState, Pause, TableFilter
from gputui.views.filter import EVERYTHING, FilterError


def view(name: str) -> HostView:
    return HostView(name)


def proc(pid: int, start: int | None = 100) -> Proc:
    return Proc(pid=pid, start_time=start, name=f"p{pid}", command=(f"p{pid}",), kind="user", gpus=(0,))


def test_a_filter_keeps_its_last_readable_text_and_says_whether_it_changed() -> None:
    f = TableFilter()
    assert (f.text, f.query) == ("", EVERYTHING)
    assert f.set("user:alice")
    assert f.text == "user:alice" and f.query
    assert not f.set("user:alice")  # the same text: nothing to draw again
    with pytest.raises(FilterError):
        f.set("mem>")
    assert f.text == "user:alice"  # a text with a mistake leaves the table as it was
    assert f.set("")
    assert not f.query


def test_each_table_has_its_own_filter() -> None:
    state = DashboardState()
    state.filter_of("fleet").set("state:idle-held")
    state.filter_of("procs").set("python")
    assert state.fleet.text == "state:idle-held" and state.procs.text == "python"


def test_pause_freezes_the_hosts_and_their_ages_and_resume_lets_go() -> None:
    live = [view("a"), view("b")]
    pause = Pause()
    assert not pause.on and pause.views(live) == live and pause.paused_for(50.0) == 0.0
    pause.toggle(live, {"a": 2.0, "b": None}, now=10.0)
    assert pause.on
    frozen = pause.views(live)
    assert [v.name for v in frozen] == ["a", "b"] and all(
        f is not v for f, v in zip(frozen, live, strict=True)
    )
    assert pause.view(live[0]) is frozen[0]
    # The sample shown ages while paused, from its age then; a host with none stays without.
    assert pause.age_of("a", live_age=0.0, now=13.0) == 5.0
    assert pause.age_of("b", live_age=0.0, now=13.0) is None
    assert pause.paused_for(13.0) == 3.0
    added = view("c")  # a host that joined since: shown live
    assert pause.views([*live, added])[-1] is added
    pause.toggle(live, {}, now=20.0)
    assert not pause.on and pause.views(live) == live
    assert pause.age_of("a", live_age=0.5, now=30.0) == 0.5


def test_a_frozen_host_does_not_move_when_the_fleet_appends_to_it() -> None:
    live = view("a")
    pause = Pause()
    pause.toggle([live], {}, now=0.0)
    live.preflight["x"] = object()  # type: ignore[assignment]
    assert "x" not in pause.view(live).preflight


def test_switching_hosts_keeps_each_hosts_gpu_row() -> None:
    state = DashboardState()
    state.switch_host("a", gpu_row=None)
    assert state.host == "a" and state.gpu_row("a", "all") == "all"
    state.switch_host("b", gpu_row="2")  # leaving a with its cursor on GPU 2
    state.switch_host(None, gpu_row="1")  # leaving b on GPU 1, to the fleet
    assert state.host is None
    assert (state.gpu_row("a", "all"), state.gpu_row("b", "all")) == ("2", "1")
    state.switch_host("a", gpu_row="3")  # the fleet has no GPU row of its own to keep
    assert state.gpu_row("a", "all") == "2"
    state.enter_at("b", "0")  # enter on b's GPU 0 in the fleet table
    assert state.gpu_row("b", "all") == "0"


def test_switching_hosts_keeps_the_selection_and_the_filters() -> None:
    state = DashboardState()
    state.switch_host("a", None)
    state.selection.add("a", proc(10))
    state.procs.set("p10")
    state.switch_host("b", None)
    state.selection.add("b", proc(20))
    state.switch_host("a", None)
    assert state.selection.keys("a") == {(10, 100)} and state.selection.keys("b") == {(20, 100)}
    assert state.selection.count() == 2 and state.procs.text == "p10"


def test_a_selection_is_by_pid_and_start_time() -> None:
    state = DashboardState()
    state.selection.toggle("a", proc(10, start=100))
    assert state.selection.keys("a") == {(10, 100)}
    state.selection.toggle("a", proc(10, start=999))  # the PID reused: another process
    assert state.selection.keys("a") == {(10, 100), (10, 999)}
    state.selection.toggle("a", proc(10, start=100))
    assert state.selection.keys("a") == {(10, 999)}


def test_stepping_through_hosts_wraps_around_all_hosts() -> None:
    state = DashboardState()
    hosts = ["a", "b"]
    assert state.step_host(hosts, 1) == "a"
    assert state.step_host(hosts, -1) == "b"
    state.switch_host("b", None)
    assert state.step_host(hosts, 1) is None
    state.switch_host("gone", None)  # a host no longer in the fleet: back to "All hosts"
    assert state.step_host(hosts, 1) is None


def test_following_remembers_the_row_and_its_host_until_it_ends() -> None:
    state = DashboardState()
    assert state.following.key is None
    state.following.follow("10:100", "a")
    assert (state.following.key, state.following.host) == ("10:100", "a")
    state.following.end()
    assert state.following.key is None


def test_the_fleet_order_is_kept_while_the_fleet_keeps_its_size() -> None:
    state = DashboardState()
    assert state.place_hosts([view("a"), view("b")]) == {"a": 0, "b": 1}
    assert state.place_hosts([view("b"), view("a")]) == {"a": 0, "b": 1}
    assert state.place_hosts([view("c"), view("a"), view("b")]) == {"c": 0, "a": 1, "b": 2}


def test_the_free_gpus_are_counted_from_the_busy_counts() -> None:
    state = DashboardState()
    state.busy.update({"a": (3, 4), "b": (0, 8)})
    assert state.free_gpus() == (12, 9)
