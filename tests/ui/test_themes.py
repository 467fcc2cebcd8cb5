"""Themes: data files loaded into Textual, bad files fall back to the default with a notification."""

from __future__ import annotations

from pathlib import Path

from textual.color import Color

from gputui.ui.themes import (
    DEFAULT_THEME,
    VARIABLE_FALLBACKS,
    bundled_themes_dir,
    load_themes,
)

from .conftest import build_app, settle


def test_bundled_themes_load_and_define_every_variable() -> None:
    found = load_themes(bundled_themes_dir())
    assert found.errors == []
    assert {"gputui-dark", "gputui-light", "gputui-contrast"} <= set(found.themes)
    assert found.themes["gputui-light"].dark is False
    for theme in found.themes.values():
        assert set(VARIABLE_FALLBACKS) <= set(theme.variables), theme.name
        for value in theme.variables.values():
            Color.parse(value)
    assert found.resolve("light") == "gputui-light"
    assert found.resolve("gputui-dark") == DEFAULT_THEME
    assert found.resolve("nope") is None


def test_bad_theme_files_are_reported(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text("name = 'x\n")
    (tmp_path / "nocolor.toml").write_text('name = "bad"\n[colors]\nprimary = "not-a-colour"\n')
    (tmp_path / "noname.toml").write_text('[colors]\nprimary = "#fff"\n')
    (tmp_path / "ok.toml").write_text('name = "mine"\n[colors]\nprimary = "#336699"\n')
    found = load_themes(tmp_path)
    assert set(found.themes) == {"mine"}
    assert len(found.errors) == 3
    assert any("broken.toml: not valid TOML" in e for e in found.errors)
    assert any("not a colour" in e for e in found.errors)


async def test_invalid_theme_falls_back_with_a_notification(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('name = "gputui-bad"\n[colors]\nprimary = "#zzz"\n')
    app = build_app(theme="bad", themes_dir=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert app.theme == DEFAULT_THEME
        messages = [n.message for n in app._notifications]
        assert any("bad.toml" in m and "not a colour" in m for m in messages)
        assert any("'bad' is not available" in m for m in messages)


async def test_theme_by_short_name_and_user_dir(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text('name = "gputui-mine"\ndark = false\n[colors]\nprimary = "#336699"\n')
    app = build_app(theme="mine", themes_dir=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert app.theme == "gputui-mine"
        # Variables the file leaves out come from its standard colours.
        assert app.theme_variables["kind-user"] == app.theme_variables["text-primary"]
