"""tests/run's scheduling: the tests of one ``xdist_group`` run on one worker, so that the real run
they share (a module-scoped fixture) is started once, not once per worker that gets one of them.

pytest-xdist's ``--dist loadgroup`` learns a test's group from a suffix it writes into the test's
node id on the worker; on a pytest whose node ids no longer take that write, the groups are
silently dealt out one test at a time, and every shared run of the suite starts on both workers.
This runs two small modules, each a group of three tests reading one module-scoped fixture, the
way ``tests/run`` runs the suite (two workers, ``loadgroup``), and counts the fixture's set-ups.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

_MODULE = '''
import os
from pathlib import Path

import pytest

OUT = Path(__file__).with_suffix(".log")


@pytest.fixture(scope="module")
def shared_run() -> str:
    with OUT.open("a") as f:
        f.write("setup " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    return "ran"


@pytest.mark.xdist_group("{group}")
@pytest.mark.parametrize("n", range(3))
def test_reads_the_run(shared_run: str, n: int) -> None:
    with OUT.open("a") as f:
        f.write("test " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''


def test_a_groups_tests_share_one_worker_and_its_module_run_is_set_up_once(tmp_path: Path) -> None:
    for group in ("alpha", "beta"):
        (tmp_path / f"test_{group}.py").write_text(_MODULE.format(group=group))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "NW_"))}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "-n", "2", "--dist", "loadgroup", str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "6 passed" in r.stdout, r.stdout[-3000:]
    for group in ("alpha", "beta"):
        lines = (tmp_path / f"test_{group}.log").read_text().splitlines()
        setups = [line for line in lines if line.startswith("setup ")]
        workers = {line.split()[1] for line in lines}
        # one set-up and one worker per group: split across two workers, the run starts twice
        assert len(setups) == 1 and len(workers) == 1, (group, lines)


_JOB_SITECUSTOMIZE = 'print("the job\'s own sitecustomize", flush=True)\n'
_RANK = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'print(\\'a rank\\')'], check=True)\n"
#: the shape of the next generation's torchrun started ahead: ``python -c`` importing torchrun's module
_SPARE = "\nimport torch.distributed.run as run\nrun.main()\n"


def test_the_start_count_counts_torchrun_and_its_ranks_once_and_chains_the_next_sitecustomize(tmp_path: Path) -> None:
    """``NW_COUNT_STARTS``' counter sits on ``PYTHONPATH`` between the rank probe's bootstrap (before
    it, chaining to it) and the job's own ``sitecustomize`` (after it): each process is counted once,
    by its kind, and the job's own still runs once (a chain back to the bootstrap would recurse).
    torchrun is its script, or a pre-started ``python -c`` one (a stand-in torch here: no import cost)."""
    from neuron_watch.node.rank_probe import BOOTSTRAP_DIR
    from tests.fixtures.starts import _HERE, tally

    job = tmp_path / "job"
    (job / "torch" / "distributed").mkdir(parents=True)
    (job / "sitecustomize.py").write_text(_JOB_SITECUSTOMIZE)
    for package in (job / "torch", job / "torch" / "distributed"):
        (package / "__init__.py").write_text("")
    (job / "torch" / "distributed" / "run.py").write_text(f"def main() -> None:\n    exec({_RANK!r})\n")
    (tmp_path / "torchrun").write_text(_RANK)  # run as `python .../torchrun`, as the venv's script is
    log = tmp_path / "starts.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "NW_", "NEURON_WATCH_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(BOOTSTRAP_DIR), str(_HERE), str(job)]), NW_START_LOG=str(log),
               PYTEST_CURRENT_TEST="tests/process/test_x.py::test_y (call)")
    for argv in ([sys.executable, str(tmp_path / "torchrun")], [sys.executable, "-c", _SPARE]):
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.splitlines() == ["the job's own sitecustomize"] * 2 + ["a rank"], (argv, r.stdout)
    assert sorted(log.read_text().splitlines()) == ["rank\ttests/process/test_x.py::test_y"] * 2 + [
        "torchrun\ttests/process/test_x.py::test_y"] * 2
    assert tally(log.read_text().splitlines()) == {"tests/process/test_x.py": {"torchrun": 2, "rank": 2}}


_PROFILED = '''
import subprocess
import sys

import pytest


def burn(seconds: float) -> None:
    """A child that spends ``seconds`` of CPU (reaped here, as a test's real run is)."""
    code = f"import time\\nwhile time.process_time() < {seconds}: pass\\n"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def shared_run() -> object:
    burn(1.0)
    yield "ran"
    burn(0.5)


@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("n", range(2))
def test_reads_the_run(shared_run: str, n: int) -> None:
    assert shared_run == "ran"


def test_burns_its_own() -> None:
    burn(0.8)
'''


def test_each_tests_cpu_is_recorded_with_a_shared_runs_cpu_apart_across_workers(tmp_path: Path) -> None:
    """``NW_RECORD_DURATIONS``' CPU seconds (tests/fixtures/cputime.py) as ``tests/run`` runs the
    suite: a test's own reaped child counts in the test; a module fixture's set-up and teardown
    count in the fixture, not in the test that happened to set it up or tear it down, and its
    set-ups are counted (a run that starts twice shows 2)."""
    import json

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "test_profiled.py").write_text(_PROFILED)
    profile = tmp_path / "profile.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "NW_"))}
    env.update(NW_RECORD_DURATIONS="1", NW_PROFILE=str(profile), PYTHONPATH=str(root))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.fixtures.cputime",
                        "--rootdir", str(tmp_path), "-n", "2", "--dist", "loadgroup", str(tmp_path)], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads(profile.read_text())
    tests = {k.split("::", 1)[1]: cpu for k, (_wall, cpu) in data["tests"].items()}
    assert set(tests) == {"test_reads_the_run[0]", "test_reads_the_run[1]", "test_burns_its_own"}, data
    (_wall, fixture_cpu, setups) = data["fixtures"]["test_profiled.py::shared_run"]
    assert fixture_cpu >= 1.5, data  # its set-up's child and its teardown's
    assert setups == 1, data  # started once: its teardown, in another report, is not a second start
    assert tests["test_burns_its_own"] >= 0.8, data
    # the readers spent no more than pytest's own bookkeeping: far less than any child above
    assert tests["test_reads_the_run[0]"] < 0.5 and tests["test_reads_the_run[1]"] < 0.5, data


_ORPHAN = '''
import os, sys, time
if os.fork() == 0:
    os.setsid()  # away from its parent, which exits at once: pid 1 reaps it, nobody here does
    while time.process_time() < 1.0:
        pass
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(repr(time.process_time()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
os._exit(0)
'''


def test_a_control_group_counts_the_cpu_of_a_process_nobody_here_reaps(tmp_path: Path) -> None:
    """What tests/fixtures/cpugroup.py is for (a Slurm job step, re-parented to pid 1): a process
    started in the group that forks an orphan, which burns a CPU second; the group counts the
    orphan's CPU, which this process's reaped children (``RUSAGE_CHILDREN``) never hold."""
    import resource

    from tests.fixtures.cpugroup import CpuGroup
    from tests.fixtures.wait import wait_for, within

    group = CpuGroup.create(f"nw-test-{os.getpid()}-{tmp_path.name}")
    if isinstance(group, str):
        from tests.conftest import IN_CI

        if IN_CI:  # CI runs as root, as for the network namespaces and the tmpfs of the disk faults
            pytest.fail(f"no control group for the Slurm tests' CPU: {group}")
        pytest.skip(group)
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([*group.enter_then(), sys.executable, "-c", _ORPHAN, str(tmp_path / "cpu")], check=True,
                       timeout=60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        orphan_cpu = float(wait_for("the orphan's CPU second", lambda: (tmp_path / "cpu").exists()
                                    and (tmp_path / "cpu").read_text(), within(120), interval=0.1))
        wait_for("the orphan's exit", lambda: not group.pids(), within(30))
        user, system = group.cpu_seconds()
        reaped = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        assert user + system >= orphan_cpu, (user, system, orphan_cpu)
        assert reaped < orphan_cpu, (reaped, orphan_cpu)  # the parent alone: a Python start, not the second
    finally:
        assert group.remove() == "", group.pids()
