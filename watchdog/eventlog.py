"""The job's event stream: ``events.jsonl`` (the public contract, README "Events") plus other sinks.

``EventLog.emit`` appends one JSON object per line and flushes it, then hands the same dict to
every extra sink (MQTT, ...). A failing sink is counted and reported, never allowed to stop the job.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import IO, Any, Protocol

from neuron_watch.events import JobEvent

log = logging.getLogger("neuron_watch")


class EventSink(Protocol):
    def emit(self, event: dict[str, Any]) -> None: ...

    def close(self, timeout: float = 5.0) -> None: ...


class EventLog:
    """Writes events to ``path`` (JSONL) and to extra sinks."""

    def __init__(self, path: str, wall: Callable[[], float] = time.time) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self._f: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._wall = wall
        self.sinks: list[EventSink] = []
        self.sink_failures = 0
        self.history: list[dict[str, Any]] = []

    def emit(self, event: str, generation: int, at: float | None = None, **fields: Any) -> dict[str, Any]:
        """Append one event. ``at``: its wall time when it is not now (a ``progress`` event is
        dated by the line that showed the step, however late it is sent)."""
        record = JobEvent(event, generation, self._wall() if at is None else at, fields).to_dict()
        self._reopen_if_moved()
        self._f.write(json.dumps(record, default=str) + "\n")
        self._f.flush()
        self.history.append(record)
        for sink in self.sinks:
            try:
                sink.emit(record)
            except Exception as exc:  # a sink's bug must not kill the watchdog; it is counted
                self.sink_failures += 1
                log.warning("event sink %s failed: %s", type(sink).__name__, exc)
        return record

    def _reopen_if_moved(self) -> None:
        """Write to the file now at ``path``: deleted or rotated away (logrotate's rename, an
        operator's ``rm``), the old descriptor would swallow every later event (issue 16, #10)."""
        try:
            now = os.stat(self.path)
            ours = os.fstat(self._f.fileno())
            if (now.st_dev, now.st_ino) == (ours.st_dev, ours.st_ino):
                return
        except FileNotFoundError:
            pass
        except OSError:
            return  # cannot tell: keep the descriptor we have
        try:
            fresh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        except OSError as exc:  # the run dir itself is gone: keep writing where we were
            log.warning("events.jsonl was moved or deleted and cannot be made again (%s)", exc)
            return
        old, self._f = self._f, fresh
        with contextlib.suppress(OSError):
            old.close()
        log.warning("events.jsonl was moved or deleted; continuing in a new %s", self.path)

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                self.sink_failures += 1
                log.warning("event sink %s failed to close: %s", type(sink).__name__, exc)
        self._f.close()


def write_json_atomic(path: str, data: Any) -> None:
    """Write JSON to ``path`` via a temp file and rename (readers never see half a file)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
        f.write("\n")
    os.replace(tmp, path)
