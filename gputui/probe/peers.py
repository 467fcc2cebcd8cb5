"""Another gputui on this host: its probe is a monitor, and the gputui that drives it is no job.

Two operators watching one shared host is the normal case. The probe of another gputui (any user,
any version) holds every GPU device file, as every NVML client does, while NVML lists it on no GPU:
by the device-file scan alone it would be an unattributed hidden holder, a target of the sweep, and
the gputui above it the root of a job. It is recognised by what it is, never by a name a job could
take (`exec -a` sets argv[0], `prctl` sets the comm):

- its program: a Python interpreter running one of gputui's launchers. Every version starts its
  probe as `python [options] -c CODE gputui-probe ...` (CODE: the bootstrap, or the local launcher,
  both of which import or name gputui), or runs it as the `gputui probe` command;
- what it holds: device files only. The classifier asks this only of holders NVML lists on no GPU,
  so a process with GPU memory stays a GPU user whatever its command line says.

The parent of a recognised probe is the gputui that owns it (`gputui wait`, a dashboard, `export`):
never the root of a job (checks.py refuses to signal one as such).

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import os
import re
from typing import List, Optional, Sequence  # noqa: F401  (type comments)

from .procfs import PROC, read_cmdline

MARKER = "gputui-probe"  # the word after the launcher's code in every version's command line
PROTECTED = "gputui"  # the `protected` and `reason` of another gputui's probe
# The interpreter: CPython or PyPy under any of their usual names (python3, python3.12, pypy3).
_PYTHON = re.compile(r"^(python|pypy)[0-9.]*(-dbg)?$")
# Interpreter options that take a value in the next argument (`-X dev`, `-W ignore`).
_WITH_VALUE = ("-X", "-W")


def _base(path):
    # type: (str) -> str
    name = path.rsplit("/", 1)[-1]
    return name[: -len(" (deleted)")] if name.endswith(" (deleted)") else name


def is_python(exe, argv):
    # type: (Optional[str], Sequence[str]) -> bool
    """Whether the program is a Python interpreter: by its executable where it can be read (root, or
    the same user), else by argv[0]."""
    name = _base(exe) if exe else (_base(argv[0]) if argv else "")
    return bool(_PYTHON.match(name))


def is_gputui_probe(argv, exe=None):
    # type: (Sequence[str], Optional[str]) -> bool
    """Whether a command line is a gputui probe's: `python [options] -c CODE gputui-probe ...` where
    CODE names gputui, or `python [options] PATH/gputui probe ...`, or `python -m gputui probe` /
    `python -m gputui.probe`, run by a Python interpreter."""
    if len(argv) < 3 or not is_python(exe, argv):
        return False
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-c":
            code = argv[i + 1] if i + 1 < len(argv) else ""
            marker = argv[i + 2] if i + 2 < len(argv) else ""
            return marker == MARKER and "gputui" in code
        if arg == "-m":
            module = argv[i + 1] if i + 1 < len(argv) else ""
            after = argv[i + 2] if i + 2 < len(argv) else ""
            return module == "gputui.probe" or (module == "gputui" and after == "probe")
        if arg in _WITH_VALUE:
            i += 2
            continue
        if arg.startswith("-") and arg != "-" and not arg.startswith("--"):
            i += 1  # a flag (-S, -u, -Es, -Xdev): the program comes later
            continue
        # The first operand is the script: the `gputui` command, its first word `probe`.
        return _base(arg) == "gputui" and i + 1 < len(argv) and argv[i + 1] == "probe"
    return False


def read_exe(pid, proc=PROC):
    # type: (int, str) -> Optional[str]
    """The path of a process's executable, or None where /proc does not let us read it."""
    try:
        return os.readlink("%s/%d/exe" % (proc, pid))
    except OSError:
        return None


def peer_probe(pid, proc=PROC, argv=None):
    # type: (int, str, Optional[List[str]]) -> bool
    """Whether process `pid` runs another gputui's probe, read from /proc now (`argv` when the caller
    has read the whole command line already)."""
    if argv is None:
        argv = read_cmdline(pid, proc)
    return is_gputui_probe(argv, read_exe(pid, proc))
