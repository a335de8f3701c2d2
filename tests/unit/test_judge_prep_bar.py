"""A bar without a description at its total is not always training's last step: a data-preparation
loop (tokenising a dataset on rank 0 before training) draws the same bar. Silence after it is a
final save only when something says training ran: a loss the ranks logged, a checkpoint save that
completed, the node's word that a new checkpoint appeared. Else a hang in the first collective after
the preparation is judged at the hang timeout, not after the save timeout.

The bar's end counts only with such a sign from its own run: tqdm prints how long a bar has run
(``[00:04<00:00, ...]``), so the loss of a training before a bare evaluation bar does not make that
bar's end training's.

The bars are real tqdm output (``data/frameworks/tqdm_prep*.log``, ``tqdm_epochs.log``, see the
README there), the training lines a real Hugging Face Trainer run (``test_judge_last_step``), on a
fake clock on which each recorded part takes the time it took when recorded (the time the bars
print must agree with the clock the judge reads).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.diagnosis.judge import STEADY_COLLECTIVES, Judge, _elapsed
from neuron_watch.diagnosis.logtext import logical_lines
from neuron_watch.events import Action, Label, RankKey
from tests.unit.test_judge_last_step import HANG, LAST_BAR, LINES, SAVE, N, fed

DATA = Path(__file__).parent / "data" / "frameworks"


def _bar(name: str) -> list[str]:
    """A recorded bar's redraws as the tail gives them (each ``\\r`` a line)."""
    out: list[str] = []
    for piece in (DATA / name).read_bytes().decode().replace("\r", "\n").split("\n"):
        out.extend(t for t in logical_lines(piece) if t.strip())
    return out


PREP = _bar("tqdm_prep.log")  # for _ in tqdm(range(1000)): a tokenising loop
MAP = _bar("tqdm_prep-map.log")  # the same with datasets' description, "Map"
DOWNLOAD = _bar("tqdm_prep-download.log")  # a byte count, as hub downloads draw it
EPOCHS = _bar("tqdm_epochs.log")  # a bar per epoch, 3 epochs of 10 steps, the loss in its postfix
#: where each epoch's bar is drawn at 0 (tqdm draws it as the loop begins)
EPOCH_STARTS = [i for i, t in enumerate(EPOCHS) if t == "  0%|          | 0/10 [00:00<?, ?it/s]"]
Part = list[str | tuple[int, str]]
#: how long each recorded part ran: tqdm's final rate (1000 items at 401.78 it/s, 250.28 it/s),
#: Trainer's train_runtime (4.715 s), 10 steps of 0.15 s a epoch, the download's 1.05M at 860kB/s
PREP_S, MAP_S, HF_S, EPOCH_S, DOWNLOAD_S = 2.5, 4.0, 4.7, 1.5, 1.2


def laid(*parts: tuple[Part, float]) -> tuple[Part, list[float]]:
    """The lines of ``parts`` in turn, each part's spread evenly over its seconds, and their times."""
    lines: Part = []
    times: list[float] = []
    t = 0.0
    for part, seconds in parts:
        if not part:
            continue
        gap = seconds / max(len(part) - 1, 1)
        lines.extend(part)
        times.extend(t + gap * i for i in range(len(part)))
        t = times[-1] + 0.1
    return lines, times


def fed_laid(*parts: tuple[Part, float], batched: bool = False) -> tuple[Judge, float]:
    """``fed`` the lines of ``parts`` at the times :func:`laid` gives them."""
    lines, times = laid(*parts)
    return fed(lines, batched, times)


#: the lines of the real Trainer run without its log dicts (logging_steps beyond max_steps: no loss before the end)
NO_LOSS = [t for t in LINES[: LAST_BAR + 1] if not t.startswith("{'loss'")]


def test_the_recorded_bars_are_what_the_cases_say() -> None:
    assert PREP[-1].startswith("100%|") and PREP[-1].endswith("]") and "1000/1000" in PREP[-1]
    assert MAP[-1].startswith("Map: 100%|") and "1000/1000" in MAP[-1]
    assert DOWNLOAD[-1].startswith("Downloading: 100%|")
    assert any(t.startswith("{'loss'") for t in LINES[:LAST_BAR]) and not any("'loss'" in t for t in NO_LOSS)


def _hang_at_the_hang_timeout(j: Judge, last: float) -> None:
    """Silence after ``last``: a wait up to the hang timeout, a hang (restart) just after it."""
    timeout = j.hang_timeout()
    assert timeout < SAVE
    v = j.verdict(last + timeout - 0.01)
    assert v.action is Action.WAIT, v.reason
    v = j.verdict(last + timeout + 0.01)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason
    assert "last step" not in v.reason


@pytest.mark.parametrize("batched", [False, True])
def test_a_hang_after_a_data_preparation_bar_is_a_hang_at_the_hang_timeout(batched: bool) -> None:
    j, last = fed_laid((PREP, PREP_S), batched=batched)
    assert j.last_step_line is not None and "1000/1000" in j.last_step_line.text  # the bar did end
    assert j.trained is None and j.last_step_reached() is None
    _hang_at_the_hang_timeout(j, last)
    # what the reproduction showed: a wait at 7 s and 100 s of silence, a hang only after the save timeout
    assert j.verdict(last + 100.0).label is Label.COLLECTIVE_HANG


@pytest.mark.parametrize("batched", [False, True])
def test_preparation_then_training_with_losses_then_silence_at_the_last_step_is_the_final_save(
        batched: bool) -> None:
    j, last = fed_laid((PREP, PREP_S), (LINES, HF_S), batched=batched)
    assert j.trained is not None and j.trained.text.startswith("{'loss'")
    reached = j.last_step_reached()
    assert reached is not None and "20/20" in reached.text
    v = j.verdict(last + HANG + 30.0)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    assert "reached the last step (20)" in v.reason and "a loss was logged by node-a/rank0" in v.reason, v.reason
    assert v.evidence == (reached,)
    # bounded as before: a save that never ends is a hang after the save timeout
    v = j.verdict(reached.mono + SAVE + 1.0)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason


@pytest.mark.parametrize("batched", [False, True])
def test_preparation_then_training_stopped_before_its_last_step_is_a_hang_at_the_hang_timeout(batched: bool) -> None:
    """The preparation's bar ended at its total, training logged losses and stopped at step 19."""
    j, last = fed_laid((PREP, PREP_S), (LINES[:LAST_BAR], HF_S), batched=batched)
    assert j.trained is not None and j.last_step_line is None and j.last_step_reached() is None
    _hang_at_the_hang_timeout(j, last)


@pytest.mark.parametrize("batched", [False, True])
def test_a_training_bar_at_its_total_with_no_loss_and_no_checkpoint_is_judged_at_the_hang_timeout(
        batched: bool) -> None:
    """The bar alone does not say it is training's: a Trainer that logged no loss and saved nothing
    before its last step is judged as before the last-step rule."""
    j, last = fed_laid((NO_LOSS, HF_S), batched=batched)
    assert j.last_step_line is not None and j.last_step_reached() is None
    _hang_at_the_hang_timeout(j, last)


@pytest.mark.parametrize("batched", [False, True])
def test_the_nodes_word_that_a_checkpoint_appeared_says_training_ran(batched: bool) -> None:
    """The same run, and the node finds its checkpoint of step 10 complete during training."""
    ckpt10 = (-1, "neuron-watch: a new complete checkpoint appeared: /fsx/ckpt/checkpoint-10 (step 10)")
    at = next(i for i, t in enumerate(NO_LOSS) if "11/20" in t)
    j, last = fed_laid(([*NO_LOSS[:at], ckpt10, *NO_LOSS[at:]], HF_S), batched=batched)
    assert j.trained is not None and j.trained.text == ckpt10[1]
    v = j.verdict(last + HANG + 30.0)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    assert "a new checkpoint appeared" in v.reason, v.reason


def test_a_completed_checkpoint_save_says_training_ran() -> None:
    save = "[2026-11-21 10:19:02,117.117: I neuronx_distributed/trainer/checkpoint.py:426] synced saving of " \
           "checkpoint step_10 completed"
    at = next(i for i, t in enumerate(NO_LOSS) if "11/20" in t)
    j, last = fed_laid(([*NO_LOSS[:at], save, *NO_LOSS[at:]], HF_S))
    assert j.trained is not None and j.trained.text == save
    v = j.verdict(last + HANG + 30.0)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT) and "a checkpoint save completed" in v.reason, v.reason


@pytest.mark.parametrize("before", [[], PREP], ids=["alone", "after-preparation"])
@pytest.mark.parametrize("batched", [False, True])
def test_the_end_of_a_later_epochs_bar_is_not_the_last_step(before: Part, batched: bool) -> None:
    """A loop with a bar per epoch that logs its loss: the second epoch's bar at its total, then a hang
    (in the work between epochs) before the third bar is drawn: a hang at the hang timeout. The same
    total again is the same loop again, not a new one (alone or after a preparation's bar)."""
    assert len(EPOCH_STARTS) == 3 and EPOCHS[EPOCH_STARTS[2] - 1].startswith("100%|██████████| 10/10 [")
    j, last = fed_laid((before, PREP_S), (EPOCHS[: EPOCH_STARTS[2]], 2 * EPOCH_S), batched=batched)
    assert j.trained is not None and "loss=" in j.trained.text
    assert j.last_step_reached() is None
    _hang_at_the_hang_timeout(j, last)


@pytest.mark.parametrize("batched", [False, True])
def test_a_bare_bar_after_training_began_is_not_a_new_training_loop(batched: bool) -> None:
    """Training logged losses up to step 19; then a loop with a bare bar of another total (an
    evaluation or a prediction pass) reaches its total, and the ranks hang: a hang at the hang timeout."""
    j, last = fed_laid((LINES[:LAST_BAR], HF_S), (PREP, PREP_S), batched=batched)
    assert j.trained is not None and j.last_step_reached() is None
    _hang_at_the_hang_timeout(j, last)


@pytest.mark.parametrize("batched", [False, True])
def test_training_whose_first_step_line_carries_its_loss_is_a_new_loop_after_the_preparation(batched: bool) -> None:
    """The loss in the training bar's own postfix (its first step's line says both): its bar's end
    after a preparation's bar is found as without the preparation."""
    first_epoch = EPOCHS[: EPOCH_STARTS[1]]
    for before in ([], PREP):
        j, last = fed_laid((before, PREP_S), (first_epoch, EPOCH_S), batched=batched)
        reached = j.last_step_reached()
        assert reached is not None and reached.text.startswith("100%|██████████| 10/10 ["), len(before)
        v = j.verdict(last + HANG + 30.0)
        assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT) and "reached the last step (10)" in v.reason


@pytest.mark.parametrize("readings", [STEADY_COLLECTIVES, STEADY_COLLECTIVES - 1])
def test_collectives_completing_steadily_say_training_ran(readings: int) -> None:
    """The run without a loss or a checkpoint, its ranks' flight recorders read every second during
    training: collectives completing in STEADY_COLLECTIVES readings are a training loop's."""
    j, last = fed_laid((NO_LOSS, HF_S))
    for n in range(readings):
        j.observe_collectives(RankKey(N, 1), [GroupProgress("0", n, n, n)], 1.0 + n)
    if readings < STEADY_COLLECTIVES:
        assert j.last_step_reached() is None
        _hang_at_the_hang_timeout(j, last)
        return
    assert j.trained is None and j.trained_collectives == RankKey(N, 1)
    v = j.verdict(last + HANG + 30.0)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    assert "node-a/rank1's collectives completed steadily" in v.reason, v.reason


@pytest.mark.parametrize("bar", [MAP, DOWNLOAD], ids=["map", "download"])
def test_a_bar_with_a_description_at_its_total_is_not_the_last_step(bar: list[str]) -> None:
    """Before training, and after training logged losses (a map run between epochs): never the last step."""
    seconds = MAP_S if bar is MAP else DOWNLOAD_S
    j, last = fed_laid((bar, seconds))
    assert j.last_step_line is None and j.last_step_reached() is None
    j, last = fed_laid((LINES[:LAST_BAR], HF_S), (bar, seconds))
    assert j.trained is not None and j.last_step_line is None and j.last_step_reached() is None
    # the map's bar is liveness (the clock runs from it), the download's byte count is not a count
    v = j.verdict(last + j.hang_timeout() + 0.01)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason
    assert "last step" not in v.reason


@pytest.mark.parametrize(("text", "seconds"), [
    ("100%|██████████| 20/20 [00:04<00:00,  5.92it/s]", 4.0),
    ("100%|##########| 30/30 [00:47<00:00,  1.53s/it]", 47.0),
    ("100%|██████████| 9000/9000 [1:02:03<00:00,  2.42it/s]", 3723.0),  # tqdm's format_interval past an hour
    ("100%|██████████| 20/20", math.inf),  # no time printed: the bar may have begun at any time
])
def test_a_bar_says_how_long_it_ran(text: str, seconds: float) -> None:
    assert _elapsed(text) == seconds
