"""The job's event stream: ``events.jsonl`` (the public contract, README "Events") plus other sinks.

``EventLog.emit`` appends one JSON object per line and flushes it, then hands the same dict to
every extra sink (MQTT, ...). A failing sink is counted and reported, never allowed to stop the job;
so is a failing disk (:class:`~neuron_watch.iofaults.AppendFile`: the events are kept and written
when it takes writes again, and the sinks get them at once).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

from neuron_watch.events import EventKind, JobEvent
from neuron_watch.iofaults import AppendFile, IOHealth

log = logging.getLogger("neuron_watch")


class EventSink(Protocol):
    def emit(self, event: dict[str, Any]) -> None: ...

    def close(self, timeout: float = 5.0) -> None: ...


class EventLog:
    """Writes events to ``path`` (JSONL) and to extra sinks."""

    def __init__(self, path: str, wall: Callable[[], float] = time.time, health: IOHealth | None = None) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self.health = health or IOHealth()
        # whole lines: a full disk never leaves a torn last event (a reader would lose job_finished)
        self._f = AppendFile(path, self.health, reopen_if_moved=True, whole_lines=True)
        self._wall = wall
        self.sinks: list[EventSink] = []
        self.sink_failures = 0
        self.history: list[dict[str, Any]] = []

    def emit(self, event: EventKind | str, generation: int, at: float | None = None, **fields: Any) -> dict[str, Any]:
        """Append one event. ``at``: its wall time when it is not now (a ``progress`` event is
        dated by the line that showed the step, however late it is sent)."""
        name = event.value if isinstance(event, EventKind) else event  # the plain word, everywhere downstream
        record = JobEvent(name, generation, self._wall() if at is None else at, fields).to_dict()
        self.history.append(record)
        self._f.write(json.dumps(record, default=str) + "\n")
        self._f.flush()
        for sink in self.sinks:
            self._send(sink, record)
        return record

    def _send(self, sink: EventSink, record: dict[str, Any]) -> None:
        try:
            sink.emit(record)
        except Exception as exc:  # a sink's bug must not kill the watchdog; it is counted
            self.sink_failures += 1
            log.warning("event sink %s failed: %s", type(sink).__name__, exc)

    def attach(self, sink: EventSink) -> None:
        """Add a sink that gets every event of the job: those emitted before it was attached first
        (a coordinator announces itself as it is built, before its sinks are)."""
        for record in self.history:
            self._send(sink, record)
        self.sinks.append(sink)

    def flush(self) -> None:
        """Retry events the disk refused (no-op when none wait; at most every few seconds otherwise)."""
        self._f.flush()

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                self.sink_failures += 1
                log.warning("event sink %s failed to close: %s", type(sink).__name__, exc)
        self._f.close()
