"""The fold keys the tables share (- folds, + unfolds: a group of hosts, a family, a job); each table
says in its tooltip what they fold there."""

from __future__ import annotations

from textual.binding import Binding


def fold_key(tooltip: str) -> Binding:
    return Binding("minus", "fold", "Fold", key_display="-", show=False, tooltip=tooltip)


def unfold_key(tooltip: str) -> Binding:
    return Binding("plus", "unfold", "Unfold", key_display="+", show=False, tooltip=tooltip)
