# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part F of the misses of round issue23-heldout-37 (elastic and fault-tolerant training frameworks),
as a rule of its family, with real lines and the near misses the rule must leave alone: c10d's monitored barrier
(the Gloo process group's hang detector) naming the ranks that did not pass it, and a rank that passed it reporting
that its coordinator's reply failed. Each line is from the corpus (named by its excerpt) or from a public thread or
repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a rank that reached the barrier, its coordinator's reply failed: a peer lost
    ("[E ProcessGroupGloo.cpp:136] Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.",
     ERROR, Label.COMM_ERROR, "corpus (pytorch-76198-elastic-pod-dies-gloo-monitoredbarrier-rank0): an elastic agent's pod died"),
    ("RuntimeError: Rank N successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0",
     ERROR, Label.COMM_ERROR, "a public repository's training notes (found by find_string): the other ranks after rank 0's W&B UsageError"),
    # rank 0's report of the ranks that did not reach it in time
    ("RuntimeError: Rank 1 failed to pass monitoredBarrier in 2000 ms", ERROR, Label.COLLECTIVE_HANG,
     "PyTorch docs (distributed.rst, monitored_barrier): a rank that skipped the barrier"),
    ("RuntimeError: Rank 0 timed out in monitoredBarrier after 1800000 ms.", ERROR, Label.COLLECTIVE_HANG,
     "the words c10d ProcessGroupGloo.cpp checkRemainingTime prints (kNoRemainingTimeError) with the default timeout"),
]

#: lines of the same words that are not this form
NEAR_MISSES = [
    # the barrier's name in c10d's own comment and in a test's pattern, not a report
    "// For monitoredBarrier, checks remaining time left to finish processing ranks",  # ProcessGroupGloo.cpp
    "            err_regex = f'Ranks {rank_str} failed to pass monitoredBarrier'",  # pytorch test/distributed
    # the second line of the timeout report, which names no failed rank
    "No ranks successfully processed in monitoredBarrier.",  # c10d ProcessGroupGloo.cpp checkRemainingTime
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_count_this_round() -> None:
    """The reader's fingerprint changed with this round's rule."""
    assert FORM_RULES >= 61


def test_survivor_of_a_lost_peer_is_restarted_the_barriers_source_code_is_healthy(tmp_path: Path) -> None:
    """A rank's report that its coordinator's reply failed is a lost peer to restart from; a log that only quotes the
    barrier's code is healthy."""
    lost = tmp_path / "lost.log"
    lost.write_text("[E ProcessGroupGloo.cpp:136] Rank 1 successfully reached monitoredBarrier, but received errors "
                    "while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n")
    verdict = diagnose_paths([str(lost)], now=0.0).verdict
    assert verdict.label is Label.COMM_ERROR
    quoted = tmp_path / "quoted.log"
    quoted.write_text("// For monitoredBarrier, checks remaining time left to finish processing ranks\n"
                      "step 10 loss 2.31\nstep 20 loss 2.12\n")
    assert diagnose_paths([str(quoted)], now=0.0).verdict.label is Label.HEALTHY
