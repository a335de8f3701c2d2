"""An S3 endpoint that does not answer: the console says that the restart, then the exit, wait on
the uploads, and the job is not held past ``--upload-timeout``.

Real torchrun, 2 gloo ranks (tests/process/ranks/trial_noise.py ``--noise cr-error``): rank 1 fails
at step 3 of generation 0, the job restarts and finishes. ``--artifacts s3://...`` points at a
loopback port where nothing listens (connections refused: every attempt fails, retried). The retry
at exit is bounded by ``--upload-retry-timeout``, short here (each of a bundle's files would take its
6 attempts, ~8 s of backoff, within the default 300 s: the wait itself is not the subject).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, events, free_port, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process

RANKS = str(Path(__file__).resolve().parent / "ranks" / "trial_noise.py")


def test_waits_on_an_unreachable_s3_endpoint_are_said(tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    env = {**toy_env, "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{free_port()}", "AWS_ACCESS_KEY_ID": "trial",
           "AWS_SECRET_ACCESS_KEY": "trial", "AWS_REGION": "us-east-1"}
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--artifacts", "s3://trial-bucket/runs", "--upload-timeout", "5",
            "--upload-retry-timeout", "3", "--max-restarts", "2", "torchrun", "--nproc_per_node", "2", RANKS,
            "--noise", "cr-error", "--steps", "6", "--hang-at", "3"]
    code, out = run_to_end(argv, str(tmp_path), env, run_dir, timeout=420)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    assert code == 0, out[-3000:]
    ours = [line for line in out.splitlines() if line.startswith("[neuron-watch]")]
    said = [i for i, line in enumerate(ours) if "uploading 1 incident bundle(s) to s3://trial-bucket/runs; the "
            "restart waits for it (5s at most: --upload-timeout)" in line]
    restarted = [i for i, line in enumerate(ours) if line.startswith("[neuron-watch] restarting as generation 1")]
    assert said and restarted and said[0] < restarted[0], "\n".join(ours)
    assert any("failed artifact upload(s) to s3://trial-bucket/runs before exiting (3s at most)" in line
               for line in ours), ours
    evs = events(run_dir)
    assert [u["ok"] for u in named(evs, "upload") if not u.get("retry_at_exit")] == [False]
    assert [u["ok"] for u in named(evs, "upload") if u.get("retry_at_exit")] == [False]
    assert named(evs, "job_finished")[-1]["restarts"] == 1
