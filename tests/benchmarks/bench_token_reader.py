"""Would a reader LEARNED from the corpus's words catch the failures blind rounds read as healthy? (prints figures)

    .venv/bin/python tests/benchmarks/bench_heldout_history.py --wrong-json /tmp/blind.json
    .venv/bin/python tests/benchmarks/bench_token_reader.py /tmp/blind.json [--tail 15] [--thresholds 2,4,6,8,10]

An experiment, not a part of the product: it asks whether a statistical reader would generalise where the readers
of forms have not. For each held-out batch in the order it was collected, a token log-odds table is learned from
the last ``--tail`` lines of every excerpt of the batches before it (and of none after: what the project could
have known then): per word (letters, three or more), the log of its rate among the last lines of failure excerpts
over its rate among the last lines of excerpts whose label waits (healthy, compiling, a transient timeout). A line
scores the sum of its words' weights; an excerpt is flagged when one of its last lines scores at least a threshold.
Then, among the batch's excerpts that the product as it stood before the batch's fixes read as ``healthy`` (from
``bench_heldout_history --wrong-json``: an excerpt not listed there was read with its own label), it counts the
failures flagged (misses a last-resort reader would have caught) and the excerpts whose label waits flagged
(healthy readings it would have broken). Printed per threshold, summed over the batches.

Measured 2026-11-29 (24 batches, 1,434 excerpts, 175 blind healthy-misses, 244 right readings of waiting labels):
at best about three misses caught per right reading broken (threshold 6: 56 caught, 24 broken); no threshold
separates them. The corpus's healthy excerpts were chosen for their frightening lines, and a bag of words
does not tell "Failed to load weights" from "failed to execute": the words that decide are the ones a form
reader places (severity, the process's end, what came after).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from neuron_watch.events import Action
from tests.fixtures.corpus_score import EXPECTED_ACTIONS
from tests.fixtures.real_logs import Excerpt, load_corpus

_WORD = re.compile(r"[A-Za-z][A-Za-z_']{2,}")
_BATCH_ORDER = re.compile(r"issue(\d+)-heldout(?:-(\d+))?$")
#: words seen fewer times than this in the training batches are left out (no weight from one excerpt)
MIN_COUNT = 3


def batch_order(batch: str) -> tuple[int, int]:
    """Collection order of a batch name (``issue12-heldout``, ``issue12-heldout-2``, ``issue23-heldout-24``);
    the development corpus (no batch) comes first."""
    m = _BATCH_ORDER.match(batch)
    return (0, 0) if m is None else (int(m.group(1)), int(m.group(2) or 1))


def waits(ex: Excerpt) -> bool:
    return EXPECTED_ACTIONS[ex.label] == frozenset({Action.WAIT})


def last_lines(ex: Excerpt, tail: int) -> list[frozenset[str]]:
    lines = [ln for ln in ex.log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    return [frozenset(w.lower() for w in _WORD.findall(ln)) for ln in lines[-tail:]]


def learn(training: list[Excerpt], words: dict[str, list[frozenset[str]]]) -> dict[str, float]:
    """Each word's log-odds of a failure excerpt's last lines against a waiting one's (add-half smoothing)."""
    failing: Counter[str] = Counter()
    quiet: Counter[str] = Counter()
    n_failing = n_quiet = 0
    for ex in training:
        for line in words[ex.name]:
            if waits(ex):
                quiet.update(line)
                n_quiet += 1
            else:
                failing.update(line)
                n_failing += 1
    return {w: math.log((failing[w] + 0.5) / (n_failing + 1)) - math.log((quiet[w] + 0.5) / (n_quiet + 1))
            for w in set(failing) | set(quiet) if failing[w] + quiet[w] >= MIN_COUNT}


def score(table: dict[str, float], lines: list[frozenset[str]]) -> float:
    return max((sum(table.get(w, 0.0) for w in line) for line in lines), default=float("-inf"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("blind", type=Path, help="bench_heldout_history.py --wrong-json output")
    ap.add_argument("--tail", type=int, default=15, help="last lines of an excerpt read")
    ap.add_argument("--thresholds", default="2,4,6,8,10")
    a = ap.parse_args()
    said = {m["excerpt"]: m["blind"] for m in json.loads(a.blind.read_text(encoding="utf-8"))}
    corpus = load_corpus()
    words = {ex.name: last_lines(ex, a.tail) for ex in corpus}
    batches = sorted({ex.batch for ex in corpus if ex.batch}, key=batch_order)
    thresholds = [float(t) for t in a.thresholds.split(",")]
    caught: Counter[float] = Counter()
    broken: Counter[float] = Counter()
    misses = right = 0
    for batch in batches:
        table = learn([ex for ex in corpus if batch_order(ex.batch) < batch_order(batch)], words)
        for ex in (ex for ex in corpus if ex.batch == batch):
            if said.get(ex.name, ex.label.value) != "healthy":
                continue
            s = score(table, words[ex.name])
            if waits(ex):
                right += 1
                broken.update(t for t in thresholds if s >= t)
            else:
                misses += 1
                caught.update(t for t in thresholds if s >= t)
    print(f"{len(batches)} batches; read healthy blind: {misses} failures (misses), {right} waiting labels (right); "
          f"last {a.tail} lines")
    print("threshold   misses caught   right readings broken")
    for t in thresholds:
        print(f"{t:9.1f}   {caught[t]:6d}/{misses}   {broken[t]:6d}/{right}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
