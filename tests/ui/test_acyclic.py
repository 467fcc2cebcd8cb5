"""gputui/ui/acyclic.py: Textual's strips and LRU caches, wrapped so that they leave no cyclic garbage,
give what Textual's own methods give (held to the originals on generated strips, cuts and crops),
and the app installs them; without the wrappers the same steps do leave garbage (the test can fail)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.strip import Strip

from gputui.ui import acyclic
from gputui.ui.app import GpuTuiApp

acyclic.install()
ORIGINAL = acyclic._ORIGINAL

STYLES = [None, Style(bold=True), Style(color="red"), Style(bgcolor="#203040")]
segments = st.lists(
    st.builds(
        lambda text, style: Segment(text, style),
        st.sampled_from(["", "a", "gpu 0", "全角", " pad ", "1234567890"]),
        st.sampled_from(STYLES),
    ),
    max_size=6,
)


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The collector off while a test makes its garbage, so that `gc.collect()` counts all of it."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def shape(strips: Any) -> list[list[tuple[str, Any]]]:
    return [[(s.text, s.style) for s in strip] for strip in strips]


@given(segments, st.lists(st.integers(1, 40), max_size=4, unique=True).map(sorted))
def test_divide_gives_what_textual_gives(parts: list[Segment], cuts: list[int]) -> None:
    strip = Strip(parts)  # cuts in order, as the compositor makes them
    for these in (cuts, [strip.cell_length], sorted({*cuts, strip.cell_length})):
        mine = Strip.divide(strip, iter(these))  # an iterator, as a caller may pass
        theirs = ORIGINAL["divide"](Strip(parts), list(these))
        assert shape(mine) == shape(theirs)
        assert [s.cell_length for s in mine] == [s.cell_length for s in theirs]


@given(segments, st.integers(-3, 40), st.integers(-3, 40), st.sampled_from(STYLES))
def test_crop_extend_gives_what_textual_gives(parts: list[Segment], start: int, end: int, style: Any) -> None:
    strip = Strip(parts)
    for a, b in ((start, end), (0, strip.cell_length), (start, strip.cell_length)):
        mine = strip.crop_extend(a, b, style)
        theirs = ORIGINAL["crop_extend"](Strip(parts), a, b, style)
        assert shape([mine]) == shape([theirs]) and mine.cell_length == theirs.cell_length
        if a <= 0 and b == strip.cell_length:
            assert mine is strip  # as Textual returns it: the strip itself


@given(
    st.lists(st.integers(0, 30), max_size=40), st.integers(1, 8), st.lists(st.integers(0, 30), max_size=10)
)
def test_lru_cache_keeps_what_textual_keeps(keys: list[int], size: int, dropped: list[int]) -> None:
    mine, theirs = LRUCache[int, str](size), LRUCache[int, str](size)
    for key in keys:
        for cache in (mine, theirs):
            cache.set(key, str(key))
            cache.get(keys[0])
    for key in dropped:
        mine.discard(key)
        ORIGINAL["discard"](theirs, key)
    assert sorted(mine.keys()) == sorted(theirs.keys())
    assert all(mine.get(k) == theirs.get(k) for k in range(31))
    mine.set(99, "x")
    theirs.set(99, "x")
    assert sorted(mine.keys()) == sorted(theirs.keys())


def strips_drawn(divide: Any, crop_extend: Any) -> None:
    """What the compositor and a log do with a line, 200 times over, the lines then dropped."""
    for n in range(200):
        strip = Strip([Segment(f"line {n}"), Segment(" gpu", Style(bold=True))])
        divide(strip, [strip.cell_length])
        crop_extend(strip, 0, strip.cell_length, None)


def caches_cleared(clear: Any, discard: Any) -> None:
    """A table's caches, filled and cleared (its rows changed), 50 times over; one emptied by discard."""
    for _ in range(50):
        cache = LRUCache[int, list[int]](20)
        for key in range(30):
            cache.set(key, [key])
        clear(cache)
        cache.set(1, [1])
        discard(cache, 1)


def test_nothing_drawn_or_cleared_is_left_for_the_collector() -> None:
    with collector_off():
        strips_drawn(Strip.divide, Strip.crop_extend)
        caches_cleared(LRUCache.clear, LRUCache.discard)
        left = gc.collect()
    assert left == 0


def test_without_the_wrappers_the_same_steps_leave_cycles() -> None:
    with collector_off():
        strips_drawn(ORIGINAL["divide"], ORIGINAL["crop_extend"])
        strips = gc.collect()
        caches_cleared(ORIGINAL["clear"], ORIGINAL["discard"])
        caches = gc.collect()
    assert strips >= 200 and caches >= 50  # every strip held itself, every ring was left whole


def test_the_app_installs_them(monkeypatch: Any) -> None:
    monkeypatch.setattr(acyclic, "_ORIGINAL", {})
    monkeypatch.setattr(Strip, "divide", ORIGINAL["divide"])
    monkeypatch.setattr(Strip, "crop_extend", ORIGINAL["crop_extend"])
    monkeypatch.setattr(LRUCache, "clear", ORIGINAL["clear"])
    monkeypatch.setattr(LRUCache, "discard", ORIGINAL["discard"])
    assert not acyclic.installed()
    from gputui.fleet.fleet import Fleet

    GpuTuiApp(Fleet())
    assert acyclic.installed() and Strip.divide is acyclic._divide and LRUCache.clear is acyclic._clear
    acyclic.install()  # again: nothing more
    assert acyclic._ORIGINAL["divide"] is ORIGINAL["divide"]
