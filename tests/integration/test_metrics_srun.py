"""``--metrics`` on ``neuron-watch srun``'s batch host, on a real Slurm (tests/fixtures/slurm.py): the
coordinator of a two-node sbatch job serves its metrics while the job runs, and stops with it."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.procs import events, free_port, named
from tests.fixtures.slurm import SlurmCluster
from tests.integration.test_srun import submitted

pytestmark = pytest.mark.integration


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_the_srun_batch_host_serves_the_jobs_metrics(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    port = free_port()
    # steps of 0.1 s: the job trains 3 s, time for a scrape while both nodes train
    with submitted(slurm_cluster, tmp_path, 2, ["--step-time", "0.1"],
                   watch_args=["--metrics", f"127.0.0.1:{port}"]) as job:
        def both_nodes_training() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
            s = scrape(port)
            ok = (s is not None and s.get(("neuron_watch_nodes", (("state", "observed"),))) == 2
                  and s.get(("neuron_watch_last_step", ()), 0) > 0)
            return s if ok else None

        seen = slurm_cluster.wait_for("a scrape with both nodes observed and a step", both_nodes_training,
                                      timeout=240, interval=0.2)
        assert isinstance(seen, dict)
        assert seen[("neuron_watch_ranks", (("state", "progressing"),))] >= 1  # a step was printed
        assert seen[("neuron_watch_job_info", (("job_id", f"slurm-{job.id}"),))] == 1
        state = job.wait()
        assert state == "COMPLETED", job.explain()
        assert named(events(job.run_dir), "job_finished")[-1]["exit_code"] == 0
        assert scrape(port) is None  # stopped with the coordinator
        job.assert_nothing_survives()
