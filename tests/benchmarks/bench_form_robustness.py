"""Does ``diagnose`` read forms or phrases? The corpus perturbed (prints figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_form_robustness.py [--seed N] [--kind K] [--batch B] [--label L] [--wrong]

Each excerpt of ``tests/data/real-logs/`` is diagnosed as it is (the reading ``bench_diagnose_corpus.py``
makes: ``diagnose_paths`` of one file) and again after a seeded perturbation of its text that keeps every
form (``tests/fixtures/perturb.py``), written to a file of the same name in a temporary directory:

* ``identifiers``: hostnames, IPs, pids/tids, users' paths and scripts, model names, hex addresses, dates
  and times, line numbers, step counters, ports and the ranks of launchers' prefixes changed consistently.
  The label and the action must not change at all: any change is a bug of the reader.
* ``envelopes``: every line inside one collector's prefix or record (``[rank3]:``, ``[default0]:``, srun's
  ``0: ``, ``host:pid:tid``, pdsh's ``host: ``, ISO and kubelet stamps, CRI and Docker json-file records,
  a Python logging prefix). Label and action must not change.
* ``interleave``: the excerpt's lines interleaved with the first lines of a healthy excerpt of another program
  (drawn by the seed), as two processes writing to one unmarked stream interleave them, each stream's lines in
  their order. A healthy neighbour's lines never hide a failure: label and action must not change. The
  neighbours are the healthy excerpts that print no time of day (114 of 261), so that the stream keeps the
  excerpt's own clock; and whose kept first lines read healthy alone (else another is drawn). An excerpt that is
  a debugger's or py-spy's dump (13: gdb, lldb, py-spy) is kept whole at a drawn point of the neighbour's lines:
  one run of the tool prints it in one go, so no real stream has another process's line between its lines.
* ``words``: in every line holding a failure form, the message's free-text words replaced by words of
  healthy real logs that no reader uses, the form kept. The label may change; a failure must never read
  as ``healthy``, and its action must stay a failure's.

Printed per kind: excerpts, label kept, action kept, failures turned healthy (a failure read as healthy
or with its action turned to ``wait``), healthy turned failure; for ``identifiers`` and ``envelopes`` the
changes by sub-kind; for ``words`` the failures by the form of the line that carried them (the evidence
line of the verdict on the original). ``--wrong`` lists each failure turned healthy (the excerpt and the
perturbed carrying line), and every label change of ``identifiers`` and ``envelopes``.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.events import Action, Label, Verdict
from tests.fixtures.corpus_score import EXPECTED_ACTIONS
from tests.fixtures.perturb import interleave, line_form, perturb_identifiers, perturb_words, vocabulary, wrap_envelope
from tests.fixtures.real_logs import Excerpt, load_corpus

#: a time of day in a line (a stamp's): the interleave kind's neighbours print none
_TIME_OF_DAY = re.compile(r"(?<!\d)\d\d:\d\d:\d\d(?!\d)")  # "T02:36:20Z" too: no \b after a T
KINDS = ("identifiers", "envelopes", "interleave", "words")
ROOT = Path(__file__).resolve().parents[2]
#: what a verdict may say of a job that needs nothing done
_CALM = frozenset({Label.HEALTHY, Label.COMPILING, Label.COMM_TIMEOUT_TRANSIENT, Label.UNOBSERVED})


def verdict_of(log: Path) -> Verdict:
    """What ``neuron-watch diagnose LOG`` says of one log file alone (bench_diagnose_corpus's reading)."""
    return diagnose_paths([str(log)]).verdict


def is_failure(verdict: Verdict) -> bool:
    return verdict.label not in _CALM and verdict.action is not Action.WAIT


def read_failure(o: Outcome) -> bool:
    """A failure the original was read as: its label calls for an action and the reading gave one."""
    return Action.WAIT not in EXPECTED_ACTIONS[o.excerpt.label] and is_failure(o.before)


@dataclass
class Outcome:
    """One excerpt under one perturbation: both verdicts, and what the perturbation did."""

    excerpt: Excerpt
    before: Verdict
    after: Verdict
    variant: str  # the envelope's name, "identifiers", or the form of the carrying line
    carrying: str  # the perturbed line that carried the original verdict ("" when none is known)


def carrying_lineno(verdict: Verdict) -> int:
    return next((e.lineno for e in verdict.evidence if e.lineno), 0)


#: neighbours drawn at most for one excerpt until one reads healthy as kept (the last is used regardless)
_NEIGHBOUR_DRAWS = 8
_kept_verdicts: dict[tuple[str, int], bool] = {}


def healthy_as_kept(neighbour: Excerpt, text: str, n_lines: int) -> bool:
    """Does the neighbour's part that ``interleave`` keeps (its first ``n_lines`` lines) read calm alone?"""
    kept = "\n".join(text.rstrip("\n").split("\n")[:n_lines]) + "\n"
    key = (neighbour.name, kept.count("\n"))
    if key not in _kept_verdicts:
        with tempfile.TemporaryDirectory(prefix="nw-neighbour-") as tmp:
            path = Path(tmp) / neighbour.log.name
            path.write_bytes(kept.encode("utf-8", "surrogateescape"))
            _kept_verdicts[key] = not is_failure(verdict_of(path))
    return _kept_verdicts[key]


def perturb(kind: str, text: str, rng: random.Random, words: list[str],
            neighbours: list[Excerpt]) -> tuple[str, dict[int, str], str]:
    """(the perturbed text, the form of each changed line for ``words``, the variant's name)."""
    if kind == "interleave":
        # a healthy neighbour other than the excerpt itself, whose lines that are kept read healthy alone: a
        # healthy excerpt's first lines may hold an error that only its later lines show to be harmless (a
        # probe NCCL retried), and a neighbour that is not healthy as kept is no test of a failure's reading
        n_own = len((text[:-1] if text.endswith("\n") else text).split("\n"))  # as interleave counts them
        for _ in range(_NEIGHBOUR_DRAWS):
            neighbour = rng.choice(neighbours)
            lines = neighbour.log.read_bytes().decode("utf-8", "surrogateescape")
            if healthy_as_kept(neighbour, lines, n_own):
                break
        return interleave(text, lines, rng), {}, f"{neighbour.platform} neighbour"
    if kind == "identifiers":
        return perturb_identifiers(text, rng), {}, "identifiers"
    if kind == "envelopes":
        wrapped, name = wrap_envelope(text, rng)
        return wrapped, {}, name
    done = perturb_words(text, rng, words)
    return done.text, done.forms, "words"


def run_kind(kind: str, excerpts: list[Excerpt], seed: int, words: list[str], before: dict[str, Verdict],
             tmp: Path, healthy: list[Excerpt]) -> list[Outcome]:
    outcomes = []
    for ex in excerpts:
        text = ex.log.read_bytes().decode("utf-8", "surrogateescape")
        rng = random.Random(f"{seed}:{kind}:{ex.name}")
        neighbours = [h for h in healthy if h.name != ex.name]
        changed, _forms, variant = perturb(kind, text, rng, words, neighbours)
        path = tmp / ex.log.name
        path.write_bytes(changed.encode("utf-8", "surrogateescape"))
        after = verdict_of(path)
        lineno = carrying_lineno(before[ex.name])
        lines = changed.split("\n")
        carrying = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
        if kind == "words":
            found = line_form(text.split("\n")[lineno - 1]) if 0 < lineno <= len(lines) else None
            variant = found[0] if found else "no form"
        outcomes.append(Outcome(ex, before[ex.name], after, variant, carrying))
    return outcomes


def turned_healthy(o: Outcome) -> bool:
    return read_failure(o) and (o.after.label is Label.HEALTHY or o.after.action is Action.WAIT)


def turned_failure(o: Outcome) -> bool:
    return o.before.label is Label.HEALTHY and is_failure(o.after)


def report(kind: str, outcomes: list[Outcome], wrong: bool) -> None:
    n = len(outcomes)
    label_kept = sum(o.before.label is o.after.label for o in outcomes)
    action_kept = sum(o.before.action is o.after.action for o in outcomes)
    healthy = [o for o in outcomes if turned_healthy(o)]
    failing = [o for o in outcomes if turned_failure(o)]
    print(f"{kind:<12} excerpts {n:>5}  label kept {label_kept:>5} ({100.0 * label_kept / max(n, 1):5.1f}%)  "
          f"action kept {action_kept:>5} ({100.0 * action_kept / max(n, 1):5.1f}%)  "
          f"failures turned healthy {len(healthy):>3}  healthy turned failure {len(failing):>3}")
    by: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by[o.variant].append(o)
    title = "form of the carrying line" if kind == "words" else "variant"
    print(f"  {title:<28}{'n':>6}{'label kept':>12}{'action kept':>13}{'fail->healthy':>15}{'healthy->fail':>15}"
          + (f"{'failures':>10}{'fail action changed':>21}" if kind == "words" else ""))
    for variant in sorted(by, key=lambda v: (-len(by[v]), v)):
        group = by[variant]
        extra = ""
        if kind == "words":
            failures = [o for o in group if read_failure(o)]
            moved = sum(o.before.action is not o.after.action and not turned_healthy(o) for o in failures)
            extra = f"{len(failures):>10}{moved:>21}"
        print(f"  {variant:<28}{len(group):>6}{sum(o.before.label is o.after.label for o in group):>12}"
              f"{sum(o.before.action is o.after.action for o in group):>13}"
              f"{sum(turned_healthy(o) for o in group):>15}{sum(turned_failure(o) for o in group):>15}{extra}")
    if not wrong:
        return
    print(f"  failures turned healthy ({len(healthy)}):")
    for o in healthy:
        print(f"    {o.excerpt.name}  {o.before.label.value} -> {o.after.label.value}/{o.after.action.value}  "
              f"[{o.variant}]\n      {o.carrying[:300]!r}")
    if kind != "words":
        moved = [o for o in outcomes if o.before.label is not o.after.label and not turned_healthy(o)]
        print(f"  other label changes ({len(moved)}):")
        for o in moved:
            sig = next((e.signature for e in o.after.evidence), "-")
            print(f"    {o.excerpt.name}  {o.before.label.value} -> {o.after.label.value} [{sig}]  [{o.variant}]")
    print(f"  healthy turned failure ({len(failing)}):")
    for o in failing:
        sig = next((e.signature for e in o.after.evidence), "-")
        line = next((e.text for e in o.after.evidence), "")
        print(f"    {o.excerpt.name}  -> {o.after.label.value} [{sig}]  [{o.variant}]\n      {line[:300]!r}")


def reader_sources() -> list[str]:
    """The readers' own text (every module of the diagnosis and the signature table): no replacement
    word is one of theirs."""
    folder = ROOT / "watchdog" / "diagnosis"
    return [p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py"))] + \
        [(folder / "signatures.toml").read_text(encoding="utf-8")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=23, help="the perturbations' seed (default 23)")
    parser.add_argument("--kind", choices=KINDS, action="append", help="only this kind (repeatable)")
    parser.add_argument("--batch", help="only the excerpts of this collection batch")
    parser.add_argument("--label", help="only excerpts with this label")
    parser.add_argument("--wrong", action="store_true", help="list the failures turned healthy and label changes")
    args = parser.parse_args()

    corpus = load_corpus()
    excerpts = [ex for ex in corpus if (args.batch is None or ex.batch == args.batch)
                and (args.label is None or ex.label.value == args.label)]
    healthy_texts = [ex.log.read_text(encoding="utf-8", errors="replace") for ex in corpus
                     if ex.label is Label.HEALTHY]
    words = vocabulary(healthy_texts, reader_sources())
    # the neighbours print no time of day: two processes of one job write one clock, and a neighbour stamped
    # on another day would read as a silence of years between the excerpt's lines (a hang by the clock alone)
    healthy = [ex for ex in corpus if ex.label is Label.HEALTHY
               and not _TIME_OF_DAY.search(ex.log.read_text(encoding="utf-8", errors="replace"))]
    started = time.process_time()
    before = {ex.name: verdict_of(ex.log) for ex in excerpts}
    print(f"seed {args.seed}, {len(excerpts)} excerpts, {len(words)} replacement words "
          f"(healthy excerpts' words no reader uses); as they are: "
          f"{sum(is_failure(before[ex.name]) and Action.WAIT not in EXPECTED_ACTIONS[ex.label] for ex in excerpts)} "
          "failures read as failures")
    runner: Callable[[str], list[Outcome]]
    with tempfile.TemporaryDirectory(prefix="nw-robust-") as tmp:
        def runner(kind: str) -> list[Outcome]:
            return run_kind(kind, excerpts, args.seed, words, before, Path(tmp), healthy)

        for kind in args.kind or KINDS:
            report(kind, runner(kind), args.wrong)
    print(f"cpu: {time.process_time() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
