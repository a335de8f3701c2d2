"""A real Hugging Face Trainer job whose last step is a checkpoint step, with a slow save there, under
``neuron-watch torchrun``: the save and the run's end after it are work, not a hang.

``examples/frameworks/hf_trainer.py`` (2 ranks, CPU, gloo) trains ``LENGTH`` steps of ``STEP`` s with a
checkpoint every ``SAVE_EVERY`` steps, so its last step is a checkpoint step, and its
``--final-save-seconds`` makes that save ``SLOW`` s longer on every rank (a slow filesystem's flush):
Trainer says nothing while it saves at its default log level, so the judge sees its bar reach
``LENGTH/LENGTH``, then silence far past ``--hang-timeout HANG``, then the final metrics. The node's
word that ``checkpoint-LENGTH`` appeared may reach the judge before that bar or after it (a late agent
tick scans the checkpoint dir before it reads the rank files: on a slow machine, before), and either
way the bar is the last step reached (``tests/unit/test_judge_last_step.py`` holds both orders). The run
must finish with no restart and no hang verdict, saying why it waited; and a run that stops during
training is still a hang (``test_frameworks``: a SIGSTOPped rank). No pid of the run survives it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.fixtures.procs import events, named
from tests.process.test_frameworks import BEGAN, JOBS, Job, _hf_checkpoints, finish, fw_environment, watched

pytestmark = pytest.mark.process

STEP = 1.0  # seconds per step: the bar is redrawn (and seen) at every step, the last one included
HANG = 6.0
SAVE_EVERY = 5
LENGTH = 2 * SAVE_EVERY  # the last step is a checkpoint step
SLOW = 3 * HANG  # the last step's save lasts three hang timeouts longer
STARTUP = 180.0  # imports of torch + transformers on a busy 2-core machine
DEADLINE = 420.0

JOB = Job(
    "hf_trainer_final_save",
    lambda ckpt, n, s: [str(JOBS / "hf_trainer.py"), "--output-dir", str(ckpt), "--max-steps", str(n),
                        "--save-steps", str(SAVE_EVERY), "--step-seconds", str(s),
                        "--final-save-seconds", str(SLOW)],
    _hf_checkpoints,
    BEGAN,
    "training done at step",
)


@pytest.mark.timeout(DEADLINE + 60)
def test_a_slow_checkpoint_save_at_the_last_step_is_not_a_hang(tmp_path: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    with watched(tmp_path, fw_environment(), JOB, LENGTH, STEP, startup=STARTUP, hang=HANG) as run:
        code = finish(run, deadline)
        out = run.output()
    assert code == 0, out
    evs = events(run.run_dir)
    assert not named(evs, "restart") and not named(evs, "incident"), [e["event"] for e in evs]
    assert not [v for v in named(evs, "verdict") if v["action"] != "wait"], named(evs, "verdict")
    # the judge did see the silence (longer than the hang timeout) and said why it waited
    waited = [v for v in named(evs, "verdict") if "reached the last step" in v["reason"]]
    assert waited and waited[0]["step"] == LENGTH, named(evs, "verdict")
    assert f"{LENGTH}/{LENGTH}" in waited[0]["evidence"][0]["text"], waited[0]
    assert named(evs, "job_finished")[0]["exit_code"] == 0
    assert f"training done at step {LENGTH}" in run.rank_log(0, 0)
    state = json.loads((run.ckpt / f"checkpoint-{LENGTH}" / "trainer_state.json").read_text())
    assert state["global_step"] == LENGTH  # the slow save completed: the checkpoint is whole
