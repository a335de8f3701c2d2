"""A rank's exit read directly (the node's reading of the rank's own record of a normal interpreter
exit, ``RankExit.presumed``; or an exit status: torchrun's failure report, an srun task's own exit)
ends the teardown grace for that rank: a quiet rank at the end's step that exited cleanly is no hang
candidate, and once every rank has exited cleanly the job is over without waiting for the grace. A
rank still running keeps its grace and the uneven-data hang; an exit by a signal or a non-zero code
is that rank's failure, the same whether a presumed clean exit came before it or not. On a fake
clock (``now`` is an argument)."""

from __future__ import annotations

from neuron_watch.diagnosis.judge import Judge, JudgeSettings, teardown_grace
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankExit, RankKey

KB = default_knowledge_base()
N = "vm"
HANG = 6.0
STEPS = 10
END_AT = STEPS + 0.5  # rank 0 alone says the end, after its last step line
END = "training done at step 10"
R0, R1, R2 = RankKey(N, 0), RankKey(N, 1), RankKey(N, 2)
GRACE_END = END_AT + teardown_grace(HANG)
PAST_HANG = END_AT + HANG + 1.0  # more than a hang timeout after every rank's last step line
SHUTTING = "a hang if not exited"  # the teardown grace's verdict (Judge._teardown_verdict)


def ln(key: RankKey, text: str, t: float) -> LogLine:
    return LogLine(key, text, t, 1_800_000_000.0 + t, f"rank-{key.rank}.log", int(t))


def trained(ranks: int = 2, last: dict[int, int] | None = None, end: bool = True) -> Judge:
    """``ranks`` ranks print ``step n`` at t = n up to STEPS (``last``: rank -> its last step, fewer);
    rank 0 alone then says the end at END_AT (``end``)."""
    j = Judge(KB, JudgeSettings(hang_timeout=HANG), start=0.0)
    j.expect([RankKey(N, r) for r in range(ranks)], 0.0)
    for n in range(1, STEPS + 1):
        for r in range(ranks):
            if n <= (last or {}).get(r, STEPS):
                j.observe_line(ln(RankKey(N, r), f"step {n} loss 1.5", n + 0.01 * r))
    if end:
        j.observe_line(ln(R0, END, END_AT))
    return j


def clean(j: Judge, key: RankKey, t: float) -> None:
    """The node read ``key``'s record of a normal interpreter exit, its process gone (code 0 presumed)."""
    j.observe_exit(RankExit(key, 0, t, presumed=True))


def test_a_quiet_rank_that_exited_cleanly_is_no_hang_candidate_and_the_grace_ends_for_it() -> None:
    before = trained()
    v = before.verdict(PAST_HANG)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT) and SHUTTING in v.reason, v.reason
    assert v.ranks == (R1,)  # the grace: rank 1, at the end's step, is shutting down
    j = trained()
    clean(j, R1, END_AT + 2.0)
    v = j.verdict(PAST_HANG)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    assert SHUTTING not in v.reason and R1 not in v.ranks, v.reason  # the grace is over for it
    assert j.ranks[R1].state_name(PAST_HANG, j.settings) == "exited"
    # past the grace, the job is no hang either: rank 1 is gone, rank 0 said its end (it exits)
    after = j.verdict(GRACE_END + 1.0)
    assert after.label is Label.HEALTHY and R1 not in after.ranks, after.reason
    assert before.verdict(GRACE_END + 1.0).label is Label.COLLECTIVE_HANG  # without the exit read


def test_every_rank_exited_cleanly_is_the_end_without_waiting_for_the_grace_or_the_launcher() -> None:
    j = trained(ranks=3)
    for key, t in ((R1, END_AT + 1.0), (R0, END_AT + 1.5), (R2, END_AT + 2.0)):
        clean(j, key, t)
    assert j.launcher_exit is None  # torchrun has not said anything yet
    for now in (PAST_HANG, GRACE_END + 1.0, GRACE_END + 600.0):
        v = j.verdict(now)
        assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), (now, v.reason)
        assert SHUTTING not in v.reason and v.ranks == (), (now, v.reason)


def test_the_grace_stays_for_the_ranks_still_running_and_names_only_them() -> None:
    j = trained(ranks=3)
    clean(j, R1, END_AT + 2.0)
    v = j.verdict(PAST_HANG)
    assert SHUTTING in v.reason and v.ranks == (R2,), v.reason
    assert "vm/rank2 reached the same final step" in v.reason and "rank1" not in v.reason
    # a rank still running past the grace is a hang, as before the exit of the other was read
    late = j.verdict(GRACE_END + 1.0)
    assert late.label is Label.COLLECTIVE_HANG and R2 in late.ranks and R1 not in late.ranks, late.reason


def test_near_miss_a_rank_that_exited_cleanly_at_an_earlier_step_left_the_others_waiting() -> None:
    """Uneven data: rank 1 has one batch fewer, exits cleanly after step 9 (it prints no end: the
    node read its exit), rank 0 waits for it in step 10's collective. Its clean exit names it."""
    j = trained(last={1: STEPS - 1}, end=False)
    clean(j, R1, STEPS - 1 + 0.3)
    v = j.verdict(STEPS + HANG + 1.0)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason
    assert v.culprit == R1 and v.culprit_source == "process_state", v.reason
    assert "left without a collective" in v.reason and v.ranks == (R0,), v.reason


def test_near_miss_an_end_said_while_a_rank_that_exited_early_holds_another_gives_no_grace() -> None:
    """Rank 0 says its end at step 10, rank 2 is behind at step 9 (waiting for rank 1, which exited
    cleanly after step 9): no grace, since a rank still running is behind the end's step."""
    j = trained(ranks=3, last={1: STEPS - 1, 2: STEPS - 1})
    clean(j, R1, STEPS - 1 + 0.3)
    v = j.verdict(PAST_HANG)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason
    assert SHUTTING not in v.reason and R2 in v.ranks and R1 not in v.ranks, v.reason


def test_near_miss_a_quiet_rank_killed_by_sigkill_is_its_failure() -> None:
    """Rank 1, at the end's step, is killed by SIGKILL (the OOM killer, an operator): it wrote no record
    of a normal exit, so only the launcher's report tells it (torchrun: exitcode -9)."""
    j = trained()
    j.observe_exit(RankExit(R1, -9, END_AT + 2.0))
    v = j.verdict(END_AT + 2.5)
    assert v.action is not Action.WAIT and v.culprit == R1 and v.culprit_source == "failure", v.reason
    assert "signal 9" in v.reason or "-9" in v.reason or "SIGKILL" in v.reason, v.reason
    assert j.ranks[R1].state_name(END_AT + 2.5, j.settings) == "exited"


def test_a_failure_reported_after_a_presumed_clean_exit_replaces_it_and_is_judged_as_ever() -> None:
    """``sys.exit(3)``, or an abort in the interpreter's teardown after the record was written: the
    record looked like a clean exit, torchrun's failure report says otherwise. The verdict is the one
    the failure report alone gives."""
    reported = trained()
    reported.observe_exit(RankExit(R1, 3, END_AT + 2.4))
    corrected = trained()
    clean(corrected, R1, END_AT + 2.0)
    assert corrected.verdict(END_AT + 2.1).label is Label.HEALTHY
    corrected.observe_exit(RankExit(R1, 3, END_AT + 2.4))
    assert corrected.ranks[R1].exit_code == 3 and not corrected.ranks[R1].exit_presumed
    assert corrected.ranks[R1].exit_time == END_AT + 2.0  # the exit itself was seen first
    a, b = reported.verdict(END_AT + 3.0), corrected.verdict(END_AT + 3.0)
    assert a.action is not Action.WAIT and a.culprit == R1, a.reason
    assert (b.label, b.action, b.culprit, b.culprit_source) == (a.label, a.action, a.culprit, a.culprit_source)


def test_an_exit_status_stands_against_a_presumed_exit_that_comes_after_it() -> None:
    j = trained()
    j.observe_exit(RankExit(R1, -6, END_AT + 2.0))  # SIGABRT at exit, reported first
    clean(j, R1, END_AT + 2.1)
    assert (j.ranks[R1].exit_code, j.ranks[R1].exit_presumed) == (-6, False)
    j2 = trained()
    clean(j2, R1, END_AT + 2.0)
    clean(j2, R1, END_AT + 2.5)  # said twice: one exit
    j2.observe_exit(RankExit(R0, 0, END_AT + 3.0))
    v = j2.verdict(GRACE_END + 1.0)
    assert v.label is Label.HEALTHY and v.ranks == (), v.reason  # both counted once: every rank exited
