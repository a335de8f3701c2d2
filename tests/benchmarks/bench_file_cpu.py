"""What a test file really costs the machine: its wall time beside all the CPU its run spent (prints figures).

    CI=true .venv/bin/python -m tests.benchmarks.bench_file_cpu tests/integration/test_srun.py [FILE ...]
        [--rounds N] [--tree DIR ...] [--pytest-args "-k hang"]

Each file is run alone as ``NW_TEST_WORKERS=0 tests/run -q -p no:cacheprovider FILE`` runs it, without
the set-up (``.venv/bin/python -m pytest --durations=25 -q -p no:cacheprovider FILE`` in the tree),
inside a control group of its own (cgroup v1 ``cpuacct`` or cgroup v2 ``cpu.stat``), which every
process the run starts stays in, whoever reaps it: Slurm's ``slurmstepd`` and the job steps under it
included, which ``tests/profile.json`` cannot see (nobody in the test worker reaps them). Printed per
run: wall seconds, the group's CPU seconds (user, system), the whole machine's busy CPU seconds over the
same interval (``/proc/stat``: the others' load too) and the load average before and after. With
several files, trees (``--tree``: a checkout of the code before a change beside this one, its ``.venv``
this one's) and ``--rounds``, the runs alternate (A B A B), so that a change of the machine's load falls
on all of them alike.

Without a control group we may create (not root, no cgroup fs), the group's column says so and only the
machine's CPU is printed: with others on the machine, that figure is an upper bound.
A process still in the group after the run is named: it outlived the run (a leak to find).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.cpugroup import CpuGroup

ROOT = Path(__file__).resolve().parents[2]


def machine_busy_seconds() -> float:
    """Busy CPU seconds of every core since boot (``/proc/stat``: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is counted in user already
    busy = sum(fields[:8]) - idle
    return busy / os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class Figures:
    file: str
    code: int
    wall: float
    user: float | None
    system: float | None
    machine: float
    load_before: str
    load_after: str
    note: str


def run_file(tree: Path, file: str, pytest_args: list[str], run_no: int, log_dir: Path | None) -> Figures:
    """Run ``file`` of ``tree`` alone as ``tests/run`` runs it, in a group of its own, and measure it."""
    group = CpuGroup.create(f"nw-bench-{os.getpid()}-{run_no}-{Path(file).stem}")
    # the shell puts itself in the group before it becomes pytest, so nothing is started outside it
    enter = group.enter_then() if isinstance(group, CpuGroup) else []
    argv = [*enter, str(tree / ".venv" / "bin" / "python"), "-m", "pytest", "--durations=25", "-q", "-p",
            "no:cacheprovider", *pytest_args, file]
    env = dict(os.environ, NW_TEST_WORKERS="0", CI=os.environ.get("CI", "true"))
    load_before, machine0, t0 = load_average(), machine_busy_seconds(), time.monotonic()
    done = subprocess.run(argv, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall, machine = time.monotonic() - t0, machine_busy_seconds() - machine0
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / f"{run_no:02d}-{tree.name}-{Path(file).stem}.log").write_text(done.stdout)
    tail = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
    note = tail[0]
    user = system = None
    if isinstance(group, CpuGroup):
        user, system = group.cpu_seconds()
        if left := group.remove():
            note += f"; {left}"
    else:
        note += f"; {group}"
    label = file if tree == ROOT else f"{tree}:{file}"
    return Figures(label, done.returncode, wall, user, system, machine, load_before, load_average(), note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each file, alternated (default 1)")
    parser.add_argument("--tree", type=Path, action="append", help="a checkout to run the files of (repeatable; "
                        "default this one)")
    parser.add_argument("--log-dir", type=Path, help="keep each run's pytest output here")
    parser.add_argument("--pytest-args", default="", help="more pytest arguments, e.g. \"-k 'not scancel'\" "
                        "(given to every run)")
    args = parser.parse_args()
    print(f"{'wall-s':>7} {'CPU-s':>7} {'user':>7} {'sys':>6} {'machine':>8}  {'load before -> after':<30} "
          "file: result")
    trees = [t.resolve() for t in args.tree] if args.tree else [ROOT]
    runs = [(tree, file) for _ in range(args.rounds) for file in args.files for tree in trees]
    for run_no, (tree, file) in enumerate(runs):
        f = run_file(tree, file, shlex.split(args.pytest_args), run_no, args.log_dir)
        cpu = f"{f.user + f.system:7.1f} {f.user:7.1f} {f.system:6.1f}" if f.user is not None and f.system is not None \
            else f"{'-':>7} {'-':>7} {'-':>6}"
        print(f"{f.wall:7.1f} {cpu} {f.machine:8.1f}  {f.load_before + ' -> ' + f.load_after:<30} "
              f"{f.file}: rc {f.code}, {f.note}", flush=True)


if __name__ == "__main__":
    main()
