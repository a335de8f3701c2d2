"""The wire with real jobs: jobs that share a port and a secret, and megabyte lines.

Two real jobs on one machine, one coordinator port and one secret, no ``--job-id`` (a secret
exported in a shell profile), their ranks torch-free step printers under a real torchrun (the subject
is the wire, not torch: no rank pays ``import torch``): before, both derived the same job id from the
coordinator address; job B's node joined job A (``node_rejoined``) and job A's coordinator relaunched it from job A's
checkpoint. Now the job id includes torchrun's rendezvous and is bound into the signing keys: job
A's coordinator refuses job B's node by name, both sides say so, and job A finishes untouched.

16 ranks printing megabyte lines: before, a batch over the 64 MiB frame limit wedged the link
(an empty merged.log, the finished job still "running"). Now every line arrives."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    STEP_RANKS,
    events,
    force_cleanup,
    free_port,
    kill_group,
    named,
    pids_with_env,
    run_to_end,
    wait_until_gone,
)

pytestmark = pytest.mark.process

SECRET = "one secret in a shell profile, 32+"
RANK_SCRIPT = Path(__file__).parent / "ranks" / "megabyte_lines.py"


@contextmanager
def two_node_job(tmp_path: Path, env: dict[str, str], name: str, coord_port: int, seconds: float,
                 until: Path) -> Iterator[list[tuple[subprocess.Popen[str], Path]]]:
    """A 2-node job (nodes n0, n1 as on the other job's hosts), no --job-id, the given coordinator port;
    its ranks train for at most ``seconds``, and end as soon as ``until`` exists; rank 0 saves an NxD-style
    checkpoint at step 5 (what a node joined to the wrong job would be relaunched from)."""
    master = free_port()
    ckpt = tmp_path / f"{name}-ckpt"
    nodes = []
    with ExitStack() as stack:
        for i in range(2):
            run_dir = tmp_path / f"{name}-node{i}"
            node_env = dict(env, NEURON_WATCH_NODE=f"n{i}", NEURON_WATCH_SECRET=SECRET)
            argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
                    "--coordinator", f"127.0.0.1:{coord_port}",
                    "torchrun", "--nnodes", "2", "--node_rank", str(i), "--nproc_per_node", "1",
                    "--master_addr", "127.0.0.1", "--master_port", str(master),
                    STEP_RANKS, "steady", str(seconds), "--save-to", str(ckpt), "--until", str(until)]
            out = open(tmp_path / f"{name}-node{i}.out", "w")  # noqa: SIM115 - closed by the stack
            stack.callback(out.close)
            p = subprocess.Popen(argv, cwd=tmp_path, env=node_env, stdout=out, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            stack.callback(force_cleanup, str(run_dir))
            stack.callback(kill_group, p)
            nodes.append((p, run_dir))
        yield nodes


def _out(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.out").read_text()


def test_two_jobs_sharing_a_port_and_a_secret_are_refused_by_name(tmp_path: Path, toy_env: dict[str, str]) -> None:
    port = free_port()
    # Job A must outlast job B (two wrappers and torchruns, whose multi-node argument check imports
    # torch): it trains until B has ended (``a_may_end``), 240 s at most
    a_may_end = tmp_path / "job-b-ended"
    with two_node_job(tmp_path, toy_env, "a", port, seconds=240, until=a_may_end) as job_a:
        run_a = job_a[0][1]
        deadline = time.monotonic() + 180
        # Job A runs: both of its nodes joined its coordinator.
        while not ((run_a / "events.jsonl").exists()
                   and {e["node"] for e in named(events(run_a), "node_joined")} == {"n0", "n1"}):
            assert time.monotonic() < deadline and all(p.poll() is None for p, _ in job_a), _out(tmp_path, "a-node0")
            time.sleep(0.2)
        job_a_id = named(events(run_a), "job_started")[0]["job_id"]
        with two_node_job(tmp_path, toy_env, "b", port, seconds=0.5, until=tmp_path / "never") as job_b:
            # B's node 0 cannot host its coordinator (A holds the port); B's node 1 reaches A's.
            b1_code = job_b[1][0].wait(180)
            b0_code = job_b[0][0].wait(180)
        assert all(p.poll() is None for p, _ in job_a), _out(tmp_path, "a-node0")[-3000:]  # A outlasted B
        a_may_end.touch()  # A's ranks print "training done" and exit
        codes_a = [p.wait(240) for p, _ in job_a]
    b1 = _out(tmp_path, "b-node1")
    assert codes_a == [0, 0], _out(tmp_path, "a-node0")[-3000:]
    assert b1_code == 2, b1[-3000:]  # ExitCode.USAGE: a configuration to fix, named
    assert b0_code != 0
    evs_a = events(run_a)
    # Job A: B's node never joined, nothing was relaunched, and the refusal names both jobs.
    assert not named(evs_a, "node_rejoined") and not named(evs_a, "restart")
    assert {e["node"] for e in named(evs_a, "node_joined")} == {"n0", "n1"}
    refused_a = named(evs_a, "job_refused")
    assert len(refused_a) == 1 and refused_a[0]["job"] == job_a_id and refused_a[0]["node"] == "n1"
    job_b_id = refused_a[0]["other_job"]
    assert job_b_id.startswith("nw-") and job_b_id != job_a_id
    assert named(evs_a, "job_finished")[0]["exit_code"] == 0
    assert f"refused node n1 of job {job_b_id}: this coordinator runs job {job_a_id}" in _out(tmp_path, "a-node0")
    # Job B's node: a console line and an event naming both jobs.
    assert f"runs job '{job_a_id}', this node belongs to job '{job_b_id}'" in b1
    refused_b = named(events(job_b[1][1]), "job_refused")
    assert [(e["job"], e["other_job"]) for e in refused_b] == [(job_b_id, job_a_id)]
    assert not (job_b[1][1] / "gen-1").exists()  # never relaunched from A's checkpoint
    for _p, run_dir in job_a + job_b:
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 15) == []
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


RANKS = 16
LINES = 6
# Just under the tail's 1 MiB partial-line bound (tail.MAX_PARTIAL), so that a line cut by a read
# boundary is never passed on in two pieces: this test is about the wire, not the tail.
SIZE = (1 << 20) - 64


def test_sixteen_ranks_printing_megabyte_lines_finish_with_every_line(tmp_path: Path,
                                                                       toy_env: dict[str, str]) -> None:
    """16 ranks printing 1 MiB lines make batches over the 64 MiB frame limit: each is split under it,
    so the link never wedges (an empty merged.log, a finished job still "running", or judged hung)."""
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "torchrun", "--nproc_per_node", str(RANKS),
            str(RANK_SCRIPT), "--lines", str(LINES), "--size", str(SIZE)]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 300)
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    assert named(evs, "job_finished")[0]["exit_code"] == 0
    assert not named(evs, "agent_dropped") and not named(evs, "restart") and not named(evs, "incident")
    counts: dict[str, int] = {}
    done = set()
    with open(run_dir / "merged.log", encoding="utf-8") as f:
        for line in f:
            tag, text = line.rstrip("\n").split(" | ", 1)
            if text.startswith("rank "):
                prefix, filler = text.rsplit(" ", 1)
                assert filler == "m" * SIZE, prefix  # the line whole
                counts[tag.rsplit(" ", 1)[1]] = counts.get(tag.rsplit(" ", 1)[1], 0) + 1
            elif text.startswith("training done rank "):
                done.add(int(text.rsplit(" ", 1)[1]))
    assert done == set(range(RANKS))  # the last line of every rank arrived
    assert sum(counts.values()) == RANKS * LINES, counts
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
