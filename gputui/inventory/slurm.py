"""`@slurm:PARTITION` and `@slurm-job:ID`: nodes as Slurm's own client tools list them.

`scontrol --oneliner show partition P` gives the partition's `Nodes=` hostlist (expanded here by
gputui/config/hostlist.py; `Nodes=ALL` is listed with `sinfo --Node`); `squeue --jobs ID --format %T|%N`
gives a job's node list (every task of an array or part of a heterogeneous job). Each is run as an
argv list, never through a shell, with SLURM_CONF and the rest of the environment as they are, within
gputui/inventory/tool.py's bounds. A node is reached by its NodeName, as `ssh NODE` is on a Slurm
cluster (ssh config entries may match it).

What the tools print is bounded before it is expanded: a source names at most MAX_HOSTS nodes, its
node lists at most MAX_WORK names in all (the same node counted again on each list that names it),
a node list is at most MAX_NODE_LIST characters and all of them MAX_LISTS; each list is counted
(hostlist.size) before any name is made.
"""

from __future__ import annotations

import re

from ..config.hostlist import MAX_HOSTS, MAX_WORD, HostlistError, expand, size
from ..model.textsafe import printable
from .base import InventoryError, ResolvedHost, checked
from .tool import label, lines, run_tool, shown, word

INSTALL = "install Slurm's client tools (Debian: slurm-client) and set SLURM_CONF if needed"
MAX_WORK = 10 * MAX_HOSTS  # names made from a source's node lists, repeats included
MAX_NODE_LIST = 1 << 20  # characters of one node list: 100,000 irregular names fit
MAX_LISTS = 8 << 20  # characters of a source's distinct node lists in all (each is parsed)
_ARGUMENT = 100_000  # characters of node lists sent to `scontrol show hostnames` (Linux: 128 KiB)
_NAME = re.compile(r"^[A-Za-z0-9_.+:-]+$")  # partition names and job ids as Slurm accepts them
_JOB_ID = re.compile(r"^[0-9]{1,10}(?:[_+][0-9]{1,10})?$")  # 1234, 1234_7 (array task), 1234+1 (het part)
_PARTITION = re.compile(r"(?:^|\s)PartitionName=(\S*)")
_NODES = re.compile(r"(?:^|\s)Nodes=(\S*)")
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
    return [
        checked(ResolvedHost(n, n, group=partition, source=spec, remote=True), where) for n in names.names
    ]


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
    return [checked(ResolvedHost(n, n, group=group, source=spec, remote=True), where) for n in names.names]


class _Names:
    """A source's node names, each once, within the bounds; lists hostlist cannot read are kept for
    one `scontrol show hostnames` at the end (`finish`)."""

    def __init__(self, where: str, tool: str) -> None:
        self.where = where
        self.tool = tool
        self.names: dict[str, None] = {}
        self.work = 0
        self.lists: set[str] = set()  # each node list is expanded once, however many lines repeat it
        self.chars = 0  # of the distinct node lists
        self.unread: list[str] = []
        self.unread_chars = 0

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
        self.lists.add(node_list)
        self.chars += len(node_list)
        if len(node_list) > MAX_NODE_LIST or self.chars > MAX_LISTS:
            raise InventoryError(
                f"{self.where}: {self.tool} printed node lists longer than gputui reads"
                f" ({MAX_NODE_LIST:,} characters a list, {MAX_LISTS:,} in all)"
            )
        try:
            count = size(node_list, MAX_WORK - self.work)  # before a single name is made
        except HostlistError:
            # A form this parser does not know: Slurm's own expansion, at the end, in one call.
            self._keep_unread(node_list)
            return
        if count > MAX_HOSTS:
            raise InventoryError(
                f"{self.where}: {self.tool} lists more than {MAX_HOSTS:,} nodes ({shown(node_list)})"
            )
        self.spend(count)
        for name in expand(node_list):
            self._keep(name)

    def _keep_unread(self, node_list: str) -> None:
        """A node list for `scontrol show hostnames`: one argument, never an option, within the
        length Linux takes for one (128 KiB)."""
        if node_list.startswith("-") or printable(node_list) != node_list:
            raise InventoryError(
                f"{self.where}: {self.tool} printed a node list {shown(node_list)} gputui cannot read"
            )
        self.unread.append(node_list)
        self.unread_chars += len(node_list) + 1
        if self.unread_chars > _ARGUMENT:
            raise InventoryError(
                f"{self.where}: {self.tool} printed node lists gputui cannot read ({shown(node_list)})"
            )

    def finish(self) -> None:
        if not self.unread:
            return
        joined = ",".join(self.unread)
        out = run_tool(["scontrol", "show", "hostnames", joined], self.where, install=INSTALL)
        self.tool = "scontrol"
        for line in lines(out):
            self.add(line)
