"""ASCII mode: the dashboard on a real pty writes no byte outside ASCII with `--ascii`, or by itself
where the locale is not UTF-8 (LANG=C), while a UTF-8 locale still gets its glyphs; each glyph's
stand-in is as wide as it was (gputui/text/glyphs.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputui.model.textsafe import cells
from gputui.text.glyphs import ASCII, SPARK_ASCII, shows_unicode, to_ascii
from tests.support.ptyapp import PtyApp

DRAWN = 60.0  # seconds for the demo's dashboard to be drawn with its GPUs, however busy the machine


def locale_env(**values: str) -> dict[str, str]:
    """This environment with its locale variables replaced by `values`."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith("LC_") or k in ("LANG", "PYTHONUTF8"))}
    env.update(values)
    return env


def drawn_output(tmp_path: Path, *args: str, env: dict[str, str]) -> bytes:
    """What the dashboard wrote on the demo until its GPU table was drawn, then `q`."""
    app = PtyApp(tmp_path, *args, env=env, size=(100, 30))
    try:
        app.up()
        app.wait_for(lambda: app.shows("demo-b"), DRAWN, "the host list")
        app.wait_for(lambda: app.shows("GiB"), DRAWN, "the GPU table's memory")
        app.pause(1.5)  # a few samples: sparklines and meters drawn
        app.send(b"q")
        assert app.wait_exit(30) is not None
        return bytes(app.output)
    finally:
        app.close()


def not_ascii(data: bytes) -> list[bytes]:
    return sorted({data[i : i + 3] for i, b in enumerate(data) if b > 0x7F})[:10]


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("--ascii",), {"LANG": "C.UTF-8"}),
        ((), {"LANG": "C"}),
        ((), {"LC_ALL": "POSIX", "LANG": "en_US.UTF-8"}),
    ],
    ids=["--ascii", "LANG=C", "LC_ALL=POSIX"],
)
def test_the_dashboard_writes_only_ascii(tmp_path: Path, args: tuple[str, ...], env: dict[str, str]) -> None:
    data = drawn_output(tmp_path, *args, env=locale_env(**env))
    assert b"GPU" in data and b"demo-a" in data
    assert not_ascii(data) == []


def test_a_utf8_locale_gets_the_glyphs(tmp_path: Path) -> None:
    data = drawn_output(tmp_path, env=locale_env(LANG="C.UTF-8"))
    assert "█".encode() in data or "·".encode() in data  # the memory meters


@pytest.mark.parametrize(
    ("env", "shows"),
    [
        ({"LANG": "en_US.UTF-8"}, True),
        ({"LANG": "de_DE.utf8"}, True),
        ({"LANG": "C"}, False),
        ({}, False),
        ({"LANG": "en_US.ISO-8859-1"}, False),
        ({"LC_ALL": "C", "LANG": "en_US.UTF-8"}, False),
        ({"LC_CTYPE": "en_US.UTF-8", "LANG": "C"}, True),
        ({"LC_CTYPE": "C.UTF-8", "LANG": "C"}, False),  # what Python's coercion of LANG=C leaves
        ({"LC_CTYPE": "C.UTF-8"}, False),
        ({"LC_CTYPE": "C.UTF-8", "LANG": "C.UTF-8"}, True),
        ({"LC_ALL": "en_US.UTF-8@euro"}, True),
    ],
)
def test_the_locale_says_whether_the_terminal_shows_unicode(env: dict[str, str], shows: bool) -> None:
    assert shows_unicode(env) is shows


def test_every_stand_in_is_as_wide_as_its_glyph() -> None:
    for code, plain in ASCII.items():
        assert plain.isascii() and cells(plain) == cells(chr(code)), (chr(code), plain)
    text = "GPU 0 ██▌·· ▁▃▅█ ✓ free … 45°C ╭─╮ 名前 e\u0301 ⣿⠀"
    shown = to_ascii(text)
    assert shown.isascii() and cells(shown) == cells(text)
    assert to_ascii("▁▂▃▄▅▆▇█") == SPARK_ASCII  # the levels keep their order
    assert to_ascii("plain") == "plain"
