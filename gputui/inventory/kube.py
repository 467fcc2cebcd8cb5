"""`@kube:[SELECTOR]`: a Kubernetes cluster's GPU nodes, as `kubectl get nodes -o json` lists them.

kubectl runs as a tool (gputui/inventory/tool.py: an argv list, never a shell; bounded in time and
output), with KUBECONFIG and the rest of the environment as they are: the user's own context and
credentials, nothing of gputui's. SELECTOR is a label selector passed as one `--selector=` argument
(`@kube:nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`, `@kube:pool=train,zone!=b`).

Each node is a host:
- only nodes with GPUs: a `status.capacity` of the NVIDIA device plugin's above 0 (`nvidia.com/gpu`;
  `nvidia.com/gpu.shared`, GPUs shared by time-slicing or MPS renamed; `nvidia.com/mig-<profile>`,
  MIG instances under the "mixed" strategy); a cluster's CPU nodes are no part of a GPU fleet, and a
  selector that finds only those says so in one line;
- reached by its name (as `ssh NODE`; ssh config entries may match it), which is what kubelets
  register on most clusters; no name is looked up in DNS here (a thousand lookups against a slow
  resolver would stall the listing): where node names do not resolve, an ssh config `Host` entry
  gives each its address;
- grouped by its GPU model label (`nvidia.com/gpu.product`, from GPU feature discovery), else its
  instance type (`node.kubernetes.io/instance-type`), else no group.
What kubectl prints is untrusted: every name and label is checked (tool.word) before it is a host.
"""

from __future__ import annotations

import re
from typing import Any

from ..config.hostlist import MAX_HOSTS
from ..model.textsafe import printable
from ..text.words import count
from .base import InventoryError, ResolvedHost, checked
from .tool import TOOL_TIMEOUT, label, parse_json, run_tool, shown, word

INSTALL = "install kubectl and point it at the cluster (KUBECONFIG, or ~/.kube/config)"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_RESOURCES = (GPU_RESOURCE, "nvidia.com/gpu.shared")  # whole GPUs; GPUs shared by time-slicing or MPS
MIG_RESOURCE = "nvidia.com/mig-"  # MIG instances under the device plugin's "mixed" strategy
GROUP_LABELS = ("nvidia.com/gpu.product", "node.kubernetes.io/instance-type")
MAX_LABEL_SELECTOR = 1024  # characters of a label selector (kubectl --selector)
TIMEOUT = TOOL_TIMEOUT  # seconds kubectl has; it is told a little less, to say why itself
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")  # Kubernetes' own rule
_QUANTITY = re.compile(r"[0-9]{1,6}\Z")  # a count of devices: "8"


def kube_hosts(selector: str, source: str | None = None) -> list[ResolvedHost]:
    spec = source or f"@kube:{selector}"
    where = label(spec)
    argv = ["kubectl", "get", "nodes", "--output=json", f"--request-timeout={max(1, int(TIMEOUT) - 5)}s"]
    if selector:
        if len(selector) > MAX_LABEL_SELECTOR or printable(selector) != selector or selector.startswith("-"):
            raise InventoryError(f"{where}: {shown(selector)} is not a label selector")
        argv.append(f"--selector={selector}")
    out = run_tool(argv, where, install=INSTALL, timeout=TIMEOUT)
    items = _items(parse_json(out, where, "kubectl"), where)
    hosts: dict[str, ResolvedHost] = {}
    for item in items:
        host = _node(item, spec, where)
        if host is not None:
            hosts.setdefault(host.name, host)
    if not hosts:
        what = count(len(items), "node") if items else "no node"
        raise InventoryError(
            f"{where}: kubectl lists {what}, none with {GPU_RESOURCE} capacity (or shared or MIG GPUs)"
        )
    return list(hosts.values())


def _items(document: Any, where: str) -> list[Any]:
    """The node objects of a `kubectl get nodes -o json` answer (a List or NodeList)."""
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise InventoryError(f"{where}: kubectl printed JSON that is not a node list", unavailable=True)
    if len(items) > MAX_HOSTS:
        raise InventoryError(f"{where}: kubectl lists more than {MAX_HOSTS:,} nodes")
    return items


def _node(item: Any, spec: str, where: str) -> ResolvedHost | None:
    """One node as a host, or None for a node without GPUs (or an entry that is no node)."""
    if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
        return None
    metadata, status = _object(item, "metadata"), _object(item, "status")
    if not _has_gpus(_object(status, "capacity")):
        return None
    name = word(metadata.get("name"), "node name", where)
    labels = _object(metadata, "labels")
    group = next((v for v in (labels.get(k) for k in GROUP_LABELS) if _is_label_value(v)), None)
    return checked(ResolvedHost(name, name, group=group, source=spec, remote=True), where)


def _object(value: Any, key: str) -> dict[str, Any]:
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


def _has_gpus(capacity: dict[str, Any]) -> bool:
    """Whether the device plugin gives the node a GPU: whole (`nvidia.com/gpu`), shared by
    time-slicing or MPS under its own name (`nvidia.com/gpu.shared`), or as MIG instances under the
    "mixed" strategy (`nvidia.com/mig-1g.10gb`, with no `nvidia.com/gpu` for a GPU in MIG mode)."""
    return any(
        (key in GPU_RESOURCES or key.startswith(MIG_RESOURCE)) and _gpus(value) > 0
        for key, value in capacity.items()
    )


def _gpus(value: Any) -> int:
    """A capacity of `nvidia.com/gpu`: Kubernetes writes it as a quantity string ("8"); anything else
    ("8k", "1.5", text) counts as none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _QUANTITY.match(value):
        return int(value)
    return 0


def _is_label_value(value: Any) -> bool:
    return isinstance(value, str) and bool(_LABEL_VALUE.match(value))
