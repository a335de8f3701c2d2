"""What a rank's start and exit cost in CPU, part by part (prints figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_rank_start.py [--rounds 3]

Each variant runs in a fresh interpreter of this venv, alternated round by round (the machine's load
moves), and is measured as the kernel counts a reaped child (user + sys). Inside, the process reads
its own CPU clock around ``import torch`` (which imports ``torch.distributed`` too) and around a gloo
``init_process_group`` of one rank with one ``all_reduce``; the rest of its total is the interpreter's
start and exit.

* ``torch``: a toy rank's part (torch, gloo, one collective), as the tests' ranks start.
* ``autoload=0``: the same with ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, the one variable torch reads at
  import to skip work (the entry-point scan for out-of-tree device backends, torch/__init__.py).
* ``frozen exit``: the same, ``gc.freeze()`` last: what the interpreter's final garbage collection over
  torch's objects costs at exit (a figure only: nothing here freezes a rank).
* ``lightning`` / ``lightning, no transformers``: ``import lightning.pytorch`` in this venv and in one
  without transformers (tests/fixtures/venvs.py, as test_frameworks runs its Lightning jobs).

Medians of the rounds and the load average are printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fixtures.procs import free_port  # noqa: E402
from tests.fixtures.venvs import venv_without  # noqa: E402

RANK = """
import time
t0 = time.process_time()
import torch
t1 = time.process_time()
import torch.distributed as dist
dist.init_process_group("gloo")
x = torch.ones(4)
dist.all_reduce(x)
t2 = time.process_time()
dist.destroy_process_group()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""
FROZEN = RANK + "import gc\ngc.freeze()\n"
LIGHTNING = """
import time
t0 = time.process_time()
import lightning.pytorch
t1 = time.process_time()
print(f"{t1 - t0:.3f} 0")
"""


def measure(python: str, code: str, extra: dict[str, str]) -> tuple[float, float, float]:
    """(total CPU-s of the child, its import, its init + collective)."""
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1", **extra}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return total, float(out[0]), float(out[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lean = str(venv_without(Path(tmp) / "venv", ("transformers",)) / "python3")
        variants = {
            "torch": (sys.executable, RANK, {}),
            "autoload=0": (sys.executable, RANK, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}),
            "frozen exit": (sys.executable, FROZEN, {}),
            "lightning": (sys.executable, LIGHTNING, {}),
            "lightning, no transformers": (lean, LIGHTNING, {}),
        }
        seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
        print(f"load average at start: {os.getloadavg()}")
        for i in range(a.rounds):
            for name, (python, code, extra) in variants.items():
                got = measure(python, code, extra)
                seen[name].append(got)
                print(f"round {i + 1} {name:28s} total {got[0]:5.2f}  import {got[1]:5.2f}  "
                      f"init+all_reduce {got[2]:5.3f}", flush=True)
    print(f"load average at end: {os.getloadavg()}")
    for name, rows in seen.items():
        total = statistics.median(r[0] for r in rows)
        imported = statistics.median(r[1] for r in rows)
        print(f"median {name:28s} total {total:5.2f} CPU-s, import {imported:5.2f}, start+exit {total - imported:5.2f}")


if __name__ == "__main__":
    main()
