"""ReplayLink: a recording played back through the Link protocol."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gputui.fleet.fleet import Fleet
from gputui.recording.player import ReplayLink, load_recording
from gputui.transport.base import TransportError

HELLO = {"type": "hello", "v": 1, "host": {"hostname": "h"}, "error": None}


def sample(seq: int) -> dict[str, object]:
    return {"type": "sample", "v": 1, "seq": seq, "time": 1.0 + seq, "gpus": [], "processes": []}


async def test_hello_then_samples_then_waits() -> None:
    link = ReplayLink([sample(1), HELLO, sample(2)])
    await link.open()
    assert (await link.recv())["type"] == "hello"  # type: ignore[index]
    assert [(await link.recv())["seq"] for _ in range(2)] == [1, 2]  # type: ignore[index]
    pending = asyncio.ensure_future(link.recv())
    await asyncio.sleep(0.05)
    assert not pending.done()  # holds the last state
    await link.close()
    assert await pending is None


async def test_loop_counts_seq_on_and_rate_paces() -> None:
    link = ReplayLink([HELLO, sample(1), sample(2)], loop=True, rate=200)
    await link.open()
    await link.recv()
    seqs = [(await link.recv())["seq"] for _ in range(5)]  # type: ignore[index]
    assert seqs == [1, 2, 3, 4, 5]
    await link.send({"type": "configure", "v": 1, "interval": 0.5})
    assert link.sent == [{"type": "configure", "v": 1, "interval": 0.5}]


async def test_no_hello_is_a_transport_error() -> None:
    with pytest.raises(TransportError):
        await ReplayLink([sample(1)]).open()


async def test_the_fleet_takes_a_replay_like_a_probe() -> None:
    fleet = Fleet()
    view = fleet.add("h", lambda: ReplayLink([HELLO, sample(1), sample(2)]), interval=3600)
    fleet.start()
    try:
        await fleet.wait_first_samples(5)
        for _ in range(100):
            if view.sample is not None and view.sample.seq == 2:
                break
            await asyncio.sleep(0.01)
        assert view.status == "live" and view.sample is not None and view.sample.seq == 2
        assert view.facts is not None and view.facts.hostname == "h"
    finally:
        await fleet.stop()


def test_load_recording(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"type": "hello", "v": 1}\n\n{"type": "sample", "v": 1, "seq": 1}\n')
    assert [r["type"] for r in load_recording(good)] == ["hello", "sample"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "hello", "v": 1}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        load_recording(bad)
