"""The hub's HTTP side (gputui/serve, docs/SERVE.md): a real aiohttp server on 127.0.0.1 port 0, in
this test's loop, over real sim probes (subprocesses through the local transport, ended with the
fleet), read by real HTTP clients.

The snapshot, the stream's frames and their order, hostile text from a host, a slow client (bounded
memory, then `reset` and the whole state), 300 clients at once, tokens, /metrics, readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gputui.config.file import HostSpec
from gputui.fleet.fleet import Fleet
from gputui.probe.delta import apply, diff
from gputui.probe.readers.sim import SimReader
from gputui.probe.wire import MAX_PROCESSES
from gputui.serve.app import CSP, Settings
from gputui.serve.stream import FLUSH_EVERY, Hub, Log
from gputui.serve.tokens import Holder, Tokens, digest
from gputui.transport.local import LocalLink
from gputui.views.metrics import FleetCollector, registry
from tests.support.apps import Unreachable
from tests.support.hubserve import hub_on_loopback

pytestmark = pytest.mark.timeout(240)  # real sim probes on a busy machine

INTERVAL = 0.3
HOSTILE = "<script>alert(1)</script>\x1b[2J\x07"


@dataclass
class Served:
    url: str
    hub: Hub
    fleet: Fleet


def sim_fleet(*names: str, **specs: HostSpec) -> Fleet:
    fleet = Fleet()
    for i, name in enumerate(names):
        spec = HostSpec(name=name, reader="sim", sim_scenario="demo", sim_variant=i, sim_seed=1)
        fleet.add(name, lambda spec=spec: LocalLink(spec, interval=INTERVAL), interval=INTERVAL)
    for name, spec in specs.items():
        fleet.add(name, lambda spec=spec: LocalLink(spec, interval=INTERVAL), interval=INTERVAL)
    return fleet


@contextlib.asynccontextmanager
async def served(
    fleet: Fleet, settings: Settings | None = None, log: Log | None = None
) -> AsyncIterator[Served]:
    """The hub over `fleet`, served on a free loopback port until the block ends (then the server,
    the hub and the fleet, with its probes, are stopped)."""
    async with hub_on_loopback(fleet, INTERVAL, settings, log) as (url, hub):
        yield Served(url, hub, fleet)


async def frames(response: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, Any]]:
    """The stream's events as (name, data decoded); comments as ("", text)."""
    event, data = "", []
    while True:
        raw = await response.content.readline()
        if not raw:
            return
        line = raw.decode("utf-8").rstrip("\n")
        if line.startswith(":"):
            yield "", line
        elif line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line == "" and event:
            yield event, json.loads("\n".join(data))
            event, data = "", []


async def until(
    stream: AsyncIterator[tuple[str, Any]], wanted: Callable[[str, Any], bool], seen: list | None = None
) -> tuple[str, Any]:
    async for name, data in stream:
        if seen is not None:
            seen.append((name, data))
        if wanted(name, data):
            return name, data
    raise AssertionError("the stream ended")


class Mirror:
    """What a client holds, built from the frames as the protocol says (samples applied in order)."""

    def __init__(self) -> None:
        self.hosts: dict[str, dict[str, Any]] = {}
        self.samples: dict[str, dict[str, Any]] = {}
        self.hub: dict[str, Any] | None = None
        self.problems: list[Any] | None = None

    def take(self, name: str, data: Any) -> None:
        if name in ("hub", "reset"):
            self.hosts, self.samples = {}, {}
            self.hub = data if name == "hub" else None
        elif name == "host":
            self.hosts[data[0]] = data[1]
        elif name == "sample":
            host, record = data
            if "delta" in record:
                self.samples[host] = apply(self.samples[host], record)  # DeltaError: out of order
            else:
                self.samples[host] = record
        elif name == "problems":
            self.problems = data


async def test_snapshot_and_the_stream_carry_the_fleet_in_the_protocols_order():
    async with served(sim_fleet("demo-a", "demo-b")) as hub, aiohttp.ClientSession() as client:
        async with client.get(f"{hub.url}/api/v1/events") as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/event-stream")
            assert response.headers["Cache-Control"] == "no-store"
            stream = frames(response)
            first = await anext(stream)
            assert first[0] == "hub"
            assert first[1]["v"] == 1 and first[1]["hosts"] == ["demo-a", "demo-b"]
            assert first[1]["actions"] is False and first[1]["interval"] == INTERVAL
            mirror = Mirror()
            mirror.take(*first)
            seen: list[tuple[str, Any]] = []

            def whole(name: str, data: Any) -> bool:
                mirror.take(name, data)
                return len(mirror.samples) == 2 and all(s["seq"] > 3 for s in mirror.samples.values())

            await asyncio.wait_for(until(stream, whole, seen), 60)
            # Deltas came and applied in order onto what the client held.
            assert any(n == "sample" and "delta" in d[1] for n, d in seen)
            assert mirror.hosts["demo-a"]["status"] == "live"
            pids = {p["pid"] for p in mirror.samples["demo-a"]["processes"]}
        async with client.get(f"{hub.url}/api/v1/snapshot") as response:
            assert response.status == 200 and response.content_type == "application/json"
            document = await response.json()
        assert [h["name"] for h in document["hosts"]] == ["demo-a", "demo-b"]
        assert pids & {p["pid"] for p in document["hosts"][0]["processes"]}


async def test_a_joining_client_gets_history_and_whole_samples_then_problems():
    async with served(sim_fleet("demo-a")) as hub, aiohttp.ClientSession() as client:
        await wait_live(hub, 3)
        async with client.get(f"{hub.url}/api/v1/events") as response:
            stream = frames(response)
            names = []
            async for name, data in stream:
                names.append(name)
                if name == "host":
                    history = data[1]["history"]
                    assert history and all(len(h["util"]) == len(h["time"]) <= 60 for h in history.values())
                if name == "sample":
                    assert "delta" not in data[1]
                if name == "problems":
                    break
            assert names == ["hub", "host", "hello", "sample", "problems"]


async def wait_live(hub: Served, samples: int = 1, timeout: float = 60) -> None:
    async def live() -> None:
        while not all(v.sample is not None and v.sample.seq >= samples for v in hub.fleet.hosts):
            await asyncio.sleep(0.05)

    await asyncio.wait_for(live(), timeout)


async def test_a_hosts_markup_and_control_characters_reach_clients_only_escaped(tmp_path):
    (tmp_path / "sims").mkdir()
    reader = SimReader(gpus=2, scenario="empty", base_dir=str(tmp_path / "sims"))
    reader.open()
    try:
        reader.spawn("busy", gpu=0, memory=1 << 30, comm=HOSTILE[:15], argv=[HOSTILE, "</script><b>x"])
        spec = HostSpec(name="evil<b>", reader="sim", sim_dir=reader.directory)
        async with served(sim_fleet(**{"evil<b>": spec})) as hub, aiohttp.ClientSession() as client:
            await wait_live(hub, 2)
            async with client.get(f"{hub.url}/api/v1/events") as response:
                raw = b""
                while b"event: problems" not in raw:
                    raw += await asyncio.wait_for(response.content.readany(), 60)
            async with client.get(f"{hub.url}/api/v1/snapshot") as response:
                snapshot = await response.read()
        for body in (raw, snapshot):
            assert b"<" not in body and b">" not in body and b"\x1b" not in body and b"\x07" not in body
            assert max(body) < 0x80  # ASCII: every other character escaped
        # Escaped, not lost: decoded, the text is the host's own.
        text = json.dumps(json.loads(snapshot))
        assert "alert(1)" in text and "evil<b>" in json.loads(snapshot)["hosts"][0]["name"]
        assert any(
            "\\u001b" in json.dumps(p) for p in json.loads(snapshot)["hosts"][0]["processes"]
        )  # the probe's escape, kept as text
    finally:
        reader.close()


async def test_a_client_that_stops_reading_holds_bounded_memory_then_gets_a_reset():
    log = Log(frames=10_000, size=256 << 10)
    async with served(sim_fleet("demo-a"), log=log) as hub:
        await wait_live(hub)
        host, port = hub.url.removeprefix("http://").split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            writer.write(b"GET /api/v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.5)  # it took its first frames; now it reads nothing
            filler = b"event: filler\ndata: " + b"x" * 8000 + b"\n\n"
            for _ in range(600):  # 4.8 MB through the hub: 19 times what its log keeps
                hub.hub.publish(filler)
                # Over many of the hub's ticks (it wakes its clients once a tick): the client is
                # given frames to write until its socket is full, then stays behind.
                await asyncio.sleep(FLUSH_EVERY / 20)
            await asyncio.sleep(0.5)
            assert log.bytes <= 256 << 10
            # What the hub holds for it: the log's window, and one write in its socket's buffer.
            assert 0 < hub.hub.buffered() <= 1 << 20, hub.hub.buffered()
            got = b""
            while b"event: reset" not in got:
                got += await asyncio.wait_for(reader.read(1 << 16), 60)
            rest = got.split(b"event: reset", 1)[1]
            while b"event: problems" not in rest:
                rest += await asyncio.wait_for(reader.read(1 << 16), 60)
            # After the reset: the whole state again, `hub` first, then the host's frames.
            order = [line for line in rest.split(b"\n") if line.startswith(b"event: ")]
            assert order[:4] == [b"event: hub", b"event: host", b"event: hello", b"event: sample"], order[:6]
            assert hub.hub.resets >= 1
        finally:
            writer.close()


async def test_three_hundred_clients_at_once_all_get_frames():
    async with served(sim_fleet("demo-a")) as hub:
        await wait_live(hub)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as client:

            async def one() -> set[str]:
                names: set[str] = set()
                async with client.get(f"{hub.url}/api/v1/events") as response:
                    assert response.status == 200
                    stream = frames(response)
                    first_seq = None
                    async for name, data in stream:
                        names.add(name)
                        if name == "sample":
                            first_seq = first_seq or data[1]["seq"]
                            if data[1]["seq"] > first_seq:  # a live sample, after the join's
                                return names
                return names

            results = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(300))), 180)
        assert all({"hub", "host", "hello", "sample"} <= names for names in results)


async def test_past_the_connections_bound_a_request_is_answered_503():
    async with served(sim_fleet("demo-a"), Settings(connections=2)) as hub, aiohttp.ClientSession() as client:
        streams = [await client.get(f"{hub.url}/api/v1/events") for _ in range(2)]
        try:
            assert [s.status for s in streams] == [200, 200]
            async with client.get(f"{hub.url}/api/v1/snapshot") as refused:
                assert refused.status == 503
        finally:
            for s in streams:
                s.close()


TOKENS = Tokens(
    {digest("viewer-secret"): Holder("alice", "viewer"), digest("operator-secret"): Holder("bob", "operator")}
)


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/api/v1/snapshot", {}, 401),
        ("/api/v1/snapshot", {"Authorization": "Bearer wrong"}, 401),
        ("/api/v1/snapshot", {"Authorization": "Basic dmlld2VyLXNlY3JldA=="}, 401),
        ("/api/v1/snapshot", {"Authorization": "Bearer viewer-secret"}, 200),
        ("/api/v1/snapshot", {"Authorization": "bearer operator-secret"}, 200),
        ("/metrics", {}, 401),
        ("/metrics", {"Authorization": "Bearer viewer-secret"}, 200),
        ("/api/v1/events", {}, 401),
        ("/-/healthy", {}, 200),
        ("/-/ready", {}, 200),
        ("/no-such-file.js", {}, 404),
    ],
)
async def test_tokens_are_refused_and_accepted(path, headers, status):
    async with served(sim_fleet("demo-a"), Settings(tokens=TOKENS)) as hub:
        await wait_live(hub)
        async with (
            aiohttp.ClientSession() as client,
            client.get(f"{hub.url}{path}", headers=headers) as answer,
        ):
            assert answer.status == status
            assert "Set-Cookie" not in answer.headers
            assert answer.headers["Content-Security-Policy"] == CSP
            assert answer.headers["X-Content-Type-Options"] == "nosniff"
            assert answer.headers["Referrer-Policy"] == "no-referrer"
            if status == 401:
                assert answer.headers["WWW-Authenticate"].startswith("Bearer")


async def test_a_viewer_token_streams_without_actions_an_operator_token_with_them():
    settings = Settings(tokens=TOKENS, allow_actions=True)
    async with served(sim_fleet("demo-a"), settings) as hub, aiohttp.ClientSession() as client:
        for token, actions in (("viewer-secret", False), ("operator-secret", True)):
            headers = {"Authorization": f"Bearer {token}"}
            async with client.get(f"{hub.url}/api/v1/events", headers=headers) as response:
                name, data = await anext(frames(response))
                assert (name, data["actions"]) == ("hub", actions)


async def test_a_hub_without_tokens_offers_no_actions_it_would_refuse():
    """--allow-actions without tokens: the hub refuses every action (403: no operator to name in its
    audit log), so its `hub` frame must not tell a viewer it may act (the dashboard would offer a
    kill flow whose every plan is refused after Ctrl+K)."""
    async with (
        served(sim_fleet("demo-a"), Settings(allow_actions=True)) as hub,
        aiohttp.ClientSession() as client,
    ):
        async with client.get(f"{hub.url}/api/v1/events") as response:
            name, data = await anext(frames(response))
        assert (name, data["actions"]) == ("hub", False)


async def test_metrics_parse_and_follow_each_host():
    async with served(sim_fleet("demo-a", "demo-b")) as hub, aiohttp.ClientSession() as client:
        await wait_live(hub, 2)
        async with client.get(f"{hub.url}/metrics") as answer:
            assert answer.status == 200
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = await answer.text()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        up = {s.labels["host"]: s.value for s in families["gputui_host_up"].samples}
        assert up == {"demo-a": 1.0, "demo-b": 1.0}
        assert len(families["gputui_build_info"].samples) == 1  # once for the fleet, not once a host
        ages = families["gputui_host_sample_age_seconds"].samples
        assert {s.labels["host"] for s in ages} == {"demo-a", "demo-b"}
        used = [s for s in families["gputui_gpu_memory_used_bytes"].samples if s.labels["host"] == "demo-a"]
        assert used
        # Each family once: a header per family, however many hosts.
        assert text.count("# TYPE gputui_host_up ") == 1


async def test_ready_waits_for_every_host_and_healthy_answers_at_once():
    fleet = sim_fleet("demo-a")
    fleet.add("gone", lambda: Unreachable(), interval=INTERVAL)
    async with served(fleet) as hub, aiohttp.ClientSession() as client:
        async with client.get(f"{hub.url}/-/healthy") as answer:
            assert answer.status == 200 and (await answer.text()).strip() == "ok"

        async def status() -> int:
            async with client.get(f"{hub.url}/-/ready") as answer:
                return answer.status

        first = await status()
        await wait_heard(hub)
        assert first in (200, 503) and await status() == 200


async def wait_heard(hub: Served) -> None:
    async def heard() -> None:
        while not hub.hub.ready():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(heard(), 60)


async def test_the_pages_files_are_served_with_their_types_and_a_missing_one_is_404(tmp_path):
    page = tmp_path / "page"
    page.mkdir()
    (page / "index.html").write_text("<!doctype html><script src=app.js></script>")
    (page / "app.js").write_text("console.log(1)")
    (page / "app.css").write_text("body{}")
    (tmp_path / "secret.txt").write_text("not the page's")
    settings = Settings(tokens=TOKENS, page=page)
    async with served(sim_fleet("demo-a"), settings) as hub, aiohttp.ClientSession() as client:
        for path, kind in (("/", "text/html"), ("/app.js", "text/javascript"), ("/app.css", "text/css")):
            async with client.get(f"{hub.url}{path}") as answer:
                assert answer.status == 200 and answer.content_type == kind, path
                assert answer.headers["Content-Security-Policy"] == CSP
        for path in ("/favicon.ico", "/../secret.txt", "/%2e%2e/secret.txt", "/.hidden", "/index.html/x"):
            async with client.get(f"{hub.url}{path}") as answer:
                assert answer.status == 404, path


async def test_metrics_text_is_what_the_exporter_writes_for_the_same_fleet(tmp_path):
    """Line for line prometheus_client's own text (but the sample ages, read at different times),
    with a holder whose name needs escaping in a label (quote, backslash)."""
    (tmp_path / "sims").mkdir()
    reader = SimReader(gpus=2, scenario="empty", base_dir=str(tmp_path / "sims"))
    reader.open()
    try:
        reader.spawn("busy", gpu=0, memory=1 << 30, comm='a"b\\c\nd', argv=['"x\\y"'])
        spec = HostSpec(name='odd"host\\', reader="sim", sim_dir=reader.directory)
        async with served(sim_fleet("demo-a", **{'odd"host\\': spec})) as hub:
            await wait_live(hub, 2)
            await hub.fleet.stop()  # the hosts' state stays as it is while both are written
            async with aiohttp.ClientSession() as client, client.get(f"{hub.url}/metrics") as answer:
                served_text = await answer.text()
            expected = generate_latest(registry(FleetCollector(lambda: hub.fleet.hosts))).decode()
    finally:
        reader.close()

    def steady(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("gputui_host_sample_age_seconds{")]

    assert steady(served_text) == steady(expected)
    assert 'host="odd\\"host\\\\"' in served_text


# -- the probe's own records, relayed ----------------------------------------------------------------

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo-a.jsonl"


class ScriptLink:
    """A host whose records are the test's: each one put into `records` is received in order (a
    Link, as the fleet reads a probe's; None ends the link)."""

    failure = None

    def __init__(self, hello: dict[str, Any]) -> None:
        self.hello = hello
        self.records: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.sent: list[dict[str, Any]] = []

    async def open(self) -> None:
        return None

    async def recv(self) -> dict[str, Any] | None:
        return await self.records.get()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    async def close(self) -> None:
        return None


def demo_records() -> tuple[dict[str, Any], dict[str, Any]]:
    records = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]
    hello = next(r for r in records if r["type"] == "hello")
    return hello, [r for r in records if r["type"] == "sample"][-1]


def script_fleet() -> tuple[Fleet, ScriptLink]:
    hello, _ = demo_records()
    link = ScriptLink(hello)
    fleet = Fleet()
    fleet.add("scripted", lambda: link, interval=5.0)
    return fleet, link


def changed(sample: dict[str, Any], seq: int, util: int) -> dict[str, Any]:
    """`sample` as the next one: seq and time on, GPU 0's utilization `util`."""
    gpus = [dict(sample["gpus"][0], util_gpu=util), *sample["gpus"][1:]]
    return dict(sample, seq=seq, time=sample["time"] + 1, gpus=gpus)


async def taken(hub: Served, seq: int) -> None:
    """Until the fleet holds sample `seq` of the scripted host."""

    async def held() -> None:
        while (raw := hub.fleet.hosts[0].raw_sample) is None or raw["seq"] != seq:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(held(), 60)


async def samples_until(stream: AsyncIterator[tuple[str, Any]], mirror: Mirror, seq: int) -> list[Any]:
    """The sample records the stream carries (each taken by `mirror`) until one of `seq`."""
    got: list[Any] = []

    def wanted(name: str, data: Any) -> bool:
        mirror.take(name, data)
        if name == "sample":
            got.append(data[1])
        return name == "sample" and data[1]["seq"] == seq

    await asyncio.wait_for(until(stream, wanted), 60)
    return got


async def test_the_probes_deltas_reach_clients_as_sent_and_apply_onto_a_joining_clients_whole():
    """The hub passes a probe's delta on as it came (a field it repeats unchanged included: the
    hub makes no delta of its own), hostile text escaped; a client that joins between two deltas
    gets the merged whole, and the next deltas apply onto it to what the hub holds."""
    fleet, link = script_fleet()
    _, first = demo_records()
    s1 = dict(first, seq=1)
    s2 = changed(s1, 2, 11)
    s2["processes"] = [dict(s2["processes"][0], name=HOSTILE), *s2["processes"][1:]]
    s3 = changed(s2, 3, 12)
    s4 = changed(s3, 4, 13)
    deltas = {n: diff(a, b) for n, a, b in ((2, s1, s2), (3, s2, s3), (4, s3, s4))}
    deltas[3]["host"] = s2["host"]  # the same again: a probe's delta may say it; the hub's diff would not
    async with served(fleet) as hub, aiohttp.ClientSession() as client:
        await link.records.put(s1)
        await taken(hub, 1)
        async with client.get(f"{hub.url}/api/v1/events") as early:
            early_mirror, early_stream = Mirror(), frames(early)
            await samples_until(early_stream, early_mirror, 1)
            await link.records.put(deltas[2])
            await taken(hub, 2)
            async with client.get(f"{hub.url}/api/v1/events") as late:
                late_mirror, late_stream = Mirror(), frames(late)
                joined = await samples_until(late_stream, late_mirror, 2)
                assert "delta" not in joined[-1]  # the whole, deltas merged
                for seq in (3, 4):
                    await link.records.put(deltas[seq])
                late_records = await samples_until(late_stream, late_mirror, 4)
            early_records = await samples_until(early_stream, early_mirror, 4)
        held = dict(hub.fleet.hosts[0].raw_sample or {})
    assert early_records == [deltas[2], deltas[3], deltas[4]]
    assert late_records == [deltas[3], deltas[4]]
    assert early_mirror.samples["scripted"] == late_mirror.samples["scripted"] == held
    assert held["processes"][0]["name"] == HOSTILE


async def test_a_delta_the_hubs_intake_refused_never_reaches_clients_a_whole_sample_does_next():
    """A delta that follows another sample than the one held is refused; the probe's next delta
    (following the refused one) is refused too; the clients get neither, and the next sample they
    get is whole (what the probe sends when asked), the deltas after it applied in order."""
    fleet, link = script_fleet()
    _, first = demo_records()
    s1 = dict(first, seq=1)
    s2, s3 = changed(s1, 2, 21), changed(s1, 3, 22)
    s4, s5, s6 = changed(s3, 4, 23), changed(s3, 5, 24), changed(s3, 6, 25)
    stray = dict(diff(s2, s3), delta=99)  # follows a sample the hub never had
    async with served(fleet) as hub, aiohttp.ClientSession() as client:
        await link.records.put(s1)
        await taken(hub, 1)
        async with client.get(f"{hub.url}/api/v1/events") as response:
            mirror, stream = Mirror(), frames(response)
            await samples_until(stream, mirror, 1)
            for record in (diff(s1, s2), stray, diff(s3, s4), s5, diff(s5, s6)):
                await link.records.put(record)
            got = await samples_until(stream, mirror, 6)
        held = dict(hub.fleet.hosts[0].raw_sample or {})
    assert [(r["seq"], "delta" in r) for r in got] == [(2, True), (5, False), (6, True)]
    assert mirror.samples["scripted"] == held
    assert {"type": "sample", "v": 1, "whole": True} in link.sent  # the fleet asked the probe for one


async def test_a_hub_that_starts_after_the_fleets_samples_sends_its_first_sample_whole():
    """The clients hold nothing the probe's next delta could follow: the hub's first frame of a host's
    sample is whole, whatever the probe sent; the deltas after it are the probe's."""
    fleet, link = script_fleet()
    _, first = demo_records()
    s1 = dict(first, seq=1)
    s2, s3 = changed(s1, 2, 31), changed(s1, 3, 32)
    hub = Hub(fleet, INTERVAL, 60.0)
    fleet.start()
    try:
        await link.records.put(s1)
        while fleet.hosts[0].raw_sample is None:
            await asyncio.sleep(0.01)
        hub.start()
        cursor = hub.log.end
        for record in (diff(s1, s2), diff(s2, s3)):
            await link.records.put(record)
        while fleet.hosts[0].raw_sample["seq"] != 3:  # type: ignore[index]
            await asyncio.sleep(0.01)
        data, _ = hub.log.since(cursor)
    finally:
        await hub.stop()
        await fleet.stop()
    sent = [json.loads(f.split(b"\ndata: ", 1)[1])[1] for f in data.split(b"\n\n") if b"event: sample" in f]
    assert [(r["seq"], "delta" in r) for r in sent] == [(2, False), (3, True)]
    assert sent[1] == diff(s2, s3)
    assert hub.feeds["scripted"].wholes == 1


async def test_a_delta_the_fleet_took_past_its_bounds_reaches_clients_as_the_whole_it_holds():
    """A delta that brings more processes than the app keeps is taken the general way, cut to the
    bound: the clients get that cut sample whole, not the delta (which would give them more than
    the hub holds), and nothing the fleet refuses after it."""
    fleet, link = script_fleet()
    _, first = demo_records()
    s1 = dict(first, seq=1)
    many = [{"pid": 100_000 + i, "start_time": i, "name": f"w{i}"} for i in range(MAX_PROCESSES)]
    s2 = dict(changed(s1, 2, 41), processes=s1["processes"] + many)
    s3 = changed(s2, 3, 42)
    async with served(fleet) as hub, aiohttp.ClientSession() as client:
        await link.records.put(s1)
        await taken(hub, 1)
        async with client.get(f"{hub.url}/api/v1/events") as response:
            mirror, stream = Mirror(), frames(response)
            await samples_until(stream, mirror, 1)
            await link.records.put(diff(s1, s2))
            await link.records.put(diff(s2, s3))  # refused: the fleet holds no keyed sample now
            await link.records.put(dict(s1, seq=4))  # whole again
            got = await samples_until(stream, mirror, 4)
        held = dict(hub.fleet.hosts[0].raw_sample or {})
    assert [(r["seq"], "delta" in r, len(r["processes"])) for r in got] == [
        (2, False, MAX_PROCESSES),
        (4, False, len(s1["processes"])),
    ]
    assert mirror.samples["scripted"] == held
