"""The corpus benchmarks' scoring: expected actions, the arithmetic, the blind commit of a batch."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis import errorclass
from neuron_watch.diagnosis.classify import Effect
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from neuron_watch.recovery.policy import NEVER_RESTART
from tests.fixtures.corpus_score import (
    ACTION_CHANGES,
    EXPECTED_ACTIONS,
    NoBlindCommit,
    action_changes,
    action_confusion,
    blind_commit,
    score,
)


def test_every_label_has_an_expected_action() -> None:
    assert set(EXPECTED_ACTIONS) == set(Label)


#: Fatal rules whose action departs from their label's on purpose: an execution that reads out of
#: bounds or is fed bad inputs crashes again on the same data, so the rule stops rather than
#: restarts. The corpus scores them by their label (restart), as docs/diagnosis.md's table does.
DEPARTURES = {"neuron.nrt.exec_oob", "neuron.nrt.exec_bad_input"}


def test_expected_actions_agree_with_every_fatal_signature() -> None:
    """The bench's table is the product's: each fatal rule gives its category an expected action."""
    kb = default_knowledge_base()
    fatal = [s for s in kb.by_id.values() if s.effect is Effect.FATAL]
    assert len(fatal) > len(DEPARTURES)
    disagree = {s.id for s in fatal if s.action not in EXPECTED_ACTIONS[s.category]}
    assert disagree == DEPARTURES


def test_expected_actions_agree_with_errorclass_and_the_restart_policy() -> None:
    for label, action in errorclass._ACTIONS.items():
        assert action in EXPECTED_ACTIONS[Label(label)], label
    for label in NEVER_RESTART:
        assert EXPECTED_ACTIONS[label] == frozenset({Action.STOP}), label


@pytest.mark.parametrize(("expected", "said", "action", "kind"), [
    (Label.OTHER_CRASH, Label.OTHER_CRASH, Action.RESTART, None),
    (Label.COMM_ERROR, Label.OTHER_CRASH, Action.RESTART, None),  # a swap within one action
    (Label.OOM, Label.OOM, Action.STOP, None),  # device OOM: stop is right
    (Label.OOM, Label.OOM, Action.RESTART, None),  # host OOM: restart is right
    (Label.NUMERICAL_ERROR, Label.HEALTHY, Action.WAIT, "failure read as healthy"),
    (Label.HARDWARE_ERROR, Label.OTHER_CRASH, Action.RESTART, "hardware not drained"),
    (Label.CONFIG_ERROR, Label.OTHER_CRASH, Action.RESTART, "config restarted"),
    (Label.CONFIG_ERROR, Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART, "config restarted"),
    (Label.HEALTHY, Label.CONFIG_ERROR, Action.STOP, "other action change"),
    (Label.COMPILING, Label.HEALTHY, Action.WAIT, None),  # both wait
])
def test_action_confusion(expected: Label, said: Label, action: Action, kind: str | None) -> None:
    assert action_confusion(expected, said, action) == kind
    assert kind is None or kind in ACTION_CHANGES


def test_score_counts_labels_actions_and_failures_called_healthy() -> None:
    s = score([
        (Label.OOM, Label.OOM, Action.STOP),  # both right
        (Label.COMM_ERROR, Label.OTHER_CRASH, Action.RESTART),  # action right, label wrong
        (Label.CONFIG_ERROR, Label.HEALTHY, Action.WAIT),  # a failure called healthy
        (Label.COMPILING, Label.HEALTHY, Action.WAIT),  # label wrong, action right, not a failure
        (Label.HARDWARE_ERROR, Label.OTHER_CRASH, Action.RESTART),  # both wrong
    ])
    assert (s.excerpts, s.labels_right, s.actions_right, s.called_healthy) == (5, 1, 3, 1)
    assert s.labels_pct == pytest.approx(20.0)
    assert s.actions_pct == pytest.approx(60.0)


def test_scores_add_up_to_the_score_of_their_union() -> None:
    a = [(Label.OOM, Label.OOM, Action.STOP), (Label.CONFIG_ERROR, Label.HEALTHY, Action.WAIT)]
    b = [(Label.HEALTHY, Label.OTHER_CRASH, Action.RESTART)]
    assert score(a) + score(b) == score(a + b)
    assert (score(a) + score(b)).excerpts == 3


def test_action_changes_counts_each_kind_and_keeps_the_zeros() -> None:
    counts = action_changes([
        (Label.CONFIG_ERROR, Label.OTHER_CRASH, Action.RESTART),
        (Label.CONFIG_ERROR, Label.COMM_ERROR, Action.RESTART),
        (Label.OOM, Label.HEALTHY, Action.WAIT),
        (Label.COMM_ERROR, Label.OTHER_CRASH, Action.RESTART),  # same action: not counted
    ])
    assert counts == {"failure read as healthy": 1, "hardware not drained": 0, "config restarted": 2,
                      "other action change": 0}


def test_score_of_nothing_is_zero_not_a_division_error() -> None:
    s = score([])
    assert (s.excerpts, s.labels_pct, s.actions_pct) == (0, 0.0, 0.0)


def test_blind_commit_is_the_newest_with_the_product_before_the_batch() -> None:
    history = [("relabel", "P2"), ("part-b", "P1"), ("part-a", "P1")]  # newest first
    chosen = blind_commit(history, "P1")
    assert chosen.commit == "part-b"
    assert chosen.later == ("relabel",)


def test_blind_commit_clean_when_nothing_came_after() -> None:
    chosen = blind_commit([("added", "P1")], "P1")
    assert (chosen.commit, chosen.later) == ("added", ())


def test_blind_commit_refuses_a_batch_added_with_a_product_change() -> None:
    with pytest.raises(NoBlindCommit, match="split the excerpts"):
        blind_commit([("added-with-fix", "P2")], "P1")
