"""`@slurm:PARTITION` and `@slurm-job:ID`: nodes as Slurm's own client tools list them.

`scontrol --oneliner show partition P` gives the partition's `Nodes=` hostlist (expanded here by
gputui/hostlist.py; `Nodes=ALL` is listed with `sinfo --Node`); `squeue --jobs ID --format %T|%N`
gives a job's node list (every task of an array or part of a heterogeneous job). Each is run as an
argv list, never through a shell, with SLURM_CONF and the rest of the environment as they are, within
gputui/inventory/tool.py's bounds. A node is reached by its NodeName, as `ssh NODE` is on a Slurm
cluster (ssh config entries may match it).

What the tools print is bounded before it is expanded: a source names at most MAX_HOSTS nodes, its
node lists at most MAX_WORK names in all (the same node counted again on each line that names it),
a node list is at most MAX_NODE_LIST characters; each is counted before any name is made.
"""

from __future__ import annotations

import re

from ..hostlist import MAX_HOSTS, HostlistError, expand
from ..textsafe import printable
from .base import InventoryError, ResolvedHost, checked
from .tool import MAX_WORD, label, lines, run_tool, shown, word

INSTALL = "install Slurm's client tools (Debian: slurm-client) and set SLURM_CONF if needed"
MAX_WORK = 10 * MAX_HOSTS  # names made from a source's node lists, repeats included
MAX_NODE_LIST = 1 << 20  # characters of one node list: 100,000 irregular names fit
_ARGUMENT = 100_000  # characters of node lists sent to `scontrol show hostnames` (Linux: 128 KiB)
_NAME = re.compile(r"^[A-Za-z0-9_.+:-]+$")  # partition names and job ids as Slurm accepts them
_JOB_ID = re.compile(r"^[0-9]{1,10}(?:[_+][0-9]{1,10})?$")  # 1234, 1234_7 (array task), 1234+1 (het part)
_PARTITION = re.compile(r"(?:^|\s)PartitionName=(\S*)")
_NODES = re.compile(r"(?:^|\s)Nodes=(\S*)")
# A node list's parts (commas outside brackets part them), its brackets and their items, to count
# the names it makes without making them.
_PART = re.compile(r"(?:[^,\[]|\[[^\]]*\]?)+")
_BRACKET = re.compile(r"\[([^\]]*)\]?")
_ITEM = re.compile(r"[^,]+")
_RANGE = re.compile(r"\s*([0-9]+)(?:-([0-9]+))?\s*")
_STATES = 4  # a job's states named when it has no nodes


def partition_hosts(partition: str, source: str | None = None) -> list[ResolvedHost]:
    spec = source or f"@slurm:{partition}"
    where = label(spec)
    if len(partition) > MAX_WORD or partition.startswith("-") or not _NAME.match(partition):
        raise InventoryError(f"{where}: {shown(partition)} is not a partition name")
    out = run_tool(
        ["scontrol", "--oneliner", "show", "partition", partition],
        where,
        install=INSTALL,
        not_found=("not found",),
    )
    nodes = _partition_nodes(out, partition, where)
    names = _Names(where, "scontrol")
    if nodes.upper() == "ALL":
        listed = run_tool(
            ["sinfo", "--noheader", "--Node", "--partition", partition, "--format", "%N"],
            where,
            install=INSTALL,
        )
        names.tool = "sinfo"
        for line in lines(listed):
            names.add(line)
    elif nodes:
        names.add_list(nodes)
    names.finish()
    if not names.names:
        raise InventoryError(f"{where}: the partition has no nodes")
    return [checked(ResolvedHost(n, n, group=partition, source=spec), where) for n in names.names]


def _partition_nodes(out: str, partition: str, where: str) -> str:
    """The `Nodes=` of the partition's own line ("" for none): only its fields are read."""
    for line in lines(out):
        named = _PARTITION.search(line)
        if named is None or named.group(1) != partition:
            continue
        found = _NODES.search(line)
        nodes = found.group(1) if found else ""
        return "" if nodes == "(null)" else nodes  # "(null)": a partition defined without nodes
    raise InventoryError(f"{where}: scontrol shows no partition {shown(partition)}")


def job_hosts(job: str, source: str | None = None) -> list[ResolvedHost]:
    spec = source or f"@slurm-job:{job}"
    where = label(spec)
    if not _JOB_ID.match(job):
        raise InventoryError(f"{where}: {shown(job)} is not a Slurm job id (like 1234, 1234_7 or 1234+1)")
    # squeue prints only the fields asked for: a job's name or comment (the submitter's text) can
    # never pass for its node list, as it could in scontrol's `Key=value` lines.
    out = run_tool(
        ["squeue", "--noheader", "--jobs", job, "--format", "%T|%N"],
        where,
        install=INSTALL,
        not_found=("invalid job id",),
    )
    names = _Names(where, "squeue")
    states: dict[str, None] = {}
    for line in lines(out):
        state, sep, node_list = line.partition("|")
        if not sep:
            continue
        names.spend(1)  # a line that names no node is read too
        if len(states) < _STATES:
            states.setdefault(state.strip(), None)
        node_list = node_list.strip()
        if node_list and node_list != "(null)":
            names.add_list(node_list)
    names.finish()
    if not states:
        raise InventoryError(f"{where}: squeue shows no job {job} (finished?)")
    if not names.names:
        said = shown("/".join(states), quote=False)
        raise InventoryError(f"{where}: the job has no nodes (it is {said})")
    group = f"job {job}"
    return [checked(ResolvedHost(n, n, group=group, source=spec), where) for n in names.names]


class _Names:
    """A source's node names, each once, within the bounds; lists hostlist cannot read are kept for
    one `scontrol show hostnames` at the end (`finish`)."""

    def __init__(self, where: str, tool: str) -> None:
        self.where = where
        self.tool = tool
        self.names: dict[str, None] = {}
        self.work = 0
        self.lists: set[str] = set()  # each node list is expanded once, however many lines repeat it
        self.unread: list[str] = []

    def spend(self, count: int) -> None:
        self.work += count
        if self.work > MAX_WORK:
            raise InventoryError(
                f"{self.where}: {self.tool}'s node lists name more than {MAX_WORK:,} nodes in all"
            )

    def add(self, name: str) -> None:
        self.spend(1)
        self._keep(name)

    def _keep(self, name: str) -> None:
        self.names.setdefault(word(name, "node name", self.where), None)
        if len(self.names) > MAX_HOSTS:
            raise InventoryError(f"{self.where}: {self.tool} lists more than {MAX_HOSTS:,} nodes")

    def add_list(self, node_list: str) -> None:
        if node_list in self.lists:
            return
        if len(node_list) > MAX_NODE_LIST:
            raise InventoryError(
                f"{self.where}: {self.tool} printed a node list of {len(node_list):,} characters"
                f" (gputui reads at most {MAX_NODE_LIST:,})"
            )
        self.lists.add(node_list)
        count = _count(node_list, MAX_WORK - self.work)
        if count > MAX_HOSTS:
            raise InventoryError(
                f"{self.where}: {self.tool} lists more than {MAX_HOSTS:,} nodes ({shown(node_list)})"
            )
        self.spend(count)
        try:
            expanded = expand(node_list)
        except HostlistError:
            # A form this parser does not know: Slurm's own expansion, at the end, in one call.
            self._check_unread(node_list)
            self.unread.append(node_list)
            return
        for name in expanded:
            self._keep(name)

    def _check_unread(self, node_list: str) -> None:
        """A node list for `scontrol show hostnames`: one argument, never an option."""
        if node_list.startswith("-") or printable(node_list) != node_list:
            raise InventoryError(
                f"{self.where}: {self.tool} printed a node list {shown(node_list)} gputui cannot read"
            )

    def finish(self) -> None:
        if not self.unread:
            return
        joined = ",".join(self.unread)
        if len(joined) > _ARGUMENT:
            raise InventoryError(
                f"{self.where}: {self.tool} printed node lists gputui cannot read ({shown(joined)})"
            )
        out = run_tool(["scontrol", "show", "hostnames", joined], self.where, install=INSTALL)
        self.tool = "scontrol"
        for line in lines(out):
            self.add(line)


def _count(node_list: str, most: int) -> int:
    """How many names the node list makes, repeats included, or `most + 1` once it is more: the
    bound is checked before hostlist makes a single name. A form it cannot read counts as one."""
    total = 0
    for part in _PART.finditer(node_list):
        names = 1
        for bracket in _BRACKET.finditer(part.group()):
            names *= max(1, _bracket_count(bracket.group(1), most))
            if names > most:
                return most + 1
        total += names
        if total > most:
            return most + 1
    return total


def _bracket_count(inside: str, most: int) -> int:
    count = 0
    for item in _ITEM.finditer(inside):
        found = _RANGE.fullmatch(item.group())
        if found is None:
            count += 1
        elif max(len(found.group(1)), len(found.group(2) or "")) > 4000:
            return most + 1  # a number Python would not convert is no node's
        else:
            low = int(found.group(1))
            high = int(found.group(2)) if found.group(2) else low
            count += max(1, high - low + 1)
        if count > most:
            return most + 1
    return count
