"""Aborts at exit of gloo ranks that exit right after their last collective (prints figures; no pass/fail).

    .venv/bin/python -m tests.benchmarks.bench_exit_abort [--runs 12]

The pair of tests/fixtures/gloo_exit.py (two gloo ranks, a few ``all_reduce``, no
``destroy_process_group``), ``--runs`` times without the rank bootstrap and as many with it.
Printed: runs in which a rank aborted (SIGABRT, "terminate called without an active exception")
for each, and the mean time from a rank's last collective to its end over the clean exits.
"""

from __future__ import annotations

import argparse
import tempfile

from tests.fixtures.gloo_exit import run_pair


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12)
    a = ap.parse_args()
    for bootstrap in (False, True):
        aborts, exits = 0, []
        for _ in range(a.runs):
            with tempfile.TemporaryDirectory(prefix="nw-abrt-") as work:
                run = run_pair(work, bootstrap)
            aborts += run.aborted
            exits += run.exit_seconds
        name = "with the rank bootstrap" if bootstrap else "without neuron-watch"
        print(f"{name:26s} aborts {aborts}/{a.runs} runs; a rank's exit after its last collective "
              f"{sum(exits) / max(1, len(exits)):.2f} s mean over {len(exits)} clean exits")


if __name__ == "__main__":
    main()
