"""Real runs shared by several integration files (session-scoped; their readers in one
``xdist_group``, so that pytest-xdist keeps them on one worker and the run starts once)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import pytest

from tests.fixtures.mqtt import Mosquitto, MqttRecorder
from tests.fixtures.procs import free_port
from tests.fixtures.s3 import S3Endpoint
from tests.fixtures.slurm import SlurmCluster
from tests.fixtures.wait import wait_for, within
from tests.integration.test_cloudwatch import cloudwatch
from tests.integration.test_metrics_srun import Scrape, scrape, scrape_while_both_nodes_train
from tests.integration.test_srun import (
    CLEAN,
    END_STATES,
    HANG_WATCH,
    SRUN_HANG,
    SRUN_HANG_NPROC,
    CleanRun,
    HangRun,
    submitted,
)


@pytest.fixture(scope="session")
def srun_hang(tmp_path_factory: pytest.TempPathFactory, slurm_cluster_shared: SlurmCluster, mqtt_broker: Mosquitto,
              s3_rclone: S3Endpoint, s3_moto: S3Endpoint) -> Iterator[HangRun]:
    """One run of the srun hang on a real Slurm (two nodes of one rank; rank 1, n2's, stops at step
    12 of generation 0: ``SRUN_HANG``; ``HANG_WATCH``), with ``--mqtt``, ``--artifacts`` (rclone's
    S3, which checks signatures) and ``--cloudwatch`` (moto's), read by every test of this scenario:
    its restart, its console, its events on the broker, its bundles in S3 and the parity matrix's srun
    row. On the session's cluster, once no other job is on it; no process of the job survives it."""
    tmp_path = tmp_path_factory.mktemp("srun-hang")
    topic = f"nwsrun{secrets.token_hex(2)}"
    rec = MqttRecorder(mqtt_broker.host, mqtt_broker.port, f"{topic}/#")
    s3 = s3_rclone.client()
    bucket = f"srun-art-{secrets.token_hex(3)}"
    s3.create_bucket(Bucket=bucket)
    url = mqtt_broker.url.rsplit("/", 1)[0] + "/" + topic
    namespace = f"NW-{topic}"
    watch = [*HANG_WATCH, "--mqtt", url, "--artifacts", f"s3://{bucket}/pre", "--cloudwatch", namespace]
    env = dict(s3_rclone.env(), AWS_ENDPOINT_URL_CLOUDWATCH=s3_moto.url)
    slurm_cluster_shared.wait_quiet()
    try:
        with submitted(slurm_cluster_shared, tmp_path, 2, SRUN_HANG, watch, env=env, nproc=SRUN_HANG_NPROC) as job:
            state = job.wait()
            job.assert_nothing_survives()
        yield HangRun(job, state, rec, s3, bucket=bucket, prefix="pre", topic=topic, cw=cloudwatch(s3_moto),
                      namespace=namespace)
    finally:
        rec.close()


@pytest.fixture(scope="session")
def srun_clean(tmp_path_factory: pytest.TempPathFactory, slurm_cluster_shared: SlurmCluster) -> CleanRun:
    """One clean run of the toy job under ``neuron-watch srun`` on two nodes (2 ranks each, ``CLEAN``),
    with ``--metrics``: scraped while both nodes train and once more after the job's end. Read by the
    test of the clean run (test_srun.py) and the metrics test (test_metrics_srun.py). On the session's
    cluster, once no other job is on it; no process of the job survives it."""
    tmp_path = tmp_path_factory.mktemp("srun-clean")
    port = free_port()
    c = slurm_cluster_shared
    c.wait_quiet()
    with submitted(c, tmp_path, 2, CLEAN, watch_args=["--metrics", f"127.0.0.1:{port}"]) as job:
        # a scrape showing both nodes observed and a step, or the job's end without one (then the metrics
        # test fails saying so, and the clean run's test still reads the run). The job's state is asked
        # every 2 s only: an scontrol each 0.2 s for the minutes of a loaded start-up cost seconds of CPU
        asked = [time.monotonic()]

        def scraped_or_ended() -> tuple[Scrape | None] | None:
            if (seen := scrape_while_both_nodes_train(port)) is not None:
                return (seen,)
            if time.monotonic() - asked[0] < 2.0:
                return None
            asked[0] = time.monotonic()
            return (None,) if c.job_state(job.id) in END_STATES else None

        (scraped,) = wait_for("a scrape with both nodes observed and a step, or the job's end", scraped_or_ended,
                              within(240), interval=0.2, explain=job.explain)
        state = job.wait()
        after = scrape(port)
        job.assert_nothing_survives()
    return CleanRun(job, state, scraped, after)
