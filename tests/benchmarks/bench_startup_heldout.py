"""Leave-the-round-out reach of the start-up reader (diagnosis/startup.py; prints figures, no pass/fail).

    .venv/bin/python tests/benchmarks/bench_startup_heldout.py [--batch B] [--timeout S]

For each held-out batch, the product of its blind commit (chosen as ``bench_heldout_history.py`` chooses it, in a
temporary detached worktree) diagnoses the batch's excerpts; then the start-up reader is applied after each blind
answer the way the crash reader applies it to a crash verdict: a blind ``other_crash`` with no step, in an excerpt
where today's judge saw no progress, whose failing process's last traceback (near the blind evidence line, read by
today's ``offline.Tracebacks``) or whose evidence line shows a set-up the program refuses becomes configuration
(stop). Printed per batch: blind labels and actions, the same with the reader, configuration errors restarted
blind and with the reader, blind misses the reader fixes and blind right actions it breaks; then each change.

Today's reading of progress and of tracebacks is observed by wrapping, for the length of this run, the
constructors of ``offline.Tracebacks``/``offline.RecentLines`` and ``Judge.verdict`` (the product keeps them
inside its offline reading); they are restored after.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_heldout_history as history

import neuron_watch.diagnosis.judge as judge_module
import neuron_watch.diagnosis.offline as offline
from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.crashreading import CrashReader
from neuron_watch.diagnosis.startup import stopped_at_startup
from neuron_watch.events import Action, Evidence, Label, Verdict
from tests.fixtures.corpus_score import EXPECTED_ACTIONS, action_confusion
from tests.fixtures.real_logs import Excerpt, load_corpus


@contextlib.contextmanager
def observed() -> Iterator[dict[str, Any]]:
    """The last offline reading's Tracebacks, RecentLines and whether its judge saw progress, while in the block."""
    seen: dict[str, Any] = {}
    tb_init, rl_init, verdict = offline.Tracebacks.__init__, offline.RecentLines.__init__, judge_module.Judge.verdict

    def tracebacks_init(self: offline.Tracebacks) -> None:
        tb_init(self)
        seen["tracebacks"] = self

    def recent_init(self: offline.RecentLines) -> None:
        rl_init(self)
        seen["recent"] = self

    def judged(self: judge_module.Judge, now: float, final: bool = False) -> Verdict:
        seen["progressed"] = self.last_progress_wall is not None
        return verdict(self, now, final=final)

    offline.Tracebacks.__init__ = tracebacks_init  # type: ignore[method-assign]
    offline.RecentLines.__init__ = recent_init  # type: ignore[method-assign]
    judge_module.Judge.verdict = judged  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        offline.Tracebacks.__init__ = tb_init  # type: ignore[method-assign]
        offline.RecentLines.__init__ = rl_init  # type: ignore[method-assign]
        judge_module.Judge.verdict = verdict  # type: ignore[method-assign]


def with_reader(ex: Excerpt, answer: dict[str, Any], seen: dict[str, Any]) -> tuple[Label, Action, str]:
    """The blind ``answer`` with the start-up reader applied after it; the reader's reason when it changed it."""
    label, action = Label(answer["label"]), Action(answer["action"])
    seen.clear()
    diagnose_paths([str(ex.log)])
    if label is not Label.OTHER_CRASH or answer.get("step") is not None or seen.get("progressed", False):
        return label, action, ""
    tracebacks, recent = seen["tracebacks"], seen["recent"]
    text = answer.get("line") or ""
    # the blind evidence line among the lines read today (its process), else every process
    keys = [k for k, kept in recent.lines.items() if any(line.text == text for line in kept)] or list(recent.lines)
    lines = {(k, line.text): line for k, kept in recent.lines.items() for line in kept}
    evidence = tuple(Evidence(k, text, "", lines[(k, text)].source, lines[(k, text)].lineno)
                     if (k, text) in lines else Evidence(k, text, "") for k in keys)
    crash = Verdict(Label.OTHER_CRASH, Action.RESTART, evidence=evidence)
    found = stopped_at_startup(crash, False, CrashReader(recent.around, tracebacks, recent).last_tracebacks(
        crash, tracebacks))
    if found is None:
        return label, action, ""
    return found.label, found.action, found.reason.split(", before any")[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", action="append", help="only this batch (repeatable)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for the blind runs")
    args = parser.parse_args()
    deadline = time.monotonic() + args.timeout
    batches: dict[str, list[Excerpt]] = defaultdict(list)
    for ex in load_corpus():
        if ex.batch and (args.batch is None or ex.batch in args.batch):
            batches[ex.batch].append(ex)
    print(f"{'batch':<20}{'n':>4} {'labels':>7} {'+reader':>8} {'actions':>8} {'+reader':>8} "
          f"{'config restarted':>17} {'fixed':>6} {'broken':>7}")
    total: dict[str, int] = defaultdict(int)
    changes: list[str] = []
    with observed() as seen:
        for name in sorted(batches, key=lambda b: (b.count("-") > 1, int(b.rsplit("-", 1)[-1]) if b.count("-") > 1
                                                   else 0, b)):
            chosen = history.find_blind(batches[name], name)
            answers, _ = history.blind_answers(chosen.commit, batches[name], deadline)
            row: dict[str, int] = defaultdict(int)
            for ex in batches[name]:
                answer = answers.get(str(ex.log), {})
                try:
                    label, action = Label(answer["label"]), Action(answer["action"])
                except (KeyError, ValueError):
                    continue  # not answered (bench_heldout_history counts it wrong on both)
                new_label, new_action, why = with_reader(ex, answer, seen)
                right, now_right = action in EXPECTED_ACTIONS[ex.label], new_action in EXPECTED_ACTIONS[ex.label]
                row["n"] += 1
                row["labels"] += label is ex.label
                row["labels+"] += new_label is ex.label
                row["actions"] += right
                row["actions+"] += now_right
                row["config"] += action_confusion(ex.label, label, action) == "config restarted"
                row["config+"] += action_confusion(ex.label, new_label, new_action) == "config restarted"
                row["fixed"] += now_right and not right
                row["broken"] += right and not now_right
                if why:
                    changes.append(f"  {name:<20} {ex.name:<72} {label.value}/{action.value} -> "
                                   f"{new_label.value}/{new_action.value} {'right' if now_right else 'WRONG'}: {why}")
            for key, value in row.items():
                total[key] += value
            print(_row(name, row))
    print(_row("all", total))
    print("\nchanges:")
    print("\n".join(changes))
    return 0


def _row(name: str, r: dict[str, int]) -> str:
    return (f"{name:<20}{r['n']:>4} {r['labels']:>7} {r['labels+']:>8} {r['actions']:>8} {r['actions+']:>8} "
            f"{r['config']:>9} -> {r['config+']:<4} {r['fixed']:>6} {r['broken']:>7}")


if __name__ == "__main__":
    raise SystemExit(main())
