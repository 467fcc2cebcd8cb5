"""Themes as data: TOML files turned into Textual `Theme`s.

A theme file has `name`, optional `dark` (default true), a `[colors]` table with Textual's theme colours
(`primary` required) and a `[variables]` table with gputui's own variables (`kind-user`, ...). Every
value must be a colour Textual can parse: a bad file is reported, never half-applied, and the app
falls back to the default theme. The bundled files live in `themes/` (in a wheel: gputui/_themes).
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package (tomli)
    import tomli as tomllib

from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

DEFAULT_THEME = "gputui-dark"
PREFIX = "gputui-"
COLOR_FIELDS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)

# gputui's variables and the standard variable each falls back to, so a theme without them (one of
# Textual's own, picked in the command palette) still gets readable, theme-coloured kinds.
VARIABLE_FALLBACKS = {
    "kind-user": "text-primary",
    "kind-ghost": "text-error",
    "kind-hidden": "text-warning",
    "kind-monitor": "foreground-muted",
    "kind-zombie": "text-secondary",
    "gpu-free": "text-success",
    "meter-util": "text-accent",
    "meter-memory": "text-primary",
    "meter-empty": "foreground-disabled",
    # Secondary text inside table cells and status lines. Not Textual's $text-muted: that is
    # "auto 60%", which needs the real background, and cell styles are resolved without it.
    "muted": "foreground-muted",
    "pane-border": "foreground-muted",  # an unfocused pane's border: Textual's own is nearly invisible
}


class ThemeError(ValueError):
    """A theme file that cannot be used; the message names the file and the problem."""


@dataclass
class ThemeSet:
    """The themes that loaded, and what went wrong with the others (shown as notifications)."""

    themes: dict[str, Theme] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def resolve(self, name: str | None) -> str | None:
        """The registered name for `name`; "dark" finds "gputui-dark". None when unknown."""
        if not name:
            return None
        for candidate in (name, PREFIX + name):
            if candidate in self.themes:
                return candidate
        return None


def theme_problem(name: str, themes: ThemeSet) -> str | None:
    """Why `name` names no theme (with the closest one and the list), or None when it does: one of
    `themes` ("dark" finds "gputui-dark") or one of Textual's own ("nord")."""
    if themes.resolve(name) is not None or name in BUILTIN_THEMES:
        return None
    ours = sorted(n.removeprefix(PREFIX) for n in themes.themes)
    textual = sorted(BUILTIN_THEMES)
    close = difflib.get_close_matches(name.removeprefix(PREFIX), ours, n=1, cutoff=0.5)
    close = close or difflib.get_close_matches(name, textual, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown theme {name!r}{hint}; gputui's: {', '.join(ours)}; Textual's: {', '.join(textual)}"


def bundled_themes_dir() -> Path:
    """Where the shipped theme files are: the source tree's themes/, or gputui/_themes in a wheel."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "_themes"
    return installed if installed.is_dir() else package.parent / "themes"


def _color(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ThemeError(f"{path}: {key} must be a colour string, not {type(value).__name__}")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ThemeError(f"{path}: {key} = {value!r} is not a colour") from None
    return value


def parse_theme(path: Path, data: dict[str, Any]) -> Theme:
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeError(f"{path}: missing `name`")
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeError(f"{path}: `dark` must be true or false")
    colors = data.get("colors", {})
    variables = data.get("variables", {})
    if not isinstance(colors, dict) or not isinstance(variables, dict):
        raise ThemeError(f"{path}: [colors] and [variables] must be tables")
    unknown = sorted(set(colors) - set(COLOR_FIELDS))
    if unknown:
        raise ThemeError(f"{path}: unknown colour {unknown[0]!r} (known: {', '.join(COLOR_FIELDS)})")
    if "primary" not in colors:
        raise ThemeError(f"{path}: [colors] needs at least `primary`")
    checked: dict[str, Any] = {key: _color(path, f"colors.{key}", value) for key, value in colors.items()}
    extra = {key: _color(path, f"variables.{key}", value) for key, value in variables.items()}
    try:
        theme = Theme(name=name.strip(), dark=dark, variables=extra, **checked)
        theme.to_color_system().generate()  # fails here, not later in the middle of a redraw
    except Exception as exc:
        raise ThemeError(f"{path}: {exc}") from None
    return theme


def load_theme_file(path: Path) -> Theme:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ThemeError(f"{path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"{path}: not valid TOML: {exc}") from None
    return parse_theme(path, data)


def load_themes(*dirs: Path | None) -> ThemeSet:
    """Every *.toml theme in `dirs`, in order: a later directory overrides a theme of the same name."""
    found = ThemeSet()
    for directory in dirs:
        if directory is None:
            continue
        if not directory.is_dir():
            found.errors.append(f"{directory}: no such theme directory")
            continue
        for path in sorted(directory.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ThemeError as exc:
                found.errors.append(str(exc))
                continue
            found.themes[theme.name] = theme
    return found


def fallback_variables(variables: dict[str, str]) -> dict[str, str]:
    """gputui's variables that the current theme lacks, taken from its standard ones."""
    return {
        name: variables[source]
        for name, source in VARIABLE_FALLBACKS.items()
        if name not in variables and source in variables
    }
