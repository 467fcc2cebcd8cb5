"""Property-based fuzzing of the config parser and the host argument parser (gputui/config/file.py), which
read untrusted text.

Properties: parse_config and parse_host_arg raise only ConfigError, and what they accept is within
the documented bounds. The wire decoder is fuzzed in tests/probe/test_wire_fuzz.py.
"""

from __future__ import annotations

import math
import string

from hypothesis import given
from hypothesis import strategies as st

from gputui.config.file import ConfigError, parse_config, parse_host_arg
from gputui.probe.readers.scenarios import SCENARIOS
from gputui.probe.wire import MAX_INTERVAL, MIN_INTERVAL
from tests.support.fuzzing import FUZZ, SLOW_FUZZ

# -- parse_config --------------------------------------------------------------------------------

TOML_WORDS = ["interval", "theme", "read_only", "hosts", "defaults", "name", "address", "port", "user",
              "reader", "sim", "sim_scenario", "sim_variant", "sim_seed", "jump", "wrap", "python", "sudo",
              "demo", "nan", "inf", "-inf", "true", "false", "0.07", "1e308", "-1", "0x1f", "1979-05-27",
              '"a"', "'b'", '"""', "[[hosts]]", "[defaults]", "[", "]", "{", "}", "=", ",", ".", "#",
              "\n", " ", "\\", "\x00", "\t", "\r\n", "é"]  # fmt: skip


@FUZZ
@given(st.lists(st.sampled_from(TOML_WORDS), max_size=80))
def test_parse_config_raises_only_config_error_on_toml_ish_text(words):
    text = "".join(words)
    try:
        parse_config(text, "fuzz.toml")
    except ConfigError as exc:
        assert exc.file == "fuzz.toml" and exc.message


@FUZZ
@given(st.text(max_size=300))
def test_parse_config_raises_only_config_error_on_any_text(text):
    try:
        parse_config(text, "fuzz.toml")
    except ConfigError:
        pass


@SLOW_FUZZ
@given(
    key=st.sampled_from(["interval", "theme", "hosts", "x"]),
    opens=st.lists(
        st.sampled_from(["[", "{ a = ", "[1, ", "{ a = 1, b = ", "[[", "{a=["]), min_size=1, max_size=3
    ),
    count=st.integers(min_value=1, max_value=20_000),
    close=st.booleans(),
    digits=st.just(0) | st.integers(min_value=4000, max_value=6000),
)
def test_parse_config_on_deep_values_and_long_numbers(key, opens, count, close, digits):
    prefix = "".join(opens)
    value = prefix * (count // len(prefix) + 1)
    if close:
        value += "".join("]" if c == "[" else "}" for c in reversed(value) if c in "[{")
    if digits:
        value = "9" * digits
    try:
        parse_config(f'theme = "dark"\n{key} = {value}\n', "deep.toml")
    except ConfigError as exc:
        assert exc.file == "deep.toml" and len(exc.message) < 1000


def toml_string(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\' or ord(char) < 32 or ord(char) == 127:
            out.append(f"\\u{ord(char):04x}")
        elif 0xD800 <= ord(char) <= 0xDFFF:
            out.append("?")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_value(value) -> str:
    """A TOML inline value (arrays and inline tables for containers)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


toml_leaves = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["demo", "empty", "nope", "sim", "nvml", "local", "gpu-a", "root@x", "-oX", ""])
)
toml_values = st.recursive(
    toml_leaves,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
HOST_KEYS = ["name", "address", "user", "port", "read_only", "sudo", "python", "jump", "wrap", "reader",
             "sim_scenario", "sim_variant", "sim_seed", "adress"]  # fmt: skip
host_tables = st.dictionaries(st.sampled_from(HOST_KEYS), toml_values | toml_leaves, max_size=6)


@FUZZ
@given(
    top=st.dictionaries(
        st.sampled_from(["interval", "theme", "read_only", "colour"]), toml_values, max_size=3
    ),
    defaults=st.none() | host_tables,
    hosts=st.lists(host_tables, max_size=4),
)
def test_parse_config_on_generated_valid_toml(top, defaults, hosts):
    lines = [f"{k} = {toml_value(v)}" for k, v in top.items()]
    if defaults is not None:
        lines += ["[defaults]", *(f"{k} = {toml_value(v)}" for k, v in defaults.items())]
    for host in hosts:
        lines += ["[[hosts]]", *(f"{k} = {toml_value(v)}" for k, v in host.items())]
    text = "\n".join(lines) + "\n"
    try:
        config = parse_config(text, "gen.toml")
    except ConfigError as exc:
        assert exc.file == "gen.toml" and exc.message and len(exc.message) < 1000
        return
    if config.interval is not None:
        assert MIN_INTERVAL <= config.interval <= MAX_INTERVAL
    names = [h.name for h in config.hosts]
    assert len(names) == len(set(names))
    for host in config.hosts:
        assert host.reader in ("nvml", "sim")
        assert host.sim_scenario is None or host.sim_scenario in SCENARIOS
        assert host.port is None or 1 <= host.port <= 65535
        assert not host.address.startswith("-")


# -- parse_host_arg ------------------------------------------------------------------------------

HOST_CHARS = string.ascii_letters + string.digits + "@:[]%.-_ \t\n\x00²٣é"


@FUZZ
@given(st.text(max_size=60) | st.text(alphabet=HOST_CHARS, max_size=40))
def test_parse_host_arg_raises_only_config_error(text):
    try:
        spec = parse_host_arg(text)
    except ConfigError as exc:
        assert exc.file is None and exc.line is None and exc.message
        return
    assert spec.address and not spec.address.startswith("-")
    assert not any(c.isspace() or ord(c) < 32 for c in spec.address)
    assert spec.port is None or 1 <= spec.port <= 65535
    assert spec.user is None or (spec.user and not any(c.isspace() for c in spec.user))
