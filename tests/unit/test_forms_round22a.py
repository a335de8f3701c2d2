# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half A of the misses of round issue23-heldout-22 (c10d's refusal of a collective on a device the
process group has no backend for), as a rule of its family, with real lines and the near misses the rule must leave
alone. Each line is from the corpus (named by its excerpt), from a public thread (named), or is the format the
program's source prints, filled in (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

E = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    ("[rank0]: RuntimeError: No backend type associated with device type xpu", E, Label.CONFIG_ERROR,
     "corpus (torch-xpu-ops-1328-no-backend-for-xpu: gloo, XPU tensors)"),
    ("RuntimeError: No backend type associated with device type cpu", E, Label.CONFIG_ERROR,
     "verl under Ray, a CPU tensor broadcast under NCCL (issues corpus)"),
    ("RuntimeError: No backend type associated with device type npu", E, Label.CONFIG_ERROR,
     "a CUDA-only all-gather path on Ascend (issues corpus)"),
]

#: lines that look like the form and must read as nothing
NEAR_MISSES = [
    '        false, "No backend type associated with device type ", deviceType);',  # the TORCH_CHECK in ProcessGroup.hpp
    "    # raises \"No backend type associated with device type",  # a comment quoting it, cut
    "# NCCL has no CPU path: it raises No backend type associated with device type cpu for host tensors, so keep the flag on the device",  # prose
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: (line, the cause its form states): error lines
CAUSES = [
    ("(TaskRunner pid=133975) RuntimeError: No backend type associated with device type cpu", Label.CONFIG_ERROR),
]
NO_CAUSE = [
    "RuntimeError: No backend type registered for this process group",  # other words: not this form
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/torch-xpu-ops-1328-no-backend-for-xpu.log", Label.CONFIG_ERROR, Action.STOP),
    ("collective_hang/vllm-ascend-1443-507048-allreduce-notify.log", Label.COLLECTIVE_HANG, Action.RESTART),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_the_refusal_then_training_going_on_is_healthy(tmp_path: Path) -> None:
    """A refusal the program caught (a fallback path) and then its steps: the job went on from it."""
    log = tmp_path / "rank.log"
    log.write_text("RuntimeError: No backend type associated with device type cpu\n"
                   + "".join(f"step {n} loss 2.{n:02d} lr 1e-4 throughput 410 seq/s\n" for n in range(1, 30)))
    assert diagnose_paths([str(log)]).verdict.label is Label.HEALTHY
