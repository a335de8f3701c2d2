"""A collective library's stall report that names the ranks that never joined (horovod.stalled_ranks).

Real lines of Horovod's stall inspector (horovod/common/stall_inspector.cc and its older forms in
the corpus: horovod#534, horovod#1442, google/automl#563). While the job goes on the report is a
wait; a log that ends on it, with no progress after, ended inside a hang (offline ``diagnose``
only: a live judge waits for its hang timeout). The bare warning, without the list, stays a wait.
"""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankKey

KB = default_knowledge_base()
WARNING = ("[1,0]<stderr>:[2019-10-09 15:36:43.594972: W horovod/common/stall_inspector.cc:105] One or more tensors "
           "were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
           "ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different "
           "tensors or that only subset of ranks is submitting tensors, which will cause deadlock.")
STALLED = ["[1,0]<stderr>:Stalled ranks:",
           "[1,0]<stderr>:6: [horovod_allreduce.0, horovod_allreduce.1, horovod_allreduce.10 ...]"]
MISSING = ["HorovodBroadcast_fully_connected_weights_0 [missing ranks: 0]",
           "HorovodBroadcast_conv_layer1_Conv_biases_0 [missing ranks: 0]"]
#: horovod#2107 (RETURNN): the list line alone, its "Missing ranks:" header cut off; srun's "3: " label
#: read as the rank, so the judge sees "[<tensors>]"
HEADLESS = ["3: [global_tensor_horovod_sum_have_data/HorovodAllreduce_globals_horovod_have_more_data_placeholder_0, "
            "global_tensor_horovod_sum_have_error/HorovodAllreduce_globals_horovod_have_error_placeholder_0]"]
#: horovod#100 and horovod#134: the older "Stalled ops:" list of ops and the ranks that *arrived*; one log
#: that ends on it hung, the other went on: a wait, whatever follows
READY = ["Stalled ops: ",
         "model/model/DistributedAdamOptimizer_Allreduce/HorovodAllgather_model_model_gradients_concat_0 "
         "[ready ranks: 1], ",
         "model/model/DistributedAdamOptimizer_Allreduce/HorovodAllreduce_model_model_gradients_AddN_58_0 "
         "[ready ranks: 1], "]
STEPS = [f"INFO:root:[step {s}]  mlm_loss=1.40114        nsp_loss= 0.02  throughput=14.5K tks/s"
         for s in (83998, 83999)]


def _final(lines: list[str], t0: float = 1000.0) -> tuple[Label, Action, str]:
    judge = Judge(KB, JudgeSettings(), t0)
    judge.observe_lines([LogLine(RankKey("n0", 0), text, t0 + i, t0 + i, "rank-0.log", i + 1)
                         for i, text in enumerate(lines)])
    v = judge.verdict(t0 + len(lines), final=True)
    return v.label, v.action, v.reason


@pytest.mark.parametrize(("lines", "label", "action"), [
    ([*STEPS, WARNING, *STALLED], Label.COLLECTIVE_HANG, Action.RESTART),
    ([WARNING, *MISSING], Label.COLLECTIVE_HANG, Action.RESTART),
    # the warning without its list names no rank: the wait it says
    ([*STEPS, WARNING], Label.COMM_TIMEOUT_TRANSIENT, Action.WAIT),
    # the job went on after the report: a stall it survived
    ([WARNING, *STALLED, *STEPS], Label.HEALTHY, Action.WAIT),
    # the list without its header: the same list, read by its own lines
    ([*STEPS, *HEADLESS], Label.COLLECTIVE_HANG, Action.RESTART),
    ([*HEADLESS, *STEPS], Label.HEALTHY, Action.WAIT),
    # ranks that arrived, not those missing: a wait even at the end, never healthy
    ([*STEPS, *READY], Label.COMM_TIMEOUT_TRANSIENT, Action.WAIT),
    ([*READY, *STEPS], Label.HEALTHY, Action.WAIT),
])
def test_a_log_ending_on_a_stall_list_is_a_hang(lines: list[str], label: Label, action: Action) -> None:
    got = _final(lines)
    assert got[:2] == (label, action), got


def test_a_stall_list_is_a_wait_while_the_job_runs() -> None:
    """Live (not final), the same lines are a wait: the judge's hang timeout decides, not the report."""
    judge = Judge(KB, JudgeSettings(), 1000.0)
    lines = [*STEPS, WARNING, *STALLED]
    judge.observe_lines([LogLine(RankKey("n0", 0), t, 1000.0 + i, 1000.0 + i, "rank-0.log", i + 1)
                         for i, t in enumerate(lines)])
    v = judge.verdict(1000.0 + len(lines))
    assert (v.label, v.action) == (Label.COMM_TIMEOUT_TRANSIENT, Action.WAIT)
