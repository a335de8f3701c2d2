"""``diagnose`` on the real-log corpus (prints figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_diagnose_corpus.py [--wrong] [--label L] [--platform P] [--batch B]

Each excerpt of ``tests/data/real-logs/`` (see its README) is diagnosed alone, the way a user
runs ``neuron-watch diagnose excerpt.log``. Printed: the accuracy over the corpus and per label,
beside it the *action* accuracy (the verdict's action against the action the excerpt's label calls
for, ``EXPECTED_ACTIONS`` of ``tests/fixtures/corpus_score.py``: what the watchdog would do, which
matters more than a label swapped within one action); then, first among the mistakes, every
confusion that changes the action, by kind (a failure read as healthy, a hardware fault read as a
crash to restart so its node is not drained, a configuration error restarted, any other); the
confusion matrix (rows: the excerpt's label, columns: what ``diagnose`` said), and every failure
called ``healthy`` (the worst mistake: a broken job left alone). ``--wrong`` also lists every other
wrong answer with the signature that decided it. ``--batch B`` keeps the excerpts collected
together as batch ``B`` (their ``batch`` key: ``issue12-heldout`` to ``-4``, ``issue23-heldout-5``
and ``-6`` were each labelled and measured before any signature was written from them);
``bench_heldout_history.py`` scores each with the product of the commit that added it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.events import Label, Verdict
from tests.fixtures.corpus_score import ACTION_CHANGES, action_confusion
from tests.fixtures.real_logs import Excerpt, load_corpus

LABELS = [label.value for label in Label]


def select(label: str | None = None, platform: str | None = None, batch: str | None = None) -> list[Excerpt]:
    """The corpus's excerpts, those of one label, platform or collection batch when given."""
    return [
        ex for ex in load_corpus()
        if (label is None or ex.label.value == label)
        and (platform is None or ex.platform == platform)
        and (batch is None or ex.batch == batch)
    ]


def verdict_of(log: Path) -> Verdict:
    """What ``neuron-watch diagnose LOG`` says of one log file alone."""
    return diagnose_paths([str(log)]).verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wrong", action="store_true", help="list every wrong answer")
    parser.add_argument("--label", help="only excerpts with this label")
    parser.add_argument("--platform", choices=("neuron", "gpu", "cpu"), help="only this platform")
    parser.add_argument("--batch", help="only the excerpts of this collection batch (their `batch` key)")
    args = parser.parse_args()

    excerpts = select(args.label, args.platform, args.batch)
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    action_right: Counter[str] = Counter()
    changes: Counter[str] = Counter()
    changed: dict[str, list[str]] = defaultdict(list)
    called_healthy: list[str] = []
    wrong: list[str] = []
    started = time.process_time()
    for ex in excerpts:
        verdict = verdict_of(ex.log)
        said = verdict.label.value
        confusion[ex.label.value][said] += 1
        change = action_confusion(ex.label, verdict.label, verdict.action)
        sig = next((e.signature for e in verdict.evidence), "-")
        line = f"  {ex.name:<58} said {said:<22} [{sig}]  {ex.source}"
        if change is None:
            action_right[ex.label.value] += 1
        else:
            changes[change] += 1
            changed[change].append(f"  {ex.name:<58} said {said}/{verdict.action.value:<12} [{sig}]  {ex.source}")
        if said != ex.label.value:
            if said == "healthy":
                called_healthy.append(line)
            else:
                wrong.append(line)
    cpu = time.process_time() - started

    right = sum(confusion[label][label] for label in confusion)
    total = len(excerpts)
    acted = sum(action_right.values())
    print(f"excerpts: {total}  right: {right}  accuracy: {100.0 * right / max(total, 1):.1f}%  "
          f"action right: {acted}  action accuracy: {100.0 * acted / max(total, 1):.1f}%  "
          f"failures called healthy: {len(called_healthy)}  cpu: {cpu:.2f}s")
    print("confusions that change the action: " + ", ".join(f"{k}: {changes[k]}" for k in ACTION_CHANGES))
    for kind in ACTION_CHANGES:
        for line in changed[kind]:
            print(f"  {kind:<24}{line}")
    print()
    print(f"{'label':<24}{'n':>5}{'right':>7}{'acc':>8}{'action':>8}{'acc':>8}")
    for label in LABELS:
        n = sum(confusion[label].values())
        if n:
            print(f"{label:<24}{n:>5}{confusion[label][label]:>7}{100.0 * confusion[label][label] / n:>7.1f}%"
                  f"{action_right[label]:>8}{100.0 * action_right[label] / n:>7.1f}%")
    print()
    shown = [label for label in LABELS if sum(confusion[label].values())
             or any(confusion[row][label] for row in confusion)]
    short = {label: label[:7] for label in shown}
    print("confusion (rows: expected, columns: diagnosed)")
    print(f"{'':<24}" + "".join(f"{short[c]:>8}" for c in shown))
    for row in shown:
        if sum(confusion[row].values()):
            print(f"{row:<24}" + "".join(f"{confusion[row][c] or '.':>8}" for c in shown))
    print()
    print(f"failures called healthy ({len(called_healthy)}):")
    print("\n".join(called_healthy) if called_healthy else "  none")
    if args.wrong:
        print()
        print(f"other wrong answers ({len(wrong)}):")
        print("\n".join(wrong) if wrong else "  none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
