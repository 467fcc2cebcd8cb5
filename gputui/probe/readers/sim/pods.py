"""The sim playing a Kubernetes node (the "kubepods" scenario): some of its jobs run "in a pod".

A real node shows a pod in two places the probe reads (gputui/probe/pods.py): the cgroup of the
pod's processes (`/proc/PID/cgroup`: kubepods...pod<uid>...) and the kubelet's directory per pod,
`/var/log/pods/<namespace>_<name>_<uid>/<container>/`. The sim cannot move its processes into
another cgroup (that needs root and a cgroup tree), so it writes both under its own directory: the
pods' directories in `<base>/var/log/pods/`, and per process in a pod `<base>/cgroup/<pid>`, JSON
{"start": its start time, "cgroup": the text its /proc/PID/cgroup would have}. The reader gives that
text to the probe for that process while it lives (same PID and start time), and the probe names the
pod from the directory as on a node. Only the sim's owner writes there (directory.checked_directory).

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import hashlib
import json
import os
from typing import Any, Dict, Optional  # noqa: F401  (used in type comments)

from .client import start_time
from .files import OPEN_FILE, read_bounded, write_file

PODS_DIR = os.path.join("var", "log", "pods")
CGROUP_DIR = "cgroup"
MAX_CGROUP_BYTES = 8192


def container_id(pod, pid):
    # type: (Dict[str, str], int) -> str
    """A container id as a runtime makes one (64 hex digits), fixed by the pod and the process."""
    return hashlib.sha256(("%s/%d" % (pod["uid"], pid)).encode()).hexdigest()


def cgroup_text(pod, pid):
    # type: (Dict[str, str], int) -> str
    """/proc/PID/cgroup of a process in `pod`: the systemd driver on cgroup v2 (containerd's scope),
    or with `"driver": "cgroupfs"` the cgroupfs driver on cgroup v1 (one line per controller)."""
    uid, qos, cid = pod["uid"], pod.get("qos", "burstable"), container_id(pod, pid)
    if pod.get("driver") == "cgroupfs":
        path = "/kubepods/%spod%s/%s" % ("" if qos == "guaranteed" else qos + "/", uid, cid)
        return "".join(
            "%d:%s:%s\n" % (n, c, path) for n, c in ((9, "memory"), (4, "devices"), (1, "name=systemd"))
        )
    qos_slice = "" if qos == "guaranteed" else "kubepods-%s.slice/" % qos
    pod_slice = "kubepods-%spod%s.slice" % ("" if qos == "guaranteed" else qos + "-", uid.replace("-", "_"))
    return "0::/kubepods.slice/%s%s/cri-containerd-%s.scope\n" % (qos_slice, pod_slice, cid)


def place(base, pod, pid, start):
    # type: (str, Dict[str, str], int, int) -> None
    """Put process `pid` (started at `start`) in `pod`: the pod's directory and the process's cgroup."""
    logs = os.path.join(base, PODS_DIR, "%s_%s_%s" % (pod["namespace"], pod["name"], pod["uid"]))
    os.makedirs(os.path.join(logs, pod.get("container", "main")), 0o755, exist_ok=True)
    cgroups = os.path.join(base, CGROUP_DIR)
    os.makedirs(cgroups, 0o755, exist_ok=True)
    record = {"start": start, "cgroup": cgroup_text(pod, pid)}
    write_file(os.path.join(cgroups, str(pid)), json.dumps(record) + "\n", 0o644)


def cgroup_of(base, pid):
    # type: (str, int) -> Optional[str]
    """The cgroup text the sim plays for `pid`, while that process lives; None for any other."""
    try:
        fd = os.open(os.path.join(base, CGROUP_DIR, str(pid)), OPEN_FILE)
    except OSError:
        return None
    try:
        raw = read_bounded(fd, MAX_CGROUP_BYTES)
    finally:
        os.close(fd)
    try:
        record = json.loads(raw.decode("utf-8")) if raw else None
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("cgroup"), str):
        return None
    start = record.get("start")
    return record["cgroup"] if isinstance(start, int) and start == start_time(pid) else None
