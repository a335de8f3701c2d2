from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import CONFIG_ADVICE
from neuron_watch.errors import ExitCode
from neuron_watch.events import Action, JobState, Label, RankKey, Verdict
from neuron_watch.recovery.policy import Decision, IllegalTransition, JobStateMachine, RestartPolicy


def v(label: Label, action: Action = Action.RESTART, step: int | None = None, node: str = "n1") -> Verdict:
    return Verdict(label, action, culprit=RankKey(node, 0), step=step)


def test_state_machine_rejects_illegal_moves_naming_both_states() -> None:
    sm = JobStateMachine()
    sm.move(JobState.RUNNING, 1.0)
    with pytest.raises(IllegalTransition, match="running -> restarting"):
        sm.move(JobState.RESTARTING, 2.0)
    sm.move(JobState.CAPTURING, 2.0)
    sm.move(JobState.STOPPING, 3.0)
    sm.move(JobState.RESTARTING, 4.0)
    sm.move(JobState.STARTING, 5.0)
    assert [s for _t, s in sm.history][-1] is JobState.STARTING and sm.live


def test_restart_until_budget_then_give_up() -> None:
    p = RestartPolicy(max_restarts=2)
    assert p.on_failure(v(Label.COLLECTIVE_HANG, step=1), 0, None).decision is Decision.RESTART
    assert p.on_failure(v(Label.OTHER_CRASH, step=2), 0, 1).decision is Decision.RESTART
    out = p.on_failure(v(Label.COLLECTIVE_HANG, step=3), 0, None)
    assert out.decision is Decision.GIVE_UP and "--max-restarts 2" in out.reason
    assert out.exit_code == ExitCode.RESTARTS_EXHAUSTED


def test_stable_run_resets_the_budget() -> None:
    p = RestartPolicy(max_restarts=1, stable_seconds=100)
    assert p.on_failure(v(Label.OTHER_CRASH, step=1), 5, 1).decision is Decision.RESTART
    assert p.on_failure(v(Label.OTHER_CRASH, step=50), 500, 1).decision is Decision.RESTART


@pytest.mark.parametrize("label", [Label.CONFIG_ERROR, Label.NUMERICAL_ERROR, Label.COMPILE_ERROR])
def test_never_restart_config_numerical_compile(label: Label) -> None:
    # 4 (README) whether torchrun exited by itself (here with 1) or the watchdog stopped it
    out = RestartPolicy(max_restarts=5).on_failure(v(label, Action.STOP), 0, 1)
    assert out.decision is Decision.GIVE_UP and out.exit_code == 4
    assert RestartPolicy(max_restarts=5).on_failure(v(label, Action.STOP), 0, None).exit_code == 4


def test_crash_loop_same_failure_same_step_stops() -> None:
    p = RestartPolicy(max_restarts=5)
    assert p.on_failure(v(Label.OTHER_CRASH, step=7), 0, 1).decision is Decision.RESTART
    out = p.on_failure(v(Label.OTHER_CRASH, step=7), 0, 1)
    assert out.decision is Decision.GIVE_UP and "crash loop" in out.reason


def test_faulty_node_without_exclusion_stops_and_names_the_node() -> None:
    out = RestartPolicy(max_restarts=5).on_failure(
        v(Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART, node="trn-7"), 0, 1
    )
    assert out.decision is Decision.GIVE_UP and "trn-7" in out.reason
    assert (
        RestartPolicy(5, can_exclude_nodes=True)
        .on_failure(v(Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART), 0, 1)
        .decision
        is Decision.RESTART
    )


# -- crash loops before the first step ---------------------------------------------------
def _early(label: Label = Label.OTHER_CRASH, signature: str = "python_cannot_open_file") -> Verdict:
    from neuron_watch.events import Evidence

    ev = Evidence(RankKey("n1", 0), "python: can't open file '/x/train.py': [Errno 2] No such file or directory",
                  signature, "/r/gen-0/rank-0.log", 1)
    return Verdict(label, Action.RESTART, culprit=RankKey("n1", 0), evidence=(ev,), step=None)


def test_the_same_failure_before_any_step_twice_is_a_crash_loop_exit_4() -> None:
    p = RestartPolicy(max_restarts=5)
    assert p.on_failure(_early(), 0, 2).decision is Decision.RESTART
    out = p.on_failure(_early(), 0, 2)
    assert out.decision is Decision.GIVE_UP and "crash loop" in out.reason and "before the first step" in out.reason
    assert out.exit_code == ExitCode.NOT_RESTARTABLE


def test_early_failures_that_differ_or_make_progress_in_between_are_no_loop() -> None:
    p = RestartPolicy(max_restarts=5)
    assert p.on_failure(_early(signature="a"), 0, 1).decision is Decision.RESTART
    assert p.on_failure(_early(signature="b"), 0, 1).decision is Decision.RESTART  # another failure
    assert p.on_failure(v(Label.OTHER_CRASH, step=4), 0, 1).decision is Decision.RESTART  # progress
    assert p.on_failure(_early(signature="b"), 0, 1).decision is Decision.RESTART


def test_a_checkpoint_fallback_gets_one_more_generation_then_the_loop_is_called() -> None:
    p = RestartPolicy(max_restarts=5)
    assert p.on_failure(_early(), 0, 1).decision is Decision.RESTART
    assert p.on_failure(_early(), 0, 1, fallback=True).decision is Decision.RESTART  # from an older checkpoint
    out = p.on_failure(_early(), 0, 1)
    assert out.decision is Decision.GIVE_UP and out.exit_code == ExitCode.NOT_RESTARTABLE


def test_a_set_up_mistake_read_from_its_exception_tries_the_fallback_checkpoint_once() -> None:
    # a KeyError before the first step (firstfailure.py: configuration, stopped) in a generation that started
    # from a checkpoint: a torn state dict raises the same, so the previous complete checkpoint is tried first
    mistake = Verdict(Label.CONFIG_ERROR, Action.STOP, culprit=RankKey("n1", 0), advice=CONFIG_ADVICE)
    p = RestartPolicy(max_restarts=5)
    assert p.on_failure(mistake, 0, 1, fallback=True).decision is Decision.RESTART
    out = p.on_failure(mistake, 0, 1)  # the same from the older checkpoint: the set-up, not the checkpoint
    assert out.decision is Decision.GIVE_UP and out.exit_code == ExitCode.NOT_RESTARTABLE
    # without a checkpoint to fall back from, or a rule's own cause, or after a step: stopped at once
    assert RestartPolicy(max_restarts=5).on_failure(mistake, 0, 1).decision is Decision.GIVE_UP
    named = Verdict(Label.CONFIG_ERROR, Action.STOP, culprit=RankKey("n1", 0), advice="Install the collectives.")
    assert RestartPolicy(max_restarts=5).on_failure(named, 0, 1, fallback=True).decision is Decision.GIVE_UP
    later = Verdict(Label.CONFIG_ERROR, Action.STOP, culprit=RankKey("n1", 0), advice=CONFIG_ADVICE, step=7)
    assert RestartPolicy(max_restarts=5).on_failure(later, 0, 1, fallback=True).decision is Decision.GIVE_UP
