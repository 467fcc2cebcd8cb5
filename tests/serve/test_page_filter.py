"""The page's filter language (gputui/serve/page/filter.js) is the dashboard's (gputui/views/filter.py):
on one corpus of queries and subjects, both are evaluated (JS in Chromium, Python here) and must give
the same matches, and the same sentence for a filter that cannot be read.

The corpus: written queries for every field, operator, alias, list, wildcard, quote and error, and
seeded random queries built from the grammar's pieces (fields, operators, values, negation, quotes,
stray characters)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest

from gputui.views.filter import FilterError, Subject, parse
from tests.support.browser import PAGE_DIR, chromium_page

pytestmark = pytest.mark.timeout(300)

GIB = 1 << 30

SUBJECTS = [
    Subject(
        host="gpu017",
        group="gpu",
        states=frozenset({"live", "busy", "problem", "idle-held"}),
        users=frozenset({"alice"}),
        uids=frozenset({1000}),
        kinds=frozenset({"user"}),
        gpus=frozenset({3}),
        uuids=frozenset({"GPU-5a1b2c3d-0000"}),
        models=("NVIDIA H200",),
        commands=("python train.py --model llama --gpus=0,1",),
        pids=frozenset({4121, 4122}),
        jobs=frozenset({"4100"}),
        containers=("lxc/129",),
        memory=45 * GIB,
        memory_total=141 * GIB,
        util=0.0,
        temp=81.0,
        idle=3600.0,
        words=("python",),
    ),
    Subject(
        host="node-12",
        group="rack3",
        states=frozenset({"live", "free", "healthy"}),
        gpus=frozenset({0, 1}),
        uuids=frozenset({"GPU-ffee"}),
        models=("NVIDIA A100-SXM4-80GB",),
        memory=0,
        memory_total=80 * GIB,
        util=4.5,
        temp=35.0,
    ),
    Subject(
        host="demo-b",
        group="demo",
        states=frozenset({"stale", "ghost", "problem"}),
        users=frozenset({"bob", "straße"}),
        uids=frozenset({1001, 4294967294}),
        kinds=frozenset({"ghost", "hidden", "zombie"}),
        gpus=frozenset({2}),
        commands=("/usr/bin/vllm serve http://x:8000", "notebook"),
        pids=frozenset({99}),
        jobs=frozenset({"slurm-77", "99"}),
        containers=("docker/abc123def456",),
        memory=512 << 20,
        memory_total=None,
        words=("<script>", "ＶＬＬＭ"),
    ),
    Subject(host="weird*[host]", states=frozenset({"down"}), memory=None),
]

WRITTEN = [
    "",
    "   ",
    "alice",
    "ALICE",
    "-alice",
    "user:alice",
    "user:Alice,bob",
    "user:1000",
    "user:4294967294",
    "user:4294967295",
    "user:99999999999999999999999",
    "user:-1",
    "user:al*",
    "user:straße",
    "user:STRASSE",
    "users:bob",
    "state:idle",
    "state:idle-held",
    "state:up",
    "state:throttling",
    "state:free,stale",
    "state:fre",
    "state:idel",
    "state:nonsense",
    "-state:problem",
    "kind:ghost",
    "kind:GHOST",
    "kind:spook",
    "kind:user,zombie",
    "gpu:3",
    "gpu:2,3",
    "gpu:gpu017:3",
    "gpu:gpu0*:all",
    "gpu:all",
    "gpu:GPU-5a1b",
    "gpu:gpu-ff",
    "gpu::3",
    "gpu:x",
    "gpu:1234567890",
    "mig:1",
    "model:H200",
    "model:a100*",
    "name:h200",
    "cmd:train",
    'cmd:"--model llama"',
    "cmd:--gpus=0,1",
    "command:vllm",
    "cmd:*serve*",
    "pid:4121",
    "pid:4121,99",
    "pid:x",
    "pid:",
    "job:4100",
    "job:slurm-77",
    "job:SLURM-*",
    "container:lxc/129",
    "container:docker*",
    "mem>40G",
    "mem>40",
    "mem>=45GiB",
    "mem<1G",
    "mem=512M",
    "mem>90%",
    "mem>30%",
    "mem>40X",
    "mem:40G",
    "memory<1t",
    "mem>1.5T",
    "mem>",
    "mem>abc",
    "mem> 40G",
    "util<5",
    "util<5%",
    "util>=4.5",
    "util<5x",
    "temp>80",
    "temp>80°C",
    "temp>80c",
    "idle>30m",
    "idle>59",
    "idle>=1h",
    "idle>1d",
    "idle>10sec",
    "idle>10min",
    "idle>10y",
    "host:gpu017",
    "host:GPU0*",
    "host:gpu01?",
    "host:gpu01[0-9]",
    "host:gpu01[!0-6]",
    "host:gpu01[",
    "host:weird[*]*",
    "hosts:node-12",
    "group:rack3",
    "group:gpu",
    "group:demo,rack3",
    "-group:rack3",
    "user:alice state:idle-held mem>40G",
    "alice -bob",
    '"http://x:8000"',
    '"unclosed',
    'cmd:"a b',
    "-",
    "--",
    "-user:bob",
    "4121",
    "412",
    "99",
    "77",
    "slurm-77",
    "<script>",
    "ｖｌｌｍ",
    "lxc",
    "usr:alice",
    "stat:live",
    "tmp>80",
    "foo:bar",
    "Foo:bar",
    "foo'bar:x",
    "a=b",
    "x>1",
    "user=alice",
    "host>3",
    "user:a,,b",
    "user:,",
    "\u200buser:x",
    "host:\u202egpu",
    "user:\x1b[31m",
    "x" * 1001,
    "a " * 400,
    "é:1",
]


def _pieces(rng: random.Random) -> str:
    field = rng.choice(
        ["user", "state", "kind", "gpu", "host", "group", "model", "cmd", "pid", "job", "container",
         "mem", "util", "temp", "idle", "usr", "Mem", "memory", "nam", "x"]
    )  # fmt: skip
    op = rng.choice([":", ":", ">", ">=", "<", "<=", "="])
    value = rng.choice(
        ["alice", "bob", "al*", "1000", "3", "2,3", "gpu017:3", "live", "idle", "ghost", "40G", "90%",
         "0.5", "30m", "1h", "4121", "lxc*", "H200", "", "a,,b", "gpu0[1-2]*", "[!a]*", "?", "x y"]
    )  # fmt: skip
    term = f"{field}{op}{value}" if rng.random() < 0.8 else rng.choice(["alice", "4121", "vllm", "rack", "-"])
    if rng.random() < 0.2:
        term = "-" + term
    if rng.random() < 0.1:
        term = f'"{term}"' if rng.random() < 0.5 else term + '"'
    return term


def _random_queries(count: int) -> Iterator[str]:
    rng = random.Random(37)
    for _ in range(count):
        yield " ".join(_pieces(rng) for _ in range(rng.randint(1, 3)))


def _as_json(subject: Subject) -> dict[str, Any]:
    out = asdict(subject)
    return {
        k: sorted(v) if isinstance(v, frozenset) else list(v) if isinstance(v, tuple) else v
        for k, v in out.items()
    }


def _python(query: str) -> dict[str, Any]:
    try:
        parsed = parse(query)
    except FilterError as e:
        return {"error": e.message, "at": e.at}
    return {"matches": [parsed.matches(s) for s in SUBJECTS]}


JS_EVAL = """([queries, subjects]) => queries.map((q) => {
  try {
    const parsed = GputuiFilter.parse(q);
    return {matches: subjects.map((s) => parsed.matches(s))};
  } catch (e) {
    if (!(e instanceof GputuiFilter.FilterError)) return {crash: String(e)};
    return {error: e.message, at: e.at};
  }
})"""


def test_js_filter_agrees_with_the_dashboards() -> None:
    queries = [*WRITTEN, *_random_queries(400)]
    with chromium_page() as page:
        page.add_script_tag(path=str(PAGE_DIR / "filter.js"))
        got = page.evaluate(JS_EVAL, [queries, [_as_json(s) for s in SUBJECTS]])
    wrong = [(q, want, js) for q, js in zip(queries, got, strict=True) if js != (want := _python(q))]
    assert not wrong, json.dumps(wrong[:10], ensure_ascii=False, indent=1)
    # The corpus reaches both outcomes, every subject both ways.
    assert sum("error" in r for r in got) > 40
    for i in range(len(SUBJECTS)):
        assert {r["matches"][i] for r in got if "matches" in r} == {True, False}
