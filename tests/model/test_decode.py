"""The model's shared decoding (gputui/model/decode.py): a record's plain fields are read by their
declared types, and a field no decoder knows is an error when the module loads, never a field read
the wrong way."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gputui.model.decode import Pids, plain, read_fields, wire_fields


@dataclass(frozen=True)
class Plain:
    pid: int
    name: str | None = None
    size: int | None = None
    pids: Pids = ()
    pairs: tuple[tuple[int, int], ...] = ()
    busy: bool = False


def test_plain_fields_are_read_by_their_declared_types():
    table = wire_fields(Plain, skip=("pid",), pairs=lambda value: ((1, 2),))
    got = read_fields({"name": "a\x1b", "size": -1, "pids": [0, 7, "8"], "busy": 1}, table)
    assert got == {"name": "a\\e", "size": None, "pids": (7,), "pairs": ((1, 2),), "busy": False}


def test_a_field_without_a_decoder_or_a_special_naming_no_field_is_refused():
    with pytest.raises(TypeError, match="pairs: no decoder"):
        wire_fields(Plain, skip=("pid",))
    with pytest.raises(TypeError, match="has no field nmae"):
        wire_fields(Plain, skip=("pid", "pairs"), nmae=str)


def test_plain_gives_json_types_in_declaration_order():
    record = Plain(3, "x", pids=(4, 5), pairs=((1, 2),))
    assert list(plain(record, skip=("busy",)).items()) == [
        ("pid", 3), ("name", "x"), ("size", None), ("pids", [4, 5]), ("pairs", [[1, 2]])
    ]  # fmt: skip
