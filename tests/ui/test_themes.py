"""Themes: data files loaded into Textual, bad files fall back to the default with a notification."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.color import Color

from gputui.ui.themes import (
    DEFAULT_THEME,
    VARIABLE_FALLBACKS,
    bundled_themes_dir,
    load_themes,
)
from tests.support.apps import build_app
from tests.support.pilot import settle


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


# -- contrast (issue 12, defect 6): every theme file's text reads at WCAG AA ------------------------

TEXT = ("foreground", "muted", *(f"kind-{k}" for k in ("user", "ghost", "hidden", "monitor", "zombie")))
TEXT += ("gpu-free", "warning", "error", "success", "accent", "primary")
AA_TEXT = 4.5  # WCAG 2.x AA, normal text
AA_UI = 3.0  # WCAG 2.x 1.4.11: the borders that show where a pane is


def luminance(color: Color) -> float:
    def channel(value: int) -> float:
        v = value / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)


def contrast(a: Color, b: Color) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def theme_colors(name: str) -> dict[str, Color]:
    theme = load_themes(bundled_themes_dir()).themes[name]
    variables = {**theme.to_color_system().generate(), **theme.variables}
    return {key: Color.parse(value) for key, value in variables.items() if key in (*TEXT, *PLACES)}


PLACES = ("background", "surface", "panel", "pane-border")


@pytest.mark.parametrize("name", ["gputui-dark", "gputui-light", "gputui-contrast"])
def test_every_text_colour_reads_at_aa(name: str) -> None:
    """Each text colour the app uses (app.tcss: kinds, states, the log, the help, the dialog) on each
    background it sits on: the tables, log, help and dialog (surface), the status line and the legend
    (panel), the screen (background); the READ-ONLY badge; the cursor row (foreground on the
    primary tint over the surface); and the unfocused pane borders (3:1)."""
    c = theme_colors(name)
    failures = [
        f"{text} on {ground}: {contrast(c[text], c[ground]):.2f}"
        for text in TEXT
        for ground in ("background", "surface", "panel")
        if contrast(c[text], c[ground]) < AA_TEXT
    ]
    badge = contrast(c["background"], c["warning"])
    if badge < AA_TEXT:
        failures.append(f"badge (background on warning): {badge:.2f}")
    for alpha in (0.25, 0.45):  # the cursor row, unfocused and focused
        row = c["surface"].blend(c["primary"], alpha)
        if contrast(c["foreground"], row) < AA_TEXT:
            failures.append(f"cursor row at {alpha:.0%}: {contrast(c['foreground'], row):.2f}")
    for ground in ("background", "surface"):
        if contrast(c["pane-border"], c[ground]) < AA_UI:
            failures.append(f"pane-border on {ground}: {contrast(c['pane-border'], c[ground]):.2f}")
    assert failures == [], f"{name}: " + "; ".join(failures)
