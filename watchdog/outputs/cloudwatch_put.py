"""``--cloudwatch NAMESPACE``: the coordinator's metrics sent to CloudWatch with ``PutMetricData``.

    sink = CloudWatchSink("NeuronWatch", job_id, os.environ, warn=...)  # a thread of its own
    coord.events.attach(sink)                       # every event of the job
    coord.status_listeners.append(sink.status)      # each status document (about once a second)
    ...
    sink.close(timeout=5.0)                         # one last publish, then the counts on the console

The coordinator's loop only folds events and status documents under a lock held for the fold
(:class:`~neuron_watch.outputs.metrics_http.MetricsFold`, the same as ``--metrics``). A thread takes the
figures every ``--cloudwatch-interval`` seconds, and at once after an incident, a restart, a give-up
and the end of the job, and sends them (``cloudwatch.py`` makes the data and cuts the requests).
A request that fails is counted and its data kept for the next publish, in a backlog of at most
:data:`BACKLOG` values: beyond it the oldest are dropped and counted. The first failure, and then
one a minute while they go on, is said on the console and as a ``warning`` event (kind
``cloudwatch_failed``) from the loop's own thread; the end of the run says what was sent and lost.

Where it goes: the AWS credential chain (environment, profile, instance or task role) and region
(``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile's), and another endpoint from
``AWS_ENDPOINT_URL_CLOUDWATCH`` or ``AWS_ENDPOINT_URL``, as the S3 upload does. botocore's own
retries are off: the next publish is the retry. Messages name the namespace and the endpoint's host
only, never a credential.

Why ``PutMetricData`` and not the embedded metric format (EMF) in a log group: EMF needs a log group
and stream to write to and CloudWatch Logs to extract the metrics, which only AWS does (moto stores
the log events and extracts nothing, so no test could read the metrics back); ``PutMetricData``
needs only ``cloudwatch:PutMetricData``, and at one request a minute (40 to 70 values) it costs no
more than the log ingestion would.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from neuron_watch.outputs.cloudwatch import batches, dimensions, metric_data
from neuron_watch.outputs.metrics_http import MetricsFold
from neuron_watch.redact import mask_urls

log = logging.getLogger("neuron_watch")

#: the events after which the figures are sent at once (they change what an alarm would say)
PUBLISH_NOW = frozenset({"incident", "restart", "gave_up", "job_finished"})
#: seconds between publishes by default (CloudWatch's standard resolution is a minute)
INTERVAL = 60.0
#: values kept for the next publish when a request fails (three full requests)
BACKLOG = 3000
#: at least this long between two publishes, however many events ask for one
MIN_GAP = 1.0
#: a warning while requests keep failing, at most this often
WARN_EVERY = 60.0
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 10.0

Warn = Callable[..., Any]


def shown_endpoint(url: str | None) -> str:
    """An endpoint as messages show it: its scheme and host (never user info or a path)."""
    if not url:
        return "AWS default"
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def explain(exc: BaseException, where: str) -> str:
    """What went wrong with a request, and the next step; no credential, no URL's user info."""
    names = {c.__name__ for c in type(exc).__mro__}
    code = ""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        code = str((response.get("Error") or {}).get("Code") or "")
    if names & {"NoCredentialsError", "PartialCredentialsError"}:
        return (f"no AWS credentials found for CloudWatch at {where}; next step: set AWS_PROFILE or "
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or attach an instance role")
    if code in ("AccessDenied", "AccessDeniedException", "UnrecognizedClientException", "InvalidClientTokenId",
                "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch"):
        return (f"CloudWatch at {where} refused the credentials ({code}); next step: check AWS_PROFILE / "
                "AWS_ACCESS_KEY_ID and grant cloudwatch:PutMetricData")
    if names & {"EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ReadTimeoutError"}:
        return (f"cannot reach CloudWatch at {where} ({type(exc).__name__}); next step: check the network, "
                "AWS_ENDPOINT_URL_CLOUDWATCH / AWS_ENDPOINT_URL and the region")
    if code:
        return f"CloudWatch at {where} answered {code}"
    return f"CloudWatch at {where}: {type(exc).__name__}: {mask_urls(str(exc))}"


class CloudWatchSink(MetricsFold):
    """An event sink and status listener that sends the job's metrics to CloudWatch from a thread.

    Args:
        namespace: the CloudWatch namespace (``--cloudwatch``).
        env: where the endpoint, the region and the cluster's name are read.
        interval: seconds between publishes (``--cloudwatch-interval``); under a minute the values
            are sent at one-second storage resolution, which CloudWatch bills as high resolution.
        warn: called in the coordinator's loop with a ``warning`` event's fields when requests fail.
        client: a boto3 CloudWatch client (tests); made in the thread otherwise, so that boto3's
            start-up never delays the coordinator.
    """

    def __init__(self, namespace: str, job_id: str, env: Mapping[str, str], *, interval: float = INTERVAL,
                 warn: Warn | None = None, client: Any = None, wall: Callable[[], float] = time.time) -> None:
        super().__init__(job_id, "--cloudwatch", wall)
        self.namespace = namespace
        self.dims = dimensions(job_id, env)
        self.interval = interval
        self.resolution = 1 if interval < 60 else 60
        self.endpoint = env.get("AWS_ENDPOINT_URL_CLOUDWATCH") or env.get("AWS_ENDPOINT_URL") or None
        self.where = shown_endpoint(self.endpoint)
        self._region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None
        self._client = client
        self._warn = warn
        self._backlog: collections.deque[dict[str, Any]] = collections.deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._counts_lock = threading.Lock()
        self.requests = 0  # requests CloudWatch accepted
        self.sent = 0  # values in them
        self.failed = 0  # requests that failed
        self.dropped = 0  # values dropped from a full backlog
        self.unsent = 0  # values still in the backlog at close
        self.last_error: str | None = None
        self._warned_failed = 0
        self._warned_at = -1e18
        self._thread = threading.Thread(target=self._run, name="neuron-watch-cloudwatch", daemon=True)
        self._thread.start()

    # -- the loop's side: fold, and ask for a publish ---------------------------------------------

    def emit(self, event: dict[str, Any]) -> None:
        super().emit(event)
        if event.get("event") in PUBLISH_NOW:
            self._wake.set()

    def status(self, doc: dict[str, Any]) -> None:
        super().status(doc)
        self._say_failures()

    def _say_failures(self) -> None:
        """New failures, said from the loop's thread (the event log is the loop's): the first at
        once, then at most every :data:`WARN_EVERY` seconds while they go on."""
        with self._counts_lock:
            failed, dropped, error = self.failed, self.dropped, self.last_error
        now = time.monotonic()
        if failed <= self._warned_failed or (self._warned_failed and now - self._warned_at < WARN_EVERY):
            return
        self._warned_failed, self._warned_at = failed, now
        message = (f"--cloudwatch {self.namespace}: {failed} request(s) failed, {dropped} value(s) dropped so far; "
                   f"{error}; the job is not affected")
        log.warning("%s", message)
        if self._warn is not None:
            try:
                self._warn(kind="cloudwatch_failed", namespace=self.namespace, endpoint=self.where,
                           failed_requests=failed, dropped_values=dropped, message=message)
            except Exception as exc:  # a report of a report: never into the loop
                log.warning("--cloudwatch: the warning event failed: %s", exc)

    # -- the thread's side ---------------------------------------------------------------------------

    def _run(self) -> None:
        next_at = 0.0  # the first publish at once: the job's start is a point of its curves
        last = -1e18
        while True:
            stopping = self._stop.is_set()
            now = time.monotonic()
            if stopping or now >= next_at or (self._wake.is_set() and now - last >= MIN_GAP):
                self._wake.clear()
                self._publish()
                last = time.monotonic()
                next_at = last + self.interval
            if stopping:
                return
            if self._wake.is_set():  # asked for within the gap: wait out the gap (close cuts it short)
                self._stop.wait(max(0.0, last + MIN_GAP - time.monotonic()))
            else:
                self._wake.wait(max(0.0, next_at - time.monotonic()))

    def _publish(self) -> None:
        try:
            data = metric_data(self.families(), self.dims, self._wall())
        except Exception as exc:  # a figure, never a reason to stop publishing
            log.warning("--cloudwatch: the figures could not be made: %r", exc)
            data = []
        for d in data:
            d["StorageResolution"] = self.resolution
        self._backlog.extend(data)
        over = len(self._backlog) - BACKLOG
        for _ in range(max(0, over)):
            self._backlog.popleft()  # the oldest go: the newest say the most about the job now
        with self._counts_lock:
            self.dropped += max(0, over)
        try:
            client = self._cloudwatch()
        except Exception as exc:
            self._failed(exc)
            return
        pending = list(self._backlog)
        for batch in batches(pending):
            try:
                client.put_metric_data(Namespace=self.namespace, MetricData=batch)
            except Exception as exc:
                self._failed(exc)
                return  # the rest waits for the next publish
            for _ in batch:
                self._backlog.popleft()
            with self._counts_lock:
                self.requests += 1
                self.sent += len(batch)

    def _failed(self, exc: BaseException) -> None:
        why = explain(exc, self.where)
        with self._counts_lock:
            self.failed += 1
            self.last_error = why
        log.debug("--cloudwatch: a request failed: %s", why)

    def _cloudwatch(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            session = boto3.session.Session(region_name=self._region)
            self._client = session.client(
                "cloudwatch", endpoint_url=self.endpoint,
                region_name=self._region or session.region_name or "us-east-1",
                config=Config(connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
                              retries={"total_max_attempts": 1, "mode": "standard"}))
        return self._client

    def close(self, timeout: float = 5.0) -> None:
        """Send the figures once more (the job's end), for up to ``timeout`` seconds; then say
        what was sent and what was lost."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        with self._counts_lock:
            self.unsent = len(self._backlog)
            counts = (self.sent, self.requests, self.failed, self.dropped, self.unsent)
        alive = " (a request was still under way)" if self._thread.is_alive() else ""
        if self.failed or self.dropped or self.unsent:
            log.warning("--cloudwatch %s at %s: %d value(s) sent in %d request(s), %d request(s) failed, "
                        "%d value(s) dropped, %d unsent at exit%s; last error: %s", self.namespace, self.where,
                        *counts, alive, self.last_error)
        else:
            log.info("--cloudwatch %s at %s: %d value(s) sent in %d request(s)", self.namespace, self.where,
                     counts[0], counts[1])
