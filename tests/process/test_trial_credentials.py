"""Credentials in URLs never reach the console, ``events.jsonl`` or the ranks' environment.

Real ``neuron-watch torchrun`` runs: an ``s3://KEY:SECRET@bucket`` artifacts URI is refused before
anything starts; an MQTT password with a raw ``/`` is a usage error that shows the URL masked; a
real 2-rank job publishing to MQTT with a password holding ``# / ? @`` (percent-encoded, as the
URL needs it; the broker is down: the job goes on) runs to its end, and neither the password nor
its encoding appears in the console, any file of the run dir or any rank's environment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, TOY, events, free_port, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process

RANKS = str(Path(__file__).resolve().parent / "ranks" / "trial_noise.py")
SECRET = "Tr1alSecret"


def test_an_s3_uri_with_credentials_is_refused_before_anything_starts(tmp_path: Path,
                                                                      toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--artifacts", f"s3://AKIDTRIAL:{SECRET}/x#y@bucket/prefix",
            "torchrun", "--nproc_per_node", "1", TOY, "--steps", "2"]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, timeout=120)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    assert code == 2, out
    assert "an S3 URI carries no credentials" in out and "s3://***@bucket/prefix" in out, out
    assert SECRET not in out and "AKIDTRIAL" not in out
    assert not (run_dir / "events.jsonl").exists()


def test_an_mqtt_password_with_a_raw_slash_is_a_usage_error_that_hides_it(tmp_path: Path,
                                                                          toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    env = {**toy_env, "NEURON_WATCH_MQTT": f"mqtt://nw:{SECRET}/1883@127.0.0.1:1883/nw"}
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "torchrun", "--nproc_per_node", "1", TOY, "--steps", "2"]
    code, out = run_to_end(argv, str(tmp_path), env, run_dir, timeout=120)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    assert code == 2 and "percent-encode" in out and "mqtt://***@127.0.0.1:1883/nw" in out, out
    assert SECRET not in out


def test_a_jobs_mqtt_password_reaches_no_output_no_file_and_no_rank(tmp_path: Path,
                                                                    toy_env: dict[str, str]) -> None:
    run_dir, env_out = tmp_path / "run", tmp_path / "env"
    env_out.mkdir()
    encoded = f"{SECRET}%23%2F%3F%40x"  # the password "Tr1alSecret#/?@x"
    port = free_port()  # nothing listens: publishing fails, counted, the job goes on
    env = {**toy_env, "NEURON_WATCH_MQTT": f"mqtt://nw:{encoded}@127.0.0.1:{port}/nw"}
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--artifacts", str(tmp_path / "artifacts"), "torchrun",
            "--nproc_per_node", "2", RANKS, "--steps", "4", "--env-out", str(env_out)]
    code, out = run_to_end(argv, str(tmp_path), env, run_dir, timeout=240)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    assert named(evs, "job_started")[0]["config"]["mqtt"] == f"mqtt://***@127.0.0.1:{port}/nw"
    assert named(evs, "job_finished")[0]["exit_code"] == 0
    ranks = sorted(env_out.iterdir())
    assert [p.name for p in ranks] == ["env-0.txt", "env-1.txt"]
    written = [p for p in [*run_dir.rglob("*"), *ranks] if p.is_file()]
    assert run_dir / "events.jsonl" in written
    for text in (out, *(p.read_text(errors="replace") for p in written)):
        assert SECRET not in text
