"""The run's last step reached: the checkpoint save that follows it and the run's end are work, not
silence. A rank that stops before that step is still a hang at the hang timeout.

The lines are a real Hugging Face Trainer run (``data/frameworks/hf_trainer.log``: ``--max-steps 20
--save-steps 10``, so its last step is also a checkpoint step), on a fake clock (``now`` is an
argument). Trainer says nothing at its default log level while it saves the checkpoint of the last
step (``_save_checkpoint``: model, optimizer, scheduler, RNG states, trainer state) and only then
logs its final metrics (``{'train_runtime': ...}``, a train-end signature).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.diagnosis.logtext import logical_lines
from neuron_watch.events import Action, Label, LogLine, RankKey
from tests.unit.test_judge_batch import feed_both

KB = default_knowledge_base()
N = "node-a"
HANG, SAVE = 6.0, 600.0
DATA = Path(__file__).parent / "data" / "frameworks" / "hf_trainer.log"


def _real_lines() -> list[str]:
    """The HF run's lines as the tail gives them (each ``\\r`` redraw a line), up to its final metrics."""
    out: list[str] = []
    for piece in DATA.read_bytes().decode().replace("\r", "\n").split("\n"):
        if piece.startswith("{'train_runtime'"):
            return out
        out.extend(t for t in logical_lines(piece) if t.strip())
    raise AssertionError("the real log has no final metrics")


LINES = _real_lines()
LAST_BAR = LINES.index("100%|██████████| 20/20 [00:04<00:00,  5.92it/s]")
#: the node's own word (its unattributed stream, rank -1) once it finds the checkpoint of the last step complete: a
#: progress line of that step, which is not training going on
SAW = (-1, "neuron-watch: a new complete checkpoint appeared: /fsx/ckpt/checkpoint-20 (step 20)")


def judge() -> Judge:
    j = Judge(KB, JudgeSettings(hang_timeout=HANG, save_timeout=SAVE), start=0.0)
    j.expect([RankKey(N, 0), RankKey(N, 1)], 0.0)
    return j


def fed(lines: list[str | tuple[int, str]], batched: bool = False,
        times: Sequence[float] | None = None) -> tuple[Judge, float]:
    """A judge that read ``lines`` (on rank 0, or ``(rank, text)``), 0.25 s apart or at ``times``; the
    time of the last one. ``batched``: in batches as a node sends them (``observe_batch``), each
    leaving the judge as line by line."""
    pairs = [(0, t) if isinstance(t, str) else t for t in lines]
    at = [0.25 * i for i in range(len(pairs))] if times is None else list(times)
    assert len(at) == len(pairs)
    rows = [LogLine(RankKey(N, r), t, at[i], 1_800_000_000.0 + at[i], f"rank-{r}.log", i)
            for i, (r, t) in enumerate(pairs)]
    if batched:
        _, j = feed_both(rows, lambda: 7, JudgeSettings(hang_timeout=HANG, save_timeout=SAVE))
        return j, rows[-1].mono
    j = judge()
    j.observe_lines(rows)
    return j, rows[-1].mono


@pytest.mark.parametrize("batched", [False, True])
def test_a_slow_save_at_the_last_step_is_work_not_a_hang(batched: bool) -> None:
    # to the save's bar and the node's word that the step's checkpoint appeared; then silence
    j, last = fed([*LINES, SAW], batched)
    assert j.last_step_reached() is not None
    v = j.verdict(last + HANG + 30.0)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    assert "reached the last step (20)" in v.reason and "20/20" in v.evidence[0].text
    # bounded: a save that never ends is a hang after the save timeout
    assert j.verdict(LAST_BAR * 0.25 + SAVE - 1.0).action is Action.WAIT
    v = j.verdict(LAST_BAR * 0.25 + SAVE + 1.0)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason


@pytest.mark.parametrize("batched", [False, True])
def test_the_checkpoint_seen_before_the_bar_of_its_step_still_leaves_the_last_step_reached(batched: bool) -> None:
    """The node's word that the last step's checkpoint appeared may come before rank 0's bar at that step:
    a late agent tick scans --checkpoint-dir before it reads the rank files (the save took less than
    the tick was late), another node sees a shared checkpoint dir on its own clock. A real HF run under
    neuron-watch on a starved machine did so, and its slow final save was judged a hang, restarted.
    The bar's end is the last step reached, whichever came first."""
    j, last = fed([*LINES[:LAST_BAR], SAW, *LINES[LAST_BAR:]], batched)
    assert j.last_step_reached() is not None
    v = j.verdict(last + HANG + 30.0)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    assert "reached the last step (20)" in v.reason and "20/20" in v.evidence[0].text
    # still bounded by the save timeout
    v = j.verdict(LAST_BAR * 0.25 + SAVE + 1.0)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason


def test_a_checkpoint_past_the_last_step_reached_is_training_going_on() -> None:
    """The node's word of a checkpoint of a later step than the bar's end: that end was not the run's last
    step (training went on); a silence after it is judged at the hang timeout."""
    j, last = fed([*LINES, (-1, "neuron-watch: a new complete checkpoint appeared: /fsx/ckpt/checkpoint-30 (step 30)")])
    assert j.last_step_reached() is None
    v = j.verdict(last + j.hang_timeout() + 0.01)
    assert v.label is Label.COLLECTIVE_HANG, v.reason


@pytest.mark.parametrize("batched", [False, True])
def test_a_rank_that_stops_before_the_last_step_is_a_hang_at_the_same_time(batched: bool) -> None:
    """The same run stopped at step 19 (both its bar and its log dict seen): a hang as soon as the
    silence passes the hang timeout, exactly as without the last-step rule."""
    j, last = fed(LINES[:LAST_BAR], batched)
    assert "19/20" in LINES[LAST_BAR - 1]
    assert j.last_step_reached() is None
    timeout = j.hang_timeout()
    assert j.verdict(last + timeout - 0.01).action is Action.WAIT
    v = j.verdict(last + timeout + 0.01)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason


def test_the_final_metrics_after_the_save_are_the_end_as_before() -> None:
    j, last = fed([*LINES, "{'train_runtime': '4.715', 'train_samples_per_second': '67.86', "
                   "'train_steps_per_second': '4.241', 'train_loss': '4.55', 'epoch': '1.25'}"])
    v = j.verdict(last + HANG + 30.0)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT) and "training finished" in v.reason, v.reason


def test_a_bar_that_ends_an_epoch_and_begins_again_is_not_the_end() -> None:
    """A plain tqdm loop draws one bar per epoch: its end is an epoch's, and the loop's next bar
    (drawn at 0 at once) says so; a hang then is judged at the hang timeout."""
    epoch = [f" {n * 10}%|#         | {n}/10 [00:0{n}<00:00,  1.00it/s]" for n in range(1, 10)]
    lines = [*epoch, "100%|##########| 10/10 [00:10<00:00,  1.00it/s]", "  0%|          | 0/10 [00:00<?, ?it/s]"]
    j, last = fed(lines)
    assert j.last_step_reached() is None
    v = j.verdict(last + j.hang_timeout() + 0.01)
    assert v.label is Label.COLLECTIVE_HANG, v.reason
    j, last = fed([*lines, " 10%|#         | 1/10 [00:01<00:09,  1.00it/s]"])  # the next epoch's steps
    assert j.last_step_reached() is None and j.last_step_line is None


def test_a_rank_behind_the_last_step_is_a_hang() -> None:
    """Two ranks printing steps: one at the bar's end, the other one step short (it stopped)."""
    j = judge()
    for n in range(1, 11):
        for r in (0, 1):
            if (r, n) != (1, 10):
                j.observe_line(LogLine(RankKey(N, r), f"{n * 10}%|#| {n}/10 [00:0{n}<00:00, 1.00it/s]",
                                       float(n), 1_800_000_000.0 + n, f"rank-{r}.log", n))
    assert j.last_step_line is not None and j.last_step_reached() is None
    v = j.verdict(10.0 + j.hang_timeout() + 0.01)
    assert v.label is Label.COLLECTIVE_HANG, v.reason
