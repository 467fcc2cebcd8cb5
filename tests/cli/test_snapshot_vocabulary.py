"""`gputui snapshot` says what the dashboard says (issue 19, item 9): a process in a MIG instance is
`0:1.0` (GPU 0, GPU instance 1, compute instance 0), not `0`; an MPS process's kind is its part in
MPS (`mps-srv`, `mps-ctl`, `mps-cli`), not "monitor" or "user"; a GPU in MIG mode lists its
instances under it as the GPU table does (`0/1.0  └ MIG 3g.71gb`).

The sim's "mig" and "mps" scenarios (a config host with reader = "sim"), the real CLI; and the same
words from the dashboard's own formatters (gputui/ui/kinds.py, the process table's GPU cell) on the
same records, so the two cannot drift apart.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from rich.style import Style

from gputui.model import Proc
from gputui.text import words
from tests.support.cli import gputui as run_gputui

REPO = Path(__file__).resolve().parents[2]
CONFIG = """
[[hosts]]
name = "mig"
address = "local"
reader = "sim"
sim_scenario = "mig"

[[hosts]]
name = "mps"
address = "local"
reader = "sim"
sim_scenario = "mps"
"""


def gputui(*args: str) -> subprocess.CompletedProcess[str]:
    return run_gputui(*args, timeout=120)


class Plain:
    exact_memory = False

    def style_of(self, name: str) -> Style:
        return Style()


def process_rows(text: str, host: str) -> list[list[str]]:
    """The process rows of `host`'s section of the text snapshot, split in words (PID, kind, GPUs, ...)."""
    section = text.split(f"== {host}", 1)[1].split("\n== ", 1)[0]
    rows = section.split(" command\n", 1)[1].split("   job ", 1)[0]
    return [line.split() for line in rows.splitlines() if re.match(r"^\s+\d+ ", line)]


def test_mig_places_mps_kinds_and_instances_read_as_in_the_dashboard(tmp_path):
    from gputui.ui import kinds
    from gputui.ui.widgets.proc_table import mig_cell

    config = tmp_path / "gputui.toml"
    config.write_text(CONFIG)
    doc = json.loads(gputui("snapshot", "--config", str(config), "--json").stdout)
    run = gputui("snapshot", "--config", str(config))
    assert run.returncode == 0, run.stderr
    text = run.stdout
    hosts = {h["name"]: h for h in doc["hosts"]}
    # MIG: the instances under their GPU, the processes in them by instance. Another run than the
    # JSON's, so other PIDs: the places and kinds are compared as lists.
    mig = [p for p in (Proc.from_wire(r) for r in hosts["mig"]["processes"]) if p is not None]
    in_mig = [p for p in mig if p.mig]
    assert in_mig
    for proc in in_mig:
        place = words.gpu_places(proc)
        assert re.fullmatch(r"\d+:\d+\.\d+(,\d+(:\d+\.\d+)?)*", place), place
        # The dashboard's GPU cell says the same.
        assert mig_cell(Plain(), proc, None).plain == place
    rows = process_rows(text, "mig")
    assert sorted(row[2] for row in rows) == sorted(words.gpu_places(p) for p in mig), rows
    instances = [
        g for g in hosts["mig"]["gpus"] if isinstance(g.get("mig_instances"), list) and g["mig_instances"]
    ]
    assert instances
    for gpu in instances:
        for inst in gpu["mig_instances"]:
            label = f"{gpu['index']}/{inst['gi']}.{inst['ci']}"
            assert re.search(rf"^\s+{re.escape(label)}\s+└ MIG ", text, re.M), (label, text)
    # MPS: each process's kind is the dashboard's word for it.
    mps = [p for p in (Proc.from_wire(r) for r in hosts["mps"]["processes"]) if p is not None]
    assert {p.mps for p in mps} >= {"server", "control", "client"}
    for proc in mps:
        assert kinds.proc_label(proc) == f"{kinds.GLYPHS[proc.kind]} {words.kind_word(proc)}"
    rows = process_rows(text, "mps")
    assert sorted(row[1] for row in rows) == sorted(words.kind_word(p) for p in mps), rows
    assert {words.kind_word(p) for p in mps if p.mps} == {"mps-srv", "mps-ctl", "mps-cli"}
