"""Encoding and checking protocol lines (docs/PROTOCOL.md). Shared by the probe and the app.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import json
from typing import Any, Dict, Optional, Tuple  # noqa: F401  (type comments)

VERSION = 1
MAX_LINE = 1 << 20  # bytes; a longer line is refused, not buffered without bound

PROBE_TYPES = ("hello", "sample", "event", "error")
APP_TYPES = ("configure", "sample", "plan", "quit")


def encode(message):
    # type: (Dict[str, Any]) -> bytes
    """One record as one line. `v` is added when missing."""
    if "v" not in message:
        message = dict(message, v=VERSION)
    # ensure_ascii keeps control characters from remote text escaped on the wire.
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=True) + "\n").encode("ascii")


def error(code, message, plan=None):
    # type: (str, str, Optional[str]) -> Dict[str, Any]
    return {"type": "error", "v": VERSION, "code": code, "message": message, "plan": plan}


def decode(line, allowed=None):
    # type: (bytes, Optional[Tuple[str, ...]]) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]
    """Parse one line. Returns (record, None) or (None, error record); never raises."""
    if len(line) > MAX_LINE:
        return None, error("too-long", "line of %d bytes is over the %d byte limit" % (len(line), MAX_LINE))
    try:
        record = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, error("bad-json", "not a JSON line: %s" % (exc,))
    if not isinstance(record, dict):
        return None, error("bad-json", "a line must be a JSON object")
    if record.get("v") != VERSION:
        return None, error("bad-version", "protocol version %r, expected %d" % (record.get("v"), VERSION))
    kind = record.get("type")
    if not isinstance(kind, str) or (allowed is not None and kind not in allowed):
        return None, error("bad-message", "unknown record type %r" % (kind,))
    return record, None
