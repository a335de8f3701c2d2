"""Publish the job's events to an MQTT broker without ever slowing the watchdog down.

    sink = MqttSink(parse_mqtt_url(url), job_id="1234")
    sink.emit({"event": "job_started", "generation": 0, "time": "..."})   # never blocks
    ...
    sink.close(timeout=5.0)                                              # flush, then disconnect

Topics (``<prefix>`` comes from the URL's path, default ``neuron-watch``):

* ``<prefix>/<job-id>/<event>``: every event as JSON (the ``events.jsonl`` line plus ``job_id``), QoS 1.
* ``<prefix>/<job-id>/state``: the job's last state, retained, QoS 1:
  ``{"job_id", "state", "event", "generation", "time", ...}``. Its last-will value is
  ``{"state": "watchdog_lost", ...}``: the broker publishes it when this process dies (or loses
  the network) without disconnecting cleanly.

aiomqtt does not reconnect by itself, so a thread of our own runs an asyncio
loop with a connect-publish-reconnect cycle. The caller only appends to a bounded buffer under a
lock. A broker that is down, slow or restarted costs the caller nothing: events wait in the buffer
(oldest dropped and counted when it is full) and are published in order after the reconnect, with
exponential backoff between attempts. QoS 1 is at-least-once: an event in flight when the
connection broke is sent again, so a subscriber may see it twice, never zero times.

Credentials from the URL are passed to the client and never logged, put in events or in errors.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from neuron_watch.errors import UsageError
from neuron_watch.redact import mask_urls, userinfo_end

log = logging.getLogger("neuron_watch.outputs.mqtt")

DEFAULT_PREFIX = "neuron-watch"
DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
_URL_HINT = "use mqtt[s]://[user:pass@]host:port/<topic-prefix>, e.g. mqtt://broker:1883/neuron-watch"


@dataclass(frozen=True)
class MqttTarget:
    """Where to publish: parsed from ``--mqtt``. ``password`` is kept out of ``repr``."""

    host: str
    port: int
    prefix: str = DEFAULT_PREFIX
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None  # mqtts only: CA bundle to trust instead of the system's

    def redacted(self) -> str:
        """The URL without credentials, safe for logs: ``mqtts://***@host:port/prefix``."""
        who = "***@" if self.username or self.password else ""
        return f"{'mqtts' if self.tls else 'mqtt'}://{who}{self.host}:{self.port}/{self.prefix}"


def redact_url(url: str) -> str:
    """``url`` with any ``user:pass@`` replaced by ``***@`` (for error messages)."""
    if "://" not in url:
        return "<not a URL>"
    return mask_urls(url)


def parse_mqtt_url(url: str) -> MqttTarget:
    """Parse ``mqtt[s]://[user:pass@]host[:port]/<topic-prefix>[?ca=FILE]``.

    The port defaults to 1883 (mqtt) or 8883 (mqtts); the prefix to ``neuron-watch``; user and
    password are percent-decoded. ``?ca=FILE`` (mqtts only) trusts that CA bundle.

    Raises:
        UsageError: naming what is wrong; the message never contains the password.
    """
    shown = redact_url(url)
    after = url.strip().split("://", 1)[-1]
    at = userinfo_end(after)
    if at is not None and any(c in after[:at] for c in "/?#"):
        # urlsplit would cut the authority inside the password and read a piece of it as the port
        raise UsageError(f"--mqtt {shown}: the user name or password holds a raw '/', '?' or '#'",
                         "percent-encode them in the URL: / is %2F, ? is %3F, # is %23, @ is %40")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"--mqtt {shown}: {mask_urls(str(exc))}", _URL_HINT) from exc
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise UsageError(f"--mqtt {shown}: scheme must be mqtt or mqtts, not {scheme or 'missing'!r}", _URL_HINT)
    if not parts.hostname:
        raise UsageError(f"--mqtt {shown}: no broker host", _URL_HINT)
    if port == 0:
        raise UsageError(f"--mqtt {shown}: port 0 is not a broker port", _URL_HINT)
    prefix = parts.path.strip("/") or DEFAULT_PREFIX
    if parts.fragment or "#" in url or any(c in prefix for c in "+\0") or "//" in prefix:
        raise UsageError(f"--mqtt {shown}: the topic prefix may not contain +, # or empty levels",
                         _URL_HINT)
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"ca"})
    if unknown:
        raise UsageError(f"--mqtt {shown}: unknown query parameter(s) {', '.join(unknown)}",
                         "the only one is ?ca=FILE (mqtts: CA bundle to trust)")
    ca_file = query["ca"][-1] if "ca" in query else None
    if ca_file is not None and scheme != "mqtts":
        raise UsageError(f"--mqtt {shown}: ?ca= needs mqtts://", "use mqtts:// for TLS or drop ?ca=")
    if parts.password is not None and not parts.username:
        raise UsageError(f"--mqtt {shown}: a password without a user name", _URL_HINT)
    return MqttTarget(
        host=parts.hostname,
        port=port or DEFAULT_PORTS[scheme],
        prefix=prefix,
        tls=scheme == "mqtts",
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        ca_file=ca_file,
    )


def topic_level(text: str) -> str:
    """One topic level from a job id or event name: ``/``, ``+``, ``#`` and NUL become ``_``."""
    out = "".join("_" if c in "/+#\0" else c for c in str(text))
    return out or "_"


#: Job state published (retained) after each event; verdicts are mapped by :func:`job_state`.
_STATE_OF_EVENT = {
    "job_started": "running",
    "incident": "recovering",
    "restart": "restarting",
    "job_finished": "finished",
}


def job_state(event: dict[str, Any]) -> str | None:
    """The job state an event implies, or None if it does not change it.

    ``verdict`` events: label ``compiling`` -> ``compiling``; ``healthy`` or action ``wait`` ->
    ``running``; anything else -> ``failing``.
    """
    name = event.get("event")
    if name == "verdict":
        label, action = event.get("label"), event.get("action")
        if label == "compiling":
            return "compiling"
        if label == "healthy" or action == "wait":
            return "running"
        return "failing"
    return _STATE_OF_EVENT.get(str(name))


@dataclass
class _Item:
    topic: str
    payload: bytes
    state: bytes | None  # retained state message to publish after the event, if it changes it


class MqttSink:
    """Event sink publishing to MQTT from its own thread. ``emit`` never blocks; see the module doc.

    Args:
        target: from :func:`parse_mqtt_url`.
        job_id: the job's id; one topic level (``/``, ``+``, ``#`` are replaced by ``_``).
        buffer: most events kept while the broker is away; beyond it the oldest are dropped and counted.
        keepalive: MQTT keepalive (seconds); bounds how long a network loss takes to trigger the will.
        backoff: (first, longest) wait between reconnect attempts, doubling in between.
        timeout: per-operation timeout (connect, publish acknowledgement), seconds.
    """

    def __init__(
        self,
        target: MqttTarget,
        job_id: str,
        *,
        buffer: int = 10_000,
        keepalive: int = 30,
        backoff: tuple[float, float] = (0.2, 30.0),
        timeout: float = 5.0,
    ) -> None:
        if buffer < 1:
            raise UsageError(f"MQTT buffer must hold at least 1 event, not {buffer}")
        self.target = target
        self.job_id = str(job_id)
        self._base = f"{target.prefix}/{topic_level(self.job_id)}"
        self.state_topic = f"{self._base}/state"
        self._maxlen = buffer
        self._keepalive = keepalive
        self._backoff = backoff
        self._timeout = timeout
        self._lock = threading.Lock()
        self._buffer: collections.deque[_Item] = collections.deque()
        self._published = 0
        self._dropped = 0
        self._unsent_at_close = 0
        self._connects = 0
        self._connected = False
        self._closing = False
        self._last_state: bytes | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._deadline = 0.0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._thread_main, name="neuron-watch-mqtt", daemon=True)
        self._thread.start()
        self._ready.wait()

    # -- caller side (any thread) ------------------------------------------------------------

    def emit(self, event: dict[str, Any]) -> None:
        """Queue ``event`` for publishing. Never blocks on the network, never raises for broker trouble.

        The event is serialised now (later changes to the dict do not leak into the message).
        After :meth:`close` it is counted as dropped.
        """
        body = dict(event)
        body.setdefault("job_id", self.job_id)
        name = topic_level(str(body.get("event", "event")))
        payload = json.dumps(body, default=str, separators=(",", ":")).encode()
        state = job_state(body)
        state_payload = None
        if state is not None:
            state_doc = {"job_id": self.job_id, "state": state, "event": body.get("event"),
                         "generation": body.get("generation"), "time": body.get("time")}
            for key in ("label", "exit_code", "restarts"):
                if key in body:
                    state_doc[key] = body[key]
            state_payload = json.dumps(state_doc, default=str, separators=(",", ":")).encode()
        item = _Item(f"{self._base}/{name}", payload, state_payload)
        with self._lock:
            if self._closing:
                self._dropped += 1
                return
            if len(self._buffer) >= self._maxlen:
                self._buffer.popleft()  # the newest events say most about the job now
                self._dropped += 1
            self._buffer.append(item)
        self._notify(lambda: self._wake.set() if self._wake is not None else None)

    def stats(self) -> dict[str, Any]:
        """Counters: ``published`` (events acknowledged by the broker), ``dropped`` (buffer full or
        emitted after close), ``buffered`` (waiting), ``unsent_at_close``, ``connected``, ``connects``."""
        with self._lock:
            return {
                "published": self._published,
                "dropped": self._dropped,
                "buffered": len(self._buffer),
                "unsent_at_close": self._unsent_at_close,
                "connected": self._connected,
                "connects": self._connects,
            }

    def close(self, timeout: float = 5.0) -> None:
        """Publish what is buffered for up to ``timeout`` seconds, disconnect cleanly (no will), stop
        the thread and log one summary line; :meth:`stats` has the final counts. Safe to call twice.

        Matches ``neuron_watch.outputs.eventlog.EventSink``."""
        with self._lock:
            already = self._closing
            self._closing = True
        if not already:
            self._deadline = time.monotonic() + max(0.0, timeout)

            def _stop() -> None:
                if self._stop is not None and self._wake is not None:
                    self._stop.set()
                    self._wake.set()

            self._notify(_stop)
            # a little beyond the deadline: the thread needs time to cancel and disconnect
            self._thread.join(max(0.0, timeout) + self._timeout + 1.0)
            with self._lock:
                self._unsent_at_close = len(self._buffer)
            final = self.stats()
            log.info("mqtt %s: %d event(s) published, %d dropped (buffer full or late), %d unsent at close",
                     self.target.redacted(), final["published"], final["dropped"], final["unsent_at_close"])

    def _notify(self, fn: Any) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed: the thread is gone
            loop.call_soon_threadsafe(fn)

    # -- publisher thread ----------------------------------------------------------------------

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main(loop))
        except Exception:  # the sink must never take the watchdog down with it
            log.exception("mqtt publisher thread failed; events are no longer published")
        finally:
            self._ready.set()
            self._loop = None
            loop.close()

    async def _main(self, loop: asyncio.AbstractEventLoop) -> None:
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._loop = loop
        self._ready.set()
        runner = asyncio.ensure_future(self._connect_loop())
        stop_wait = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({runner, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        if not runner.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(runner, timeout=max(0.0, self._deadline - time.monotonic()))
        stop_wait.cancel()

    def _client(self) -> Any:
        import aiomqtt  # imported here: the CLI stays fast when --mqtt is not used

        t = self.target
        tls_context = None
        if t.tls:
            tls_context = ssl.create_default_context(cafile=t.ca_file)
        will = aiomqtt.Will(
            self.state_topic,
            json.dumps({"job_id": self.job_id, "state": "watchdog_lost",
                        "reason": "the neuron-watch process died or lost the network without disconnecting"}),
            qos=1,
            retain=True,
        )
        return aiomqtt.Client(
            t.host,
            port=t.port,
            username=t.username,
            password=t.password,
            identifier=f"neuron-watch-{topic_level(self.job_id)[:40]}-{uuid.uuid4().hex[:8]}",
            will=will,
            keepalive=self._keepalive,
            timeout=self._timeout,
            tls_context=tls_context,
            clean_session=True,
            logger=logging.getLogger("neuron_watch.outputs.mqtt.client"),
        )

    async def _connect_loop(self) -> None:
        assert self._stop is not None
        backoff = self._backoff[0]
        was_up = True  # log the first failure at warning, repeats at debug
        while True:
            with self._lock:
                if self._closing and not self._buffer:
                    return
            try:
                async with self._client() as client:
                    with self._lock:
                        self._connected = True
                        self._connects += 1
                        waiting = len(self._buffer)
                    if self._connects > 1 or not was_up:
                        log.info("mqtt %s: connected again; publishing %d buffered event(s)",
                                 self.target.redacted(), waiting)
                    backoff, was_up = self._backoff[0], True
                    if self._last_state is not None:
                        # the broker may have lost retained messages while it was away
                        await client.publish(self.state_topic, self._last_state, qos=1, retain=True)
                    await self._drain(client)
                    return
            except Exception as exc:  # any broker/network trouble: buffer and retry, never raise
                with self._lock:
                    self._connected = False
                    waiting = len(self._buffer)
                level = logging.WARNING if was_up else logging.DEBUG
                log.log(level, "mqtt %s: broker unreachable (%s: %s); %d event(s) buffered, retry in %.1fs",
                        self.target.redacted(), type(exc).__name__, exc, waiting, backoff)
                was_up = False
            if self._stop.is_set():
                await asyncio.sleep(backoff)
            else:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), backoff)
            backoff = min(backoff * 2, self._backoff[1])

    async def _drain(self, client: Any) -> None:
        """Publish the buffer head to tail; return once closing and empty. Raises on broker loss."""
        assert self._wake is not None
        while True:
            with self._lock:
                item = self._buffer[0] if self._buffer else None
                closing = self._closing
            if item is None:
                if closing:
                    return
                self._wake.clear()
                with self._lock:
                    empty = not self._buffer and not self._closing
                if empty:
                    await self._wake.wait()
                continue
            await client.publish(item.topic, item.payload, qos=1)
            if item.state is not None:
                await client.publish(self.state_topic, item.state, qos=1, retain=True)
                self._last_state = item.state
            with self._lock:
                if self._buffer and self._buffer[0] is item:
                    self._buffer.popleft()
                else:  # evicted by a full buffer while in flight: it was counted dropped, but arrived
                    self._dropped -= 1
                self._published += 1
