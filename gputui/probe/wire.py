"""Encoding and checking protocol lines (docs/PROTOCOL.md). Shared by the probe and the app.

Also the protocol's limits, with one owner: the app's config and command line check a sample
interval with `interval_problem`, as the probe does; the sample and the detail bound their strings
with `clip_text`, `clip_arg` (a command's argument: a path keeps its name) and `clip_list`, the
one way a record marks what it cut.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import json
import math
import re
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments)

VERSION = 1
MAX_LINE = 1 << 20  # bytes of one record, its newline not counted; a longer line is refused
MAX_DEPTH = 32  # nesting of lists and objects in one record (a protocol record needs 5)
MIN_INTERVAL = 0.1  # seconds between samples, the fastest a probe samples
MAX_INTERVAL = 3600.0  # seconds between samples, the slowest
# Process records in one sample: the probe sends at most this many (GPU users first) and counts the
# rest in `processes_omitted`; the app parses no more than this of a sample that sends more.
MAX_PROCESSES = 1000
# A sample's `host` metrics (docs/PROTOCOL.md): field -> (lowest, highest, type). The probe sends a
# value outside them as null, and the app (gputui/model/host.py HostMetrics) takes nothing outside them.
HOST_LIMITS = {
    "cpu_percent": (0.0, 100.0, float),  # busy share of all CPUs since the last sample
    "cpus": (1, 1 << 16, int),  # online CPUs
    "load1": (0.0, 1e6, float),  # load averages over 1, 5 and 15 minutes
    "load5": (0.0, 1e6, float),
    "load15": (0.0, 1e6, float),
    "memory_total": (0, 1 << 60, int),  # bytes
    "memory_used": (0, 1 << 60, int),  # MemTotal - MemAvailable
    "swap_total": (0, 1 << 60, int),
    "swap_used": (0, 1 << 60, int),
    "uptime": (0.0, 1e10, float),  # seconds since boot
}  # type: Dict[str, Tuple[Any, Any, type]]

# A string a record carries is bounded, and marked where cut (clip_text, clip_list): a sample's, a
# detail's and an event's alike, so that a record always fits in one line.
MAX_TEXT = 256  # characters of a name, user or container; more: "<first 256>…(N bytes)"

PROBE_TYPES = ("hello", "sample", "event", "error", "detail")
APP_TYPES = ("configure", "sample", "plan", "cancel", "reset", "quit", "detail", "signal")


def interval_problem(value):
    # type: (Any) -> Optional[str]
    """Why `value` is not a sample interval (None when it is one): a number of seconds, not a bool,
    finite, from MIN_INTERVAL to MAX_INTERVAL."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "must be a number of seconds"
    if not MIN_INTERVAL <= value <= MAX_INTERVAL:  # NaN fails every comparison
        return "must be from %g to %g seconds" % (MIN_INTERVAL, MAX_INTERVAL)
    return None


# Control characters, and invisible format characters that reorder or hide text (bidi overrides and
# isolates, zero-width characters, BOM): shown as escapes, so that a name can neither drive the
# terminal nor disguise itself or what follows it. The one rule for untrusted text: the app's
# gputui.model.textsafe takes it from here, and the probe's own messages use it too.
_CONTROL = "\x00-\x1f\x7f-\x9f"
_INVISIBLE = "\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2069\ufeff"
UNSAFE = re.compile("[" + _CONTROL + _INVISIBLE + "]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\x1b": "\\e"}


def _escape(match):
    # type: (Any) -> str
    ch = match.group()
    if ord(ch) > 0xFF:
        return "\\u%04x" % ord(ch)
    return _NAMED.get(ch, "\\x%02x" % ord(ch))


def printable(text):
    # type: (str) -> str
    """`text` with every control character shown as an escape (\\e, \\x07, \\n) and every invisible
    reordering or zero-width character as \\u202e."""
    return UNSAFE.sub(_escape, text) if UNSAFE.search(text) else text


def clip_text(text, limit=MAX_TEXT):
    # type: (Optional[str], int) -> Optional[str]
    """`text` cut to `limit` characters, with a visible marker saying how long it was."""
    if text is None or len(text) <= limit:
        return text
    return "%s\u2026(%d bytes)" % (text[:limit], len(text.encode("utf-8", "replace")))


def clip_arg(text, limit):
    # type: (str, int) -> str
    """One command-line argument within `limit` characters, marked where cut. A path (a `/` before
    its last component, no white space) gives up its directories and keeps its name, the script's or
    the file's, whole: `/…/kernels/notebook_kernel_launcher.py`, `--config=/…/runs/a.yaml` (what
    comes up to the first `/` kept where it fits, then as many directories next to the name as fit).
    A name too long even alone keeps its start after `…/`, and the whole length in bytes, as
    clip_text says it. Anything else keeps its start: clip_text."""
    if len(text) <= limit:
        return text
    return _clip_path(text, limit) or clip_text(text, limit) or ""


def _clip_path(text, limit):
    # type: (str, int) -> Optional[str]
    """clip_arg of a path; None when `text` is no path (no directory to give up, or white space)."""
    end = len(text.rstrip("/"))  # `/data/runs/` names `runs`
    last = text.rfind("/", 0, end)
    if last <= 0 or any(ch.isspace() for ch in text):
        return None  # no directory before the name (`/name`, `name`): nothing to give up
    name = text[last:]
    if len(name) + 1 > limit:
        return "\u2026%s\u2026(%d bytes)" % (name[: max(limit - 1, 1)], len(text.encode("utf-8", "replace")))
    first = text.find("/")
    lead = text[: first + 1]
    if first == last or len(lead) + 1 + len(name) > limit:
        lead = ""  # nothing between it and the name, or no room for it: the mark starts the text
    keep = last  # the leftmost `/` of the tail that fits
    while True:
        before = text.rfind("/", len(lead), keep)
        if before < 0 or len(lead) + 1 + len(text) - before > limit:
            break
        keep = before
    return "%s\u2026%s" % (lead, text[keep:])


def clip_list(items, limit):
    # type: (List[str], int) -> List[str]
    """`items` cut to `limit` entries, with a last entry saying how many more there were."""
    if len(items) <= limit:
        return items
    return [*items[:limit], "... (%d more)" % (len(items) - limit)]


def encode(message):
    # type: (Dict[str, Any]) -> bytes
    """One record as one line. `v` is added when missing."""
    if "v" not in message:
        message = dict(message, v=VERSION)
    return (dumps(message) + "\n").encode("ascii")


def dumps(value):
    # type: (Any) -> str
    """`value` as compact JSON text, as it goes on the wire (all ASCII)."""
    try:
        # ensure_ascii keeps control characters from remote text escaped on the wire.
        return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except ValueError:
        # NaN and the infinities are not JSON and the other side refuses them: a number the host
        # cannot give is null (docs/PROTOCOL.md).
        return json.dumps(_finite(value), separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _finite(value):
    # type: (Any) -> Any
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def error(code, message, plan=None):
    # type: (str, str, Optional[str]) -> Dict[str, Any]
    return {"type": "error", "v": VERSION, "code": code, "message": message, "plan": plan}


def _no_constant(name):
    # type: (str) -> Any
    raise ValueError("%s is not a JSON number" % name)


def _cut(text, limit):
    # type: (str, int) -> str
    """`text` in at most `limit` characters, ending in "…" where cut (a message that quotes a
    received value: what is shown is not taken for the whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _finite_float(text):
    # type: (str) -> float
    value = float(text)
    if not math.isfinite(value):  # 1e400
        raise ValueError("%s is out of a float's range" % _cut(text, 40))
    return value


def _too_deep(record):
    # type: (Any) -> bool
    stack = [(record, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        for item in value.values() if type(value) is dict else value:
            if type(item) is dict or type(item) is list:
                stack.append((item, depth + 1))
    return False


def decode(line, allowed=None):
    # type: (bytes, Optional[Tuple[str, ...]]) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]
    """Parse one line (with or without its newline). Returns (record, None) or (None, error record);
    never raises, whatever the bytes."""
    try:
        return _decode(line, allowed)
    except Exception as exc:  # a decoder bug must not end a probe or a host's session
        return None, error("bad-json", "cannot decode the line: %s: %s" % (type(exc).__name__, exc))


def _decode(line, allowed):
    # type: (bytes, Optional[Tuple[str, ...]]) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]
    if line.endswith(b"\n"):
        line = line[:-1]  # the limit is on the record
    if len(line) > MAX_LINE:
        return None, error("too-long", "line of %d bytes is over the %d byte limit" % (len(line), MAX_LINE))
    try:
        record = loads(line.decode("utf-8"))
    except RecursionError:
        return None, error("bad-json", "not a JSON line: nested too deeply")
    except (UnicodeDecodeError, ValueError) as exc:
        return None, error("bad-json", "not a JSON line: %s" % (_cut(str(exc), 200),))
    return check(record, allowed, line.count(b"[") + line.count(b"{"))


def loads(text):
    # type: (str) -> Any
    """JSON text parsed as a line is: no NaN or infinity, no number beyond a float's range. Raises
    ValueError (or RecursionError) as json.loads does."""
    return _DECODER.decode(text)


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)  # one, not one a line


def check(record, allowed=None, brackets=None):
    # type: (Any, Optional[Tuple[str, ...]], Optional[int]) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]
    """A parsed record checked as a line's is (an object, nested at most MAX_DEPTH, this protocol
    version, a known type): (record, None) or (None, error record). A recording's records are
    checked with it when they are played back (gputui/recording/format.py). `brackets`: how many `[` and
    `{` the line held, where known: fewer than MAX_DEPTH cannot nest deeper, and the walk is skipped."""
    if not isinstance(record, dict):
        return None, error("bad-json", "a line must be a JSON object")
    if (brackets is None or brackets > MAX_DEPTH) and _too_deep(record):
        return None, error("bad-json", "a record nests lists and objects over %d deep" % MAX_DEPTH)
    version = record.get("v")
    if type(version) is not int or version != VERSION:  # true == 1 and 1.0 == 1 in Python
        return None, error("bad-version", "protocol version %s, expected %d" % (_brief(version), VERSION))
    kind = record.get("type")
    if not isinstance(kind, str) or (allowed is not None and kind not in allowed):
        return None, error("bad-message", "unknown record type %s" % (_brief(kind),))
    return record, None


def _brief(value):
    # type: (Any) -> str
    """A received value in an error message, at most 80 characters of its repr."""
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return _cut(text, 80)
