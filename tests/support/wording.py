"""A checker for the lines a person reads (issue 19, item 8): a phrase said twice (`not sent: plan not
sent`), `GPU3` without its space, the wrong plural for one or two, a literal `\\n`. Used on the
dashboard's dialogs, verdicts and toasts and on the words the front ends share."""

from __future__ import annotations

import itertools
import re

# What must never reach a terminal raw: C0 and C1 controls, DEL, and the Unicode marks that reorder
# or hide text (bidi overrides and isolates, zero-width spaces, the BOM).
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")

NOUNS = ("process", "GPU", "job", "target", "holder", "member", "blocker", "host", "client", "poll")


PLURALS = {"process": "processes"}


def _plural(noun: str) -> str:
    return PLURALS.get(noun, noun + "s")


def _segments(line: str) -> list[list[str]]:
    """The line's clauses (split at `: `, ` · `, `; `), each as its lower-case words."""
    # Words of two letters or more: `c copy PID · C copy command` names keys, not a phrase twice.
    return [re.findall(r"[a-z]{2,}", part.casefold()) for part in re.split(r": |\s·\s|; ", line)]


def doubled(line: str) -> str | None:
    """A phrase of two or more words said in one clause and again in another (`not sent: plan not
    sent`, `NOTHING DONE: not confirmed: nothing done`), or None."""
    parts = _segments(line)
    for a, b in itertools.combinations(parts, 2):
        pairs = {tuple(a[i : i + 2]) for i in range(len(a) - 1)}
        for i in range(len(b) - 1):
            if tuple(b[i : i + 2]) in pairs:
                return " ".join(b[i : i + 2])
    return None


def problems(line: str) -> list[str]:
    """What is wrong with one line a person reads."""
    out = []
    if (phrase := doubled(line)) is not None:
        out.append(f"says {phrase!r} twice")
    if re.search(r"GPU\d", line):
        out.append("GPU without its space")
    if "\\n" in line:
        out.append("a literal \\n")
    for noun in NOUNS:
        if re.search(rf"(?<![\d.,-])\b1 {_plural(noun)}\b", line):
            out.append(f"1 {_plural(noun)}")
        if re.search(rf"(?<![\d.,-])\b(?:0|[2-9]|[1-9]\d+) {noun}\b(?!-)", line):
            out.append(f"N {noun}")
    return out


def check(lines: list[str]) -> None:
    bad = [(line, p) for line in lines for p in problems(line)]
    assert not bad, "\n".join(f"{p}: {line}" for line, p in bad)
