"""`@slurm:PARTITION` and `@slurm-job:ID`: nodes as Slurm's own client tools list them.

`scontrol --oneliner show partition P` gives the partition's `Nodes=` hostlist (expanded here by
gputui/inventory/hostlist.py; `Nodes=ALL` is listed with `sinfo --Node`); `squeue --jobs ID --format %T|%N` gives a job's
node list (every task of an array or part of a heterogeneous job). Each is run as an
argv list, never through a shell, with SLURM_CONF and the rest of the environment as they are. A node
is reached by its NodeName, as `ssh NODE` is on a Slurm cluster (ssh config entries may match it).
"""

from __future__ import annotations

import re

from ..hostlist import HostlistError, expand
from .base import InventoryError, ResolvedHost, checked, run_tool

INSTALL = "install Slurm's client tools (Debian: slurm-client) and set SLURM_CONF if needed"
_NAME = re.compile(r"^[A-Za-z0-9_.+:-]+$")  # partition names and job ids as Slurm accepts them
_JOB_ID = re.compile(r"^[0-9]+(?:[_+][0-9]+)?$")  # 1234, 1234_7 (array task), 1234+1 (het part)
_FIELD = re.compile(r"(?:^|\s)([A-Za-z/:]+)=(\S*)")  # a partition's fields: set by the admin


def _fields(line: str) -> dict[str, str]:
    return {key: value for key, value in _FIELD.findall(line)}


def partition_hosts(partition: str, source: str | None = None) -> list[ResolvedHost]:
    where = source or f"@slurm:{partition}"
    if not partition or partition.startswith("-") or not _NAME.match(partition):
        raise InventoryError(f"{where}: {partition!r} is not a partition name")
    out = run_tool(
        ["scontrol", "--oneliner", "show", "partition", partition],
        where,
        install=INSTALL,
        not_found=("not found",),
    )
    records = [_fields(line) for line in out.splitlines() if line.strip()]
    record = next((r for r in records if r.get("PartitionName") == partition), None)
    if record is None:
        raise InventoryError(f"{where}: scontrol shows no partition {partition!r}")
    nodes = record.get("Nodes", "")
    if nodes == "(null)":  # a partition defined without nodes
        nodes = ""
    if nodes.upper() == "ALL":
        listed = run_tool(
            ["sinfo", "--noheader", "--Node", "--partition", partition, "--format", "%N"],
            where,
            install=INSTALL,
        )
        names = list(dict.fromkeys(line.strip() for line in listed.splitlines() if line.strip()))
    else:
        names = _expand(nodes, where) if nodes else []
    if not names:
        raise InventoryError(f"{where}: the partition has no nodes")
    return [checked(ResolvedHost(n, n, group=partition, source=where), where) for n in names]


def job_hosts(job: str, source: str | None = None) -> list[ResolvedHost]:
    where = source or f"@slurm-job:{job}"
    if not _JOB_ID.match(job):
        raise InventoryError(f"{where}: {job!r} is not a Slurm job id (like 1234, 1234_7 or 1234+1)")
    # squeue prints only the fields asked for: a job's name or comment (the submitter's text) can
    # never pass for its node list, as it could in scontrol's `Key=value` lines.
    out = run_tool(
        ["squeue", "--noheader", "--jobs", job, "--format", "%T|%N"],
        where,
        install=INSTALL,
        not_found=("invalid job id",),
    )
    names: dict[str, None] = {}
    states: dict[str, None] = {}
    for line in out.splitlines():
        state, sep, node_list = line.strip().partition("|")
        if not sep:
            continue
        states[state] = None
        if node_list and node_list != "(null)":
            names.update(dict.fromkeys(_expand(node_list, where)))
    if not states:
        raise InventoryError(f"{where}: squeue shows no job {job} (finished?)")
    if not names:
        raise InventoryError(f"{where}: the job has no nodes (it is {'/'.join(states)})")
    group = f"job {job}"
    return [checked(ResolvedHost(n, n, group=group, source=where), where) for n in names]


def _expand(node_list: str, where: str) -> list[str]:
    try:
        return expand(node_list)
    except HostlistError:
        # A form this parser does not know: Slurm's own expansion, one name a line.
        out = run_tool(["scontrol", "show", "hostnames", node_list], where, install=INSTALL)
        return list(dict.fromkeys(line.strip() for line in out.splitlines() if line.strip()))
