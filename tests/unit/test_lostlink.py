"""The lost-coordinator policy of an agent (lostlink.py): a quiet coordinator never stops ranks
that still work; only a long silence with silent (or ended) ranks does. Fake time."""

from __future__ import annotations

import itertools

from neuron_watch.recovery.lostlink import CoordinatorLoss, LocalFacts, LossAction, LossSettings, loop_jump

S = LossSettings(silence=30.0, loss_timeout=600.0, hang_window=900.0, say_every=60.0)
WORKING = LocalFacts(active_ago=2.0, ended=False, buffered_lines=10)


def run(loss: CoordinatorLoss, start: float, end: float, facts: LocalFacts, heard: float = 0.0,
        step: float = 1.0) -> list[tuple[float, LossAction, str]]:
    """Step the policy each ``step`` seconds from ``start`` to ``end`` (coordinator last heard at ``heard``)."""
    out = []
    t = start
    while t <= end:
        action, message = loss.step(t, t - heard, facts)
        if action is not LossAction.KEEP:
            out.append((t, action, message))
        t += step
    return out


def test_a_quiet_coordinator_below_the_silence_changes_nothing() -> None:
    loss = CoordinatorLoss(S, "10.0.0.1:29510")
    assert run(loss, 0.0, 30.0, WORKING) == []
    assert not loss.lost


def test_working_ranks_are_kept_however_long_the_coordinator_is_away_and_it_is_said_every_minute() -> None:
    loss = CoordinatorLoss(S, "10.0.0.1:29510")
    said = run(loss, 0.0, 6 * 3600.0, WORKING, step=5.0)
    assert all(a is LossAction.SAY for _t, a, _m in said)  # never GIVE_UP
    assert "lost the coordinator at 10.0.0.1:29510" in said[0][2] and "keeps its ranks" in said[0][2]
    assert "still work" in said[1][2] and "10 line(s) buffered" in said[1][2]
    gaps = {round(b[0] - a[0]) for a, b in itertools.pairwise(said[1:])}
    assert gaps == {60}


def test_silent_ranks_are_stopped_only_after_the_loss_timeout() -> None:
    loss = CoordinatorLoss(S, "c:1")
    silent = LocalFacts(active_ago=1000.0, ended=False)
    said = run(loss, 0.0, 700.0, silent)
    gave_up = [t for t, a, _m in said if a is LossAction.GIVE_UP]
    assert gave_up and gave_up[0] > 600.0
    assert all(a is LossAction.SAY for t, a, _m in said if t <= 600.0)
    assert "--coordinator-loss-timeout 600s" in next(m for _t, a, m in said if a is LossAction.GIVE_UP)


def test_ended_ranks_wait_for_the_coordinator_as_long_and_no_longer() -> None:
    loss = CoordinatorLoss(S, "c:1")
    said = run(loss, 0.0, 602.0, LocalFacts(active_ago=None, ended=True))
    assert [a for _t, a, _m in said][-1] is LossAction.GIVE_UP and "ranks have ended" in said[-1][2]


def test_the_coordinator_coming_back_is_said_and_resets_the_policy() -> None:
    loss = CoordinatorLoss(S, "c:1")
    run(loss, 0.0, 100.0, WORKING)
    assert loss.lost
    action, message = loss.step(101.0, 0.5, WORKING)
    assert action is LossAction.SAY and "answers again after" in message
    assert not loss.lost
    assert loss.step(102.0, 1.5, WORKING)[0] is LossAction.KEEP


def test_a_jump_of_the_loop_is_reported_only_beyond_the_limit() -> None:
    assert loop_jump(None, 100.0, 5.0) == 0.0
    assert loop_jump(100.0, 100.5, 5.0) == 0.0
    assert loop_jump(100.0, 160.0, 5.0) == 60.0
