"""Kubernetes pods named as people name them: `pod/NAMESPACE/NAME`, from what the node itself keeps.

A process in a pod's cgroup has the container `pod/<uid>` (procfs.container_of). The kubelet keeps a
directory per pod on its node, `/var/log/pods/<namespace>_<name>_<uid>/` (every container runtime:
the kubelet makes it, not the runtime), so the pod's namespace and name are read there: no API
server, no token. Namespaces and pod names are DNS names (no `_`), so a directory name splits in
exactly three; one that does not, or that holds anything a DNS name cannot, is skipped.

Bounded: one directory listing of at most MAX_ENTRIES names, read again for a pod not known yet at
most every RESCAN_S seconds; what is kept is only what the latest listing found. Without the
directory (not a node, no permission) a pod keeps its uid: `pod/<uid>`.

`Containers` is what the sampling core and the jobs read a process's cgroup and container through,
so a reader that plays a node (the sim's "kubepods" scenario) can give its own cgroup text and pods
directory. Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import re
import time
from typing import Callable, Dict, Optional, Tuple  # noqa: F401  (type comments)

from .procfs import PROC, container_in, read_cgroup

POD_LOGS = "/var/log/pods"
MAX_ENTRIES = 4096  # names read from one listing (a node runs at most a few hundred pods)
RESCAN_S = 10.0  # a pod not found is looked for again after this long
POD_PREFIX = "pod/"

_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_UID = re.compile(r"[0-9a-f][-0-9a-f]{0,63}\Z")


def parse_pod_dir(name):
    # type: (str) -> Optional[Tuple[str, str, str]]
    """(namespace, name, uid) of a `/var/log/pods` entry `<namespace>_<name>_<uid>`, or None."""
    parts = name.split("_")
    if len(parts) != 3:
        return None
    namespace, pod, uid = parts
    if _NAMESPACE.match(namespace) and _NAME.match(pod) and _UID.match(uid):
        return namespace, pod, uid
    return None


class PodNames(object):
    """uid -> (namespace, name), from the names of the pods directory's entries."""

    def __init__(self, root=POD_LOGS, clock=time.monotonic):
        # type: (str, Callable[[], float]) -> None
        self.root = root
        self._clock = clock
        self._names = {}  # type: Dict[str, Tuple[str, str]]
        self._scanned = None  # type: Optional[float]

    def lookup(self, uid):
        # type: (str) -> Optional[Tuple[str, str]]
        found = self._names.get(uid)
        now = self._clock()
        if found is None and (self._scanned is None or now - self._scanned >= RESCAN_S):
            self._scanned = now
            self._names = self._scan()
            found = self._names.get(uid)
        return found

    def _scan(self):
        # type: () -> Dict[str, Tuple[str, str]]
        names = {}  # type: Dict[str, Tuple[str, str]]
        try:
            with os.scandir(self.root) as entries:
                for count, entry in enumerate(entries):
                    if count >= MAX_ENTRIES:
                        break
                    parsed = parse_pod_dir(entry.name)
                    if parsed is not None:
                        names[parsed[2]] = (parsed[0], parsed[1])
        except OSError:
            pass  # not a node, or not ours to read: pods keep their uids
        return names

    def label(self, container):
        # type: (Optional[str]) -> Optional[str]
        """`pod/<uid>` as `pod/NAMESPACE/NAME` where the node knows the pod; anything else as it is."""
        if container is None or not container.startswith(POD_PREFIX):
            return container
        found = self.lookup(container[len(POD_PREFIX) :])
        return "%s%s/%s" % (POD_PREFIX, found[0], found[1]) if found else container


class Containers(object):
    """A process's cgroup text and its container (a pod named), for the core and the jobs.

    `fake`: a reader's own cgroup text for a PID (None: read /proc), as the sim playing a node."""

    def __init__(self, proc=PROC, pod_logs=POD_LOGS):
        # type: (str, str) -> None
        self.proc = proc
        self.pods = PodNames(pod_logs)
        self.fake = None  # type: Optional[Callable[[int], Optional[str]]]

    def play(self, pod_logs, fake):
        # type: (str, Callable[[int], Optional[str]]) -> None
        """Take the pods directory and cgroups a reader plays (the sim's "kubepods" scenario)."""
        self.pods = PodNames(pod_logs)
        self.fake = fake

    def cgroup(self, pid):
        # type: (int) -> Optional[str]
        text = self.fake(pid) if self.fake is not None else None
        return text if text is not None else read_cgroup(pid, self.proc)

    def container(self, pid):
        # type: (int) -> Optional[str]
        """The container as its cgroup says (`pod/<uid>`): kept per process, named each sample
        (`label`), so a pod whose directory comes after its process was first seen gets its name."""
        return container_in(self.cgroup(pid))

    def label(self, container):
        # type: (Optional[str]) -> Optional[str]
        return self.pods.label(container)
