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
