"""Every bad value is refused with one clear line and exit 2, never a traceback (issue 17, defect 10):
every numeric flag range-checked and overflow-safe, every config value type-checked, a GPU index a
host lists twice refused at the edge, an export that fails leaves no half of itself behind."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gputui.model import Sample
from tests.support.cli import gputui

ROOT = Path(__file__).resolve().parents[2]


def one_clear_line(run: subprocess.CompletedProcess[str], *words: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert "Traceback" not in run.stderr, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    last = lines[-1]  # argparse prints its usage first, then the one line that says what is wrong
    assert last.startswith(("gputui", "usage")) or "error:" in last, lines
    for word in words:
        assert word in last, (word, last)


# -- a GPU index listed twice ------------------------------------------------------------------------


def gpu(index: Any, used: int = 0) -> dict[str, Any]:
    return {"index": index, "uuid": f"GPU-{index}", "memory_used": used, "memory_total": 1 << 30}


def test_a_gpu_index_listed_twice_is_refused_and_said() -> None:
    """Both records were taken: a wait or a plan could judge or target either one."""
    sample = Sample.from_wire({"seq": 1, "gpus": [gpu(0, 5), gpu(1), gpu(0, 7), gpu(2)]})
    assert [g.index for g in sample.gpus] == [1, 2]  # neither GPU 0 can be believed
    assert sample.gpus_refused == 2 and sample.gpus_refused_why == ("GPU 0: listed 2 times",)
    sample = Sample.from_wire({"seq": 1, "gpus": [gpu(0), gpu("x"), "junk", gpu(1)]})
    assert [g.index for g in sample.gpus] == [0, 1]
    assert sample.gpus_refused == 2
    assert sample.gpus_refused_why == ("GPU record #2: no usable index", "GPU record #3: no usable index")
    clean = Sample.from_wire({"seq": 1, "gpus": [gpu(0), gpu(1)]})
    assert clean.gpus_refused == 0 and clean.gpus_refused_why == ()


# -- every config value type-checked -----------------------------------------------------------------

# One of each TOML type, and the numbers that break a careless check.
TOML_VALUES = [
    '["SIGSTOP"]', "[]", "[[1]]", "{ a = 1 }", "{}", '"x"', '""', "1", "0", "-1", "9223372036854775807",
    "-9223372036854775808", "1" + "0" * 400, "1e400", "-1e400", "nan", "inf", "-inf", "0.5", "true",
    "false", "1979-05-27T07:32:00Z", "1979-05-27", "07:32:00",
]  # fmt: skip


def config_texts() -> list[tuple[str, str]]:
    import gputui.config.file as config

    tables = {
        "": [*config.TOP_KEYS],
        "[defaults]\n": [*config.DEFAULT_KEYS],
        '[[hosts]]\naddress = "gpu-a"\nreader = "sim"\n': [k for k in config.HOST_KEYS if k != "address"],
        "[kill]\n": [*config.KILL_KEYS],
        "[columns]\n": [f"hide_{name}" for name in config.COLUMNS],
    }
    return [
        (f"{header}{key} = {value}\n", f"{header.strip() or 'top'} {key} = {value}")
        for header, keys in tables.items()
        for key in keys
        for value in TOML_VALUES
    ]


def test_every_config_value_of_every_type_is_a_config_error_or_fine() -> None:
    """`[kill] signals = ["SIGSTOP"]` (any list or inline table) was a TypeError traceback."""
    from gputui.config.file import ConfigError, parse_config

    crashed = []
    for text, what in config_texts():
        try:
            parse_config(text, "c.toml")
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("c.toml"), (what, str(exc))
        except Exception as exc:  # the point: nothing else may come out
            crashed.append(f"{what}: {type(exc).__name__}: {exc}")
    assert crashed == []


@pytest.mark.parametrize("value", ['["SIGSTOP"]', "{ a = 1 }", "1" + "0" * 400])
def test_a_kill_signals_list_is_exit_2_for_cli_and_dashboard(tmp_path: Path, value: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[kill]\nsignals = {value}\n")
    for argv in (["clean", "--demo", "demo-a", "--all", "--dry-run"], ["--demo"]):
        run = gputui(*argv, "--config", str(path))
        one_clear_line(run, f"{path}:2", "'signals' in [kill] must be")


# -- every numeric flag range-checked and overflow-safe ----------------------------------------------

# Refused by every numeric flag of every command: none is negative, infinite, NaN, or that long.
ALWAYS_REFUSED = [
    "9" * 400, "1" + "0" * 5000, "1e400", "-1e400", "nan", "inf", "-inf", "-1", "", "x", "²", "0x10",
    "1_000",
]  # fmt: skip
# And by these flags, too (documented ranges: --help says them).
ALSO_REFUSED = {
    ("wait", "--interval"): ["0", "0.05", "3601"],
    ("wait", "--util-below"): ["0", "101", "1000"],
    ("wait", "--memory-below"): ["0", "0B", "2E", str(1 << 70)],
    ("wait", "--temp-below"): ["0", "150"],
    ("wait", "--timeout"): [str(24 * 3600 + 1)],
    ("", "--interval"): ["0", "0.05"],
    ("snapshot", "--timeout"): ["0"],
    ("clean", "--timeout"): ["0"],
    ("clean", "--term-timeout"): ["0"],
    ("clean", "--pid"): ["0"],
    # A user is a name or a uid, and a uid is below 2**32 - 1 (uid_t's -1 is no user).
    ("", "--user"): ["9" * 20, str(2**32 - 1)],
    ("snapshot", "--user"): ["9" * 20, str(2**32 - 1)],
}
# Flags that take a name as well as a number (--user: a name or a uid): of ALWAYS_REFUSED, these are
# names (a login may be "x" or "nan"), so they are taken; the rest (no name starts with '-') are not.
TAKE_A_NAME = {"--user"}
NAMES = {"1e400", "nan", "inf", "x", "²", "0x10", "1_000"}
# Flags whose type checks a path, not a number: "99999" is a fine file name (--log: its own tests in
# tests/cli/test_bad_days_five_b.py).
PATHS = {"--log"}


def numeric_flags() -> list[tuple[str, Any, str]]:
    import argparse

    from gputui.cli.commands import clean, dashboard, snapshot, wait

    parsers = {
        "": dashboard.parser(),
        "snapshot": snapshot.parser(),
        "clean": clean.parser(),
        "wait": wait.parser(),
    }
    out = []
    for command, parser in parsers.items():
        for action in parser._actions:
            if (
                action.type is not None
                and action.option_strings
                and not isinstance(action, argparse._HelpAction)
                and action.option_strings[-1] not in PATHS
            ):
                out.append((command, parser, action.option_strings[-1]))
    return out


def test_every_numeric_flag_refuses_what_is_out_of_range_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--memory-below with 400 digits was an OverflowError (exit 1, the timeout's code); wait's
    --interval 0 was taken and then refused by the probe (exit 1, "down"); --util-below 101 was taken
    though its message says 1-100."""
    flags = numeric_flags()
    assert {(c, f) for c, _, f in flags} >= set(ALSO_REFUSED)  # every flag named here exists
    wrong = []
    for command, parser, flag in flags:
        always = [v for v in ALWAYS_REFUSED if flag not in TAKE_A_NAME or v not in NAMES]
        for value in always + ALSO_REFUSED.get((command, flag), []):
            try:
                parser.parse_args([f"{flag}={value}"])
            except SystemExit as exc:
                err = capsys.readouterr().err
                last = err.splitlines()[-1]
                # argparse names a flag with its aliases: "argument --gpu/--only"
                if exc.code != 2 or not re.search(rf"argument (\S+/)?{flag}\b", last):
                    wrong.append(f"{command} {flag} {value[:20]!r}: exit {exc.code}: {err[-200:]}")
            except Exception as exc:  # the point: nothing else may come out
                wrong.append(f"{command} {flag} {value[:20]!r}: {type(exc).__name__}: {str(exc)[:100]}")
            else:
                wrong.append(f"{command} {flag} {value[:20]!r}: accepted")
    assert wrong == []


@pytest.mark.parametrize(
    "flag, value, words",
    [
        pytest.param("--memory-below", "9" * 400, "out of range", id="memory-below-400-digits"),
        pytest.param("--interval", "0", "interval 0", id="interval-0"),
        pytest.param("--util-below", "101", "from 1 to 100", id="util-below-101"),
    ],
)
def test_wait_bad_values_are_exit_2_and_one_clear_line(flag: str, value: str, words: str) -> None:
    run = gputui("wait", "--demo", "demo-a", "--timeout", "2", flag, value)
    one_clear_line(run, f"argument {flag}", words)


def test_wait_json_prints_a_document_on_every_exit(tmp_path: Path) -> None:
    """`wait --json` printed nothing on exit 3 (no driver or GPU) and on a GPU spec naming nothing."""
    import json

    path = tmp_path / "config.toml"
    path.write_text('[[hosts]]\nname = "empty"\naddress = "local"\nreader = "sim"\nsim_scenario = "empty"\n')
    run = gputui("wait", "--config", str(path), "--gpu", "empty:9", "--json", "--timeout", "20")
    assert run.returncode == 2, run.stderr
    doc = json.loads(run.stdout)
    assert doc["exit_code"] == 2 and doc["ready"] is False and "has no GPU 9" in doc["error"]
    assert "has no GPU 9" in run.stderr
    # This machine's own GPUs (nvml): where it has no driver (CI), exit 3, and the document says why.
    run = gputui("wait", "local", "--json", "--timeout", "20")
    if run.returncode != 3:
        pytest.skip("this machine has an NVIDIA driver: no exit 3 to see")
    doc = json.loads(run.stdout)
    assert doc["exit_code"] == 3 and doc["ready"] is False and doc["error"] in run.stderr


# -- an export is both files or neither --------------------------------------------------------------


@pytest.fixture(scope="module")
def views() -> list[Any]:
    """One real sample of a sim host, as the dashboard's export writes it."""
    import asyncio

    from gputui.cli import snapshot
    from gputui.config.file import HostSpec
    from tests.support.commands import fleet_of

    fleet = fleet_of([HostSpec(name="e", reader="sim", sim_scenario="empty", sim_seed=3)])
    taken = asyncio.run(snapshot.take(fleet, 60))
    assert taken[0].sample is not None
    return taken


NOW = 1_800_000_000.0


def stem() -> str:
    import time

    return "gputui-snapshot-" + time.strftime("%Y%m%d-%H%M%S", time.localtime(NOW))


@pytest.mark.parametrize("planted", [".txt", ".json"])
def test_a_planted_name_never_leaves_half_an_export(tmp_path: Path, views: list[Any], planted: str) -> None:
    """A dangling symlink planted at the .txt name (exists() is false for it) made the export fail
    after its .json was written: an orphan .json, and no export."""
    from gputui.views.report import write_files

    (tmp_path / f"{stem()}{planted}").symlink_to(tmp_path / "nowhere")
    json_path, text_path = write_files(views, tmp_path, NOW)
    assert (json_path.name, text_path.name) == (f"{stem()}-1.json", f"{stem()}-1.txt")
    assert json_path.read_text().startswith("{") and "== e" in text_path.read_text()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([f"{stem()}{planted}", json_path.name, text_path.name])  # nothing else
    assert not (tmp_path / "nowhere").exists()  # the symlink was not followed


def test_an_export_that_fails_midway_leaves_nothing(tmp_path: Path, views: list[Any]) -> None:
    """No room for the second file (a full disk): neither stays."""
    from gputui.views.report import dumps, write_files

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        # Room for the JSON (in whole pages, as a tmpfs counts), none for the text after it.
        pages = -(-(len(dumps(views, NOW)) + 1) // 4096)
        info = os.statvfs(where)
        (where / "filler").write_bytes(b"\0" * (info.f_bavail * info.f_frsize - pages * 4096))
        with pytest.raises(OSError):
            write_files(views, where, NOW)
        assert sorted(p.name for p in where.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", str(where)], check=False)
