"""The ranks' output is the job's own: nothing of ours appears in it.

A small deterministic 2-rank gloo job (tests/process/ranks/trial_quiet.py) runs under plain torchrun
(``--log-dir D --redirects 3``) and under ``neuron-watch torchrun`` (which starts torch's worker
server in every rank for its flight-recorder probe). Each rank's stdout and stderr are the same in
both, apart from timing (c10's own log lines carry a time, a thread id, addresses); ``rank-R.log``
holds the same lines. The job runs a worker server of its own: torch's warnings about that one
stay (the job's C++ warnings keep their level); only ours are gone.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, VENV_BIN, events, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process

RANKS = str(Path(__file__).resolve().parent / "ranks" / "trial_quiet.py")
#: long enough for the probe to read every rank's worker server (every 5 s) before the job ends
LINGER = ("--linger", "8", "--own-server")
#: c10's log line prefix "[W1126 14:20:43.070197078 WorkerServer.cpp:113] " (and "[I...", "[E..."),
#: after "[rank0]:" once the process group knows the rank
_C10_LINE = re.compile(r"^(?:\[rank\d+\]:)?\[[IWEF]\d{4} ")


def timeless(line: str) -> str:
    """A c10 log line with its numbers (time, thread, fd, port) replaced; any other line as it is."""
    return re.sub(r"\d+", "#", line) if _C10_LINE.match(line) else line


def rank_files(log_dir: Path) -> dict[tuple[int, str], list[str]]:
    """torchrun's per-rank files under ``log_dir``: (local rank, stdout|stderr) -> lines, timeless."""
    out = {}
    for f in log_dir.rglob("attempt_0/*/std*.log"):
        out[(int(f.parent.name), f.stem)] = [timeless(x) for x in f.read_text().splitlines()]
    return out


def test_a_rank_log_under_neuron_watch_equals_plain_torchruns(tmp_path: Path, toy_env: dict[str, str]) -> None:
    env = dict(toy_env)
    plain_dir = tmp_path / "plain"
    subprocess.run([str(VENV_BIN / "torchrun"), "--nproc_per_node", "2", "--log-dir", str(plain_dir),
                    "--redirects", "3", RANKS, *LINGER],
                   cwd=tmp_path, env=env, check=True, capture_output=True, timeout=240)
    plain = rank_files(plain_dir)
    assert sorted(plain) == [(0, "stderr"), (0, "stdout"), (1, "stderr"), (1, "stdout")]

    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "torchrun", "--nproc_per_node", "2", RANKS, *LINGER]
    code, out = run_to_end(argv, str(tmp_path), env, run_dir, timeout=240)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    assert code == 0 and named(events(run_dir), "job_finished")[0]["exit_code"] == 0, out[-3000:]
    # the probe was there: its worker server answered (else the comparison proves nothing)
    assert "liveness: flight recorder on 2 of 2 rank(s)" in out, out[-3000:]

    watched = rank_files(run_dir / "gen-0" / "torchrun")
    assert watched == plain
    for rank in (0, 1):
        logged = [timeless(x) for x in (run_dir / "gen-0" / f"rank-{rank}.log").read_text().splitlines()]
        assert Counter(logged) == Counter(plain[(rank, "stdout")] + plain[(rank, "stderr")])
    # the job's own worker server is logged as under plain torchrun; ours is not
    for rank in (0, 1):
        assert sum("Server listening to UNIX" in x for x in watched[(rank, "stderr")]) == 1
        assert any("Server listening to UNIX job-r#.sock" in x for x in watched[(rank, "stderr")])  # timeless
