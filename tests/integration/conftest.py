"""Real runs shared by several integration files (session-scoped; their readers in one
``xdist_group``, so that pytest-xdist keeps them on one worker and the run starts once)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.fixtures.mqtt import Mosquitto, MqttRecorder
from tests.fixtures.s3 import S3Endpoint
from tests.fixtures.slurm import running_cluster
from tests.integration.test_cloudwatch import cloudwatch
from tests.integration.test_srun import HANG, HANG_WATCH, HangRun, submitted


@pytest.fixture(scope="session")
def srun_hang(tmp_path_factory: pytest.TempPathFactory, mqtt_broker: Mosquitto, s3_rclone: S3Endpoint,
              s3_moto: S3Endpoint) -> Iterator[HangRun]:
    """One run of the srun hang on a real Slurm (rank 3 on n2 stops at step 12 of generation 0;
    ``HANG_WATCH``), with ``--mqtt``, ``--artifacts`` (rclone's S3, which checks signatures)
    and ``--cloudwatch`` (moto's), read by every test of this scenario: its restart, its console,
    its events on the broker, its bundles in S3 and the parity matrix's srun row. The cluster lives
    as long as the job (the readers read files, the broker and the stores); no process of the job
    survives it."""
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
    try:
        with running_cluster(tmp_path_factory) as cluster, submitted(cluster, tmp_path, 2, HANG, watch,
                                                                     env=env) as job:
            state = job.wait()
            job.assert_nothing_survives()
        yield HangRun(job, state, rec, s3, bucket=bucket, prefix="pre", topic=topic, cw=cloudwatch(s3_moto),
                      namespace=namespace)
    finally:
        rec.close()
