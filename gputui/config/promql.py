"""A Prometheus feed: its address (`URL[#SELECTOR]`, checked), the instant queries gputui runs on it,
the host a series belongs to, and one bounded query over Prometheus' HTTP API (aiohttp).

Shared by the `@prometheus:` source (gputui/inventory/prometheus.py: which hosts have series) and its
link (gputui/transport/prometheus.py: their GPUs, each round), which may not import each other.

Two kinds of series are read, the newest point of each (an instant query):
- gputui's own (`gputui export` on each host, or its textfile): the host is the `host` label;
- dcgm-exporter's (`DCGM_FI_DEV_*`, memory in MiB): the host is the `Hostname` label, else
  `instance` without its port.
What a Prometheus answers is untrusted: a query has a deadline (QUERY_TIMEOUT) and a body bound
(MAX_BODY), an answer that is not the API's JSON is one PromError line, and at most MAX_SERIES
series are read of one answer; label values are cut at MAX_LABEL characters.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

import aiohttp

PREFIX = "prometheus:"
MAX_URL = 2048  # characters of a Prometheus URL
MAX_SELECTOR = 1024  # characters of a selector
MAX_BODY = 64 << 20  # bytes of one answer: 10,000 GPUs' series are some 30 MB
MAX_SERIES = 200_000  # series read of one answer (10,000 GPUs of ~12 series each, with room)
MAX_LABEL = 256  # characters of a label value kept (a host name is at most 255)
QUERY_TIMEOUT = 10.0  # seconds one query may take, connecting and reading included

# dcgm-exporter's fields gputui reads (its default counters' names); memory is in MiB.
DCGM = (
    "FB_USED", "FB_FREE", "FB_RESERVED", "GPU_UTIL", "MEM_COPY_UTIL", "GPU_TEMP", "POWER_USAGE",
    "XID_ERRORS", "ECC_SBE_VOL_TOTAL", "ECC_DBE_VOL_TOTAL",
)  # fmt: skip
# gputui's own families (docs/MONITORING.md), as Prometheus stores them (info and counter suffixes).
GPUTUI = (
    "gpu_info", "gpu_memory_total_bytes", "gpu_memory_used_bytes", "gpu_memory_baseline_bytes",
    "gpu_utilization_ratio", "gpu_memory_copy_utilization_ratio", "gpu_temperature_celsius",
    "gpu_power_watts", "gpu_power_limit_watts", "gpu_error", "gpu_ecc_errors_total",
)  # fmt: skip
# The one series of each kind every GPU has: it says which hosts and GPUs there are, and how old
# their points are.
DCGM_KEY = "DCGM_FI_DEV_FB_USED"
GPUTUI_KEY = "gputui_gpu_memory_used_bytes"
KIND_LABEL = "gputui_series"  # the name a point of the times query is the time of

_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_VALUE = r'"(?:[^"\\]|\\.)*"|' + r"'(?:[^'\\]|\\.)*'"
_MATCHER = re.compile(rf"\s*({_NAME})\s*(=~|!~|!=|=)\s*({_VALUE})\s*")


class PromError(Exception):
    """A feed that cannot be used, or a Prometheus that did not answer as its API says: one line."""

    def __init__(self, message: str) -> None:
        message = " ".join(message.split())  # one line, whatever an exception's text held
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class PromFeed:
    """Where series are read: a Prometheus' base URL (no trailing slash) and the label matchers
    every query adds (`cluster="a"`, without braces; "" for none)."""

    url: str
    matchers: str = ""

    @property
    def feed(self) -> str:
        """The HostSpec.feed that names it: `prometheus:URL[#{MATCHERS}]`."""
        return PREFIX + self.url + (f"#{{{self.matchers}}}" if self.matchers else "")

    @property
    def spec(self) -> str:
        """The host spec that names its hosts."""
        return "@" + self.feed

    def selector(self, *names: str) -> str:
        """`{__name__=~"a|b", MATCHERS}`: the series of those names this feed selects."""
        inner = '__name__=~"' + "|".join(re.escape(n) for n in names) + '"'
        return "{" + inner + (", " + self.matchers if self.matchers else "") + "}"

    def series_query(self) -> str:
        """Every series gputui reads, one instant query."""
        return self.selector(*(f"DCGM_FI_DEV_{n}" for n in DCGM), *(f"gputui_{n}" for n in GPUTUI))

    def times_query(self) -> str:
        """The time of each GPU's newest point (an instant query's own time is the evaluation's).
        timestamp() drops the series' name: KIND_LABEL says which it was."""
        return " or ".join(
            f'label_replace(timestamp({self.selector(key)}), "{KIND_LABEL}", "{key}", "", "")'
            for key in (DCGM_KEY, GPUTUI_KEY)
        )

    def hosts_query(self) -> str:
        """One series a GPU, for the hosts there are."""
        return self.selector(DCGM_KEY, GPUTUI_KEY)


def parse_feed(text: str) -> PromFeed:
    """`URL[#SELECTOR]` as a user writes it after `@prometheus:`, checked; PromError otherwise."""
    url, _, selector = text.partition("#")
    return PromFeed(_checked_url(url.strip()), _checked_matchers(selector.strip()))


def feed_of(feed: str) -> PromFeed:
    """A HostSpec.feed (`prometheus:...`) back as its PromFeed."""
    return parse_feed(feed.removeprefix(PREFIX))


def _checked_url(url: str) -> str:
    if not url:
        raise PromError('name the Prometheus: @prometheus:http://HOST:9090[#{LABEL="VALUE"}]')
    if len(url) > MAX_URL or any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise PromError("the Prometheus URL has spaces or control characters, or is too long")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError as exc:
        raise PromError(f"the Prometheus URL is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PromError("the Prometheus URL must be http://HOST[:PORT][/PATH] or https://...")
    if parts.query:
        raise PromError("the Prometheus URL takes no query string (the selector goes after '#')")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _checked_matchers(selector: str) -> str:
    """The matchers of `{a="b", c=~"d"}` (braces optional), normalized; PromError otherwise."""
    if not selector:
        return ""
    if len(selector) > MAX_SELECTOR or any(ord(c) < 32 or ord(c) == 127 for c in selector):
        raise PromError("the selector has control characters or is too long")
    inner = selector[1:-1] if selector.startswith("{") and selector.endswith("}") else selector
    out: list[str] = []
    pos = 0
    while pos < len(inner):
        found = _MATCHER.match(inner, pos)
        if found is None:
            raise PromError('the selector is not a PromQL label matcher list like {cluster="a", env=~"p.*"}')
        if found.group(1) == "__name__":
            raise PromError("the selector may not name series (__name__): gputui picks them")
        out.append(f"{found.group(1)}{found.group(2)}{found.group(3)}")
        pos = found.end()
        if pos < len(inner):
            if inner[pos] != ",":
                raise PromError("the selector's matchers must be separated by commas")
            pos += 1
    return ", ".join(out)


# --------------------------------------------------------------------------- a series' host


def dcgm_host(labels: dict[str, str]) -> str | None:
    """The host of a dcgm-exporter series: `Hostname`, else `instance` without its port."""
    name = labels.get("Hostname")
    if name:
        return name
    instance = labels.get("instance", "")
    if instance.startswith("["):  # [::1]:9400
        return instance[1:].partition("]")[0] or None
    host, _, port = instance.rpartition(":")
    # A port is ASCII digits: `²` is a digit to str.isdigit, `٣` a decimal one; neither is a port.
    is_port = port.isascii() and port.isdecimal()
    return (host if host and is_port else instance) or None


def host_of(labels: dict[str, str]) -> str | None:
    """The host a series belongs to (None: it names none)."""
    name = labels.get("__name__") or labels.get(KIND_LABEL, "")
    if name.startswith("gputui_"):
        return labels.get("host") or None
    return dcgm_host(labels)


# --------------------------------------------------------------------------- one query


@dataclass(frozen=True, slots=True)
class Point:
    """One series' newest point: its labels (values cut at MAX_LABEL), value and time."""

    labels: dict[str, str]
    value: float | None
    time: float


async def query(session: aiohttp.ClientSession, feed: PromFeed, promql: str) -> list[Point]:
    """The answer to one instant query, or PromError in one line (no answer within QUERY_TIMEOUT,
    an HTTP error, a body over MAX_BODY, not the API's JSON, a failed query)."""
    where = f"Prometheus at {feed.url}"
    try:
        body, status = await _post(session, feed, promql, where)
    except asyncio.TimeoutError:
        raise PromError(f"{where}: no answer within {QUERY_TIMEOUT:g} s") from None
    except aiohttp.ClientError as exc:
        raise PromError(f"{where}: {type(exc).__name__}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise PromError(f"{where}: {exc}") from None
    return decode(body, status, where)


async def _post(session: aiohttp.ClientSession, feed: PromFeed, promql: str, where: str) -> tuple[bytes, int]:
    # The deadline is aiohttp's own, not an asyncio.wait_for around the call: before Python 3.12,
    # wait_for swallows a cancellation that comes as the call completes (a poller being closed).
    timeout = aiohttp.ClientTimeout(total=QUERY_TIMEOUT)
    async with session.post(feed.url + "/api/v1/query", data={"query": promql}, timeout=timeout) as answer:
        return await _bounded_body(answer.content, where), answer.status


async def _bounded_body(content: aiohttp.StreamReader, where: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > MAX_BODY:
            raise PromError(f"{where}: the answer is over {MAX_BODY >> 20} MiB")
        chunks.append(chunk)
    return b"".join(chunks)


def decode(body: bytes, status: int, where: str) -> list[Point]:
    """The points of an API answer (a vector), or PromError saying what was wrong with it."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise PromError(f"{where}: answered HTTP {status} with something that is not JSON") from None
    if not isinstance(doc, dict):
        raise PromError(f"{where}: answered HTTP {status} with JSON that is not the query API's")
    if doc.get("status") != "success":
        error = doc.get("error")
        said = error[:200] if isinstance(error, str) else "no reason given"
        raise PromError(f"{where}: the query failed (HTTP {status}): {said}")
    data = doc.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(result, list):
        raise PromError(f"{where}: answered a query with no vector")
    return [p for p in (_point(item) for item in result[:MAX_SERIES]) if p is not None]


def _point(item: Any) -> Point | None:
    if not isinstance(item, dict):
        return None
    metric, value = item.get("metric"), item.get("value")
    if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
        return None
    stamp = value[0]
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
        return None
    labels = {str(k)[:MAX_LABEL]: v[:MAX_LABEL] for k, v in metric.items() if isinstance(v, str)}
    return Point(labels, _number(value[1]), float(stamp))


def _number(text: Any) -> float | None:
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


async def _once(feed: PromFeed, promql: str) -> list[Point]:
    async with aiohttp.ClientSession() as session:
        return await query(session, feed, promql)


def query_now(feed: PromFeed, promql: str) -> list[Point]:
    """One query from synchronous code (a host source): on a loop of its own, in a thread of its own
    when the caller's thread already runs one (a script's coroutine calling gputui.api.hosts)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_once(feed, promql))
    box: list[list[Point] | BaseException] = []

    def run() -> None:
        try:
            box.append(asyncio.run(_once(feed, promql)))
        except BaseException as exc:  # handed back to the caller's thread
            box.append(exc)

    thread = threading.Thread(target=run, name="prometheus-query", daemon=True)
    thread.start()
    thread.join()
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]
