"""Small command-line values: timeouts, intervals, indexes and PIDs, in ASCII and in range."""

from __future__ import annotations

import argparse
import re

import pytest

from gputui.cli import argtypes
from gputui.cli.argtypes import parse_index
from gputui.probe.wire import MAX_INTERVAL, MIN_INTERVAL


@pytest.mark.parametrize(
    "text, value", [("0", 0), ("3", 3), ("012", 12), ("4121", 4121), ("9" * 18, int("9" * 18))]
)
def test_parse_index_takes_ascii_digits(text, value):
    assert parse_index(text) == value


@pytest.mark.parametrize(
    "text",
    # "²".isdigit() and "٣".isdigit() are true, and int("²") raises: `clean --gpu ²` crashed.
    ["²", "³", "٣", "１", "", " 3", "3 ", "+3", "-3", "3_0", "0x3", "3.0", "three", "9" * 19, "9" * 5000],
)
def test_parse_index_refuses_anything_else(text):
    assert parse_index(text) is None


def test_isdigit_is_not_enough():
    """Why parse_index exists: the check clean.py uses today accepts what int() refuses."""
    assert "²".isdigit()
    with pytest.raises(ValueError):
        int("²")


@pytest.mark.parametrize("text", ["0.5", "20", "3600", "1e-3"])
def test_seconds_in_range(text):
    assert argtypes.seconds(text) == float(text)


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "-1", "0", "3600.5", "1e10", "x", ""])
def test_seconds_out_of_range(text):
    with pytest.raises(argparse.ArgumentTypeError):
        argtypes.seconds(text)


@pytest.mark.parametrize("text", [str(MIN_INTERVAL), "1", str(MAX_INTERVAL)])
def test_interval_in_bounds(text):
    assert argtypes.interval(text) == float(text)


@pytest.mark.parametrize("text", ["0.07", "0.05", "0", "-1", "nan", "inf", "3601", "1e308", "fast"])
def test_interval_out_of_bounds(text):
    with pytest.raises(argparse.ArgumentTypeError):
        argtypes.interval(text)


@pytest.mark.parametrize("text, ok", [("1", True), ("4121", True), ("0", False), ("²", False), ("-5", False)])
def test_pid(text, ok):
    if ok:
        assert argtypes.pid(text) == int(text)
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            argtypes.pid(text)


@pytest.mark.parametrize(
    "text, value",
    [
        ("4096", 4096),
        ("8GiB", 8 << 30),
        ("1.5T", 3 << 39),
        ("2PiB", 2 << 50),
        ("1EiB", 1 << 60),
        ("1024P", 1 << 60),
    ],
)
def test_a_size_takes_every_unit_up_to_its_bound(text, value):
    """The range a refusal names is "1 byte to 1 EiB": its top is written as it says it (`1EiB`)."""
    assert argtypes.size(text) == value


@pytest.mark.parametrize(
    "text, says",
    [("1.5EiB", "out of range (1 byte to 1 EiB)"), ("2E", "out of range"), ("1ZiB", "is not a size")],
)
def test_a_size_past_the_bound_says_the_range(text, says):
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(says)):
        argtypes.size(text)
