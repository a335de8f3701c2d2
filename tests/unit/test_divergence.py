# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""A loss that rose a hundredfold and stayed there (diagnosis/divergence.py): the series rule with its near misses,
and offline ``diagnose`` on logs whose every record is finite."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.divergence import DIVERGED_SIGNATURE, LossSeries, diverged_verdict
from neuron_watch.events import Action, Label, LogLine, RankKey

RANK0, RANK1 = RankKey("n", 0), RankKey("n", 1)


def _series(losses: list[float], fmt: str = "progress.plain_loss", key: RankKey = RANK0) -> LossSeries:
    series = LossSeries()
    for i, loss in enumerate(losses):
        series.observe(LogLine(key, f"step {i} loss {loss}", float(i), float(i)), fmt, loss)
    return series


def test_a_loss_that_rose_a_hundredfold_and_stayed_is_a_divergence() -> None:
    jump = _series([0.6186, 1.0083, 225192.6129, 17610679897.699]).first_jump()
    assert jump is not None and (jump.before, jump.after) == (1.0083, 225192.6129)
    verdict = diverged_verdict(_series([1.80130756, 663.56591797]))
    assert verdict is not None and (verdict.label, verdict.action) == (Label.NUMERICAL_ERROR, Action.STOP)
    assert verdict.evidence[0].signature == DIVERGED_SIGNATURE and "663.566" in verdict.reason


@pytest.mark.parametrize(("losses", "why"), [
    ([2.31, 2.12, 150.0, 2.05, 2.01], "a spike the run came back from"),
    ([0.0001, 0.0002, 0.05, 0.06], "a loss near zero moving by large factors, below 1"),
    ([0.01, 5.0, 0.012, 5.1, 0.011, 5.2], "two losses of different scales in alternate records (a GAN's D and G)"),
    ([1e9, 4e8, 1e7, 3e5], "an unnormalised regression that starts high and falls"),
    ([2.3, 30.0, 2.2], "a tenfold rise is within a run's noise"),
    ([2.3, float("nan"), 2.2, float("inf")], "non-finite values are a form of their own line, not a jump"),
])
def test_no_divergence(losses: list[float], why: str) -> None:
    assert _series(losses).first_jump() is None, why


def test_streams_and_formats_are_not_compared() -> None:
    series = LossSeries()
    series.observe(LogLine(RANK0, "loss 0.5", 0.0, 0.0), "progress.plain_loss", 0.5)
    series.observe(LogLine(RANK1, "loss 900", 1.0, 1.0), "progress.plain_loss", 900.0)  # another rank
    series.observe(LogLine(RANK0, "{'loss': 900}", 2.0, 2.0), "progress.hf_trainer", 900.0)  # another format
    assert series.first_jump() is None


@pytest.mark.parametrize(("lines", "label"), [
    # open-mmlab/mmdetection#1742: Faster R-CNN at lr 0.02, the loss from 1.0 to 225,192 and 1.76e10
    (["2019-12-03 13:36:58,567 - INFO - Epoch [6][3150/3681]\tlr: 0.02000, eta: 3:50:55, time: 0.924, data_time: 0.005, memory: 6147, loss_rpn_cls: 0.0431, loss_rpn_bbox: 0.0594, loss_cls: 0.2494, acc: 90.6348, loss_bbox: 0.2668, loss: 0.6186",
      "2019-12-03 13:37:26,314 - INFO - Epoch [6][3200/3681]\tlr: 0.02000, eta: 3:50:21, time: 0.555, data_time: 0.005, memory: 6147, loss_rpn_cls: 0.4505, loss_rpn_bbox: 0.1093, loss_cls: 0.2473, acc: 92.7031, loss_bbox: 0.2011, loss: 1.0083",
      "2019-12-03 13:37:43,641 - INFO - Epoch [6][3250/3681]\tlr: 0.02000, eta: 3:49:37, time: 0.347, data_time: 0.005, memory: 6147, loss_rpn_cls: 117119.4643, loss_rpn_bbox: 86211.9636, loss_cls: 18325.3354, acc: 83.0372, loss_bbox: 3535.8495, loss: 225192.6129"],
     Label.NUMERICAL_ERROR),
    # the same run's records, the spike gone again at the next record: healthy
    (["2019-12-03 13:36:58,567 - INFO - Epoch [6][3150/3681]\tlr: 0.02000, eta: 3:50:55, time: 0.924, data_time: 0.005, memory: 6147, loss: 0.6186",
      "2019-12-03 13:37:43,641 - INFO - Epoch [6][3250/3681]\tlr: 0.02000, eta: 3:49:37, time: 0.347, data_time: 0.005, memory: 6147, loss: 225.1926",
      "2019-12-03 13:38:23,517 - INFO - Epoch [6][3300/3681]\tlr: 0.02000, eta: 3:49:16, time: 0.798, data_time: 0.005, memory: 6147, loss: 0.6013"],
     Label.HEALTHY),
])
def test_diagnose_reads_a_diverged_run(tmp_path: Path, lines: list[str], label: Label) -> None:
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    assert diagnose_paths([str(log)]).verdict.label is label
