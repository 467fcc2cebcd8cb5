"""How a plan kills (signals, timeouts): the options' one owner, apart from the plan itself so that
reading a config (its [kill] table) does not import the plan and the model, which the commands
scripts call import while the probe starts (gputui/transport/headstart.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..probe.common import DEFAULT_SIGNALS, MAX_TIMEOUT, SIGNAL_PLANS, TERM_TIMEOUT, VERIFY_TIMEOUT


class PlanError(ValueError):
    """The request cannot be planned (an unknown GPU index, say); the message says why."""


def seconds(value: float, what: str) -> float:
    """`value` as a timeout in seconds, or PlanError saying what is wrong with it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIMEOUT:
        raise PlanError(
            f"the {what} timeout must be a number of seconds in (0, {MAX_TIMEOUT:g}], not {value!r}"
        )
    return float(value)


@dataclass(frozen=True, slots=True)
class KillOptions:
    """How a plan kills: the signal sequence and its timeouts. The defaults live here (and in the
    probe's common module, which they come from); the config's [kill] table and the CLI flags
    override them, and the dialog can change them for one plan."""

    signals: str = DEFAULT_SIGNALS  # a key of SIGNAL_PLANS: "term", "int" or "kill"
    term_timeout: float = TERM_TIMEOUT
    verify_timeout: float = VERIFY_TIMEOUT

    def __post_init__(self) -> None:
        if self.signals not in SIGNAL_PLANS:
            raise PlanError(f"signals must be one of {', '.join(SIGNAL_PLANS)}, not {self.signals!r}")
        seconds(self.term_timeout, "term")
        seconds(self.verify_timeout, "verify")
