"""A host read without a probe (its series in a Prometheus: no holders, no actions) opened over SSH.

The front end that built the fleet hands the app one opener per such host (`GpuTuiApp(over_ssh=...)`):
it adds the same host, reached over SSH through the user's ssh_config, to the fleet beside the first,
and gives the name it is shown under ("gpu01 (ssh)"), or raises ValueError saying why it cannot. The
UI reaches no transport itself: it only calls the opener, then says how the connection went, once,
when the new host is first live or down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeGuard

from gputui.fleet.session import DOWN, LIVE, HostView
from gputui.model.textsafe import printable

Opener = Callable[[], str]  # adds the host over SSH to the fleet (once); the name it is shown under


class OverSsh:
    """The openers, and the hosts opened whose connection has not been said yet."""

    def __init__(self, openers: Mapping[str, Opener]) -> None:
        self.openers = openers
        self.waiting: dict[str, str] = {}  # the SSH host -> the host it opens

    def offers(self, host: str | None) -> TypeGuard[str]:
        return host is not None and host in self.openers

    def open(self, host: str) -> tuple[str | None, str]:
        """(the SSH host, or None when it cannot be opened; the line that says so)."""
        try:
            twin = self.openers[host]()
        except ValueError as exc:
            return None, f"{printable(host)} cannot be opened over SSH: {printable(str(exc))}"
        self.waiting[twin] = host
        return twin, (
            f"{printable(host)} is read from Prometheus (no holders, no actions): "
            f"opening it over SSH as {printable(twin)}, through your ssh_config"
        )

    def settled(self, views: Iterable[HostView]) -> list[tuple[str, bool]]:
        """The lines to say of hosts opened that are now live (True) or down (False), each once."""
        said: list[tuple[str, bool]] = []
        for view in views:
            host = self.waiting.get(view.name)
            if host is None or view.status not in (LIVE, DOWN):
                continue
            del self.waiting[view.name]
            if view.status == LIVE:
                said.append((f"{printable(view.name)}: open over SSH, with holders and actions", True))
            else:
                why = printable(view.detail or view.reason or "down")
                said.append((f"{printable(host)} cannot be opened over SSH: {why}", False))
        return said
