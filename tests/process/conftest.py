"""Real runs shared by the process tests of several files (session-scoped, each read by tests of one
``xdist_group`` so that pytest-xdist's loadgroup keeps them on the worker that ran it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import pids_with_env, toy_environment
from tests.process.test_multinode import job, wait_all


@pytest.fixture(scope="session")
def two_node_hang(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[int], Path, list[Path]]:
    """One run read by the multi-node restart's test, the shared host name's and the two consoles':
    2 nodes x 2 ranks on one host, each named by the host name and its node_rank (no
    ``NEURON_WATCH_NODE``), rank 3 (node 1) hangs at step 8, every node restarts and finishes.
    (exit codes, its directory with ``node<i>.out``, each node's run dir); no pid of it survives."""
    tmp_path = tmp_path_factory.mktemp("two-node-hang")
    with job(tmp_path, toy_environment(), 2, ["--steps", "14", "--hang-at", "8", "--hang-rank", "3"],
             ["--hang-timeout", "6"], named=False) as nodes:
        codes = wait_all(nodes, 300)
    for _p, run_dir in nodes:
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    return codes, tmp_path, [run_dir for _p, run_dir in nodes]
