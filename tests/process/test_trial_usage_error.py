"""torchrun refusing its own arguments is a configuration error, not a crash to restart.

Real torchrun, under ``neuron-watch torchrun`` and on its own with the same arguments: a value its
configuration check refuses (``--nproc_per_node two``: torchrun raises ValueError and exits 1) and a
flag its parser does not know (argparse's usage text and exit 2). Under neuron-watch the job ends
with torchrun's own exit code, its message printed once, one generation, a ``config_error`` verdict
in ``events.jsonl``, no restart and no evidence bundle; on each node of a job of two as well (torchrun
checks its configuration before its rendezvous).
"""

from __future__ import annotations

import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    TOY,
    VENV_BIN,
    events,
    free_port,
    named,
    pids_with_env,
    run_to_end,
    start_node,
)

pytestmark = pytest.mark.process


@pytest.mark.parametrize(("bad", "message"), [
    (["--nproc_per_node", "two"], "Unsupported nproc_per_node value: two"),
    (["--nproc_per_node", "1", "--no-such-torchrun-flag"], "unrecognized arguments: --no-such-torchrun-flag"),
], ids=["configuration-check", "parser"])
def test_torchrun_refusing_its_arguments_is_not_restarted(tmp_path: Path, toy_env: dict[str, str], bad: list[str],
                                                          message: str) -> None:
    args = [*bad, TOY, "--steps", "3"]
    plain = subprocess.run([str(VENV_BIN / "torchrun"), *args], cwd=tmp_path, env=toy_env, capture_output=True,
                           text=True, timeout=240)
    assert plain.returncode != 0 and message in plain.stderr, plain.stderr[-2000:]

    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--max-restarts", "3", "torchrun", *args]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, timeout=240)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    _assert_stopped_as_a_configuration_error(code, out, run_dir, plain, message)


def test_torchrun_of_two_nodes_refusing_its_configuration_is_not_restarted_on_either_node(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """Two nodes on a static rendezvous (one wrapper a node, node 0 hosting the coordinator): torchrun
    checks its configuration before its rendezvous, so each node's torchrun refuses ``--nproc_per_node
    two`` and exits without waiting for the other; each wrapper, asking torchrun's check after that
    early end, stops its node as a configuration error, never restarted."""
    message = "Unsupported nproc_per_node value: two"
    master, coordinator = free_port(), free_port()

    def args(node_rank: int) -> list[str]:
        return ["--nnodes", "2", "--node_rank", str(node_rank), "--nproc_per_node", "two", "--master_addr",
                "127.0.0.1", "--master_port", str(master), TOY, "--steps", "3"]

    # node 1 alone, with no node 0 to meet: refused at once, not after a rendezvous timeout
    plain = subprocess.run([str(VENV_BIN / "torchrun"), *args(1)], cwd=tmp_path, env=toy_env, capture_output=True,
                           text=True, timeout=240)
    assert plain.returncode != 0 and message in plain.stderr, plain.stderr[-2000:]

    env = dict(toy_env, NEURON_WATCH_SECRET="c" * 32)
    with ExitStack() as stack:
        nodes = [start_node(stack, [NEURON_WATCH, "--run-dir", str(tmp_path / f"node{i}"), "--max-restarts", "3",
                                    "--job-id", "refused-two-nodes", "--coordinator", f"127.0.0.1:{coordinator}",
                                    "torchrun", *args(i)],
                            cwd=tmp_path, env=env, out=tmp_path / f"node{i}.out", run_dir=tmp_path / f"node{i}")
                 for i in range(2)]
        codes = [p.wait(240) for p in nodes]
    for i, code in enumerate(codes):
        run_dir = tmp_path / f"node{i}"
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
        _assert_stopped_as_a_configuration_error(code, (tmp_path / f"node{i}.out").read_text(), run_dir, plain,
                                                 message)


def _assert_stopped_as_a_configuration_error(code: int, out: str, run_dir: Path,
                                             plain: subprocess.CompletedProcess[str], message: str) -> None:
    """The wrapper ended as torchrun did alone, its words said once, with a ``config_error`` verdict,
    one generation, no restart and no evidence bundle."""
    assert code == plain.returncode, out[-3000:]
    # torchrun's own words, once (a restart printed them again)
    assert out.count(message) == 1 + out.count("torchrun rejects its arguments"), out[-3000:]
    assert "verdict: config_error" in out and "-> stop, no restart" in out, out[-3000:]
    assert f"exit code {plain.returncode} (torchrun's own)" in out, out[-3000:]
    if "usage: torchrun" in plain.stderr:
        assert out.count("usage: torchrun") == 1, out[-3000:]

    evs = events(run_dir)
    assert not named(evs, "restart") and not named(evs, "incident"), evs
    (verdict,) = named(evs, "verdict")
    assert verdict["label"] == "config_error" and verdict["action"] == "stop"
    assert message in verdict["reason"]
    assert evs[-1]["event"] == "job_finished" and evs[-1]["exit_code"] == plain.returncode
    assert evs[-1]["restarts"] == 0 and evs[-1]["state"] == "failed"
    assert sorted(p.name for p in run_dir.glob("gen-*")) == ["gen-0"]
    assert not (run_dir / "incidents").exists()
