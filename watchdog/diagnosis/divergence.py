"""A loss that rose a hundredfold and stayed there: a run that diverged, read from the series a log prints.

Pure: no I/O. The judge reads each line alone, and a NaN loss is a form of one line (forms_metric); a loss that
grows by orders of magnitude is finite in every record, and only the series shows it: mmdetection's Faster R-CNN
at lr 0.02 going from 1.0 to 225,192 and then 1.76e10 (open-mmlab/mmdetection#1742), a two-node Qwen2-VL SFT
going from 1.8 to 663 as its gradient norm turned NaN (modelscope/ms-swift#2280).

Offline ``diagnose`` asks it of a log the judge calls healthy (:func:`diverged_verdict`); the live judge does not
stop a running job on it. A jump counts when, within one stream and one progress format (the signature that read
the loss, so that two losses of different scales printed in different records are never compared), a loss is at
least :data:`RATIO` times every finite one before it (a run whose records alternate two losses of different
scales, a GAN's discriminator and generator, never jumps past its own highest) and at least :data:`FLOOR` (a loss
near zero moves by large factors: 1e-4 to 0.05 is no divergence), and no later loss of that stream and format
comes back below :data:`RECOVERED` times the loss before the jump (a spike the run came back from is no
divergence). Over the 2,336
excerpts of the corpus, the three series it finds are all labelled numerical_error; none of the 420 healthy ones.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from neuron_watch.events import Action, Evidence, Label, LogLine, RankKey, Verdict

RATIO = 100.0
FLOOR = 1.0
RECOVERED = 10.0
#: the evidence's signature (no rule of the table: the series, not one line, is the evidence)
DIVERGED_SIGNATURE = "numerical.loss_diverged"
ADVICE = ("The loss grew by orders of magnitude and did not come back: training diverged. Restarting from the same "
          "checkpoint with the same settings repeats it: lower the learning rate, add warm-up or gradient clipping, "
          "check the data at that step, or resume from an earlier checkpoint.")


class Jump(NamedTuple):
    """A loss of a stream that rose :data:`RATIO`-fold: the loss before, the line of the loss after."""

    before: float
    after: float
    line: LogLine


class LossSeries:
    """The losses of each stream and progress format, in order, and their jumps that stand."""

    def __init__(self) -> None:
        self._last: dict[tuple[RankKey, str], float] = {}
        self._highest: dict[tuple[RankKey, str], float] = {}  # the highest loss so far: the scale the run ran at
        self._jumps: dict[tuple[RankKey, str], Jump] = {}

    def observe(self, line: LogLine, fmt: str, loss: float) -> None:
        """A record of ``line``'s stream in progress format ``fmt`` (its signature) with ``loss``."""
        if not math.isfinite(loss):
            return  # a NaN or an infinity is a form of its own line
        key = (line.key, fmt)
        jump = self._jumps.get(key)
        if jump is not None and loss < RECOVERED * jump.before:
            del self._jumps[key]  # the run came back from it
        previous, highest = self._last.get(key), self._highest.get(key)
        if (key not in self._jumps and previous is not None and highest is not None and highest > 0
                and loss >= RATIO * highest and loss >= FLOOR):
            self._jumps[key] = Jump(previous, loss, line)
        self._last[key] = loss
        self._highest[key] = loss if highest is None else max(highest, loss)

    def first_jump(self) -> Jump | None:
        """The earliest jump that stands, or None."""
        return min(self._jumps.values(), key=lambda j: j.line.mono, default=None)


def diverged_verdict(series: LossSeries) -> Verdict | None:
    """A numerical failure when a loss of ``series`` jumped and stayed up; None otherwise."""
    jump = series.first_jump()
    if jump is None:
        return None
    line = jump.line
    return Verdict(
        Label.NUMERICAL_ERROR, Action.STOP, ranks=(line.key,), culprit=line.key,
        evidence=(Evidence(line.key, line.text, DIVERGED_SIGNATURE, line.source, line.lineno, line.mono),),
        reason=(f"the loss rose from {jump.before:g} to {jump.after:g} ({jump.after / jump.before:,.0f} times) "
                "between two records of one stream and did not come back: the run diverged"),
        advice=ADVICE, culprit_source="failure")
