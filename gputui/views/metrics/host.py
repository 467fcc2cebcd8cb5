"""The host families: whether samples come from each host, its state, what its probe says of
itself, and how complete its latest sample is."""

from __future__ import annotations

from ...fleet.session import HostView
from .scrape import HOST_STATES, Family, Scrape, collector, counter, gauge, host_state, info, is_up, label

HOST = ["host"]


@collector("host")
def host_families(scrape: Scrape) -> list[Family]:
    g = gauge
    up = g("gputui_host_up", "1 when samples come from the host's probe, else 0.", HOST)
    state = g(
        "gputui_host_state",
        "1 for the host's state (connecting, live, stale, down, no-gpu), 0 for the others.",
        [*HOST, "state"],
    )
    facts = info("gputui_host", "What the host's probe says of it (hello).", HOST)
    age = g("gputui_host_sample_age_seconds", "Seconds since the host's latest sample arrived.", HOST)
    connects = counter("gputui_host_connects", "Times the link to the host's probe came up.", HOST)
    unreadable = g(
        "gputui_host_unreadable_processes",
        "Processes whose open files the probe could not read (holders may be missed: run it as root).",
        HOST,
    )
    omitted = g(
        "gputui_host_processes_omitted",
        "Process records left out of the host's sample (bounds).",
        HOST,
    )
    for view in scrape.views:
        host = label(view.name)
        current = host_state(view)
        up.add_metric([host], 1.0 if is_up(view) else 0.0)
        for name in HOST_STATES:
            state.add_metric([host, name], 1.0 if name == current else 0.0)
        connects.add_metric([host], float(view.connects))
        _add_info(facts, host, view)
        sample = view.sample
        if sample is None or not is_up(view):
            continue  # a down host's last sample is not today's state
        seconds = view.age  # a clock's reading: read once
        if seconds is not None:
            age.add_metric([host], max(0.0, seconds))
        unreadable.add_metric([host], float(sample.scan_unreadable))
        omitted.add_metric([host], float(sample.omitted))
    return [up, state, facts, age, connects, unreadable, omitted]


def _add_info(family: Family, host: str, view: HostView) -> None:
    facts = view.facts
    if facts is None:
        return
    family.add_metric(
        [host],
        {
            "hostname": label(facts.hostname),
            "driver_version": label(facts.driver_version),
            "probe_version": label(facts.probe_version),
            "reader": label(facts.reader),
        },
    )
