"""Property-based fuzzing of the wire decoder (gputui/probe/wire.py), which reads every probe line and
every app record: untrusted text.

Properties: wire.decode never raises and answers with a record or a documented error record; what
it accepts is exactly the documented records; encode/decode round trip. The config's parsers are
fuzzed in tests/config/test_config_fuzz.py.
"""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from gputui.probe.wire import (
    APP_TYPES,
    MAX_DEPTH,
    MAX_LINE,
    PROBE_TYPES,
    decode,
    encode,
)
from tests.support.fuzzing import FUZZ, SLOW_FUZZ

ERROR_CODES = {"bad-json", "too-long", "bad-version", "bad-message"}
TYPES = sorted(set(PROBE_TYPES) | set(APP_TYPES) | {"launch", ""})


def check_decoded(result, allowed=None) -> None:
    record, err = result
    assert (record is None) != (err is None)
    if err is not None:
        assert err["type"] == "error" and err["v"] == 1 and err["code"] in ERROR_CODES
        assert isinstance(err["message"], str) and len(err["message"]) < 1000
        json.dumps(err)  # an error record can always be sent on
    else:
        assert isinstance(record, dict) and type(record["v"]) is int and record["v"] == 1
        assert isinstance(record["type"], str) and (allowed is None or record["type"] in allowed)


# -- wire.decode ---------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=4096))
def test_decode_never_raises_on_bytes(line):
    check_decoded(decode(line))
    check_decoded(decode(line, PROBE_TYPES), PROBE_TYPES)


JSON_TOKENS = [b"[", b"]", b"{", b"}", b",", b":", b'"a"', b"1", b"-0", b"1e400", b"NaN", b"Infinity",
               b"-Infinity", b"true", b"null", b" ", b"\n", b'"\\ud800"', b'"v":1', b'"type":"sample"']  # fmt: skip


@FUZZ
@given(st.lists(st.sampled_from(JSON_TOKENS), max_size=400))
def test_decode_never_raises_on_json_like_token_soup(tokens):
    line = b"{" + b"".join(tokens)
    check_decoded(decode(line, APP_TYPES), APP_TYPES)


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=40,
)


def depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def finite(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list):
        return all(finite(v) for v in value)
    return True


@FUZZ
@given(
    kind=st.sampled_from(TYPES) | json_values,
    version=st.sampled_from([1, 1.0, True, 2, 0, "1", None, [1]]),
    body=st.dictionaries(st.text(max_size=8), json_values, max_size=6),
)
def test_decode_on_generated_records(kind, version, body):
    record = dict(body, type=kind, v=version)
    line = json.dumps(record, allow_nan=True).encode()
    result = decode(line, PROBE_TYPES)
    check_decoded(result, PROBE_TYPES)
    accepted = result[0] is not None
    should = (
        type(version) is int
        and version == 1
        and kind in PROBE_TYPES
        and finite(record)
        and depth(record) <= MAX_DEPTH
        and len(line) <= MAX_LINE
    )
    assert accepted == should, (result[1], line[:200])
    if accepted:
        assert result[0] == record


@FUZZ
@given(body=st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_what_encode_writes_decode_reads_back(body):
    record = dict({k: v for k, v in body.items() if k != "v"}, type="sample")
    line = encode(record)
    assert line.endswith(b"\n") and b"\n" not in line[:-1] and line.isascii()
    decoded, err = decode(line, PROBE_TYPES)
    if depth(record) <= MAX_DEPTH:
        assert err is None, err
        # encode writes null for NaN and the infinities; everything else comes back as it was.
        assert finite(decoded)
        if finite(record):
            assert decoded == dict(record, v=1)


@SLOW_FUZZ
@given(
    opens=st.lists(st.sampled_from([b"[", b'{"a":', b"[1,", b'{"type":"sample","v":1,"x":']), min_size=1),
    count=st.integers(min_value=1, max_value=60_000),
    close=st.booleans(),
)
def test_decode_on_deep_nesting(opens, count, close):
    prefix = b"".join(opens)
    line = prefix * (count // len(prefix) + 1)
    if close:
        line += b"]" * count
    check_decoded(decode(line[: MAX_LINE + 10]))
