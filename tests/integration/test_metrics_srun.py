"""``--metrics`` on ``neuron-watch srun``'s batch host, on a real Slurm (tests/fixtures/slurm.py): the
coordinator of a two-node sbatch job serves its metrics while the job runs, and stops with it.

The job is the clean srun run that test_srun.py reads too (``srun_clean``, tests/integration/conftest.py):
it runs with ``--metrics``, and its fixture scrapes while both nodes train and again after the end."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.procs import events, named
from tests.integration.test_srun import SRUN_CLEAN_GROUP, CleanRun

pytestmark = pytest.mark.integration

Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Scrape | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def scrape_while_both_nodes_train(port: int) -> Scrape | None:
    """A scrape of ``port`` that shows both nodes observed and a step trained, or None."""
    s = scrape(port)
    ok = (s is not None and s.get(("neuron_watch_nodes", (("state", "observed"),))) == 2
          and s.get(("neuron_watch_last_step", ()), 0) > 0)
    return s if ok else None


@pytest.mark.xdist_group(SRUN_CLEAN_GROUP)
def test_the_srun_batch_host_serves_the_jobs_metrics(srun_clean: CleanRun) -> None:
    job = srun_clean.job
    seen = srun_clean.scraped
    assert seen is not None, f"no scrape showed both nodes observed and a step before the job ended\n{job.explain()}"
    assert seen[("neuron_watch_ranks", (("state", "progressing"),))] >= 1  # a step was printed
    assert seen[("neuron_watch_job_info", (("job_id", f"slurm-{job.id}"),))] == 1
    assert srun_clean.state == "COMPLETED", job.explain()
    assert named(events(job.run_dir), "job_finished")[-1]["exit_code"] == 0
    assert srun_clean.after is None  # stopped with the coordinator
