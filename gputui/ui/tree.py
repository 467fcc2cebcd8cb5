"""The process tree (`t`, as in htop): families of processes, drawn with box characters.

A process hangs under its parent when the parent is listed too. A hidden holder whose parent is not
listed hangs under the ghost or GPU user it is tied to by process group, session or ancestry (the
probe's `links`): a ghost's forked child outlives it and is reparented, so its parent PID no longer
says whose it is; that edge is drawn dashed (`├╌`), as a tie, not a parenthood. Processes that are
not in the list (the sample's `parents`: a launcher, a shell; or sample processes that the GPU, the
filter or the scope leave out) are shown, dimmed, only where they join two listed processes: a
launcher above its ranks, never a lone chain up to init.

Siblings are sorted by the table's sort column; a collapsed node keeps its descendants out of the
rows. Plain data in, plain data out: no Textual here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.model import Parent, Proc, Sample

LINKED_BY = ("pgid", "sid", "ancestor")  # a hidden holder's reasons that name its family
MAX_DRAWN_DEPTH = 32  # levels drawn in full; deeper ones share the last indent (a hostile chain)

Record = Proc | Parent


@dataclass(frozen=True, slots=True)
class Node:
    """A row of the tree: `key` (the table's row key), its tree parent's key (None: a root), whether
    that edge is a tie rather than a parenthood, and whether it is context (not in the list)."""

    key: str
    record: Record
    parent: str | None = None
    tie: bool = False
    context: bool = False


@dataclass(frozen=True, slots=True)
class Line:
    """One row in tree order: its key, the box-drawing prefix, and how many rows a collapsed node
    keeps out of view (0: not collapsed, or nothing below it)."""

    key: str
    prefix: str
    folded: int = 0
    has_children: bool = False


def build(
    shown: Iterable[tuple[str, Proc]],
    sample: Sample | None,
    context_key: Callable[[Record], str],
) -> dict[str, Node]:
    """The tree of the `shown` processes ((row key, record) in the list), with the context nodes
    that join families. `context_key` names a context node's row key."""
    listed: dict[int, str] = {}
    records: dict[str, Record] = {}
    for key, proc in shown:
        listed.setdefault(proc.pid, key)
        records[key] = proc
    others: dict[int, Record] = {}
    if sample is not None:
        for proc in sample.processes:
            if proc.pid not in listed:
                others.setdefault(proc.pid, proc)
        for ancestor in sample.parents:
            if ancestor.pid not in listed:
                others.setdefault(ancestor.pid, ancestor)

    def up(record: Record) -> tuple[int | None, bool]:
        """(the pid of its tree parent, whether the edge is a tie); None: none known."""
        ppid = record.ppid
        tied = _tied_to(record)
        if ppid in listed:
            return ppid, False
        for pid in tied:
            if pid in listed:
                return pid, True
        if ppid in others:
            return ppid, False
        for pid in tied:
            if pid in others:
                return pid, True
        return None, False

    # Every node reachable upwards from a listed one: its parent pid and edge kind.
    edges: dict[int, tuple[int | None, bool]] = {}
    todo = list(listed)
    while todo:
        pid = todo.pop()
        if pid in edges:
            continue
        record = records[listed[pid]] if pid in listed else others[pid]
        parent, tie = up(record)
        if parent == pid:
            parent = None
        edges[pid] = (parent, tie)
        if parent is not None and parent not in edges:
            todo.append(parent)
    _cut_cycles(edges)
    keep = _joining(edges, set(listed))
    nodes: dict[str, Node] = {}
    keys = {pid: listed.get(pid) or context_key(others[pid]) for pid in keep}
    for pid in keep:
        parent, tie = edges[pid]
        parent_key = keys.get(parent) if parent is not None and parent in keep else None
        record = records[listed[pid]] if pid in listed else others[pid]
        nodes[keys[pid]] = Node(
            keys[pid], record, parent_key, tie and parent_key is not None, pid not in listed
        )
    return nodes


def _tied_to(record: Record) -> tuple[int, ...]:
    if isinstance(record, Proc) and record.kind == "hidden" and record.reason in LINKED_BY:
        return record.links
    return ()


def _cut_cycles(edges: dict[int, tuple[int | None, bool]]) -> None:
    """A hostile probe may send parents that loop: the edge that closes a loop is cut."""
    state: dict[int, int] = {}  # 1: on the current walk, 2: done
    for start in edges:
        walk: list[int] = []
        pid: int | None = start
        while pid is not None and pid in edges and state.get(pid) is None:
            state[pid] = 1
            walk.append(pid)
            pid = edges[pid][0]
        if pid is not None and state.get(pid) == 1:
            edges[walk[-1]] = (None, False)  # walk[-1]'s parent is on this walk: a loop
        for seen in walk:
            state[seen] = 2


def _joining(edges: Mapping[int, tuple[int | None, bool]], listed: set[int]) -> set[int]:
    """The listed nodes, and the context nodes on a path between two listed ones."""
    children: dict[int | None, list[int]] = {}
    for pid, (parent, _) in edges.items():
        children.setdefault(parent if parent in edges else None, []).append(pid)
    below: dict[int, int] = {}  # listed nodes in each subtree
    root_of: dict[int, int] = {}
    for root in children.get(None, []):
        order = _preorder(root, children)
        for pid in order:
            root_of[pid] = root
        for pid in reversed(order):
            below[pid] = (pid in listed) + sum(below[c] for c in children.get(pid, []))
    keep = set(listed)
    for pid in edges:
        if pid in listed or not below.get(pid):
            continue
        branches = sum(1 for c in children.get(pid, []) if below[c])
        outside = below[root_of[pid]] - below[pid]
        if branches >= 2 or outside >= 1:
            keep.add(pid)
    return keep


def _preorder(root: int, children: Mapping[int | None, list[int]]) -> list[int]:
    out: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def lines(
    nodes: Mapping[str, Node],
    sort_key: Callable[[str], Any],
    reverse: bool,
    collapsed: Collection[str] = (),
) -> list[Line]:
    """The rows in tree order: roots, then each one's children (siblings sorted by `sort_key`,
    ties by key), depth first; a collapsed node's descendants left out."""
    children: dict[str | None, list[str]] = {}
    for key, node in nodes.items():
        children.setdefault(node.parent if node.parent in nodes else None, []).append(key)

    def ordered(keys: list[str]) -> list[str]:
        return sorted(sorted(keys), key=sort_key, reverse=reverse)

    out: list[Line] = []
    # (key, the indent of its children, whether it is the last sibling, depth)
    stack: list[tuple[str, str, bool, int]] = [
        (k, "", True, 0) for k in reversed(ordered(children.get(None, [])))
    ]
    while stack:
        key, lead, last, depth = stack.pop()
        kids = ordered(children.get(key, []))
        folded = _count_below(key, children) if kids and key in collapsed else 0
        if depth == 0:
            prefix = "+ " if folded else ""
        else:
            edge = "╌" if nodes[key].tie else "─"
            prefix = lead + ("└" if last else "├") + ("+" if folded else edge) + " "
        out.append(Line(key, prefix, folded, bool(kids)))
        if folded:
            continue
        inner = lead + ("   " if last else "│  ") if depth > 0 else ""
        if depth >= MAX_DRAWN_DEPTH:
            inner = lead
        for i, kid in reversed(list(enumerate(kids))):
            stack.append((kid, inner, i == len(kids) - 1, depth + 1))
    return out


def fold_words(folded: int) -> str:
    """What a folded row says of the rows it keeps out of view (`7 folded`): drawn right after its
    branch, before the command, so a cut command never hides it."""
    return f"{folded} folded"


def _count_below(key: str, children: Mapping[str | None, list[str]]) -> int:
    count = 0
    stack = list(children.get(key, []))
    while stack:
        count += 1
        stack.extend(children.get(stack.pop(), []))
    return count


def family(nodes: Mapping[str, Node], key: str) -> str | None:
    """The tree parent of row `key` (None for a root or an unknown key)."""
    node = nodes.get(key)
    return node.parent if node is not None else None
