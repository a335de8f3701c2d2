"""``--notify URL``: a short JSON message POSTed on an incident, a give-up and the end of the job.

    sink = NotifySink(url, job_id)       # a thread of its own; nothing is sent yet
    coord.events.attach(sink)            # every event; only those of NOTIFIED become messages
    ...
    sink.close(timeout=5.0)              # what is queued gets until then; the rest is counted

The payload is what a chat webhook takes (``{"text": ...}``: Slack's and Mattermost's incoming
webhooks, Google Chat's, Teams' workflows) plus the facts as fields, for a program to read::

    {"text": "neuron-watch job j-7: incident 1: collective_hang, culprit n0 rank 2 (generation 0)",
     "job_id": "j-7", "event": "incident", "generation": 0, "time": "2026-...Z",
     "label": "collective_hang", "culprit": {"node": "n0", "rank": 2}, "incident": 1, ...}

The event loop only puts the message in a bounded queue (:data:`QUEUE_SIZE`; a full queue drops the
newest and counts it). A thread POSTs them in order, each retried with tenacity (explicit stop and
wait, a log line before each wait) while the failure is one a retry can fix (no answer, a 5xx, a
429). A receiver that is down costs the job nothing: the messages fail, are counted, and the end of
the run says so on the console. A webhook URL holds its secret in its path or user info, so it is
never shown: logs name only its scheme and host.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from neuron_watch.redact import mask_value, shown_url

log = logging.getLogger("neuron_watch")

#: the events that become a message
NOTIFIED = frozenset({"incident", "gave_up", "job_finished"})
QUEUE_SIZE = 100
ATTEMPTS = 4
#: one message gets at most this long, retries included
MESSAGE_DEADLINE = 30.0
HTTP_TIMEOUT = 5.0


def message(event: Mapping[str, Any], job_id: str) -> dict[str, Any] | None:
    """The message for ``event``, or None when it is not one of :data:`NOTIFIED`. Pure."""
    name = event.get("event")
    if name not in NOTIFIED:
        return None
    gen = event.get("generation")
    culprit = event.get("culprit")
    who = (f", culprit {culprit.get('node')} rank {culprit.get('rank')}" if isinstance(culprit, Mapping) else "")
    if name == "incident":
        text = f"incident {event.get('incident')}: {event.get('label')}{who} (generation {gen})"
    elif name == "gave_up":
        text = f"gave up after {event.get('label')}: {event.get('reason')}"
    else:
        text = (f"job {event.get('state')}, exit code {event.get('exit_code')}, {event.get('restarts')} restart(s)"
                + (f", last step {event['last_step']}" if event.get("last_step") is not None else ""))
    keep = ("label", "culprit", "incident", "reason", "state", "exit_code", "restarts", "last_step")
    out: dict[str, Any] = {"text": f"neuron-watch job {job_id}: {text}", "job_id": job_id, "event": name,
                           "generation": gen, "time": event.get("time")}
    out.update({k: event[k] for k in keep if k in event})
    masked: dict[str, Any] = mask_value(out)  # type: ignore[assignment]  # a dict in, a dict out
    return masked


def is_retryable(exc: BaseException) -> bool:
    """A retry may help: no answer (refused, reset, timed out), a server error, too many requests."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500 or exc.code == 429
    return isinstance(exc, (urllib.error.URLError, ConnectionError, TimeoutError))


class NotifySink:
    """An event sink that POSTs :func:`message` of the notified events to ``url``, from a thread."""

    def __init__(self, url: str, job_id: str, post: Callable[[str, bytes], None] | None = None) -> None:
        self.url = url
        self.shown = shown_url(url)
        self.job_id = job_id
        self._post = post or _post
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_SIZE)
        self._stop = threading.Event()
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="neuron-watch-notify", daemon=True)
        self._thread.start()

    def emit(self, event: dict[str, Any]) -> None:
        msg = message(event, self.job_id)
        if msg is None:
            return
        try:
            self._queue.put_nowait(msg)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            msg = self._queue.get()
            if msg is None:
                return
            body = json.dumps(msg).encode()
            try:
                self._retrying()(self._post, self.url, body)
                self.sent += 1
            except Exception as exc:
                self.failed += 1
                log.warning("notify %s: a %s message was not delivered: %s", self.shown, msg["event"],
                            _why(exc))

    def _retrying(self) -> Retrying:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            log.info("notify %s: attempt %d failed (%s); retrying in %.1fs", self.shown, state.attempt_number,
                     _why(exc), wait)

        return Retrying(stop=stop_after_attempt(ATTEMPTS) | stop_after_delay(MESSAGE_DEADLINE),
                        wait=wait_exponential(multiplier=0.5, min=0.5, max=5.0),
                        retry=retry_if_exception(is_retryable), before_sleep=before_sleep,
                        sleep=self._pause, reraise=True)

    def _pause(self, seconds: float) -> None:
        """tenacity's wait between attempts, cut short by :meth:`close`."""
        self._stop.wait(seconds)

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued for up to ``timeout`` seconds, then stop; report what was not sent."""
        deadline = time.monotonic() + timeout
        with contextlib.suppress(queue.Full):  # a queue still full at the deadline: its messages are unsent
            self._queue.put(None, timeout=timeout)
        self._thread.join(max(0.0, deadline - time.monotonic()))
        self._stop.set()  # a retry still waiting gives up now
        self._thread.join(1.0)
        unsent = sum(1 for m in list(self._queue.queue) if m is not None)
        if self.failed or self.dropped or unsent:
            log.warning("notify %s: %d message(s) sent, %d failed, %d dropped (queue full), %d unsent at exit",
                        self.shown, self.sent, self.failed, self.dropped, unsent)
        else:
            log.info("notify %s: %d message(s) sent", self.shown, self.sent)


def _why(exc: BaseException | None) -> str:
    """An error without the URL (urllib's messages may quote it)."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return f"{type(exc.reason).__name__}: {exc.reason}" if isinstance(exc.reason, BaseException) else "no answer"
    return type(exc).__name__ if exc is not None else "?"


def _post(url: str, body: bytes) -> None:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp:
        resp.read()
