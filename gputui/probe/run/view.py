"""One look at the host, as a run's stages and verdicts read it.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import time
from typing import Any, Dict, List, Optional  # noqa: F401  (type comments)


class View(object):
    """One full look at the host: GPU records, NVML's lists, and every GPU process classified."""

    __slots__ = ("gpus", "listed", "records", "time")

    def __init__(self, gpus, listed, records):
        # type: (List[Dict[str, Any]], Dict[int, Dict[int, Optional[int]]], Dict[int, Dict[str, Any]]) -> None
        self.gpus = {g["index"]: g for g in gpus}  # type: Dict[int, Dict[str, Any]]
        self.listed = listed
        self.records = records
        self.time = time.monotonic()

    def on_gpu(self, index):
        # type: (int) -> List[Dict[str, Any]]
        return [r for r in self.records.values() if index in r["gpus"]]
