"""``--cloudwatch``: the sink against moto's server (the one the S3 tests start), read back with
ListMetrics and GetMetricData; a request that fails (moto behind a proxy that answers 503) is sent
again with the next publish; an endpoint that is down is counted, warned from the loop's side once,
and said at the end, without a credential; one that never answers holds neither the loop's calls
nor the exit."""

from __future__ import annotations

import logging
import os
import secrets
import select
import socket
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import boto3
import pytest

from neuron_watch.outputs.cloudwatch_put import CloudWatchSink
from neuron_watch.outputs.status import RANK_STATES
from tests.fixtures.procs import free_port
from tests.fixtures.s3 import FaultProxy, S3Endpoint
from tests.fixtures.wait import wait_for, within
from tests.unit.test_metrics import doc, ev

pytestmark = pytest.mark.integration


def cloudwatch(endpoint: S3Endpoint) -> Any:
    return boto3.client("cloudwatch", endpoint_url=endpoint.url, region_name=endpoint.region,
                        aws_access_key_id=endpoint.access_key, aws_secret_access_key=endpoint.secret_key)


def series(cw: Any, namespace: str, name: str, dims: list[dict[str, str]], start: float,
           end: float) -> list[tuple[float, float]]:
    """(time, maximum) of one metric, oldest first, at one-second periods."""
    got = cw.get_metric_data(
        MetricDataQueries=[{"Id": "m", "MetricStat": {"Metric": {"Namespace": namespace, "MetricName": name,
                                                                 "Dimensions": dims},
                                                      "Period": 1, "Stat": "Maximum"}}],
        StartTime=datetime.fromtimestamp(start - 5, timezone.utc),
        EndTime=datetime.fromtimestamp(end + 5, timezone.utc), ScanBy="TimestampAscending")["MetricDataResults"][0]
    return [(t.timestamp(), v) for t, v in zip(got["Timestamps"], got["Values"], strict=True)]


def listed(cw: Any, namespace: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every (name, dimensions) ListMetrics names in ``namespace`` (moto repeats some: a set)."""
    out = set()
    for page in cw.get_paginator("list_metrics").paginate(Namespace=namespace):
        for m in page["Metrics"]:
            out.add((m["MetricName"], tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"]))))
    return out


def aws_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> dict[str, str]:
    """``env`` set in this process too: boto3's credential chain reads the process's environment,
    as it does in the coordinator (whose ``env`` is ``os.environ``)."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return dict(os.environ)


class Wall:
    """The sink's wall clock, moved by the test: each publish's timestamp is the test's choice."""

    def __init__(self) -> None:
        self.t = float(int(time.time()))

    def __call__(self) -> float:
        return self.t


def published(sink: CloudWatchSink, n: int) -> Callable[[], bool]:
    return lambda: sink.requests + sink.failed >= n


def test_a_hang_and_restart_arrive_in_cloudwatch_with_their_dimensions(s3_moto: S3Endpoint,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    namespace = f"NW-{secrets.token_hex(3)}"
    env = aws_env(monkeypatch, dict(s3_moto.env(), SLURM_CLUSTER_NAME="trn-east"))
    wall = Wall()
    t0 = wall.t
    sink = CloudWatchSink(namespace, "job-7", env, interval=3600, wall=wall)
    try:
        wait_for("the first publish", published(sink, 1), within(60))
        sink.emit(ev(0, "job_started", 0))
        sink.emit(ev(0.1, "recovery_phase", 0, phase="running", previous="starting"))
        sink.status(doc(1, 0, [8, 8], ["progressing", "silent"], last_progress=0.5))
        wall.t = t0 + 10
        sink.emit(ev(30, "verdict", 0, label="collective_hang", action="restart", culprit={"node": "n0", "rank": 1}))
        sink.emit(ev(33, "incident", 0, incident=1, label="collective_hang", culprit={"node": "n0", "rank": 1}))
        wait_for("the incident's publish", published(sink, 2), within(60))
        wall.t = t0 + 20
        sink.emit(ev(35, "recovery_phase", 0, phase="restarting", previous="stopping"))
        sink.emit(ev(35.5, "restart", 1, checkpoint="/ckpt/step_5", restarts=1))
        sink.status(doc(40, 1, [12, 12], ["progressing", "progressing"], last_progress=39.5))
        wait_for("the restart's publish", published(sink, 3), within(60))
        wall.t = t0 + 30
        sink.status(doc(50, 1, [14, 14], ["exited", "exited"], state="finished", last_progress=49))
        sink.emit(ev(51, "job_finished", 1, state="finished", exit_code=0, restarts=1))
    finally:
        sink.close(timeout=30)
    assert sink.failed == 0 and sink.dropped == 0 and sink.unsent == 0 and sink.requests >= 4
    cw = cloudwatch(s3_moto)
    job = [("Cluster", "trn-east"), ("JobId", "job-7")]
    names = listed(cw, namespace)
    assert ("Restarts", tuple(job)) in names
    assert ("Restarts", tuple(sorted([*job, ("Label", "collective_hang")]))) in names
    assert {s for n, d in names if n == "Ranks" for k, s in d if k == "State"} == set(RANK_STATES)
    assert all(dict(d).keys() >= {"JobId", "Cluster"} for _, d in names)
    dims = [{"Name": "JobId", "Value": "job-7"}, {"Name": "Cluster", "Value": "trn-east"}]
    restarts = series(cw, namespace, "Restarts", dims, t0, t0 + 30)
    assert restarts[0][1] == 0 and restarts[-1][1] == 1, restarts
    hang = series(cw, namespace, "Restarts", [*dims, {"Name": "Label", "Value": "collective_hang"}], t0, t0 + 30)
    assert hang and hang[0][0] >= t0 + 20 and {v for _, v in hang} == {1.0}, hang
    steps = dict(series(cw, namespace, "LastStep", dims, t0, t0 + 30))
    gens = dict(series(cw, namespace, "Generation", dims, t0, t0 + 30))
    assert gens[t0 + 30] == 1 and steps[t0 + 30] == 14 > steps[t0 + 10] == 8, (steps, gens)
    assert series(cw, namespace, "ExitCode", dims, t0, t0 + 30) == [(t0 + 30, 0.0)]


def test_a_failed_request_is_sent_again_with_the_next_publish(s3_moto: S3Endpoint,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    namespace = f"NW-{secrets.token_hex(3)}"
    upstream = int(s3_moto.url.rsplit(":", 1)[1])
    wall = Wall()
    t0 = wall.t
    with FaultProxy(upstream, failures=1, status=503, code="ServiceUnavailable") as proxy:
        env = aws_env(monkeypatch, dict(s3_moto.env(), AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}"))
        sink = CloudWatchSink(namespace, "job-8", env, interval=3600, wall=wall)
        try:
            wait_for("the first publish", published(sink, 1), within(60))
            assert sink.failed == 1 and sink.requests == 0, sink.last_error
            assert str(sink.last_error).endswith("answered 503")  # the proxy's XML body is no CBOR to read
            wall.t = t0 + 10
            sink.emit(ev(33, "incident", 0, incident=1, label="collective_hang"))
            wait_for("the next publish", lambda: sink.requests >= 1, within(60))
        finally:
            sink.close(timeout=30)
    assert proxy.faulted == 1 and sink.dropped == 0 and sink.unsent == 0
    cw = cloudwatch(s3_moto)
    gen = series(cw, namespace, "Generation", [{"Name": "JobId", "Value": "job-8"}], t0, t0 + 10)
    assert [t for t, _ in gen] == [t0, t0 + 10], gen  # the failed first point arrived with the second


def test_an_endpoint_that_is_down_is_counted_warned_from_the_loop_and_said_at_the_end(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO, logger="neuron_watch")
    monkeypatch.setattr("neuron_watch.outputs.cloudwatch_put.BACKLOG", 60)  # a publish holds ~50 values
    dead = free_port()  # nothing listens there
    secret = "wJalrXUtnFEMI-not-a-real-secret"
    env = aws_env(monkeypatch, {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{dead}", "AWS_ACCESS_KEY_ID": "AKIATESTKEY",
                                "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "eu-west-1",
                                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                                "AWS_EC2_METADATA_DISABLED": "true"})
    warned: list[dict[str, Any]] = []
    sink = CloudWatchSink("NW-down", "job-9", env, interval=3600, warn=lambda **f: warned.append(f))
    try:
        wait_for("the first failure", published(sink, 1), within(60))
        sink.status(doc(1, 0, [1], ["progressing"]))  # the loop's side says it
        sink.status(doc(2, 0, [2], ["progressing"]))  # and not again within the minute
        sink.emit(ev(3, "incident", 0, incident=1, label="collective_hang"))
        wait_for("the second failure", published(sink, 2), within(60))
    finally:
        sink.close(timeout=30)
    assert sink.requests == 0 and sink.failed >= 3  # the first, the incident's, the last at close
    assert sink.dropped > 0 and sink.unsent == 60  # the backlog keeps the newest, bounded
    assert [w["kind"] for w in warned] == ["cloudwatch_failed"]
    assert warned[0]["failed_requests"] == 1 and warned[0]["endpoint"] == f"http://127.0.0.1:{dead}"
    assert "cannot reach CloudWatch" in warned[0]["message"] and "not affected" in warned[0]["message"]
    end = [r.getMessage() for r in caplog.records if r.getMessage().startswith("--cloudwatch NW-down")]
    assert end and "0 value(s) sent in 0 request(s)" in end[-1] and "dropped" in end[-1], end
    assert secret not in caplog.text and secret not in repr(warned)


def test_an_endpoint_that_never_answers_holds_neither_the_loop_nor_the_exit(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO, logger="neuron_watch")
    with socket.socket() as silent:  # takes connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        env = aws_env(monkeypatch, {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{silent.getsockname()[1]}",
                                    "AWS_ACCESS_KEY_ID": "AKIATESTKEY", "AWS_SECRET_ACCESS_KEY": "not-a-secret",
                                    "AWS_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
                                    "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true"})
        sink = CloudWatchSink("NW-silent", "job-10", env, interval=3600)
        try:
            wait_for("the first request to connect", lambda: select.select([silent], [], [], 0.1)[0], within(60))
            # the loop's side while the request hangs: each call returns (a lock held by I/O would stall it)
            for i in range(50):
                sink.emit(ev(i, "progress", 0, step=i))
                sink.status(doc(i, 0, [i], ["progressing"]))
            sink.emit(ev(60, "job_finished", 0, state="finished", exit_code=0))
            assert sink.requests == 0 and sink.failed == 0  # still waiting for its answer
        finally:
            sink.close(timeout=0.5)
    assert sink.unsent > 0
    end = [r.getMessage() for r in caplog.records if r.getMessage().startswith("--cloudwatch NW-silent")]
    assert end and "unsent at exit (a request was still under way)" in end[-1], end
