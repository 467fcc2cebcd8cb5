"""The words a run's events share: lists of PIDs and GPUs, sizes, a command line cut to fit.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from typing import Any, Dict, List, Optional  # noqa: F401  (type comments)

from ..wire import clip_arg


def short_command(command):
    # type: (List[str]) -> List[str]
    """A command line small enough to repeat in every event (some are kilobytes of arguments)."""
    out = [clip_arg(arg, 512) for arg in command[:64]]
    if len(command) > 64:
        out.append("... (%d more)" % (len(command) - 64))
    return out


def zombie_words(ppid):
    # type: (Optional[int]) -> str
    return "zombie: exited, holds nothing; parent %s must reap it" % (ppid if ppid is not None else "?")


def gpus_words(gpus):
    # type: (List[int]) -> str
    """`GPU 3`, `GPUs 0,1` in a sentence (the app's gputui.text.words.gpus_words, for the probe)."""
    return ("GPU " if len(gpus) == 1 else "GPUs ") + gpu_list(gpus)


def gpu_list(gpus):
    # type: (List[int]) -> str
    return ",".join(str(i) for i in gpus) if gpus else "-"


def pid_list(pids):
    # type: (List[int]) -> str
    return ", ".join(str(p) for p in pids)


def by_key(mapping):
    # type: (Dict[int, Any]) -> Dict[str, Any]
    return {str(k): v for k, v in sorted(mapping.items())}


def size_words(nbytes):
    # type: (int) -> str
    """`2.1 GiB`, `615 MiB`: for the probe's own words (the app has gputui.text.units)."""
    if nbytes >= 1 << 30:
        return "%.1f GiB" % (nbytes / float(1 << 30))
    return "%d MiB" % (nbytes >> 20)
