"""Hostlist expressions as Slurm writes them: examples, errors, and properties (hypothesis)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.config.hostlist import MAX_HOSTS, HostlistError, collapse, expand, is_hostlist


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("gpu[001-003]", ["gpu001", "gpu002", "gpu003"]),
        ("node[1-4,7]-ib", ["node1-ib", "node2-ib", "node3-ib", "node4-ib", "node7-ib"]),
        ("n[8-10]", ["n8", "n9", "n10"]),  # no padding: the low bound's width
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("a,b[2-3],c", ["a", "b2", "b3", "c"]),
        ("gpu[1,1,2]", ["gpu1", "gpu2"]),  # each once
        ("x[5]", ["x5"]),
        ("plain", ["plain"]),
        ("alice@gpu[1-2]:2222", ["alice@gpu1:2222", "alice@gpu2:2222"]),
    ],
)
def test_expand(expr: str, names: list[str]) -> None:
    assert expand(expr) == names


def test_gpu_001_to_128_is_128_hosts() -> None:
    names = expand("gpu[001-128]")
    assert len(names) == 128 and names[0] == "gpu001" and names[-1] == "gpu128"


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("gpu[3-1]", "goes down"),
        ("gpu[1-", "without a closing"),
        ("gpu]1[", "without '\\['"),
        ("gpu[]", "empty brackets"),
        ("gpu[a-b]", "not a number or a range"),
        ("gpu[1-2-3]", "not a number or a range"),
        ("gpu[[1-2]]", "do not nest"),
        ("a,,b", "empty name"),
        ("n[0-9999999999]", "more than"),
        ("a[0-999]b[0-999]", "more than"),
    ],
)
def test_bad_expressions_say_what_is_wrong(expr: str, problem: str) -> None:
    with pytest.raises(HostlistError, match=problem):
        expand(expr)


def test_the_limit_counts_every_combination() -> None:
    assert len(expand("a[0-99]b[0-99]")) == 10_000
    with pytest.raises(HostlistError):
        expand("a[0-99]b[0-99]", limit=9_999)
    assert MAX_HOSTS >= 4096


@pytest.mark.parametrize(
    ("text", "is_list"),
    [
        ("gpu[001-128]", True),
        ("a,b", True),
        ("gpu[1-", True),
        ("gpu1", False),
        ("[::1]", False),
        ("user@[fe80::1]:2222", False),
        ("alice@gpu-a:22", False),
        ("local", False),
    ],
)
def test_what_reads_as_a_hostlist(text: str, is_list: bool) -> None:
    assert is_hostlist(text) is is_list


def test_collapse() -> None:
    assert collapse(f"gpu{i:03d}" for i in range(1, 129)) == "gpu[001-128]"
    assert collapse(["n1", "n2", "n3", "n7", "login"]) == "login,n[1-3,7]"
    assert collapse(["a1-ib", "a2-ib"]) == "a[1-2]-ib"
    # Padded and unpadded numbers of one name: their brackets in the order of their numbers.
    assert collapse(f"gpu{i:03d}" for i in range(1, 1003)) == "gpu[001-999],gpu[1000-1002]"


# -- properties ----------------------------------------------------------------------------------

prefix = st.text(alphabet="abcgpu-.", min_size=1, max_size=4).filter(lambda s: not s[-1].isdigit())
suffix = st.sampled_from(["", "-ib", ".lan"])


@st.composite
def ranges(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A bracket's text and the numbers it stands for, as formatted."""
    items, numbers = [], []
    for _ in range(draw(st.integers(1, 3))):
        width = draw(st.integers(1, 4))
        low = draw(st.integers(0, 10 ** min(width, 3) - 1))
        high = draw(st.integers(low, low + 20))
        low_text = f"{low:0{width}d}"
        items.append(low_text if low == high else f"{low_text}-{high}")
        numbers += [f"{n:0{width}d}" for n in range(low, high + 1)]
    return "[" + ",".join(items) + "]", numbers


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(prefix, ranges()), min_size=1, max_size=2), suffix)
def test_expand_is_every_combination_leftmost_slowest(
    parts: list[tuple[str, tuple[str, list[str]]]], tail: str
) -> None:
    expr = "".join(p + r[0] for p, r in parts) + tail
    pieces = [[p + n for n in r[1]] for p, r in parts]
    expected = list(dict.fromkeys("".join(combo) + tail for combo in itertools.product(*pieces)))
    assert expand(expr) == expected


name = st.builds(
    lambda p, n, w, s: f"{p}{n:0{w}d}{s}" if n is not None else p + s,
    prefix,
    st.one_of(st.none(), st.integers(0, 2000)),
    st.integers(1, 5),
    suffix,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(name, min_size=1, max_size=40))
def test_collapse_then_expand_gives_the_same_names(names: list[str]) -> None:
    expr = collapse(names)
    back = expand(expr)
    assert sorted(back) == sorted(set(names))
    assert len(back) == len(set(back))
    assert not re.search(r"\[\]", expr)
