"""After the job says its training finished (the frameworks' own last words, real lines): silence
is the final save and teardown, and a failure is a failure of the shutdown, which is not restarted.
On a fake clock (``now`` is an argument)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.judge import END_REDRAW_SECONDS, Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankExit, RankKey, Verdict
from neuron_watch.recovery.policy import Decision, RestartPolicy

KB = default_knowledge_base()
N = "node-a"
# real last lines of the frameworks' jobs (tests/unit/data/frameworks/, captured from real runs)
HF_END = ("{'train_runtime': '4.715', 'train_samples_per_second': '67.86', 'train_steps_per_second': '4.241', "
          "'train_loss': '4.55', 'epoch': '1.25'}")
LIGHTNING_END = "`Trainer.fit` stopped: `max_steps=40` reached."
OWN_END = "training done at step 14"


def ln(rank: int, text: str, t: float) -> LogLine:
    return LogLine(RankKey(N, rank), text, t, 1_800_000_000.0 + t, f"rank-{rank}.log", int(t))


def trained(end_line: str | None, printing: tuple[int, ...] = (0,), steps: int = 10) -> Judge:
    """Two ranks, a step a second printed by the ``printing`` ranks (HF and Lightning print on rank 0
    only); each of them then says training finished at t = steps + 0.5."""
    j = Judge(KB, JudgeSettings(hang_timeout=12.0, save_timeout=600.0), start=0.0)
    j.expect([RankKey(N, 0), RankKey(N, 1)], 0.0)
    for n in range(1, steps + 1):
        for r in printing:
            j.observe_line(ln(r, f"step {n} loss 1.5", float(n)))
    if end_line is not None:
        for r in printing:
            j.observe_line(ln(r, end_line, steps + 0.5))
    return j


@pytest.mark.parametrize("end_line", [HF_END, LIGHTNING_END, OWN_END])
def test_silence_after_training_finished_is_shutting_down_not_a_hang(end_line: str) -> None:
    j = trained(end_line)
    v = j.verdict(10.0 + 100.0)  # far beyond the 12 s hang timeout, within the 600 s save timeout
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    assert "training finished" in v.reason and "shutting down" in v.reason
    assert trained(None).verdict(10.0 + 100.0).label is Label.COLLECTIVE_HANG  # the same silence without it


def test_the_nodes_word_that_the_last_checkpoint_appeared_does_not_hide_the_end() -> None:
    """The node's own stream (rank -1) says the checkpoint of the last step appeared, a progress
    line of that step, before Trainer's final metrics: it says no end of its own, and the silence
    after the end (the teardown) was judged a hang, blamed on rank 0 for leaving early."""
    j = trained(None)
    j.observe_line(LogLine(RankKey(N, -1), "neuron-watch: a new complete checkpoint appeared: "
                           "/fsx/ckpt/checkpoint-10 (step 10)", 10.2, 1_800_000_010.2, "ckpt", 0))
    j.observe_line(ln(0, HF_END, 10.5))
    assert j.training_finished() is not None
    v = j.verdict(10.5 + 100.0)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT) and "training finished" in v.reason, v.reason


def test_a_shutdown_that_never_ends_is_stopped_not_restarted() -> None:
    j = trained(OWN_END, printing=(0, 1))  # our toy job: every rank prints its steps and its end
    v = j.verdict(10.5 + 601.0)
    assert (v.label, v.action, v.after_training) == (Label.COLLECTIVE_HANG, Action.STOP, True), v.reason
    assert "not restarting" in v.reason
    assert v.to_dict()["after_training"] is True
    out = RestartPolicy(max_restarts=3).on_failure(v, progressed_for=10.0, job_exit_code=None)
    assert out.decision is Decision.GIVE_UP and out.exit_code == 4, out


def test_a_rank_that_aborts_after_training_finished_is_not_restarted_and_the_jobs_code_stands() -> None:
    j = trained(HF_END)
    j.observe_exit(RankExit(RankKey(N, 1), -6, 11.0))  # "terminate called without an active exception"
    v = j.verdict(11.5)
    assert v.action is Action.STOP and v.after_training, v
    assert v.reason.startswith("after training finished (step 10;") and "exited with -6" in v.reason
    out = RestartPolicy(max_restarts=3).on_failure(v, progressed_for=10.0, job_exit_code=1)
    assert (out.decision, out.exit_code) == (Decision.GIVE_UP, 1), out
    assert "training had finished" in out.reason


def test_a_failure_before_the_end_was_said_is_a_failure_of_the_training() -> None:
    j = trained(None)
    j.observe_exit(RankExit(RankKey(N, 1), -6, 10.2))
    j.observe_line(ln(0, OWN_END, 10.5))  # rank 0 says it is done after rank 1 had died
    v = j.verdict(11.0)
    assert (v.action, v.after_training) == (Action.RESTART, False), v


def test_progress_after_the_end_line_cancels_it() -> None:
    j = trained(LIGHTNING_END)  # a first fit() ends ...
    j.observe_line(ln(0, "step 11 loss 1.4", 12.0))  # ... and a second one trains on
    assert j.training_finished() is None
    v: Verdict = j.verdict(12.0 + 100.0)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART)


# rank 0 of a real HF Trainer run (4 ranks, --max-steps 6), in the order its log got them: the bar's
# redraws were too quick for tqdm to print, the log dicts carry no step, then the final metrics and
# the closing redraws of the training bar and of the final save's bar
HF_RANK0 = ["{'loss': '4.559', 'grad_norm': '0.5647', 'learning_rate': '0.0001667', 'epoch': '0.75'}",
            "{'train_runtime': '0.3675', 'train_samples_per_second': '522.5', 'train_steps_per_second': '16.33', "
            "'train_loss': '4.557', 'epoch': '0.75'}",
            "training done at step 6",
            "100%|##########| 6/6 [00:00<00:00, 20.55it/s]",
            "Writing model shards: 100%|##########| 1/1 [00:00<00:00, 410.60it/s]",
            "100%|##########| 6/6 [00:00<00:00, 16.20it/s]"]


@pytest.mark.parametrize("bar_before", [False, True])
def test_the_bars_closed_after_the_end_line_do_not_cancel_it(bar_before: bool) -> None:
    """Ranks 1 and 2 then hung in torch's teardown: judged a hang of the training at the hang
    timeout and restarted, because the closing redraws had cancelled the end. With or without the
    bar's steps printed before the end."""
    j = Judge(KB, JudgeSettings(hang_timeout=12.0, save_timeout=600.0), start=0.0)
    j.expect([RankKey(N, r) for r in range(4)], 0.0)
    if bar_before:
        for n in range(1, 7):
            j.observe_line(ln(0, f"{n * 100 // 6}%|#####     | {n}/6 [00:0{n}<00:00, 14.40it/s]", float(n)))
    for i, text in enumerate(HF_RANK0):
        j.observe_line(ln(0, text, 6.0 + 0.01 * i))
    assert j.training_finished() is not None
    for r in (0, 3):
        j.observe_exit(RankExit(RankKey(N, r), 0, 7.0))
    v = j.verdict(7.0 + 100.0)  # ranks 1 and 2 still in their teardown, far past the hang timeout
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    v = j.verdict(6.2 + 601.0)  # past the save timeout: stopped, not restarted
    assert (v.action, v.after_training) == (Action.STOP, True), v.reason
    assert v.culprit is None and set(v.ranks) == {RankKey(N, 1), RankKey(N, 2)}  # not rank 0, which said it
    j.observe_exit(RankExit(RankKey(N, 2), 0, 610.0))
    v = j.verdict(611.0)
    assert (v.culprit, v.culprit_source) == (RankKey(N, 1), "process_state"), v


def test_a_bar_beyond_the_ends_step_or_later_progress_cancels_the_end() -> None:
    j = trained(OWN_END)  # steps 1..10, the end said at 10.5
    j.observe_line(ln(0, "step 11 loss 1.4", 11.0))  # within the redraw window, but a step beyond
    assert j.training_finished() is None
    j = trained(OWN_END)
    j.observe_line(ln(0, "step 3 loss 1.4", 10.5 + END_REDRAW_SECONDS + 1))  # a second run, after the window
    assert j.training_finished() is None


def test_one_rank_that_says_done_and_exits_while_the_others_wait_is_a_hang_and_the_culprit() -> None:
    """DDP's uneven inputs: rank 1 had one batch fewer, said "training done" and exited cleanly;
    rank 0 waits for it in the last step's all-reduce and never says it is done."""
    j = trained(None, printing=(0, 1))
    j.observe_line(ln(1, "training done at step 10", 10.5))
    j.observe_exit(RankExit(RankKey(N, 1), 0, 10.6))
    assert j.training_finished() is None
    v = j.verdict(10.0 + 13.0)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason
    assert v.culprit == RankKey(N, 1) and v.culprit_source == "process_state"
    assert "exited cleanly while the others wait" in v.reason


def test_peers_that_report_the_closed_connection_of_the_rank_that_left_early_name_it() -> None:
    """gloo: when the rank that left early closes its connections, its peers fail with "Connection
    closed by peer" (real line of the run of tests/process/ranks/ddp_faults.py --fault uneven)."""
    closed = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
              "closed by peer [127.0.0.1]:8621. This is typically caused by a remote worker crashing. Check the "
              "logs of the remote worker before reporting an error. GLHF! 🏖️")
    j = Judge(KB, JudgeSettings(hang_timeout=12.0), start=0.0)
    for n in range(1, 8):
        for r in range(4):
            j.observe_line(ln(r, f"step {n} loss 1.5", float(n)))
    j.observe_line(ln(2, "training done at step 7", 7.5))  # its shard had one batch fewer
    for r in (1, 3):
        j.observe_line(ln(r, closed, 8.0))
    v = j.verdict(8.5)
    assert v.culprit == RankKey(N, 2), v.reason
    assert "rank 2 had said it was done" in v.reason or "2 had said it was done" in v.reason, v.reason


@pytest.mark.parametrize("exit_code", [-15, 143])
def test_the_rank_that_left_early_is_named_when_the_teardowns_sigterm_catches_it_on_its_way_out(exit_code: int) -> None:
    """The race test_culprit's uneven-inputs run met 3 times in ~13: the rank that left early recorded its
    normal interpreter exit (a presumed 0), and the launcher's teardown then SIGTERMed it before it was gone
    (exit -15; a shell says 143). It reported nothing all the same: the culprit is still it, not the peer
    that reports the closed connection."""
    closed = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
              "closed by peer [127.0.0.1]:8621. This is typically caused by a remote worker crashing.")
    j = Judge(KB, JudgeSettings(hang_timeout=12.0), start=0.0)
    for n in range(1, 8):
        for r in range(3):
            j.observe_line(ln(r, f"step {n} loss 1.5", float(n)))
    j.observe_line(ln(1, "training done at step 7", 7.5))
    j.observe_exit(RankExit(RankKey(N, 1), 0, 7.6, presumed=True))
    j.observe_line(ln(0, closed, 8.0))
    j.observe_exit(RankExit(RankKey(N, 1), exit_code, 8.2))
    v = j.verdict(8.5)
    assert v.culprit == RankKey(N, 1), v.reason
    # a rank that a SIGTERM stopped before it said it was done is not taken for the one that left
    j = Judge(KB, JudgeSettings(hang_timeout=12.0), start=0.0)
    for n in range(1, 8):
        for r in range(3):
            j.observe_line(ln(r, f"step {n} loss 1.5", float(n)))
    j.observe_line(ln(0, closed, 8.0))
    j.observe_exit(RankExit(RankKey(N, 1), exit_code, 8.2))
    assert j.verdict(8.5).culprit != RankKey(N, 1)


def test_a_clean_exit_at_the_last_step_every_rank_reached_is_the_end_a_teardown_failure_is_not_restarted() -> None:
    """The trial: a script with no end line; rank 0 returns (exit 0, read at a /proc sample after rank 1's
    error) once both printed step 10, rank 1's teardown fails (exit 1). It was restarted from the last
    checkpoint (step 10), failed the same way: a crash loop, exit 4. The exit status is the end."""
    j = trained(None, printing=(0, 1))
    j.observe_exit(RankExit(RankKey(N, 1), 1, 11.0))
    j.observe_exit(RankExit(RankKey(N, 0), 0, 11.6))  # read after rank 1's failure, as /proc sampling has it
    v = j.verdict(12.0)
    assert v.action is Action.STOP and v.after_training, v
    assert "exited 0 at step 10, the last step every rank reached" in v.reason, v.reason
    out = RestartPolicy(max_restarts=3).on_failure(v, progressed_for=10.0, job_exit_code=1)
    assert (out.decision, out.exit_code) == (Decision.GIVE_UP, 1), out


def test_a_peers_closed_connection_after_a_clean_exit_is_uneven_inputs_not_a_teardown() -> None:
    """DDP's uneven inputs: rank 1 had one batch fewer, printed the same last step, exited 0 and rank 0, waiting
    for it in the next step's collective, fails on the closed connection: restarted, as ever."""
    j = trained(None, printing=(0, 1))
    j.observe_exit(RankExit(RankKey(N, 1), 0, 10.5))
    j.observe_line(ln(0, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed "
                         "by peer [127.0.0.1]:24611", 10.6))
    j.observe_exit(RankExit(RankKey(N, 0), 1, 10.8))
    v = j.verdict(12.0)
    assert v.label is Label.COMM_ERROR and (v.action, v.after_training) == (Action.RESTART, False), v


@pytest.mark.parametrize("case", ["a_rank_behind", "no_clean_exit", "clean_exit_short_of_the_top"])
def test_without_a_clean_exit_at_the_end_of_every_rank_a_failure_is_restarted(case: str) -> None:
    """Both ranks print steps 1-7; then rank 0 (a_rank_behind: it alone goes on to step 10, rank 1 stays at 7)
    or rank 1 (the others: it reaches step 10) goes on. Rank 0 exits 0 (not in no_clean_exit), rank 1 fails."""
    j = trained(None, printing=(0, 1), steps=7)
    ahead = 0 if case == "a_rank_behind" else 1
    for n in (8, 9, 10):
        j.observe_line(ln(ahead, f"step {n} loss 1.5", float(n)))
    if case != "no_clean_exit":
        j.observe_exit(RankExit(RankKey(N, 0), 0, 10.4))
    j.observe_exit(RankExit(RankKey(N, 1), 1, 11.0))
    v = j.verdict(12.0)
    assert (v.action, v.after_training) == (Action.RESTART, False), (case, v)
