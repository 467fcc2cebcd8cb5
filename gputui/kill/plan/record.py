"""The plan record: what the probe of one host is asked to do and what the operator sees before
confirming it (docs/PROTOCOL.md "Plans"): its targets and what it leaves alone, its title and
stages in words, what its verdict will prove, the changes the dialog may make before it is
confirmed, and its forms on the wire (`to_wire`) and on disk (`describe`, the audit log's).

The planner (planner.py, jobs.py, signal.py) builds it from a sample; everything here reads only
the plan itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ...config.killoptions import KillOptions
from ...model import Job, MigPlace
from ...probe.common import (
    KILL_WAIT_S,
    POLL_FAST_S,
    POLL_S,
    SIGNAL_PLANS,
    job_grace,
    plan_deadline,
    plan_silence_limit,
    signal_deadline,
)
from ...text.units import fmt_gpus
from ...text.words import count_does, gpus_words, plural
from .entries import STOP_JOB_FLAG, Excluded, GpuBefore, PlanScope, PlanWarning, Target, included
from .jobs import jobs_title
from .mps import mps_warning

VERIFY_POLL_MS = round(POLL_S * 1000)  # the probe's NVML polling interval while verifying (the
VERIFY_FAST_POLL_MS = round(POLL_FAST_S * 1000)  # fast one for its first POLL_FAST_FOR_S, then this)
KILL_WAIT = KILL_WAIT_S
INCLUDE_MONITOR_HINT = "--include-monitor stops it anyway"  # `gputui clean`'s way to include a monitor
SIGNAL_WORDS = {  # the ladders of KillOptions.signals (probe.common.SIGNAL_PLANS), in words
    "term": "SIGTERM, then SIGKILL",
    "int": "SIGINT, then SIGTERM, then SIGKILL",
    "kill": "SIGKILL at once",
    "hup": "SIGHUP, then SIGTERM, then SIGKILL",
    "usr1": "SIGUSR1, then SIGTERM, then SIGKILL",
}


@dataclass(frozen=True, slots=True)
class Plan:
    """What the probe of one host is asked to do, and what the operator sees before confirming it."""

    id: str
    host: str
    operator: str
    scope: PlanScope  # what the operator asked for
    gpus: tuple[GpuBefore, ...]  # the GPUs the plan proves clean (none for a plan of processes)
    targets: tuple[Target, ...]
    sweep: tuple[Target, ...]  # unattributed hidden holders; signalled only when sweep_included
    sweep_included: bool
    excluded: tuple[Excluded, ...]
    warnings: tuple[PlanWarning, ...]
    touched: tuple[GpuBefore, ...] = ()  # other GPUs the targets use: their memory is reported
    ghosts: tuple[int, ...] = ()  # dead PIDs the operator chose: their memory must come back
    include_protected: tuple[int, ...] = ()
    kill: KillOptions = KillOptions()
    sample_seq: int = 0
    # The jobs the plan stops (root first, then the members left): their roots, the processes
    # between and the members are targets (Target.role). Empty for a plan without jobs.
    jobs: tuple[Job, ...] = ()
    # A `signal` plan (scope "signal"): this one signal, sent once to its one target; no ladder,
    # no verification (plan_for_signal). None for every other plan.
    signal: str | None = None
    # MIG instances the plan frees (`--gpu MIG-...`): the processes in them are its targets; the
    # probe proves them gone, the app then proves each instance clean from a fresh scan
    # (Operations.run: nothing left in it, its memory at idle where read). Not its GPU's others.
    instances: tuple[MigPlace, ...] = ()

    # -- what it is --------------------------------------------------------------------------

    def describe_jobs(self) -> str | None:
        """The plan's title when it stops jobs: `Stop job 4242 (torchrun --nproc-per-node 2
        train.py)`, `Stop 2 jobs: 4242 (torchrun ...), 4343 (python serve.py)`; None without jobs.
        The dialog's title and the CLI's plan head use it."""
        return jobs_title(self.jobs)

    @property
    def title(self) -> str:
        """What the plan does, in a few words, for any scope (`Stop job 4242 (torchrun ...)`,
        `Free GPU 3`, `Free GPUs 0, 2`, `Free every GPU (0-7)`, `Stop the chosen process`).
        The dialog, the action log and the CLI's plan head all use it."""
        gpus = gpus_words(self.gpu_indexes)
        if self.signal is not None:
            who = self.targets[0] if self.targets else (self.excluded[0] if self.excluded else None)
            return (
                f"Send {self.signal} to {who.pid} ({who.brief})" if who is not None else f"Send {self.signal}"
            )
        jobs = self.describe_jobs()
        if jobs is not None:
            return jobs + (f"; free {gpus}" if self.cleans_gpus else "")
        if self.scope == "host":
            return f"Free every GPU ({fmt_gpus(self.gpu_indexes)})"
        if self.scope == "gpus":
            return f"Free {gpus}"
        if self.scope == "mig":
            return f"Free {self.instances_words}"
        chosen = "the chosen process" if len(self.targets) == 1 else "the chosen processes"
        if self.scope == "selection":
            return f"Free {gpus} and stop {chosen}"
        return f"Stop {chosen}"

    @property
    def instances_words(self) -> str:
        """`MIG instance 0:1.0`, `MIG instances 0:1.0, 0:2.0`; empty without instances."""
        if not self.instances:
            return ""
        return f"{plural(len(self.instances), 'MIG instance')} {', '.join(i.label for i in self.instances)}"

    @property
    def kind_title(self) -> str:
        """What the plan does in one or two words, for a dialog that shows several plans (one per
        host): `Free GPUs`, `Stop processes`, `Stop jobs`."""
        if self.signal is not None:
            return f"Send {self.signal}"
        if self.jobs:
            return "Stop jobs"
        if self.scope == "mig":
            return "Free MIG instances"
        if self.cleans_gpus:
            return "Free GPUs and stop processes" if self.scope == "selection" else "Free GPUs"
        return "Stop processes"

    def job_targets(self, job: Job) -> tuple[Target, ...]:
        """The targets of one of the plan's jobs, in the order they are signalled (root, the
        processes between, the members): what the dialog lists under the job, with what each holds."""
        order = {"root": 0, "between": 1, "member": 2}
        mine = [t for t in self.targets if t.job == job.id and t.role is not None]
        return tuple(sorted(mine, key=lambda t: (order.get(t.role or "", 3), t.pid)))

    @property
    def gpu_indexes(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)

    @property
    def cleans_gpus(self) -> bool:
        """Whether the verdict is about GPUs (clean or not) rather than about processes."""
        return bool(self.gpus)

    @property
    def signalled(self) -> tuple[Target, ...]:
        """Every process the probe is asked to signal (the sweep only when included)."""
        return self.targets + (self.sweep if self.sweep_included else ())

    @property
    def is_empty(self) -> bool:
        """Nothing to signal: the probe will only verify."""
        return not self.signalled

    @property
    def zombies_alone(self) -> bool:
        """Nothing to signal and nothing to prove: every process chosen is a zombie (no signal
        reaches one; it stays until its parent reaps it) and no GPU or ghost was chosen."""
        chosen = [e for e in self.excluded if e.chosen]
        return (
            self.is_empty
            and not self.gpus
            and not self.ghosts
            and bool(chosen)
            and all(e.kind == "zombie" for e in chosen)
        )

    @property
    def zombies_refusal(self) -> str | None:
        """Why a plan of zombies alone (`zombies_alone`) is not run, in the words every front says
        (`gputui clean`'s exit 4, the hub's 409): "stopped" would claim a signal no zombie can get.
        None for any other plan."""
        if not self.zombies_alone:
            return None
        said = [w.message for w in self.warnings if w.kind == "zombie"]
        return "nothing was signalled: " + ("; ".join(said) or "every process chosen is a zombie")

    @property
    def protected_chosen(self) -> tuple[Excluded, ...]:
        """The protected processes the operator named (by PID, a job whose root is protected, a PID
        above a job) that the plan leaves alone."""
        return tuple(e for e in self.excluded if e.chosen and e.protected)

    def refusal(self, monitor_hint: str = INCLUDE_MONITOR_HINT) -> str | None:
        """Why the plan is not run, in the words every front says (`gputui clean`'s exit 4, the hub's
        409), or None: a protected process was named (the operator asked for something the plan will
        not do: the rest must not run as if it would), then a plan of zombies alone
        (`zombies_refusal`). `monitor_hint` says what would stop a named monitor (the front's way to
        include one), added in brackets when one is among them."""
        refused = self.protected_chosen
        if refused:
            hint = f" ({monitor_hint})" if any(e.can_include for e in refused) else ""
            return "; ".join(f"{e.pid} ({e.name or '?'}) is {e.why}" for e in refused) + hint
        return self.zombies_refusal

    @property
    def signals(self) -> tuple[str, ...]:
        """The soft signals before SIGKILL (a `signal` plan: its one signal)."""
        if self.signal is not None:
            return (self.signal,)
        return SIGNAL_PLANS[self.kill.signals]

    @property
    def term_timeout(self) -> float:
        return self.kill.term_timeout

    @property
    def verify_timeout(self) -> float:
        return self.kill.verify_timeout

    @property
    def deadline(self) -> float:
        """Seconds after which the app stops waiting for the probe's verdict (outcome unknown)."""
        if self.signal is not None:
            return signal_deadline()
        return plan_deadline(len(self.signals), self.term_timeout, self.verify_timeout)

    @property
    def silence_limit(self) -> float:
        """Seconds a running plan may be silent before the app calls its outcome unknown."""
        if self.signal is not None:
            return signal_deadline()
        return plan_silence_limit(self.term_timeout, self.verify_timeout)

    @property
    def proves(self) -> str:
        """What the verdict will say, in words the dialog shows before anything is signalled."""
        if self.signal is not None:
            return (
                f"{self.signal} delivered to that very process (its PID and start time checked), and "
                "what it did (stopped, running, exited); nothing else is sent, nothing verified"
            )
        if self.cleans_gpus:
            one = len(self.gpu_indexes) == 1
            what = f"{gpus_words(self.gpu_indexes)} clean (nothing holds {'it' if one else 'them'}, memory back at idle)"
            if self.scope == "selection":
                what += "; the chosen processes gone"
            return what
        if self.instances:
            return (
                f"{self.instances_words} clean: the processes in it gone with the memory they held "
                "released, then nothing left running in it and its memory back at idle (where the "
                "driver reads an instance's memory; else judged by its processes), from a fresh scan. "
                "The GPU's other MIG instances left alone"
            )
        if self.jobs:
            return (
                "each job gone (its root, the processes between and every member) and the GPU memory "
                "its members held released (others on its GPUs left alone)"
            )
        return "each chosen process gone and the GPU memory it held released (others on its GPU left alone)"

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages in words, for the dialog and the CLI (worded here only)."""
        if self.signal is not None:
            return (
                "check: the same process (PID and start time, through its pidfd), not protected",
                f"{self.signal}, once",
                "read its state (no SIGKILL after it, no verification)",
            )
        t = self.term_timeout
        if self.jobs and self.signals:
            roots = ", ".join(str(j.root) for j in self.jobs)
            steps = [
                f"{sig} -> the job {plural(len(self.jobs), 'root')} ({roots}) -> "
                f"after {job_grace(t):g} s, {sig} to the members left -> wait up to {t:g} s"
                for sig in self.signals
            ]
        else:
            steps = [f"{sig} -> wait up to {t:g} s" for sig in self.signals]
        steps.append("SIGKILL the survivors" if self.signals else "SIGKILL at once")
        if self.cleans_gpus:
            rescan = f"rescan: stop the hidden holders now on {gpus_words(self.gpu_indexes)}"
        elif self.instances:
            rescan = "rescan: stop only holders tied to the processes in the instance"
        else:
            rescan = "rescan: stop only holders tied to the targets"
        if self.sweep_included and self.sweep:
            rescan += f" and the {len(self.sweep)} swept"
        steps.append(rescan)
        steps.append(
            f"verify {gpus_words(self.gpu_indexes) + ' clean' if self.cleans_gpus else 'the targets gone'}"
            f" (NVML every {VERIFY_FAST_POLL_MS}-{VERIFY_POLL_MS} ms, up to {self.verify_timeout:g} s)"
        )
        if self.instances:
            steps.append(f"then a fresh scan: {self.instances_words} clean (nothing in it, memory at idle)")
        return tuple(steps)

    # -- changing it before it is confirmed --------------------------------------------------

    def with_sweep(self, on: bool = True) -> Plan:
        warnings = tuple(w for w in self.warnings if w.kind != "sweep-off")
        if not on and self.sweep:
            warnings += (sweep_warning(len(self.sweep)),)
        return replace(self, sweep_included=on and bool(self.sweep), warnings=warnings)

    def with_options(self, kill: KillOptions) -> Plan:
        return replace(self, kill=kill)

    def including(self, pids: Iterable[int]) -> Plan:
        """Move excluded monitors with these PIDs into the targets (the operator chose them)."""
        wanted = set(pids)
        moved = [e for e in self.excluded if e.pid in wanted and e.can_include]
        if not moved:
            return self
        targets = self.targets + tuple(included(e) for e in moved)
        excluded = tuple(e for e in self.excluded if e not in moved)
        include = tuple(sorted(set(self.include_protected) | {e.pid for e in moved}))
        warnings = self.warnings + tuple(
            PlanWarning(
                "protected-included",
                f"{e.pid} ({e.name or 'monitor'}) is a GPU monitor: stopping it ends what it does for "
                "everyone (metrics, health checks, persistence)",
                e.pid,
            )
            for e in moved
        )
        warnings += tuple(w for e in moved if (w := mps_warning(e.pid, e.mps, e.mps_clients)) is not None)
        touched = self.touched
        if not self.cleans_gpus:
            seen = {g.index for g in touched}
            touched += tuple(GpuBefore(i, None, None, None) for e in moved for i in e.gpus if i not in seen)
        return replace(
            self,
            targets=targets,
            excluded=excluded,
            include_protected=include,
            warnings=tuple(w for w in warnings if w.kind != "nothing"),
            touched=touched,
        )

    @property
    def includable(self) -> tuple[Excluded, ...]:
        """Monitors the operator chose by name that the plan left out: they may be included, with a
        second, explicit confirmation. Never into a signal plan: the probe sends those to no monitor."""
        if self.signal is not None:
            return ()
        return tuple(e for e in self.excluded if e.chosen and e.can_include)

    # -- on the wire and on disk -------------------------------------------------------------

    def to_wire(self) -> dict[str, Any]:
        """The `plan` record for the probe (docs/PROTOCOL.md "Plans"); a `signal` plan's is a
        `signal` record (docs/PROTOCOL.md "Signal"), which a probe without it refuses."""
        if self.signal is not None:
            return {
                "type": "signal",
                "v": 1,
                "id": self.id,
                "operator": self.operator,
                "signal": self.signal,
                # No role: the probe checks this target as a job root's (no GPU needed, never
                # an init or a session) whatever it is.
                "targets": [{k: v for k, v in t.to_wire().items() if k != "role"} for t in self.targets],
            }
        return {
            "type": "plan",
            "v": 1,
            "id": self.id,
            "operator": self.operator,
            "scope": "processes" if not self.cleans_gpus else ("host" if self.scope == "host" else "gpus"),
            # Job roots are signalled first (role "root"); older probes ignore the roles.
            "targets": [t.to_wire() for t in self.targets],
            "sweep": [t.to_wire() for t in self.sweep] if self.sweep_included else [],
            "gpus": list(self.gpu_indexes),
            "ghosts": list(self.ghosts),
            "include_protected": list(self.include_protected),
            "signals": list(self.signals),
            "term_timeout": self.term_timeout,
            "verify_timeout": self.verify_timeout,
        }

    def describe(self) -> dict[str, Any]:
        """Everything in plain JSON types (for `--json`, the audit log and tests)."""
        return {
            "id": self.id,
            "host": self.host,
            "operator": self.operator,
            "scope": self.scope,
            "proves": self.proves,
            "gpus": [g.describe() for g in self.gpus],
            "touched": [g.describe() for g in self.touched],
            "ghosts": list(self.ghosts),
            "targets": [t.describe() for t in self.targets],
            "sweep": [t.describe() for t in self.sweep],
            "sweep_included": self.sweep_included,
            "excluded": [e.describe() for e in self.excluded],
            "warnings": [
                {"kind": w.kind, "message": w.said(STOP_JOB_FLAG), "pid": w.pid, "job": w.job}
                for w in self.warnings
            ],
            "stages": list(self.stages),
            "signals": list(self.signals),
            "term_timeout": self.term_timeout,
            "verify_timeout": self.verify_timeout,
            "include_protected": list(self.include_protected),
            "title": self.title,
            "signal": self.signal,
            "mig": [i.label for i in self.instances],
            "jobs": [
                dict(j.describe(), targets=[t.pid for t in self.job_targets(j)], where=j.where)
                for j in self.jobs
            ],
        }

    def pids_allowed(self) -> set[int]:
        """The PIDs a verdict may name as the plan's own (confirmed targets and the sweep)."""
        return {t.pid for t in self.targets} | {t.pid for t in self.sweep}


def sweep_warning(processes: int) -> PlanWarning:
    """The warning of a plan that leaves its unattributed holders (the sweep) alone."""
    return PlanWarning(
        "sweep-off",
        f"unattributed holders not included: {count_does(processes, 'process', 'holds', 'processes')} "
        "/dev/nvidia* with no link to a GPU (the sweep adds them)",
    )
