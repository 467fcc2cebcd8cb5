"""The one interface every transport gives the fleet: a bidirectional stream of protocol records."""

from __future__ import annotations

from typing import Any, Protocol


class TransportError(Exception):
    """A link could not be made or broke. `reason` is a short code the UI turns into words.

    Codes: unreachable, auth-failed, host-key-unknown, host-key-changed, no-python, probe-crashed,
    passphrase-needed, timeout, closed.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Link(Protocol):
    """One probe session. Opened once; a broken link is replaced by a new one (fleet reconnects).

    After open(), `hello` holds the probe's hello record; when recv() has returned None because the
    stream broke, `failure` says why (None for an orderly end)."""

    hello: dict[str, Any] | None
    failure: TransportError | None

    async def open(self) -> None:
        """Start the probe and wait for its `hello`; raise TransportError when that fails."""

    async def recv(self) -> dict[str, Any] | None:
        """The next record after the hello (decoded and validated); None at end of stream.

        Lines that fail to decode are returned as `{"type": "error", ...}` records, never raised."""

    async def send(self, message: dict[str, Any]) -> None:
        """Send one record to the probe."""

    async def close(self) -> None:
        """Stop the probe and release everything; idempotent."""
