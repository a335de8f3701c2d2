"""Tailing the rank files (prints figures; no pass/fail): the agent's per-turn cost of watching them.

    .venv/bin/python tests/benchmarks/bench_tail.py [--ranks 32] [--turns 2000] [--rate 1000]

The agent polls every rank's ``stdout.log`` and ``stderr.log`` (torchrun's ``--redirects 3``
files) once per loop turn, 50 turns a second. Printed: CPU per turn and as a share of one core
at 50 turns/s, (1) with nothing new in any file, (2) with ``--rate`` lines a second appended
across the ranks (the lines are written by this process between turns; only the polls are timed).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from neuron_watch.node.tail import RankStreams

TURNS_PER_SECOND = 50  # the agent's loop (watchdog/runtime.py run_node_loop: 20 ms)
LINE = "2026-11-21 13:05:03.000004 INFO step 1003 loss 2.0115 lr 1.0e-04 grad_norm 0.8813 throughput 123.4\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=32, help="local ranks on the node (two files each)")
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--rate", type=int, default=1000, help="lines a second across the node's ranks")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        root = os.path.join(d, "torchrun")
        outs = []
        for lr in range(args.ranks):
            p = os.path.join(root, "job_x", "attempt_0", str(lr))
            os.makedirs(p)
            for name in ("stdout.log", "stderr.log"):
                with open(os.path.join(p, name), "w") as f:
                    f.write("started\n")
            outs.append(open(os.path.join(p, "stdout.log"), "a"))  # noqa: SIM115
        streams = RankStreams("n", d)
        streams.set_log_root(root)
        streams.rank_offset = 0
        streams.poll(0.0, 0.0)
        per_turn = args.rate / TURNS_PER_SECOND
        for label, writing in (("idle files", False), (f"{args.rate:,} lines/s", True)):
            cpu, owed, lines = 0.0, 0.0, 0
            for i in range(args.turns):
                if writing:
                    owed += per_turn
                    while owed >= 1:
                        outs[lines % args.ranks].write(LINE)
                        lines += 1
                        owed -= 1
                    for f in outs:
                        f.flush()
                t0 = time.process_time()
                streams.poll(1.0 + i / TURNS_PER_SECOND, 0.0)
                cpu += time.process_time() - t0
            us = cpu / args.turns * 1e6
            print(f"{2 * args.ranks} files, {label:>14}: {us:7.1f} us per poll = "
                  f"{us * TURNS_PER_SECOND / 1e4:.2f}% of one core at {TURNS_PER_SECOND} polls/s")
        streams.close()
        for f in outs:
            f.close()


if __name__ == "__main__":
    main()
