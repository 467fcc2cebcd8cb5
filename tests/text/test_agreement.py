"""Counts and names said one way everywhere: a number agrees with its noun and its verb (one helper,
gputui.text.words), and a GPU is `GPU 3` in every output, never `GPU3`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gputui.kill.plan.record import sweep_warning
from gputui.text.words import count_does, plural

GPUTUI = Path(__file__).resolve().parents[2] / "gputui"
# A plural made by hand next to a number (`host{'s' if n != 1 else ''}`): the helpers say it.
HAND_PLURAL = re.compile(r"""[{( ]['"](e?s)['"] if """)
# A GPU named without its space: `f"GPU{index}"`, `"GPU%d"`, `"GPU" + str(i)`.
GLUED_GPU = re.compile(r"""GPU\{|GPU%d|["']GPU["'] ?\+""")


@pytest.mark.parametrize(
    ("n", "one", "verb", "many", "said"),
    [
        (1, "process", "holds", "processes", "1 process holds"),
        (2, "process", "holds", "processes", "2 processes hold"),
        (0, "GPU", "is", None, "0 GPUs are"),
        (1, "client", "ends", None, "1 client ends"),
        (3, "client", "ends", None, "3 clients end"),
        (2, "monitor", "watches", None, "2 monitors watch"),
        (2, "host", "has", None, "2 hosts have"),
    ],
)
def test_a_count_agrees_with_its_verb(n, one, verb, many, said):
    assert count_does(n, one, verb, many) == said


def test_plural_is_the_noun_alone():
    assert (plural(1, "host"), plural(4, "host"), plural(2, "process", "processes")) == (
        "host",
        "hosts",
        "processes",
    )


@pytest.mark.parametrize("n", [1, 2])
def test_the_sweep_warning_agrees_with_its_count(n):
    words = sweep_warning(n).message
    assert ("1 process holds /dev/nvidia*" if n == 1 else "2 processes hold /dev/nvidia*") in words


def _offenders(pattern: re.Pattern[str]) -> list[str]:
    return [
        f"{path.relative_to(GPUTUI.parent)}:{number}: {line.strip()}"
        for path in sorted(GPUTUI.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def test_no_plural_is_made_by_hand():
    """Every count goes through `count`, `plural` or `count_does`, so none is left to forget."""
    assert _offenders(HAND_PLURAL) == []


def test_a_gpu_is_always_named_with_a_space():
    assert _offenders(GLUED_GPU) == []
