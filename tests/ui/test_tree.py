"""gputui.ui.tree on hand-made records: which families join, the edges, folding, hostile parents."""

from __future__ import annotations

from typing import Any

from gputui.model import Parent, Proc, Sample
from gputui.ui import tree
from gputui.ui.widgets.proc_table import context_row_key, proc_row_key


def proc(pid: int, ppid: int | None, kind: str = "user", **kw: Any) -> Proc:
    return Proc(pid=pid, start_time=pid * 10, kind=kind, ppid=ppid, **kw)


def parent(pid: int, ppid: int | None) -> Parent:
    return Parent(pid=pid, start_time=pid * 10, ppid=ppid, name=f"p{pid}")


def sample(procs: list[Proc], parents: list[Parent] = ()) -> Sample:  # type: ignore[assignment]
    return Sample(seq=1, time=0.0, gpus=(), processes=tuple(procs), parents=tuple(parents))


def build(
    procs: list[Proc], parents: list[Parent] = (), shown: list[Proc] | None = None
) -> dict[str, tree.Node]:  # type: ignore[assignment]
    listed = procs if shown is None else shown
    return tree.build(((proc_row_key(p), p) for p in listed), sample(procs, parents), context_row_key)


def drawn(nodes: dict[str, tree.Node], collapsed: set[str] = set()) -> list[tuple[int, str]]:  # noqa: B006
    """(pid, prefix) per row, siblings by PID."""
    return [
        (int(line.key.lstrip("~").split(":")[0]), line.prefix)
        for line in tree.lines(nodes, lambda k: int(k.lstrip("~").split(":")[0]), False, collapsed)
    ]


def test_children_hang_under_their_parent_in_order() -> None:
    procs = [proc(10, 1), proc(12, 10), proc(11, 10), proc(13, 11)]
    assert drawn(build(procs)) == [(10, ""), (11, "├─ "), (13, "│  └─ "), (12, "└─ ")]


def test_a_context_parent_is_shown_only_where_it_joins_two_listed_processes() -> None:
    # A launcher (not listed) with two ranks: shown above them. A shell above one process: not shown.
    procs = [proc(21, 20), proc(22, 20), proc(31, 30)]
    parents = [parent(20, 5), parent(5, 1), parent(30, 1)]
    nodes = build(procs, parents)
    assert {n.record.pid for n in nodes.values() if n.context} == {20}
    assert drawn(nodes) == [(20, ""), (21, "├─ "), (22, "└─ "), (31, "")]
    # A process of the sample that the filter leaves out joins the same way.
    procs = [proc(40, 1), proc(41, 40), proc(42, 40)]
    nodes = build(procs, shown=procs[1:])
    assert [(n.record.pid, n.context) for n in nodes.values() if n.parent is None] == [(40, True)]


def test_a_ghosts_hidden_child_hangs_under_it_on_a_tie() -> None:
    ghost = proc(50, None, "ghost")
    child = proc(51, 1, "hidden", reason="pgid", links=(50,))
    other = proc(52, 1, "hidden", reason="unattributed", links=(50,))  # not a family reason
    nodes = build([ghost, child, other])
    assert nodes[proc_row_key(child)].parent == proc_row_key(ghost)
    assert nodes[proc_row_key(child)].tie
    assert nodes[proc_row_key(other)].parent is None
    assert drawn(nodes) == [(50, ""), (51, "└╌ "), (52, "")]


def test_a_folded_family_keeps_its_descendants_out_and_counts_them() -> None:
    procs = [proc(10, 1), proc(11, 10), proc(12, 11), proc(13, 10), proc(20, 1)]
    nodes = build(procs)
    lines = tree.lines(nodes, lambda k: k, False, {proc_row_key(procs[0])})
    assert [(line.key, line.folded) for line in lines] == [
        (proc_row_key(procs[0]), 3),
        (proc_row_key(procs[4]), 0),
    ]
    assert lines[0].prefix == "+ "
    lines = tree.lines(nodes, lambda k: k, False, {proc_row_key(procs[1])})
    assert [line.prefix for line in lines] == ["", "├+ ", "└─ ", ""]


def test_parents_that_loop_are_cut_and_every_process_is_drawn_once() -> None:
    # A hostile probe: 60's parent is 61, 61's is 60; a parent that names itself.
    procs = [proc(60, 61), proc(61, 60), proc(70, 70)]
    lines = tree.lines(build(procs), lambda k: k, False)
    assert sorted(line.key for line in lines) == sorted(proc_row_key(p) for p in procs)
    # Loops through context records too.
    procs = [proc(80, 81), proc(82, 81)]
    nodes = build(procs, [parent(81, 83), parent(83, 81)])
    assert len(tree.lines(nodes, lambda k: k, False)) == len(nodes)


def test_a_deep_chain_stops_indenting() -> None:
    procs = [proc(100, 1)] + [proc(100 + i, 100 + i - 1) for i in range(1, 60)]
    lines = tree.lines(build(procs), lambda k: k, False)
    assert len(lines) == 60
    widest = max(len(line.prefix) for line in lines)
    assert widest <= 3 * (tree.MAX_DRAWN_DEPTH + 1)
