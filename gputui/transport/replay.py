"""A link that plays back recorded probe records: fixed data for snapshots, screenshots and UI tests.

Real probes report real PIDs, times and sparkline histories that differ on every run; a recording
(one JSON record per line, exactly what a probe wrote on stdout) does not. `ReplayLink` hands the
fleet the recorded `hello`, then the samples, then waits forever, so the host keeps its last state.
Recorded `detail` records are not played: they answer the app's `detail` requests for their (pid,
start time), with the request's id; a request for another process is answered `exited`.
Nothing here reads the clock: stale detection stays the fleet's job (give the fleet an interval
longer than the test when a host must stay live after the recording ends).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gputui.transport.base import TransportError


def load_recording(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSONL recording (blank lines skipped). Raises ValueError naming the line."""
    records: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line: {exc}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number}: a record must be a JSON object")
            records.append(record)
    return records


class ReplayLink:
    """Implements the `Link` protocol over a list of records.

    The first `hello` is sent once; the other records follow in order, at `rate` records per second
    (None: as fast as the fleet reads them). With `loop`, the records after the hello repeat forever,
    their `seq` counting on so the app sees new samples. Records the app sends are kept in `sent`.
    """

    def __init__(
        self, records: Iterable[dict[str, Any]], loop: bool = False, rate: float | None = None
    ) -> None:
        records = list(records)
        hellos = [r for r in records if r.get("type") == "hello"]
        self.hello = hellos[0] if hellos else None
        self.records = [r for r in records if r.get("type") not in ("hello", "detail")]
        self.details = {(r.get("pid"), r.get("start_time")): r for r in records if r.get("type") == "detail"}
        self._answers: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.loop = loop
        self.rate = rate
        self.sent: list[dict[str, Any]] = []
        self._last_seq = max((r["seq"] for r in self.records if isinstance(r.get("seq"), int)), default=0)
        self._position = 0
        self._seq_offset = 0
        self._hello_sent = False
        self._opened = False
        self._closed = asyncio.Event()

    async def open(self) -> None:
        if self.hello is None:
            raise TransportError("probe-crashed", "the recording has no hello record")
        self._opened = True

    async def recv(self) -> dict[str, Any] | None:
        if not self._opened or self._closed.is_set():
            return None
        if not self._hello_sent:
            self._hello_sent = True
            return dict(self.hello or {})
        if not self._answers.empty():
            return self._answers.get_nowait()
        if self._position >= len(self.records):
            if not self.loop or not self.records:
                return await self._answer_or_close()  # hold the last state until the fleet closes the link
            self._seq_offset += self._last_seq
            self._position = 0
        # Even at full speed, yield to the event loop between records so the UI keeps running.
        await asyncio.sleep(1.0 / self.rate if self.rate else 0)
        record = self.records[self._position]
        self._position += 1
        if self._seq_offset and isinstance(record.get("seq"), int):
            record = dict(record, seq=record["seq"] + self._seq_offset)
        return record

    async def _answer_or_close(self) -> dict[str, Any] | None:
        answer = asyncio.ensure_future(self._answers.get())
        closed = asyncio.ensure_future(self._closed.wait())
        done, pending = await asyncio.wait({answer, closed}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        return answer.result() if answer in done else None

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message.get("type") == "detail":
            key = (message.get("pid"), message.get("start_time"))
            recorded = self.details.get(key)
            answer = (
                dict(recorded) if recorded is not None else {"type": "detail", "v": 1, "result": "exited"}
            )
            answer.update(id=message.get("id"), pid=key[0], start_time=key[1])
            if recorded is None:
                answer["message"] = "no such process: it has exited"
            self._answers.put_nowait(answer)

    async def close(self) -> None:
        self._closed.set()
