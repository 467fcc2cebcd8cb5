"""What gputui says about a running plan and its verdict, in one place: `gputui clean` prints these
lines, the dashboard's action log and notifications show them.

Everything here is plain text for a person. Text that came from a host (messages, command lines,
names) is made printable here (gputui.model.textsafe), so every output path gets the same escaping.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TextIO

from ..model import (
    Event,
    GpuVerdict,
    HostMetrics,
    MemoryAccount,
    MigInstance,
    PlanVerdict,
    Proc,
    ProcessVerdict,
    Restart,
)
from ..model.textsafe import cut, fit, printable
from ..probe.common import count as count  # one owner: the probe words counts the same way
from ..probe.common import took as _took
from .units import (
    fmt_bytes,
    fmt_duration,
    fmt_gpus,
    fmt_load,
    fmt_memory,
    fmt_memory_of,
    fmt_percent,
    index_runs,
)


def took(ms: float | None) -> str:
    """A duration as people read it: `180 ms` under a second, `15.0 s` above; `?` unknown."""
    return "?" if ms is None else _took(ms)


# Verbs whose plural is not the singular without its last `s`.
_PLURAL_VERBS = {"is": "are", "was": "were", "has": "have", "does": "do"}


def plural(n: int, one: str, many: str | None = None) -> str:
    """The noun `count` puts after `n`, alone (for a number styled apart): `host`, `hosts`."""
    return count(n, one, many).partition(" ")[2]


def count_does(n: int, one: str, verb: str, many: str | None = None) -> str:
    """A number of things and a verb that agrees with it: `1 process holds`, `2 processes hold`,
    `0 GPUs are`. `verb` in its singular form (`holds`, `is`, `ends`)."""
    if n == 1:
        return f"{count(n, one, many)} {verb}"
    if verb in _PLURAL_VERBS:
        return f"{count(n, one, many)} {_PLURAL_VERBS[verb]}"
    # watches -> watch, passes -> pass, ends -> end
    trim = 2 if verb.endswith(("sses", "shes", "ches", "xes", "zes")) else 1 if verb.endswith("s") else 0
    return f"{count(n, one, many)} {verb[: len(verb) - trim]}"


def pids(items: Iterable[int]) -> str:
    return ", ".join(str(p) for p in items)


def clock(t: float) -> str:
    """Local wall time with milliseconds: 12:01:03.120."""
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 1000):03d}"


# -- a host's own load (the dashboard's host header, `gputui snapshot`) -------------------------


def host_metrics_parts(m: HostMetrics, exact: bool = False) -> list[str]:
    """`CPU 38% of 64 CPUs`, `load 12.25 10.10 9.80`, `RAM 40.1/125 GiB`, `swap 1.0 GiB` (or `no swap`), `up 3d04h`;
    what the probe could not read is left out. `exact`: memory in whole MiB."""
    parts = []
    if m.cpu_percent is not None:
        parts.append(f"CPU {fmt_percent(m.cpu_percent)}" + (f" of {count(m.cpus, 'CPU')}" if m.cpus else ""))
    loads = [m.load1, m.load5, m.load15]
    if any(x is not None for x in loads):
        parts.append("load " + " ".join(fmt_load(x) for x in loads))
    if m.memory_used is not None and m.memory_total is not None:
        parts.append(f"RAM {fmt_memory_of(m.memory_used, m.memory_total, exact)}")
    if m.swap_total == 0:
        parts.append("no swap")
    elif m.swap_used is not None:
        parts.append(f"swap {fmt_memory(m.swap_used, exact)}")
    if m.uptime is not None:
        parts.append(f"up {fmt_duration(m.uptime)}")
    return parts


def no_gpu_words(names: Iterable[str], local: Iterable[str] = ()) -> str:
    """`no NVIDIA driver or GPU on this host` when the one such host is this machine (in `local`),
    else the hosts by name (`... on gpu7, gpu8`): a remote host is never "this host"."""
    hosts = list(names)
    if len(hosts) == 1 and hosts[0] in set(local):
        return "no NVIDIA driver or GPU on this host"
    return f"no NVIDIA driver or GPU on {listed([printable(h) for h in hosts]) or 'any host'}"


def listed(items: Sequence[str], shown: int = 8) -> str:
    """`items` joined with commas, the first `shown` of them, and how many more were left out:
    `101, 102, 103 and 7 more`; never a list that looks whole but is not."""
    more = f" and {len(items) - shown:,} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


# -- stages ------------------------------------------------------------------------------------


def gpus_words(indexes: Iterable[int]) -> str:
    """GPUs named in a sentence: `GPU 3`, `GPUs 0, 2`, `GPUs 0-7` (three or more in a row make a
    range), `no GPU`. The one way a plan, a dialog and a verdict name them."""
    runs = [text for text, _ in index_runs(list(indexes))]
    if not runs:
        return "no GPU"
    many = len(runs) > 1 or "-" in runs[0]
    return ("GPUs " if many else "GPU ") + ", ".join(runs)


def where(event: Event) -> str:
    """The GPU(s) an event is about, for a column: `GPU 3`, `GPU 0,1`, or ``."""
    if event.gpu is not None:
        return f"GPU {event.gpu}"
    gpus = event.data.get("gpus")
    if isinstance(gpus, list) and gpus and all(isinstance(g, int) for g in gpus):
        return "GPU " + ",".join(str(g) for g in gpus)
    return ""


_GPU_LEAD = re.compile(r"GPU ?(\d+): ")


def event_message(event: Event) -> str:
    """An event's message without the `GPU 3: ` it starts with when the event names that GPU: the
    line's GPU column (`where`) says it already. Not made printable (the caller does)."""
    lead = _GPU_LEAD.match(event.message)
    if lead is not None and event.gpu is not None and int(lead.group(1)) == event.gpu:
        return event.message[lead.end() :]
    return event.message


def stage_text(event: Event) -> str:
    """A stage line without its time and host (`GPU 3   SIGTERM -> 4121 python train.py`)."""
    return f"{where(event):<7} {printable(event_message(event))}".rstrip()


def stage_line(host: str, event: Event) -> str:
    """`12:01:03.120 demo-a GPU3  SIGTERM -> 4121 python train.py` (remote text escaped)."""
    return f"{clock(event.time)} {printable(host)} {stage_text(event)}".rstrip()


def signals_sent(events: Iterable[Event]) -> str:
    """What a plan's events say it sent, by signal: `SIGTERM to 4121, 4122; SIGKILL to 4121`; empty
    when nothing was sent."""
    by_signal: dict[str, list[int]] = {}
    for e in events:
        if e.stage == "signal" and e.result == "sent" and e.pid is not None:
            pids_sent = by_signal.setdefault(printable(e.signal or "a signal"), [])
            if e.pid not in pids_sent:
                pids_sent.append(e.pid)
    return "; ".join(f"{name} to {pids(sent)}" for name, sent in by_signal.items())


# -- verdicts ----------------------------------------------------------------------------------

HEADS = {
    "clean": "CLEAN",
    "stopped": "STOPPED",
    "not-clean": "NOT CLEAN",
    "not-stopped": "NOT STOPPED",
    "signalled": "SIGNALLED",
    "not-signalled": "NOT SIGNALLED",
    "not-trusted": "VERDICT NOT TRUSTED",
    "refused": "REFUSED",
    "no-gpu": "NO GPU",
    "outcome-unknown": "OUTCOME UNKNOWN",
    "not-sent": "NOT SENT",
    "unreachable": "UNREACHABLE",
    "aborted": "NOTHING DONE",
    "busy": "BUSY",
}


# The fewest cells a command is cut to in a verdict's process line and in a restart warning: a
# narrower terminal wraps the line rather than cut the command shorter.
VERDICT_COMMAND = 60
RESTART_COMMAND = 80

# What memory nothing here holds is, from inside a container (MemoryAccount.outside).
OUTSIDE = "used outside this container: another container or the host (no process here holds it)"


def head(status: str) -> str:
    return HEADS.get(status, status.upper())


def without_head(lead: str, message: str) -> str:
    """`message` less the words `lead` says already, where it starts or ends with them (`NOTHING
    DONE` and `not confirmed: nothing done` -> `not confirmed`; `not sent` and `plan not sent: the
    link broke` -> `the link broke`): a joined line says each thing once."""
    words = lead.casefold().replace("-", " ").strip()
    text = message.strip()
    low = text.casefold().replace("-", " ")  # as long as `text`: its offsets hold there
    if not words:
        return text
    # Only a clause of its own: `plans are refused` keeps its word.
    for opener in ("", "plan ", "the plan ", "reset "):
        end = len(opener) + len(words)
        if low.startswith(opener + words) and (end == len(low) or low[end] in ":;,"):
            return text[end:].lstrip(" :;,")
    start = len(low) - len(words)
    if low.endswith(words) and (start == 0 or low[:start].rstrip().endswith((":", ";", ","))):
        return text[:start].rstrip(" :;,")
    return text


def joined(*parts: str | None) -> str:
    """`parts` joined with `: `, each said once: an empty part, or one the part after it says
    already (`no NVIDIA driver` before `no NVIDIA driver (library not found)`), is left out."""
    kept: list[str] = []
    items = [p.strip() for p in parts if p and p.strip()]
    for i, part in enumerate(items):
        key = part.casefold().replace("-", " ")
        later = " ".join(items[i + 1 :]).casefold().replace("-", " ")
        if key in later or any(key == k.casefold().replace("-", " ") for k in kept):
            continue
        kept.append(part)
    return ": ".join(kept)


def part_words(account: MemoryAccount, part: str, exact: bool = False) -> str:
    """One part of a GPU's memory account, for a person: `2.1 GiB orphaned, no process holds it; a
    reset would free it`. The same words in `gputui wait`, a clean's verdict and the GPU view
    (`exact`: its size in exact MiB, the dashboard's `m`)."""
    size = fmt_memory(getattr(account, part), exact)
    if part == "ghost":
        held = f"; suspected holders: {pids(account.suspects)}" if account.suspects else ""
        return f"{size} listed for dead PIDs {pids(account.ghosts) or '?'}{held}"
    if part == "container":
        where = ", ".join(printable(c) for c in account.containers) or "a container"
        return f"{size} held by processes of another PID namespace ({where})"
    if part == "unreported":
        return f"{size} of processes the driver lists without a figure (MIG or a container)"
    if part == "hidden":
        return f"{size} held by hidden holders of the device file (not listed by NVML)"
    if part == "orphaned":
        return f"{size} orphaned, no process holds it; a reset would free it"
    if part == "outside":
        # Seen from inside a container: never "orphaned" (a reset would take a neighbour's memory).
        return f"{size} {OUTSIDE}"
    if part == "unknown":
        return f"{size} not listed; unattributed processes hold the device file"
    return f"{size} {part}"


def unaccounted_words(account: MemoryAccount) -> str:
    """Every unaccounted part of `account`, `; `-separated (empty when all is accounted for)."""
    return "; ".join(part_words(account, p) for p, _ in account.parts() if p in account.UNACCOUNTED)


def gpu_note(g: GpuVerdict) -> str:
    """What a GPU verdict adds to its result word: who holds it, who may, what else uses it."""
    notes = []
    if g.result == "held":
        notes.append(f"held by {pids(g.held_by) or printable(g.error or 'memory in use')}")
    elif g.result == "ghost-memory":
        notes.append(
            f"NVML lists {pids(g.ghosts) or 'nothing'} (dead); suspected holders: {pids(g.suspects) or 'none found'}"
        )
    elif g.result == "orphaned":
        if g.accounting is not None:
            notes.append(unaccounted_words(g.accounting) or "memory above idle that nothing holds")
        else:
            notes.append("memory above idle that nothing holds; a reset would free it")
    elif g.result == "outside":
        if g.accounting is not None:
            notes.append(unaccounted_words(g.accounting) or OUTSIDE)
        else:
            notes.append(OUTSIDE)
    elif g.result == "still-listed":
        notes.append(
            f"memory not released: NVML still lists {pids(g.still_listed)}; suspected holders: "
            f"{pids(g.suspects) or 'none found'}"
        )
    if g.others:
        notes.append(f"still used by {pids(g.others)} (not in the plan, left alone)")
    return "; ".join(notes)


def gpu_words(g: GpuVerdict) -> str:
    """`GPU 1 clean`, `GPU 0 held by 7566`, `GPU 0 released: still used by 7566 (not in the plan, ...)`."""
    note = gpu_note(g)
    if g.result == "held":
        return f"GPU {g.index} {note}"
    return f"GPU {g.index} {printable(g.result)}" + (f": {note}" if note else "")


def memory_words(g: GpuVerdict) -> str:
    """`40.0 GiB -> 0 B` (and when it came back)."""
    text = f"{fmt_bytes(g.memory_before)} -> {fmt_bytes(g.memory_after)}"
    if g.idle_ms is not None and g.result == "clean":
        text += f" (idle at {took(g.idle_ms)})"
    return text


def process_counts(processes: Iterable[ProcessVerdict]) -> str:
    """`2 exited, 1 vanished`."""
    counts = Counter(p.result for p in processes)
    return ", ".join(f"{n} {printable(result)}" for result, n in counts.most_common())


# How a parent that may start again what a plan stopped is stopped, in each front's words. Once it
# has started GPU processes again it is a job's root: `clean --job`, the dashboard's X. Before, it
# holds no GPU and no plan can name it (`clean --pid` of it is refused): the shell's kill stops it.
CLI_JOB_STOP = "`clean --job {pid}` stops it whole"
KEY_JOB_STOP = "X on job {pid} stops it whole (J lists jobs)"


def restart_words(r: Restart, job_stop: str = CLI_JOB_STOP) -> str:
    """A parent that outlived what the plan stopped: `parent 4242 `python supervisor.py` still runs
    and may start it again: `kill 4242` stops it (a plan names only what holds a GPU)`; once it has,
    `... has started 5252 again (GPU 2) since: ` and `job_stop` (CLI_JOB_STOP, KEY_JOB_STOP). The
    same words in `clean`'s text, its JSON (`restarts[].words`) and the dashboard's verdict."""
    who = f"parent {r.pid} `{cut(r.brief, RESTART_COMMAND)}` still runs"
    if r.new:
        on = f" on GPU {','.join(map(str, r.new_gpus))}" if r.new_gpus else ""
        what = f"and has started {pids(r.new[:8])}{' and more' if len(r.new) > 8 else ''}{on} since"
        return f"{who} {what}: {job_stop.format(pid=r.pid)}"
    them = "it" if len(r.children) <= 1 else "them"
    return f"{who} and may start {them} again: `kill {r.pid}` stops it (a plan names only what holds a GPU)"


def restarts_line(verdict: PlanVerdict, job_stop: str = CLI_JOB_STOP) -> str:
    """Every restart warning of a verdict, `; `-separated (empty when there is none)."""
    return "; ".join(restart_words(r, job_stop) for r in verdict.restarts)


def verdict_summary(verdict: PlanVerdict, job_stop: str = CLI_JOB_STOP) -> str:
    """One line: `clean in 209 ms · GPU 0 clean; GPU 1 clean · 3 exited`; a signal plan's:
    `SIGSTOP sent to 4121 python train.py: state T (stopped) · 12 ms`."""
    if verdict.unknown or verdict.result in ("refused", "error"):
        lead = head(verdict.result).lower()
        return joined(lead, without_head(lead, printable(verdict.message)))
    if verdict.scope == "signal":
        parts = [signal_words(verdict), took(verdict.elapsed_ms)]
        if verdict.problems:
            parts.append("NOT TRUSTED: " + printable("; ".join(verdict.problems)))
        return " · ".join(parts)
    if verdict.ok:
        lead = "clean" if verdict.result == "clean" else "stopped, memory released"
    else:
        lead = "NOT clean" if verdict.result in ("not-clean", "clean") else "NOT stopped"
    parts = [f"{lead} in {took(verdict.elapsed_ms)}"]
    if verdict.gpus:
        parts.append("; ".join(gpu_words(g) for g in verdict.gpus))
    if verdict.processes:
        parts.append(process_counts(verdict.processes))
    if verdict.problems:
        parts.append("NOT TRUSTED: " + printable("; ".join(verdict.problems)))
    if verdict.restarts:
        parts.append("WARNING: " + restarts_line(verdict, job_stop))
    return " · ".join(parts)


def signal_words(verdict: PlanVerdict) -> str:
    """What a signal plan did, from the probe's `done`: `SIGSTOP sent to 4121 python x: state T
    (stopped)`, `SIGKILL NOT sent to 1 systemd: protected (...)` (its plan id left out)."""
    message = printable(verdict.message)
    lead = f"signal {printable(verdict.plan)}: "
    return message[len(lead) :] if message.startswith(lead) else message


TOAST_TITLES = {
    "clean": "verified clean",
    "stopped": "stopped, memory released",
    "signalled": "signal sent",  # the message names it: `SIGSTOP sent to 4121 ...`
    "outcome-unknown": "OUTCOME UNKNOWN",
    "not-sent": "NOT SENT",
}


def toast_title(status: str, cleans_gpus: bool, signal: str | None = None) -> str:
    """The title of the notification a verdict pops up (after the host's name): what it is about
    in two or three words; a failure in capitals."""
    if status in TOAST_TITLES:
        return TOAST_TITLES[status]
    if signal is not None:
        return "signal NOT sent"
    return "NOT clean" if cleans_gpus else "NOT stopped"


def verdict_lines(
    host: str, status: str, message: str | None, verdict: PlanVerdict | None, width: int = 0
) -> list[str]:
    """The verdict as `gputui clean` prints it: a head line, then a line per GPU and per process. A
    process's command takes the room a terminal `width` cells wide leaves it, never fewer than
    VERDICT_COMMAND cells (all that a `width` of 0 gives it), cut with a mark where it must be."""
    spent = (
        f" in {took(verdict.elapsed_ms)}" if verdict is not None and verdict.elapsed_ms is not None else ""
    )
    # The head line names the host and the status: the message need not again.
    said = without_head(host, without_head(head(status), printable(message))) if message else ""
    lines = [f"== {printable(host)}: {head(status)}{spent}" + (f": {said}" if said else "")]
    if verdict is None:
        return lines
    for g in verdict.gpus:
        note = gpu_note(g)
        lines.append(
            f"   GPU {g.index:<3} {printable(g.result):<13} {memory_words(g)}" + (f"  {note}" if note else "")
        )
    for p in verdict.processes:
        signals = ",".join(p.signals) or "-"
        note = p.why or ""
        if p.allow:
            note = f"{note}; {p.allow}" if note else p.allow
        lead = f"   {p.pid:>7}  {printable(p.result):<18} {signals:<16} "
        lines.append(fit(lead, p.brief, f"  ({printable(note)})" if note else "", width, VERDICT_COMMAND))
    for problem in verdict.problems:
        lines.append(f"   ! {printable(problem)}")
    for r in verdict.restarts:
        lines.append(f"   ! {restart_words(r)}")
    return lines


# -- what a process is and where it runs (the dashboard's tables, `gputui snapshot`) -------------

# CUDA MPS: a process's part in it is said in place of its kind (the Kind column, the snapshot).
MPS_WORDS = {"server": "mps-srv", "control": "mps-ctl", "client": "mps-cli"}
MPS_NAMES = {"server": "MPS server", "control": "MPS control daemon", "client": "MPS client"}


def kind_word(proc: Proc) -> str:
    """The kind of `proc` in one word: its MPS part (`mps-srv`) for an MPS process, else its kind
    (`user`, `ghost`, ...). The dashboard puts its glyph before it (gputui/ui/kinds.py)."""
    return MPS_WORDS.get(proc.mps or "", proc.kind)


def gpu_place(proc: Proc, index: int) -> str:
    """Where `proc` runs on GPU `index`: its MIG instances there (`0:1.0`: GPU 0, GPU instance 1,
    compute instance 0), else the index."""
    return ",".join(p.label for p in proc.mig_on(index)) or str(index)


def gpu_places(proc: Proc) -> str:
    """The GPU column of a process: `0,1`, `0-3` (runs), `0:1.0` for a MIG instance, `-` for none."""
    if not proc.mig:
        return fmt_gpus(proc.gpus)
    return ",".join(gpu_place(proc, i) for i in sorted(proc.gpus)) or "-"


def mig_profile(instance: MigInstance) -> str:
    """`3g.71gb`, what tells a GPU's instances apart, from the driver's name of the instance
    ("NVIDIA H200 MIG 3g.71gb"); the whole name where it has no "MIG", empty where none. Made safe."""
    name = printable(instance.name or "")
    at = name.find("MIG")
    return cut(name[at + 3 :].strip() if at >= 0 else name, 40)


# -- the reset ladder (`gputui clean --reset-gpu N`) ------------------------------------------


def reset_advice(kind: str, host: str, gpu: int, pid: int | None = None, proc: Proc | None = None) -> str:
    """What to do about one thing that blocks a reset of GPU `gpu` (the probe's blocker `kind`:
    process, mig, display, nvlink, outside, root), with the command where there is one. `proc`: the
    blocking process as the latest sample lists it (None: not listed, or not a process)."""
    where = printable(host)
    if kind == "process":
        if pid is None:
            return "stop it, or wait for it to end"
        stop = f"gputui clean {where} --pid {pid}"
        if proc is None:
            return f"stop it ({stop}), or wait for it to end"
        if proc.protected in ("pid-1", "kernel-thread", "probe-ancestor", "gputui"):
            return f"never signalled by gputui ({printable(proc.protected)}): the GPU frees with it, or at a reboot"
        if proc.mps in ("server", "control"):
            return (
                f"an {MPS_NAMES[proc.mps]} (protected): end MPS for the reset (`echo quit | "
                f"nvidia-cuda-mps-control`), or {stop} --include-monitor"
            )
        if proc.kind == "monitor":
            return f"a monitor (protected): stop its service for the reset, or {stop} --include-monitor"
        if proc.kind == "ghost":
            return f"a dead PID the driver still lists: free the GPU (gputui clean {where} --gpu {gpu})"
        if proc.kind == "zombie":
            parent = f" (gputui clean {where} --pid {proc.ppid})" if proc.ppid else ""
            return f"exited, not reaped: its parent must reap it or be stopped{parent}"
        return f"stop it: {stop}"
    if kind == "mig":
        return f"turn MIG mode off first (nvidia-smi -i {gpu} -mig 0, as root: it removes every MIG instance)"
    if kind == "display":
        return "stop the display server that drives this GPU (or move the display to another GPU)"
    if kind == "nvlink":
        return "the driver resets NVLink peers together: free those GPUs too"
    if kind == "outside":
        return "run gputui on the host itself: from inside a container a reset is never done"
    if kind == "root":
        return "run the probe as root (sudo = true for this host in the config)"
    return "see the words above: the probe says no more"


# -- text on a terminal (`wait`'s live line, `snapshot --watch`) ---------------------------------

DEFAULT_COLUMNS, DEFAULT_LINES = 80, 24  # where a terminal does not say (or says 0, as some consoles do)


def terminal_size(stream: TextIO) -> tuple[int, int]:
    """(columns, lines) of the terminal `stream` writes to: $COLUMNS and $LINES where set (as
    shutil.get_terminal_size reads them), else the terminal's own, asked on `stream`'s descriptor
    (not stdout's: `wait` draws on stderr), else 80 x 24."""
    try:
        size: tuple[int, int] = tuple(os.get_terminal_size(stream.fileno()))  # type: ignore[assignment]
    except (AttributeError, OSError, ValueError):  # not a file, not a terminal, closed
        size = (0, 0)
    out = []
    for name, found, default in (("COLUMNS", size[0], DEFAULT_COLUMNS), ("LINES", size[1], DEFAULT_LINES)):
        env = os.environ.get(name, "")
        if env.isascii() and env.isdigit() and 0 < int(env) < 100_000:
            out.append(int(env))
        else:
            out.append(found if found > 0 else default)  # 0: some consoles say so; unknown
    return out[0], out[1]


def columns(stream: TextIO) -> int:
    """The width of the terminal `stream` writes to (terminal_size)."""
    return terminal_size(stream)[0]


def shares(sizes: Sequence[int], room: int) -> list[int]:
    """Cells for each of several texts of `sizes` cells so that together they take at most `room`:
    the short ones whole, the long ones an equal share of what is left (water-filling)."""
    out = [0] * len(sizes)
    left, waiting = max(room, 0), len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: sizes[i]):
        out[i] = min(sizes[i], left // waiting)
        left -= out[i]
        waiting -= 1
    return out
