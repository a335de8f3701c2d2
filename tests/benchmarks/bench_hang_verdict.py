"""What one hang line's verdict costs a judge that holds a big job's ranks. Prints figures only.

    .venv/bin/python tests/benchmarks/bench_hang_verdict.py [--ranks 65536] [--rounds 7] [--profile]

A judge of ``--ranks`` ranks (64 a node), every rank in training (a step line each) with a flight
recorder reading of two process groups, as the coordinator of a 1,024-node job holds them; then one
rank prints the Neuron runtime's "suspected hang in collectives" line (the one bench_scale.py
injects) and the judge gives its verdict. The verdict's CPU time is printed (median and best of
``--rounds`` fresh judges), with the steady verdict's before it for scale; ``--profile`` adds the
cProfile of one hang verdict (its top entries by cumulative time).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time

from bench_wire import HANG_LINE  # tests/benchmarks is on sys.path: run as a script

from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import LogLine, RankKey

KB = default_knowledge_base()
RANKS_A_NODE = 64


def trained_judge(ranks: int, t: float) -> tuple[Judge, list[RankKey]]:
    """A judge whose ``ranks`` ranks have each printed a step and had their flight recorder read."""
    judge = Judge(KB, JudgeSettings(), t - 10.0)
    keys = [RankKey(f"node{i // RANKS_A_NODE}", i) for i in range(ranks)]
    lines = [LogLine(k, f"step 100 loss 2.{k.rank % 9999:04d}", t, t, "", k.rank) for k in keys]
    judge.observe_lines(lines)
    for k in keys:
        done = 500 + k.rank % 3  # read at slightly different moments: their newest ids differ
        judge.observe_collectives(k, (
            GroupProgress("0", done, done, done, "nccl:all_reduce", "completed", t, done, "[[4]] Float"),
            GroupProgress("1", done // 2, done // 2, done // 2, "nccl:all_gather", "completed", t, done // 2, ""),
        ), t)
    return judge, keys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=65536)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    t = 1000.0
    steady_ms: list[float] = []
    hang_ms: list[float] = []
    for _ in range(args.rounds):
        judge, keys = trained_judge(args.ranks, t)
        start = time.process_time()
        steady = judge.verdict(t + 1.0)
        steady_ms.append((time.process_time() - start) * 1e3)
        culprit = keys[len(keys) // 2]
        judge.observe_lines([LogLine(culprit, HANG_LINE, t + 2.0, t + 2.0, "", 0)])
        start = time.process_time()
        hung = judge.verdict(t + 2.5)
        hang_ms.append((time.process_time() - start) * 1e3)
        assert hung.culprit == culprit, hung
    print(f"# a judge of {args.ranks:,} ranks in training; {args.rounds} rounds")
    print(f"steady verdict ({steady.label.value}): median {statistics.median(steady_ms):.2f} ms, "
          f"best {min(steady_ms):.2f} ms CPU")
    print(f"hang verdict ({hung.label.value}, culprit {hung.culprit}): median {statistics.median(hang_ms):.1f} ms, "
          f"best {min(hang_ms):.1f} ms CPU")
    if args.profile:
        judge, keys = trained_judge(args.ranks, t)
        judge.verdict(t + 1.0)
        judge.observe_lines([LogLine(keys[0], HANG_LINE, t + 2.0, t + 2.0, "", 0)])
        prof = cProfile.Profile()
        prof.enable()
        judge.verdict(t + 2.5)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(14)
        print(out.getvalue())


if __name__ == "__main__":
    main()
