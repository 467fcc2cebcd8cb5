"""Where every byte of a GPU's memory went: the answer to "No running processes found" while
gigabytes are used.

NVML's used memory is split into:
- `baseline`: what the GPU uses idle (v1's driver reserve; 0 with memory info v2);
- `processes`: memory NVML lists for live processes (users and monitors);
- and the unaccounted rest, classified:
  - `ghost`: listed for a dead PID (docs/GPU_FACTS.md "Ghosts"), with its suspected holders;
  - `container`: listed for PIDs of another PID namespace (a container; named from the cgroup of a
    holder whose inner PID is the listed one, when one is visible);
  - `unreported`: the driver lists a process on the GPU without a figure for it (MIG, some
    containers): the rest is probably its;
  - `hidden`: not listed at all, while hidden holders are attributed to this GPU (they hold it);
  - `orphaned`: not listed at all, and no process but a monitor holds /dev/nvidiaN: nothing can free
    it but a GPU reset (or the driver). Only where the probe sees the host's PID namespace;
  - `outside`: the same seen from inside a container (`foreign_pids`): processes of another
    container or of the host may hold it, and NVML lists nobody of another namespace there. Never
    called orphaned: a reset would take another guest's memory (docs/GPU_FACTS.md "Containers");
  - `unknown`: not listed, not attributed, but some process NVML does not list holds /dev/nvidiaN.
Differences within the idle slack are the driver's own bookkeeping, not memory anyone holds.

Pure functions over the probe's records, tested without a GPU. Stdlib only, Python >= 3.8 syntax:
this runs on monitored hosts.
"""

from typing import Any, Dict, List, Optional, Set  # noqa: F401  (type comments)

from .common import IDLE_SLACK

PARTS = (
    "baseline", "processes", "ghost", "container", "unreported", "hidden", "orphaned", "outside", "unknown",
)  # fmt: skip
UNACCOUNTED = ("ghost", "container", "unreported", "hidden", "orphaned", "outside", "unknown")


def account(gpu, listed, records, device_prefix, foreign_pids=False):
    # type: (Dict[str, Any], Dict[int, Dict[int, Optional[int]]], Dict[int, Dict[str, Any]], str, bool) -> Optional[Dict[str, Any]]
    """The accounting of one GPU record (None when NVML gave no memory figure for it).

    `foreign_pids`: the probe is not in the host's PID namespace (a container): memory nothing here
    holds is `outside`, not `orphaned`."""
    used = gpu.get("memory_used")
    if not isinstance(used, int):
        return None
    index = gpu["index"]
    base = gpu.get("memory_baseline")
    base = base if isinstance(base, int) else 0
    out = dict.fromkeys(PARTS, 0)  # type: Dict[str, Any]
    out["baseline"] = min(base, used)
    ghosts = []  # type: List[int]
    suspects = set()  # type: Set[int]
    containers = set()  # type: Set[str]
    unreported = []  # type: List[int]
    by_nspid = {r.get("nspid"): r for r in records.values() if r.get("nspid")}
    for pid, memory in listed.items():
        if index not in memory:
            continue
        nbytes = memory[index]
        record = records.get(pid) or {}
        kind = record.get("kind")
        if nbytes is None:
            unreported.append(pid)
            continue
        if kind == "ghost" and record.get("reason") == "other-namespace":
            out["container"] += nbytes
            inner = by_nspid.get(pid)
            if inner is not None and inner.get("container"):
                containers.add(inner["container"])
        elif kind == "ghost":
            out["ghost"] += nbytes
            ghosts.append(pid)
            suspects.update(record.get("links") or [])
        else:
            out["processes"] += nbytes
    rest = used - out["baseline"] - out["processes"] - out["ghost"] - out["container"]
    if rest > IDLE_SLACK:
        if unreported:
            out["unreported"] = rest
        else:
            hidden = [
                r["pid"]
                for r in records.values()
                if r.get("kind") == "hidden" and index in (r.get("gpus") or [])
            ]
            device = device_file(gpu, device_prefix)
            # Who else may hold it: not a monitor, and not a process NVML lists (every CUDA process
            # opens every /dev/nvidiaN; one with memory here would be listed here).
            holders = [
                r["pid"]
                for r in records.values()
                if device in (r.get("holds") or [])
                and r.get("kind") not in ("monitor", "zombie", "user")
                and not r.get("protected")
            ]
            if hidden:
                out["hidden"] = rest
                suspects.update(hidden)
            elif not holders:
                out["outside" if foreign_pids else "orphaned"] = rest
            else:
                out["unknown"] = rest
                suspects.update(holders)
    out["unaccounted"] = sum(out[k] for k in UNACCOUNTED)
    out["ghosts"] = sorted(ghosts)
    out["suspects"] = sorted(suspects)
    out["containers"] = sorted(containers)
    out["unreported_pids"] = sorted(unreported)
    return out


def device_file(gpu, prefix):
    # type: (Dict[str, Any], str) -> str
    """/dev/nvidiaN of a GPU: N is its minor number, not its NVML index (GPU_FACTS.md)."""
    minor = gpu.get("minor")
    return "%s%d" % (prefix, minor if isinstance(minor, int) else gpu["index"])
