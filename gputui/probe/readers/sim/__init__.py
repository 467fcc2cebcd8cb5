"""Simulated GPUs whose memory is owned by real processes (the `sim` reader, for --demo and tests).

It behaves like docs/GPU_FACTS.md says the real driver does, using real processes and real files:

- The "driver" lives in a directory, `<base>/` (directory.py): device files `<base>/dev/nvidia*`
  (regular files) and one file per CUDA context, `<base>/ctx/<uid>/<gpu>-<pid>-<serial>.ctx`, JSON
  {"gpu", "pid", "start", "bytes", "util"}, on which the process that made it holds flock(LOCK_SH).
  flock locks belong to the open file description, so a forked child that inherits the fd keeps the
  memory after its parent died (a ghost), and exit (any exit: SIGKILL, crash) releases it. A zombie
  has no fds: it holds nothing.
- The real driver cannot be lied to, so the sim's context files are trusted no more than they must
  be (contexts.py): nobody else writes in ctx/, and each user allocates in a ctx/<uid>/ that the
  reader made and only that user writes in (every user may read them all, as every user may ask
  NVML); a file is opened without following a link or blocking (O_NOFOLLOW, O_NONBLOCK) and
  believed only if it is a small regular file of that user, whose record names its file's GPU and
  PID and the start time (/proc/PID/stat field 22) of a process of that user living at that PID. A
  context whose process has exited stays listed (a ghost) only if it was seen alive, or the sim's own
  session reported that process; a new process that gets the PID is never it. What was not believed
  is in `SimReader.ignored`, with the reason.
- The reader watches every context from a thread blocked in flock(LOCK_EX); when that returns, every
  holder is gone, and the memory is released 0.10 to 0.18 s later (seeded), like NVML. Until then
  the context's owner PID stays listed, alive or not. Any process of the sim's user (or of a user
  it runs jobs as) may make contexts (`create_context`); any SimReader of that user on the
  directory (`attach=True`) sees the same state, a ghost whose parent it never saw alive included:
  the owner publishes in `<base>/owner.json` its session and the processes its session reported.
  An attached reader holds flock(LOCK_SH) on `<base>/sim.json` while open, so the owner can tell
  whether anyone watches (`watched`: the live demo's daemon, gputui/cli/demod.py, ends without clients).
- Jobs are real `python3 -S <base>/bin/<name>.py ARGS` processes (source: worker.py) started by a
  session process (a child subreaper that reaps them and their orphans; session.py). The reader holds
  the write end of a "lifeline" pipe every sim process watches: when the reader closes or its process
  dies, even by SIGKILL, every job exits (and the session removes the directory).
- A job run as another user (root's sims only) reaches its program, the device files and its
  contexts by their paths, so it runs only where every user may search the sim's directory (the
  temporary directory, or a `base_dir` the caller chooses); under a private TMPDIR (mode 700) such a
  job is refused before it starts, in one line that names the directory in the way
  (directory.py `reach_problem`). Nothing else needs the directory to be searchable: the sim, the
  demo and their probes stay in the TMPDIR they are given.
- The sim signals only processes of its own sim (processes.py). Jobs report their PIDs on a status
  socket that every job inherits, even one run as another user, so a report is taken only from the
  process it is about (the kernel says who wrote it: SCM_CREDENTIALS), and a reported PID is
  signalled only through a pidfd, while it is below the session process (a subreaper: every job and
  every orphan of a job stays below it while alive) and has the reported start time.

The modules, from the bottom up: worker.py (the program every sim process runs, as a string),
client.py (its functions run in this process), processes.py, files.py, roles.py (what a job is),
gpus.py, directory.py, contexts.py, session.py, reader.py (SimReader). The scenarios' tables are in
readers/scenarios.py, apart so the app's config can check a name without importing any of this.
This package re-exports what its callers use.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

from ..scenarios import MIG_LAYOUT, SCENARIO_JOBS, GiB
from .client import create_context, open_devices, start_time
from .files import watched
from .gpus import MEMORY_RESERVED, MEMORY_TOTAL
from .processes import signal_checked
from .reader import SimReader
from .roles import ROLES, SimError, SimJob

__all__ = [
    "MEMORY_RESERVED",
    "MEMORY_TOTAL",
    "MIG_LAYOUT",
    "ROLES",
    "SCENARIO_JOBS",
    "GiB",
    "SimError",
    "SimJob",
    "SimReader",
    "create_context",
    "open_devices",
    "signal_checked",
    "start_time",
    "watched",
]
