"""Bad days, fifth round: what `gputui clean`, `wait` and `snapshot` say around a kill, and what a new
user meets on the command line, found by driving the real CLI against a live demo of the test's own
(tests/support/livedemo.py). Each test failed before its fix (docs/RELIABILITY.md, "Bad days, fifth
round")."""

from __future__ import annotations

import json

import pytest

from tests.support.livedemo import Live

# Each test starts a demo (two sims, some twenty processes): more than the suite's 120 s on a busy
# machine. Nothing here asserts a duration.
pytestmark = pytest.mark.timeout(600)


# -- a positional HOST:N is a GPU for every command that takes GPU SPECs ---------------------------


def test_wait_takes_a_positional_host_gpu_as_clean_does(live: Live) -> None:
    """`gputui clean gpu-a:2 --yes && gputui wait gpu-a:2`: clean read `gpu-a:2` as GPU 2 of gpu-a,
    wait as a host named so (over SSH: gpu-a on port 2; on the demo, a config error)."""
    r = live.gputui("wait", "--demo", "demo-b:5", "--timeout", "120", "--json")
    live.record()
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert [(h["host"], list(h["gpus"])) for h in doc["hosts"]] == [("demo-b", ["5"])]


def test_snapshot_takes_a_positional_host_gpu_as_its_gpu_filter(live: Live) -> None:
    r = live.gputui("snapshot", "--demo", "demo-b:5", "--json")
    live.record()
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert [(h["name"], [g["index"] for g in h["gpus"]]) for h in doc["hosts"]] == [("demo-b", [5])]


# -- clean --json prints its document on a usage error too ----------------------------------------


@pytest.mark.parametrize(
    "argv, words",
    [
        (("--gpu", "9"), "demo-a has no GPU 9"),
        (("--pid", "999999999"), "not a GPU process"),
        (("--job", "999999999"), "no job 999999999"),
        (("--gpu", "0", "--sigint-first", "--signals", "kill"), "say different things"),
    ],
)
def test_clean_json_prints_its_document_when_a_name_names_nothing(
    live: Live, argv: tuple[str, ...], words: str
) -> None:
    """`gputui clean --json ... | jq .ok`: a GPU, PID or job that names nothing exited 2 with an
    empty stdout (no document to read why from), where `wait --json` prints one (README)."""
    r = live.gputui(
        "clean", "--demo", "demo-a", *argv, "--yes", "--json", "--log", str(live.root / "a.jsonl")
    )
    live.record()
    assert r.returncode == 2, r.stdout + r.stderr
    assert words in r.stderr and "Traceback" not in r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2 and words in doc["error"]
    assert doc["hosts"] == [] and doc["version"] == 2
