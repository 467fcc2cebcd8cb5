"""What Textual would leave as cyclic garbage on every frame, freed as it goes instead.

An object in a reference cycle is not freed when its last outside reference goes: it waits for the
garbage collector. Two of Textual's own structures make such cycles on every frame:
- **A strip that holds itself.** `Strip` caches what it makes from itself, and where the answer is
  the strip itself it caches that too: `divide` at one cut at its end gives `[self]`, kept in
  `self._divide_cache`; `crop_extend` over exactly its cells gives `self`, kept in
  `self._crop_extend_cache`. The compositor divides every line of every widget it draws, so nearly
  every strip on screen held itself, with its seven caches and its segments.
- **An LRU cache's ring.** `LRUCache` keeps its entries in a ring of `[prev, next, key, value]`
  lists. `clear()` drops the ring whole, a cycle with every value in it (a table's rendered rows
  and cells: DataTable clears its caches whenever its rows change), and `discard` of the last entry
  leaves one that refers to itself.

At a thousand hosts that was some 7,000 objects of garbage a second, and it was what filled the
young generation: the app's own objects replace one another and are freed at once, so the
generation's count grows with that garbage alone. Each young collection then walks everything the
hosts' latest samples hold (some 100 objects a host): a pause of 0.4 s at 4,096 hosts every ten
seconds or so (docs/BENCHMARKS.md section 13, "Sixth round").

`install()` makes those answers without the cycles: the same strip (a new one-strip list for
`divide`), the same cache contents, in every case what Textual's own methods return
(tests/ui/test_acyclic.py holds them to it); the links a cache lets go of are emptied, so no ring
is left. It is a no-op when called again, and refuses a Textual whose classes no longer have the
methods it wraps (the version is pinned in pyproject.toml).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from rich.style import Style
from textual.cache import LRUCache
from textual.strip import Strip

from ._textual import lru_links

__all__ = ["install", "installed"]

_ORIGINAL: dict[str, Any] = {}
_WRAPPED = ((Strip, "divide"), (Strip, "crop_extend"), (LRUCache, "clear"), (LRUCache, "discard"))


def _divide(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
    cuts = list(cuts)
    length = self.cell_length
    if [cut for cut in cuts if cut <= length] == [length]:
        return [self]  # Textual's answer, not kept in self's own cache
    divided: Sequence[Strip] = _ORIGINAL["divide"](self, cuts)
    return divided


def _crop_extend(self: Strip, start: int, end: int, style: Style | None) -> Strip:
    if start <= 0 and end == self.cell_length:
        return self  # extended by nothing, cropped to itself: Textual's answer, not cached
    strip: Strip = _ORIGINAL["crop_extend"](self, start, end, style)
    return strip


def _clear(self: LRUCache[Any, Any]) -> None:
    links = list(lru_links(self).values())
    _ORIGINAL["clear"](self)
    deque(map(list.clear, links), maxlen=0)  # no ring left: each link and its value freed now


def _discard(self: LRUCache[Any, Any], key: Any) -> None:
    link = lru_links(self).get(key)
    _ORIGINAL["discard"](self, key)
    if link is not None:
        link.clear()  # out of the ring now; the last one referred to itself


def installed() -> bool:
    return bool(_ORIGINAL)


def install() -> None:
    """Wrap Strip's `divide` and `crop_extend`, LRUCache's `clear` and `discard` (once a process)."""
    if _ORIGINAL:
        return
    for cls, name in _WRAPPED:
        if not callable(getattr(cls, name, None)):
            raise RuntimeError(f"textual's {cls.__name__} has no {name}: gputui/ui/acyclic.py must follow it")
    replacements = {"divide": _divide, "crop_extend": _crop_extend, "clear": _clear, "discard": _discard}
    for cls, name in _WRAPPED:
        _ORIGINAL[name] = getattr(cls, name)
        setattr(cls, name, replacements[name])
