"""The [idle] table of the config: when a process holding GPU memory at 0 % SM is an idle holder."""

from __future__ import annotations

import pytest

import gputui.config.file as config
from gputui.config.file import ConfigError


def test_the_idle_table_sets_the_minutes() -> None:
    assert config.parse_config("[idle]\nminutes = 30\n").idle_minutes == 30.0
    assert config.parse_config("[idle]\nminutes = 0.5\n").idle_minutes == 0.5
    assert config.parse_config("").idle_minutes is None  # the default (10 minutes)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "[idle]\nminutes = 0\n",
            r"config.toml:2: 'minutes' in \[idle\] must be a number of minutes more than 0",
        ),
        ("[idle]\nminutes = -5\n", r"more than 0 and at most 10080 \(got -5\)"),
        ('[idle]\nminutes = "10"\n', r"must be a number of minutes"),
        ("[idle]\nminutes = true\n", r"must be a number of minutes"),
        ("[idle]\nminutes = 1e9\n", r"at most 10080"),
        ("[idle]\nminuets = 10\n", r"unknown key 'minuets' in \[idle\] \(line 2\): did you mean 'minutes'\?"),
        ("idle = 10\n", r"'idle' must be a table: write \[idle\] on its own line"),
    ],
)
def test_a_bad_idle_table_says_what_to_fix(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        config.parse_config(text, "config.toml")
