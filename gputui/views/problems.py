"""The fleet at its real size: what is wrong where, hosts by group, GPUs by user. Pure:
the dashboard's fleet table, host list and user view draw what these functions say, and the filter
language (gputui/views/filter.py) matches the `Subject`s built here.

Problems first (docs/FLEET_VIEW.md "Problems first"): each host and GPU gets its problems, each with
a rank; the fleet table sorts by the worst (lowest rank), then by the host's place and the GPU's
index. In rank order:
  down, stale (the host: its numbers are old), no GPU (no driver), a GPU error, ECC trouble
  (uncorrected errors, a row remap pending or failed, a page retirement pending), ghost, orphaned,
  outside and other unaccounted memory, idle holders, throttling (thermal, hardware slowdown, power
  brake), and GPUs that differ from their siblings (model, memory size, settings; a host's driver
  that differs from its group's).
A host with none, and live, is healthy: the fleet table folds the healthy hosts of a group into one
line. A host's group is what its source says (`HostView.group`: the config's [groups]), else its
name without the number at its end (`gpu017` -> `gpu`, `node-12` -> `node`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..fleet.idle import ProcKey, span
from ..fleet.session import DOWN, LIVE, STALE, HostView
from ..model import IDLE_SLACK, Gpu, Preflight, Proc, Sample
from ..text.units import fmt_bytes, fmt_memory
from .filter import Subject
from .readiness import preflight_flags

# Problem states in rank order: the fleet table shows the first first.
RANKS: dict[str, int] = {
    state: rank
    for rank, state in enumerate(
        (
            "down", "stale", "no-gpu", "error", "ecc", "ghost", "orphaned", "outside", "unaccounted",
            "idle-held", "throttle", "mismatch",
        )
    )
}  # fmt: skip
HEALTHY = len(RANKS)  # the rank of a GPU with no problem
# Clock-event reasons that mean the GPU is held down (heat, a hardware slowdown, a power brake);
# the others (the power cap under load, application clocks, sync boost) are how GPUs run.
THROTTLE_PROBLEMS = ("hw-slowdown", "hw-thermal", "sw-thermal", "hw-power-brake")
_TRAILING_NUMBER = re.compile(r"^(.*?[^0-9])[-_.]?[0-9]+$")


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem of a host or a GPU: its state (a fleetfilter.STATES name), words for a cell,
    and a shorter form for a narrow one."""

    state: str
    words: str
    short: str = ""
    size: int | None = None  # bytes, for a problem of memory: its words are the state and this size

    @property
    def rank(self) -> int:
        return RANKS.get(self.state, HEALTHY)

    def text(self, exact: bool = False) -> str:
        """Its words, a size in them in GiB or in exact MiB (the dashboard's `m`)."""
        if self.size is None:
            return self.words
        return f"{self.state} {fmt_memory(self.size, exact)}"


def default_group(name: str) -> str:
    """A host's group by its name: the name without the number at its end and the separator before
    it (`gpu017` -> `gpu`, `node-12` -> `node`, `a100-03` -> `a100`); a name that does not end in a
    number is its own group."""
    match = _TRAILING_NUMBER.match(name)
    return match.group(1).rstrip("-_.") or name if match else name


def group_of(view: HostView) -> str:
    """The group a host belongs to: its source's (the config's [groups]), else by its name."""
    return view.group or default_group(view.name)


# -- problems ------------------------------------------------------------------------------------


def host_problems(view: HostView, group_driver: str | None = None) -> list[Problem]:
    """What is wrong with the host itself. `group_driver`: the driver most of its group runs (a host
    that differs is a mismatch). A host trying again after it went down is down (`shown_status`)."""
    out: list[Problem] = []
    facts = view.facts
    if view.shown_status == DOWN:
        why = view.down_why
        out.append(Problem("down", f"down: {why}" if why else "down", "down"))
    elif view.status == STALE:
        out.append(Problem("stale", "stale", "stale"))
    if facts is not None and facts.error_code:
        out.append(Problem("no-gpu", facts.error_code, "no GPU"))
    driver = facts.driver_version if facts is not None else None
    if group_driver and driver and driver != group_driver:
        out.append(Problem("mismatch", f"driver {driver} (group: {group_driver})", f"driver {driver}"))
    return out


def gpu_problems(
    view: HostView,
    sample: Sample,
    gpu: Gpu,
    settings: Mapping[int, tuple[str, ...]] | None = None,
    siblings: Mapping[int, str] | None = None,
    idle: Mapping[ProcKey, float] | None = None,
) -> list[Problem]:
    """What is wrong with one GPU, worst first. `settings`: what its preflight reading says that
    differs from its siblings (`sibling_settings`); `siblings`: how its model or memory differs
    (`sibling_models`); `idle`: the host's idle holders with their seconds (HostIdle.durations)."""
    out = severe_problems(view, gpu)
    account = gpu.accounting
    if account is not None:
        other = sum(getattr(account, part) for part in ("container", "unreported", "hidden", "unknown"))
        for state, size in (
            ("ghost", account.ghost),
            ("orphaned", account.orphaned),
            ("outside", account.outside),
            ("unaccounted", other),
        ):
            if size > IDLE_SLACK:
                out.append(Problem(state, f"{state} {fmt_bytes(size)}", state, size=size))
    if idle:
        held = [
            s for p in sample.processes if gpu.index in p.gpu_memory and (s := idle.get(p.key)) is not None
        ]
        if held:
            more = f" ×{len(held)}" if len(held) > 1 else ""
            out.append(Problem("idle-held", f"idle {span(max(held))}{more}", f"idle {span(max(held))}"))
    preflight = view.preflight.get(gpu.index)
    if preflight is not None and preflight.throttle:
        serious = [r for r in preflight.throttle if r in THROTTLE_PROBLEMS]
        if serious:
            out.append(Problem("throttle", f"throttle: {', '.join(serious)}", "throttle"))
    model = (siblings or {}).get(gpu.index)
    differs = [*([model] if model else []), *(settings or {}).get(gpu.index, ())]
    if differs:
        what = differs[0].split(" ", 1)[0]  # model, memory, persistence, compute, MIG, clocks, power, PCIe
        out.append(
            Problem(
                "mismatch",
                f"differs: {differs[0]}" + (f" +{len(differs) - 1}" if len(differs) > 1 else ""),
                f"differs: {what}",
            )
        )
    return sorted(out, key=lambda p: p.rank)


def severe_problems(view: HostView, gpu: Gpu) -> list[Problem]:
    """The GPU's problems at rank "ecc" or worse: an error, memory trouble (`ecc_problems`). Such a
    GPU wants a reset or a look, not a job: it is never free (`gpu_free`), whoever holds it."""
    out = [Problem("error", f"error: {gpu.error}", "error")] if gpu.error else []
    return out + ecc_problems(view.preflight.get(gpu.index))


def gpu_free(view: HostView, gpu: Gpu) -> bool:
    """Free for the next job: nothing holds it, its memory is at its baseline (Sample.gpu_is_free),
    and it has no problem at rank "ecc" or worse (`severe_problems`). Whether the host is live is
    the caller's to add: a host that is not live shows what its last sample had."""
    sample = view.sample
    return sample is not None and sample.gpu_is_free(gpu) and not severe_problems(view, gpu)


def ecc_problems(preflight: Preflight | None) -> list[Problem]:
    """Memory trouble the driver reports: uncorrected ECC errors, a failed or pending row remap, a
    pending page retirement (a reset applies the last two)."""
    if preflight is None:
        return []
    words, short = [], []
    if preflight.ecc_uncorrected:
        words.append(f"{preflight.ecc_uncorrected} ECC uncorrected")
        short.append(f"ECC {preflight.ecc_uncorrected}")
    if preflight.remap_failed:
        words.append("row remap failed")
        short.append("remap failed")
    elif preflight.remap_pending:
        words.append("row remap pending")
        short.append("remap")
    if preflight.retired_pending:
        words.append("retirement pending")
        short.append("retire")
    return [Problem("ecc", ", ".join(words), short[0])] if words else []


_NOT_SETTINGS = ("throttling", "ECC", "remap", "retirement")  # preflight_flags' problems, said above


def sibling_settings(preflights: Mapping[int, Preflight]) -> dict[int, tuple[str, ...]]:
    """Settings of a GPU that differ from most of its siblings' (persistence, compute mode, MIG,
    clocks, power limit, PCIe link: gputui.views.readiness.preflight_flags), per GPU index."""
    out: dict[int, tuple[str, ...]] = {}
    for index, flags in preflight_flags(preflights).items():
        kept = tuple(f for f in flags if not any(word in f for word in _NOT_SETTINGS))
        if kept:
            out[index] = kept
    return out


def sibling_models(gpus: Sequence[Gpu]) -> dict[int, str]:
    """GPUs whose model or memory size differs from most of the host's (a card swapped, a GPU that
    fell back to a smaller memory), per index: `model NVIDIA A100 (others: NVIDIA H200)`."""
    out: dict[int, str] = {}
    readers: tuple[tuple[str, Callable[[Gpu], str | None]], ...] = (
        ("model", lambda g: g.name),
        ("memory", lambda g: fmt_bytes(g.memory_total) if g.memory_total is not None else None),
    )
    for what, value_of in readers:
        values = {g.index: value_of(g) for g in gpus if value_of(g) is not None}
        if len(values) < 2:
            continue
        common, times = Counter(values.values()).most_common(1)[0]
        if times * 2 <= len(values):
            continue  # no majority to differ from
        for index, value in values.items():
            if value != common and index not in out:
                out[index] = f"{what} {value} (others: {common})"
    return out


def majority(values: Iterable[str | None]) -> str | None:
    """The value most of `values` have (more than half of those known), else None."""
    known = [v for v in values if v]
    if len(known) < 2:
        return None
    value, times = Counter(known).most_common(1)[0]
    return value if times * 2 > len(known) else None


@dataclass
class HostState:
    """One host as the fleet view sees it: its problems, its GPUs' problems, its states."""

    host: str
    group: str
    problems: list[Problem] = field(default_factory=list)  # the host's own
    gpus: dict[int, list[Problem]] = field(default_factory=dict)  # by GPU index
    idle: dict[ProcKey, float] = field(default_factory=dict)  # its idle holders' seconds

    @property
    def worst(self) -> Problem | None:
        found = [*self.problems, *(p for ps in self.gpus.values() for p in ps)]
        return min(found, key=lambda p: p.rank) if found else None

    @property
    def troubled(self) -> bool:
        return bool(self.problems) or any(self.gpus.values())

    def gpu_worst(self, index: int) -> Problem | None:
        """The worst problem of GPU `index`, its host's included (a down host's GPUs are down)."""
        found = [*self.problems, *self.gpus.get(index, ())]
        return min(found, key=lambda p: p.rank) if found else None

    def gpu_count(self, index: int) -> int:
        return len(self.problems) + len(self.gpus.get(index, ()))


def host_state(
    view: HostView,
    idle_after: float,
    group_driver: str | None = None,
    settings: Mapping[int, tuple[str, ...]] | None = None,
    siblings: Mapping[int, str] | None = None,
    kept: dict[int, tuple[tuple[object, ...], tuple[Proc, ...], list[Problem]]] | None = None,
) -> HostState:
    """Everything wrong with `view` and each of its GPUs (from its latest sample, live or not).
    `settings`, `siblings`: `sibling_settings` and `sibling_models` of it, when the caller keeps
    them (they change only with a preflight reading or a GPU swapped). `kept`: each GPU's problems
    as last worked out, and what from; a GPU whose error, accounting, preflight reading, siblings
    and idle holders (their processes, the words of their time) are the same keeps them (a reading
    that moved is not a problem that changed: at a thousand hosts a second, this was most of the
    work)."""
    state = HostState(view.name, group_of(view), host_problems(view, group_driver))
    sample = view.sample
    if sample is None:
        return state
    state.idle = view.idle.durations(idle_after)
    if settings is None:
        settings = sibling_settings(view.preflight)
    if siblings is None:
        siblings = sibling_models(sample.gpus)
    # An idle holder's problem says for how long (minutes, then hours): the same words on the same
    # processes (the intake keeps the tuple while none changed) make the same problem.
    idle_words = tuple((key, span(seconds)) for key, seconds in state.idle.items())
    processes = sample.processes if state.idle else ()
    for gpu in sample.gpus:
        if kept is None:
            state.gpus[gpu.index] = gpu_problems(view, sample, gpu, settings, siblings, state.idle)
            continue
        values = (gpu.error, gpu.accounting, view.preflight.get(gpu.index), settings, siblings, idle_words)
        last = kept.get(gpu.index)
        if (
            last is not None
            and last[1] is processes
            and all(a is b or a == b for a, b in zip(last[0], values, strict=True))
        ):
            state.gpus[gpu.index] = last[2]
            continue
        problems = gpu_problems(view, sample, gpu, settings, siblings, state.idle)
        kept[gpu.index] = (values, processes, problems)
        state.gpus[gpu.index] = problems
    return state


# -- what the filter matches -----------------------------------------------------------------------


def host_states(view: HostView, state: HostState | None = None) -> frozenset[str]:
    """The states of the host itself: live/down/stale/connecting (as shown: a host that went down is
    down while it tries again), no-gpu, its problems'."""
    out = {view.shown_status}
    if state is not None:
        out |= {p.state for p in state.problems}
    if view.facts is not None and view.facts.error_code:
        out.add("no-gpu")
    return frozenset(out)


def gpu_subject(view: HostView, state: HostState, gpu: Gpu) -> Subject:
    """A fleet table row of one GPU: its host, its processes, its memory and states."""
    sample = view.sample
    procs = [p for p in sample.processes if gpu.index in p.gpus] if sample is not None else []
    states = set(host_states(view, state)) | {p.state for p in state.gpus.get(gpu.index, ())}
    if view.status == LIVE and sample is not None:
        states.add("free" if gpu_free(view, gpu) else "busy")
    states.add("problem" if state.gpu_worst(gpu.index) is not None else "healthy")
    idle = [state.idle[p.key] for p in procs if p.key in state.idle]
    return _rows_subject(
        view,
        state,
        states,
        procs,
        gpus=frozenset({gpu.index}),
        uuids=frozenset({gpu.uuid}) if gpu.uuid else frozenset(),
        models=(gpu.name,) if gpu.name else (),
        memory=gpu.memory_used,
        memory_total=gpu.memory_total,
        idle=max(idle) if idle else None,
        util=gpu.util_gpu,
        temp=gpu.temperature,
    )


def host_subject(view: HostView, state: HostState) -> Subject:
    """A host as one row (the host list; a host with no GPU to list): the union of its GPUs'."""
    sample = view.sample
    procs = sample.processes if sample is not None else ()
    states = set(host_states(view, state)) | {p.state for ps in state.gpus.values() for p in ps}
    states.add("problem" if state.troubled else "healthy")
    used = [g.memory_used for g in sample.gpus if g.memory_used is not None] if sample else []
    total = [g.memory_total for g in sample.gpus if g.memory_total is not None] if sample else []
    return _rows_subject(
        view,
        state,
        states,
        procs,
        gpus=frozenset(g.index for g in sample.gpus) if sample else frozenset(),
        uuids=frozenset(g.uuid for g in sample.gpus if g.uuid) if sample else frozenset(),
        models=tuple(dict.fromkeys(g.name for g in sample.gpus if g.name)) if sample else (),
        memory=sum(used) if used else None,
        memory_total=sum(total) if total else None,
        idle=max(state.idle.values()) if state.idle else None,
    )


def _rows_subject(
    view: HostView,
    state: HostState,
    states: set[str],
    procs: Sequence[Proc],
    *,
    gpus: frozenset[int],
    uuids: frozenset[str],
    models: tuple[str, ...],
    memory: int | None,
    memory_total: int | None,
    idle: float | None,
    util: float | None = None,
    temp: float | None = None,
) -> Subject:
    """A row over one or more GPUs (a GPU, a host): who and what its processes are, with the GPUs'
    own figures."""
    return Subject(
        host=view.name,
        group=state.group,
        states=frozenset(states),
        users=frozenset(p.user for p in procs if p.user),
        uids=frozenset(p.uid for p in procs if p.uid is not None),
        kinds=frozenset(p.kind for p in procs),
        gpus=gpus,
        uuids=uuids,
        models=models,
        commands=tuple(" ".join(p.command) for p in procs if p.command),
        pids=frozenset(p.pid for p in procs),
        jobs=frozenset(p.job for p in procs if p.job),
        containers=tuple(p.container for p in procs if p.container),
        memory=memory,
        memory_total=memory_total,
        util=util,
        temp=temp,
        idle=idle,
        words=tuple(p.name for p in procs if p.name),
    )


def proc_subject(
    view: HostView, group: str, proc: Proc, gpu: int | None, idle: float | None, idle_after: float
) -> Subject:
    """A process table row: its user, kind, command, its memory (on GPU `gpu`, or on all its GPUs),
    its SM utilization; `state:idle-held` when it is an idle holder."""
    states = set(host_states(view))
    if idle is not None and idle >= idle_after:
        states.add("idle-held")
    memory = (proc.gpu_memory.get(gpu) if gpu is not None else proc.gpu_bytes) if proc.gpu_memory else None
    return Subject(
        host=view.name,
        group=group,
        states=frozenset(states),
        users=frozenset({proc.user}) if proc.user else frozenset(),
        uids=frozenset({proc.uid}) if proc.uid is not None else frozenset(),
        kinds=frozenset({proc.kind}),
        gpus=frozenset(proc.gpus),
        uuids=_uuids(view, proc.gpus),
        commands=(" ".join(proc.command),) if proc.command else (),
        pids=frozenset({proc.pid}),
        jobs=frozenset({proc.job}) if proc.job else frozenset(),
        containers=(proc.container,) if proc.container else (),
        memory=memory,
        util=proc.sm_util(gpu),
        idle=idle,
        words=(proc.name,) if proc.name else (),
    )


def _uuids(view: HostView, indexes: Iterable[int]) -> frozenset[str]:
    """The UUIDs of the GPUs `indexes` of `view`'s sample (`gpu:GPU-5a1b` on a process)."""
    sample = view.sample
    if sample is None or not indexes:
        return frozenset()
    wanted = set(indexes)
    return frozenset(g.uuid for g in sample.gpus if g.index in wanted and g.uuid)


# -- GPUs and memory per user --------------------------------------------------------------------


@dataclass
class UserUse:
    """What one user holds across the fleet (live hosts): GPUs, memory, processes, idle holders."""

    user: str
    hosts: set[str] = field(default_factory=set)
    gpus: set[tuple[str, int]] = field(default_factory=set)
    memory: int = 0
    processes: int = 0
    jobs: set[tuple[str, str]] = field(default_factory=set)
    idle_holders: int = 0
    idle_memory: int = 0
    longest_idle: float | None = None


NO_USER = "?"  # a process whose user the probe could not read


def user_usage(views: Iterable[HostView], idle_after: float) -> tuple[list[UserUse], int]:
    """Every user's GPUs, memory and processes over the live hosts, most memory first; and how
    many hosts were left out (not live: their numbers are old). Counted: processes NVML lists with
    memory (users) and hidden holders attributed to a GPU; a ghost's memory belongs to nobody."""
    users: dict[str, UserUse] = {}
    left_out = 0
    for view in views:
        sample = view.sample
        if view.status != LIVE or sample is None:
            left_out += 1
            continue
        idle = view.idle.durations(idle_after)
        for proc in sample.processes:
            if proc.kind not in ("user", "hidden") or not proc.gpus or proc.state == "Z":
                continue
            use = users.get(proc.user or NO_USER)
            if use is None:
                use = users[proc.user or NO_USER] = UserUse(proc.user or NO_USER)
            use.hosts.add(view.name)
            use.gpus.update((view.name, i) for i in proc.gpus)
            use.memory += proc.gpu_bytes
            use.processes += 1
            if proc.job:
                use.jobs.add((view.name, proc.job))
            seconds = idle.get(proc.key)
            if seconds is not None:
                use.idle_holders += 1
                use.idle_memory += proc.gpu_bytes
                use.longest_idle = max(seconds, use.longest_idle or 0.0)
    ranked = sorted(users.values(), key=lambda u: (-u.memory, -len(u.gpus), u.user))
    return ranked, left_out


# -- the whole fleet's problems and folds ---------------------------------------------------------

FOLD_AT = 2  # healthy hosts a group needs before they are folded into one line


class FleetProblems:
    """Every host's problems, kept up to date host by host (only the hosts that changed are worked
    out again), and which groups fold their healthy hosts into one line: a group with FOLD_AT or
    more of them, unless the operator unfolded it. The fleet table and the host list share it."""

    def __init__(self) -> None:
        self.states: dict[str, HostState] = {}
        self.unfolded: set[str] = set()  # groups the operator unfolded
        self._groups: dict[str, list[str]] = {}  # group -> its hosts, in the fleet's order
        self._group_of: dict[str, str] = {}
        self._views: dict[str, HostView] = {}
        self._folds: dict[str, bool] = {}  # group -> whether it folds, as of the last update
        self._order: dict[str, int] = {}  # group -> its place
        self._drivers: dict[str, str | None] = {}  # host -> its driver, as last seen
        self._majority: dict[str, str | None] = {}  # group -> the driver most of its hosts run
        self._healthy: dict[str, set[str]] = {}  # group -> its healthy hosts, as of the last update
        self._kept: dict[str, dict[int, tuple[tuple[object, ...], tuple[Proc, ...], list[Problem]]]] = {}
        self._sibling_cache: dict[
            str,
            tuple[
                tuple[Preflight, ...], tuple[object, ...], Mapping[int, tuple[str, ...]], Mapping[int, str]
            ],
        ] = {}

    def group(self, host: str) -> str:
        return self._group_of.get(host, default_group(host))

    def members(self, group: str) -> list[str]:
        return self._groups.get(group, [])

    @property
    def groups(self) -> list[str]:
        """Every group, in the order of their first host."""
        return list(self._groups)

    def group_index(self, group: str) -> int:
        """Where `group` comes among the groups (the order of their first hosts)."""
        return self._order.get(group, len(self._order))

    def update(
        self, touched: Iterable[HostView], everyone: Sequence[HostView], idle_after: float
    ) -> set[str]:
        """Work out the problems of `touched` again; return the groups whose folding (or usual driver)
        changed: every host of those needs drawing again, not only the touched ones."""
        if len(self._views) != len(everyone) or any(self._views.get(v.name) is not v for v in everyone[:1]):
            self._index(everyone)
        touched = list(touched)
        # The driver most of each group runs: counted again only for a group where a host's driver
        # changed (a hello), and then every host of it is judged again (it may differ now).
        moved = set()
        for view in touched:
            driver = view.facts.driver_version if view.facts is not None else None
            if self._drivers.get(view.name) != driver:
                self._drivers[view.name] = driver
                moved.add(self.group(view.name))
        names = {v.name for v in touched}
        changed = set()
        for group in moved:
            driver = majority(self._drivers.get(h) for h in self.members(group))
            if driver != self._majority.get(group):
                self._majority[group] = driver
                changed.add(group)  # every host of it drawn again
                touched += [
                    self._views[h] for h in self.members(group) if h not in names and h in self._views
                ]
        groups: set[str] = set()
        for view in touched:
            group = self.group(view.name)
            groups.add(group)
            self.states[view.name] = host_state(
                view,
                idle_after,
                self._majority.get(group),
                *self._siblings(view),
                kept=self._kept.setdefault(view.name, {}),
            )
            self._note_health(view.name, group)
        for group in groups:
            folds = self._group_folds(group)
            if folds != self._folds.get(group, False):
                changed.add(group)
            self._folds[group] = folds
        return changed

    def _siblings(self, view: HostView) -> tuple[Mapping[int, tuple[str, ...]], Mapping[int, str]]:
        """`sibling_settings` and `sibling_models` of `view`, worked out again only when its preflight
        readings (new objects: a sample carries one now and then) or its GPUs' models changed: at a
        thousand hosts a second, they were half of what this costs."""
        readings = tuple(view.preflight.values())
        models = tuple((g.name, g.memory_total) for g in view.sample.gpus) if view.sample is not None else ()
        kept = self._sibling_cache.get(view.name)
        if (
            kept is not None
            and kept[1] == models
            and len(kept[0]) == len(readings)
            and all(a is b for a, b in zip(kept[0], readings, strict=True))
        ):
            return kept[2], kept[3]
        settings = sibling_settings(view.preflight)
        siblings = sibling_models(view.sample.gpus) if view.sample is not None else {}
        self._sibling_cache[view.name] = (readings, models, settings, siblings)
        return settings, siblings

    def _index(self, everyone: Sequence[HostView]) -> None:
        self._views = {v.name: v for v in everyone}
        self._groups, self._group_of = {}, {}
        for view in everyone:
            group = group_of(view)
            self._group_of[view.name] = group
            self._groups.setdefault(group, []).append(view.name)
        self._order = {g: i for i, g in enumerate(self._groups)}
        self._healthy = {}
        for name in self.states:
            if name in self._views:
                self._note_health(name, self.group(name))

    def _note_health(self, host: str, group: str) -> None:
        healthy = self._healthy.setdefault(group, set())
        if self.healthy(host):
            healthy.add(host)
        else:
            healthy.discard(host)

    def healthy(self, host: str) -> bool:
        """Live, with GPUs, nothing wrong: what may go into its group's line."""
        view, state = self._views.get(host), self.states.get(host)
        if view is None or state is None or state.troubled or view.status != LIVE:
            return False
        return view.sample is not None and bool(view.sample.gpus)

    def _group_folds(self, group: str) -> bool:
        return group not in self.unfolded and len(self._healthy.get(group, ())) >= FOLD_AT

    def folded_members(self, group: str) -> list[str]:
        """The hosts folded into `group`'s line, in the fleet's order (none when it does not fold)."""
        if not self.folds(group):
            return []
        healthy = self._healthy.get(group, set())
        return [h for h in self.members(group) if h in healthy]

    def folds(self, group: str) -> bool:
        """Whether `group` folds its healthy hosts (as of the last update)."""
        return self._folds.get(group, False) and group not in self.unfolded

    def folded(self, host: str) -> bool:
        """Whether `host` is folded into its group's line."""
        return self.folds(self.group(host)) and self.healthy(host)

    def set_folded(self, group: str, folded: bool) -> None:
        """The operator folds (or unfolds) a group."""
        if folded:
            self.unfolded.discard(group)
        else:
            self.unfolded.add(group)
        self._folds[group] = self._group_folds(group)

    def troubled(self) -> int:
        """Hosts with a problem."""
        return sum(1 for s in self.states.values() if s.troubled)
