"""``--metrics``, ``--cloudwatch`` and ``--notify`` on a real job: torchrun with 2 CPU ranks that
compile, hang, are restarted and finish, scraped over HTTP while they run, and by a real Prometheus
server (Debian's ``prometheus``) whose HTTP API answers PromQL over what it scraped; the same
figures sent to moto's CloudWatch (the server the S3 tests start) and read back with ListMetrics and
GetMetricData; a webhook on loopback receives the run's messages. A webhook and a CloudWatch
endpoint that are down cost the job nothing and are said."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import IN_CI, require_binary
from tests.fixtures.procs import (
    NEURON_WATCH,
    STEP_RANKS,
    TOY,
    events,
    force_cleanup,
    free_port,
    kill_group,
    named,
    pids_with_env,
)
from tests.fixtures.s3 import S3Endpoint
from tests.fixtures.wait import wait_for
from tests.integration.test_cloudwatch import cloudwatch, listed, series
from tests.integration.test_notify import receiver

pytestmark = pytest.mark.process

Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> tuple[str, Scrape] | None:
    """One scrape of ``/metrics`` as text and values, or None while nothing listens there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    return text, {(s.name, tuple(sorted(s.labels.items()))): s.value
                  for fam in text_string_to_metric_families(text) for s in fam.samples}


@contextlib.contextmanager
def prometheus(tmp_path: Path, target_port: int) -> Iterator[int]:
    """A real Prometheus scraping 127.0.0.1:``target_port`` every second; yields its API port.
    Loopback only, its data in ``tmp_path``; stopped with one deadline and reaped."""
    binary = require_binary("prometheus")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "neuron-watch", "scrape_interval": "1s", "scrape_timeout": "1s",
                            "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}],
    }))
    log = (tmp_path / "prometheus.log").open("w")
    p = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                          f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not _ready(port):
            assert p.poll() is None, (tmp_path / "prometheus.log").read_text()
            assert time.monotonic() < deadline, "prometheus not ready in 60 s"
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(0.2)  # waits on the server: returns early if it dies
        yield port
    finally:
        kill_group(p)
        log.close()


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def promql(port: int, query: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_metrics_follow_a_compile_a_hang_a_restart_and_the_end(tmp_path: Path, toy_env: dict[str, str],
                                                                s3_moto: S3Endpoint) -> None:
    have_prometheus = IN_CI or any(os.access(f"{d}/prometheus", os.X_OK) for d in ("/usr/bin", "/usr/local/bin"))
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    port = free_port()
    namespace = f"NW-{os.urandom(3).hex()}"
    toy_env = dict(toy_env, **s3_moto.env())
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt), "--hang-timeout", "8",
            "--no-prewarm", "--metrics", f"127.0.0.1:{port}", "--cloudwatch", namespace, "--cloudwatch-interval", "2",
            "torchrun", "--nproc_per_node", "2", TOY, "--checkpoint-dir", str(ckpt), "--steps", "14",
            "--step-time", "0.3", "--checkpoint-every", "5", "--compile-at", "2", "--compile-rank", "0",
            "--compile-seconds", "5", "--hang-at", "8", "--hang-rank", "1"]
    scrapes: list[Scrape] = []
    texts: list[str] = []
    with contextlib.ExitStack() as stack:
        prom_port = stack.enter_context(prometheus(tmp_path, port)) if have_prometheus else None
        hook = stack.enter_context(receiver())  # --notify's webhook, on loopback
        argv[1:1] = ["--notify", f"http://127.0.0.1:{hook.server_port}/hooks/job"]
        out = (tmp_path / "console.log").open("w")
        stack.callback(out.close)
        p = subprocess.Popen(argv, cwd=tmp_path, env=toy_env, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        stack.callback(force_cleanup, str(run_dir))
        stack.callback(kill_group, p)
        deadline = time.monotonic() + 300
        while p.poll() is None and time.monotonic() < deadline:
            got = scrape(port)
            if got is not None:
                texts.append(got[0])
                scrapes.append(got[1])
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(0.25)  # waits on the job: the loop ends as soon as it does
        code = p.wait(30)
        console = (tmp_path / "console.log").read_text()
        assert code == 0, console[-3000:]
        if prom_port is not None:
            window = "[15m]"
            rose = promql(prom_port, f'increase(neuron_watch_restarts_total{{label="collective_hang"}}{window}) > 0')
            assert rose, "Prometheus saw no rise of the restart counter"
            assert promql(prom_port, f'increase(neuron_watch_job_state_entries_total{{state="restarting"}}{window})'
                                     " > 0")
            # the series appears with the first compiling verdict: increase() does not count a
            # series' first sample, so a verdict before the next scrape reads 0 there; the value does not
            assert promql(prom_port, f'max_over_time(neuron_watch_verdicts_total{{label="compiling"}}{window}) > 0')
            after = promql(prom_port,
                           "max_over_time((neuron_watch_last_step and neuron_watch_generation == 1)[15m:1s])")
            assert after and float(after[0]["value"][1]) > 8, after  # generation 1 trained past the hang's step
            # the README's alerting rule, as Prometheus evaluates it: true while the hang lasted
            hung = promql(prom_port, "max_over_time((neuron_watch_last_progress_age_seconds"
                                     " > neuron_watch_hang_timeout_seconds)[15m:1s])")
            assert hung, "the README's rule never fired during the hang"

    assert len(scrapes) >= 3, f"{len(scrapes)} scrape(s) during the run"
    restarts = [s.get(("neuron_watch_restarts_total", (("label", "collective_hang"),))) for s in scrapes]
    assert restarts[0] == 0 and restarts[-1] == 1, restarts  # the counter rises with the hang's label
    assert max(s[("neuron_watch_job_state_entries_total", (("state", "restarting"),))] for s in scrapes) == 1
    gen1_steps = [s[("neuron_watch_last_step", ())] for s in scrapes
                  if s.get(("neuron_watch_generation", ())) == 1 and ("neuron_watch_last_step", ()) in s]
    assert gen1_steps and max(gen1_steps) > 8, gen1_steps  # the step continues past the hang after the restart
    culprits = {dict(labels)["rank"] for s in scrapes for (name, labels), v in s.items()
                if name == "neuron_watch_culprit_info" and v == 1 and dict(labels)["label"] == "collective_hang"}
    assert culprits == {"1"}, culprits  # the hung rank, as one info series (no per-rank series otherwise)
    # what Prometheus' own linter says of a scrape taken mid-run
    promtool = require_binary("promtool") if have_prometheus else None
    if promtool is not None:
        checked = subprocess.run([promtool, "check", "metrics"], input=texts[len(texts) // 2], capture_output=True,
                                 text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    # the server stopped with the coordinator; nothing of the job survives
    assert scrape(port) is None
    evs = events(run_dir)
    assert [e["label"] for e in named(evs, "incident")] == ["collective_hang"]
    # the webhook heard the incident, then the end, in that order (sent before the run exited)
    assert [(b["event"], b.get("label"), b.get("state")) for b in hook.bodies] == [
        ("incident", "collective_hang", None), ("job_finished", None, "finished")]
    assert hook.bodies[0]["culprit"]["rank"] == 1 and hook.bodies[0]["text"].startswith("neuron-watch job ")
    # the same run in CloudWatch, read back from moto
    job_id = next(e["job_id"] for e in evs if e["event"] == "job_started")
    cw = cloudwatch(s3_moto)
    names = listed(cw, namespace)
    assert ("Restarts", (("JobId", job_id), ("Label", "collective_hang"))) in names, sorted(names)
    assert all(dict(d).get("JobId") == job_id for _, d in names)
    start, end = evs[0]["time"], evs[-1]["time"]
    t0, t1 = (datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in (start, end))
    dims = [{"Name": "JobId", "Value": job_id}]
    cw_restarts = [v for _, v in series(cw, namespace, "Restarts", dims, t0, t1)]
    assert cw_restarts[0] == 0 and cw_restarts[-1] == 1, cw_restarts  # the total rose ...
    hang = series(cw, namespace, "Restarts", [*dims, {"Name": "Label", "Value": "collective_hang"}], t0, t1)
    assert hang and hang[-1][1] == 1, hang  # ... under the hang's label
    gens = dict(series(cw, namespace, "Generation", dims, t0, t1))
    cw_steps = [v for t, v in series(cw, namespace, "LastStep", dims, t0, t1) if gens.get(t) == 1]
    assert cw_steps and max(cw_steps) > 8, (cw_steps, gens)  # the step continued past the hang after the restart
    assert f"--cloudwatch {namespace} at {s3_moto.url}: " in console and "request(s) failed" not in console
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


def test_a_webhook_and_cloudwatch_that_are_down_cost_the_job_nothing_and_are_reported(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir, said = tmp_path / "run", tmp_path / "said"
    dead = free_port()  # nothing listens there
    secret = "cw-s3cret-not-real"
    toy_env = dict(toy_env, AWS_ENDPOINT_URL_CLOUDWATCH=f"http://127.0.0.1:{dead}", AWS_ACCESS_KEY_ID="AKIATEST",
                   AWS_SECRET_ACCESS_KEY=secret, AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                   AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--no-prewarm", "--notify",
            f"http://127.0.0.1:{dead}/hooks/T0/s3cret", "--cloudwatch", "NW-down", "torchrun", "--nproc_per_node",
            # torch-free ranks (the endpoints are the subject), a step line every 0.1 s until the loop has said
            # the failed request: CloudWatch's first publish (at the start, from a thread that first imports
            # boto3) must fail while the job runs, whatever the load (the next is a minute later)
            "2", STEP_RANKS, "steady", "600", "--until", str(said)]
    out_path = tmp_path / "console.log"
    with out_path.open("w") as out:
        p = subprocess.Popen(argv, cwd=tmp_path, env=toy_env, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            wait_for("the loop to say CloudWatch's failed request",
                     lambda: "--cloudwatch NW-down: 1 request(s) failed" in out_path.read_text(errors="replace"),
                     time.monotonic() + 240, alive=p, explain=lambda: out_path.read_text(errors="replace")[-3000:])
            said.touch()
            code = p.wait(240)
        finally:
            kill_group(p)
            force_cleanup(str(run_dir))
    console = out_path.read_text()
    assert code == 0, console[-3000:]
    assert named(events(run_dir), "job_finished")[0]["exit_code"] == 0
    assert f"notify http://127.0.0.1:{dead}/...: 0 message(s) sent, 1 failed" in console, console[-3000:]
    assert "s3cret" not in console and "s3cret" not in (run_dir / "events.jsonl").read_text()
    # CloudWatch: the failures said on the console, as they happen and at the end, and as an event
    assert "--cloudwatch NW-down: 1 request(s) failed" in console and "cannot reach CloudWatch" in console
    assert f"--cloudwatch NW-down at http://127.0.0.1:{dead}: 0 value(s) sent in 0 request(s)" in console
    (warned, *_) = [e for e in events(run_dir) if e["event"] == "warning" and e.get("kind") == "cloudwatch_failed"]
    assert warned["failed_requests"] >= 1 and warned["namespace"] == "NW-down"
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
