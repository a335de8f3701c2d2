"""The live watchdog against offline ``diagnose`` on the real-log corpus (prints figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_live_vs_offline.py [--label L] [--batch B] [--all]

Each excerpt of ``tests/data/real-logs/`` is judged twice: offline, as ``neuron-watch diagnose
excerpt.log`` does, and live, replayed through the path a running job takes
(``tests/fixtures/live_replay.py``: the node's tail, batches, classification and error blocks, the
coordinator's judge fed with ``now`` advancing, recovery's commands), as one rank's lines that then
end as the excerpt's label says the process did: a failure the log ends on exits with code 1, a hang
goes silent, a healthy run, a compile or a transient wait goes on. Printed: how often the action live
(what recovery did: restart, drain and restart, stop, wait) is the action offline (the verdict's), over
the corpus and per label; the disagreements by (offline action -> live action), the ones that matter
most first (a configuration error restarted live, a hardware fault not drained live, a failure left
waiting live); the largest families (offline label and action -> live label and action) with three
excerpts each; and the healthy excerpts that stay healthy live. ``--all`` lists every disagreement.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.events import Action, Label
from neuron_watch.runtime import knowledge_base
from tests.fixtures.corpus_score import EXPECTED_ACTIONS
from tests.fixtures.live_replay import End, LiveJob, live_lines, replay
from tests.fixtures.real_logs import Excerpt, load_corpus

LABELS = [label.value for label in Label]
#: the disagreements that change most what the job goes through, worst first
WORST: tuple[tuple[str, Callable[[Action, Action], bool]], ...] = (
    ("config restarted live", lambda off, live: off is Action.STOP and live in (Action.RESTART,
                                                                               Action.DRAIN_AND_RESTART)),
    ("hardware not drained live", lambda off, live: off is Action.DRAIN_AND_RESTART
     and live is not Action.DRAIN_AND_RESTART),
    ("failure left waiting live", lambda off, live: off is not Action.WAIT and live is Action.WAIT),
    ("offline waits, live acts", lambda off, live: off is Action.WAIT and live is not Action.WAIT),
)


def end_of(ex: Excerpt) -> End:
    """How the excerpt's process ended, by its label: a hang goes silent, what calls for waiting goes on,
    any other failure is the one the log ends on, and its process exited."""
    if ex.label is Label.COLLECTIVE_HANG:
        return End.SILENT
    if Action.WAIT in EXPECTED_ACTIONS[ex.label]:
        return End.GOES_ON
    return End.EXIT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", help="only excerpts with this label")
    parser.add_argument("--batch", help="only the excerpts of this collection batch (their `batch` key)")
    parser.add_argument("--all", action="store_true", help="list every disagreement")
    parser.add_argument("--cost", action="store_true",
                        help="also time the coordinator's verdict on each crash, with and without the crash reader")
    args = parser.parse_args()
    excerpts = [ex for ex in load_corpus() if (args.label is None or ex.label.value == args.label)
                and (args.batch is None or ex.batch == args.batch)]
    kb = knowledge_base(WatchConfig())
    agree: Counter[str] = Counter()
    total: Counter[str] = Counter()
    live_right: Counter[str] = Counter()
    offline_right: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    families: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    worst: dict[str, list[str]] = defaultdict(list)
    healthy_kept = healthy_n = 0
    healthy_acted: list[str] = []  # healthy excerpts the live watchdog acts on (stops or restarts)
    offline_cpu = live_cpu = 0.0
    for ex in excerpts:
        t0 = time.process_time()
        offline = diagnose_paths([str(ex.log)], kb=kb).verdict
        t1 = time.process_time()
        outcome = replay(ex.log.read_text(encoding="utf-8", errors="replace"), kb, end_of(ex))
        t2 = time.process_time()
        offline_cpu += t1 - t0
        live_cpu += t2 - t1
        label = ex.label.value
        total[label] += 1
        live, off = outcome.action, offline.action
        live_right[label] += live in EXPECTED_ACTIONS[ex.label]
        offline_right[label] += off in EXPECTED_ACTIONS[ex.label]
        if ex.label is Label.HEALTHY:
            healthy_n += 1
            healthy_kept += live is Action.WAIT
            if live is not Action.WAIT:
                healthy_acted.append(f"  {ex.name:<60} offline {offline.label.value}/{off.value:<18} live "
                                     f"{outcome.verdict.label.value}/{live.value}")
        if live is off:
            agree[label] += 1
            continue
        pairs[(off.value, live.value)] += 1
        families[(offline.label.value, off.value, outcome.verdict.label.value, live.value)].append(ex.name)
        for name, test in WORST:
            if test(off, live):
                worst[name].append(f"  {ex.name:<60} offline {offline.label.value}/{off.value:<18} live "
                                   f"{outcome.verdict.label.value}/{live.value}")
                break

    n = sum(total.values())
    agreed = sum(agree.values())
    print(f"excerpts: {n}  live action = offline action: {agreed} ({100.0 * agreed / max(n, 1):.1f}%)  "
          f"live action right: {sum(live_right.values())}  offline action right: {sum(offline_right.values())}  "
          f"healthy kept healthy live: {healthy_kept}/{healthy_n}  cpu offline {offline_cpu:.1f}s live {live_cpu:.1f}s")
    print("disagreements that matter most: " + ", ".join(f"{name}: {len(worst[name])}" for name, _ in WORST))
    print()
    print(f"{'label':<24}{'n':>5}{'agree':>7}{'%':>7}{'live ok':>9}{'off ok':>8}")
    for label in LABELS:
        if total[label]:
            print(f"{label:<24}{total[label]:>5}{agree[label]:>7}{100.0 * agree[label] / total[label]:>6.1f}%"
                  f"{live_right[label]:>9}{offline_right[label]:>8}")
    print()
    print("disagreements (offline action -> live action):")
    for (off_a, live_a), count in pairs.most_common():
        print(f"  {off_a:>18} -> {live_a:<18}{count:>5}")
    print()
    print("largest families (offline label/action -> live label/action), three excerpts each:")
    ranked = sorted(families.items(), key=lambda kv: -len(kv[1]))
    for (ol, oa, ll, la), names in ranked[:12]:
        print(f"  {len(names):>4}  {ol}/{oa} -> {ll}/{la}")
        for name in names[:3]:
            print(f"          {name}")
    for name, _ in WORST:
        if worst[name] and (args.all or name != WORST[-1][0] or len(worst[name]) <= 20):
            print()
            print(f"{name} ({len(worst[name])}):")
            print("\n".join(worst[name]))
    print()
    print(f"healthy excerpts acted on live ({len(healthy_acted)}):")
    print("\n".join(healthy_acted) if healthy_acted else "  none")
    if args.cost:
        print()
        cost(excerpts, kb)
    return 0


def cost(excerpts: list[Excerpt], kb: KnowledgeBase, repeats: int = 50) -> None:
    """The coordinator's verdict on each excerpt whose process exits, once it exited: CPU microseconds a
    verdict, with the crash reader and without it (the reader runs only on a crash verdict)."""
    extra: list[float] = []
    base: list[float] = []
    for ex in excerpts:
        if end_of(ex) is not End.EXIT:
            continue
        lines = live_lines(ex.log.read_text(encoding="utf-8", errors="replace"))
        if not lines:
            continue
        job = LiveJob(kb, lines[0].mono)
        for line in lines:
            job.feed(line)
        job.exit(lines[-1].mono + 0.001)
        judge, now = job.judge, lines[-1].mono + 1.0
        reader = getattr(judge, "crash_reader", None)
        timed: list[float] = []
        for wired in (None, reader):
            setattr(judge, "crash_reader", wired)  # noqa: B010  (JudgeLike does not name it)
            t = time.process_time()
            for _ in range(repeats):
                judge.verdict(now)
            timed.append((time.process_time() - t) / repeats * 1e6)
        base.append(timed[0])
        extra.append(timed[1] - timed[0])
    if base:
        extra.sort()
        print(f"verdict on a crash, {len(base)} excerpts: {sum(base) / len(base):.0f} us without the reader; "
              f"the reader adds {sum(extra) / len(extra):.0f} us on average, {extra[len(extra) // 2]:.0f} median, "
              f"{extra[-1]:.0f} at most")


if __name__ == "__main__":
    sys.exit(main())
