# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-37 (video and large image generation training), each
as a rule of its family, with real lines and the near misses the rule must leave alone: CPython's message of a name it
could not import printed without its class, activation checkpointing's recomputation unlike its forward pass, and the
line torch prints under NCCL's internal error (its "Last error:") stating the cause. Each line is from the corpus
(named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.heldout.round37a import round37a_form
from neuron_watch.events import Action, Label, Verdict
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # CPython's ImportError message printed alone (the program caught the exception and printed it)
    ("cannot import name 'log' from 'torch.distributed.elastic.agent.server.api' (/home/miya123/miniconda3/envs/py310_env/lib/python3.10/site-packages/torch/distributed/elastic/agent/server/api.py)",
     ERROR, Label.CONFIG_ERROR, "corpus (simpletuner-668-flux-validation-deepspeed-cannot-import-log)"),
    ("cannot import name 'log' from 'torch.distributed.elastic.agent.server.api'", ERROR, Label.CONFIG_ERROR,
     "a public repository's environment notes (the same message as printed, before 3.7's location)"),
    # torch.utils.checkpoint's exception for a recomputation unlike its forward pass
    ("[rank3]: torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Recomputed values for the following tensors have different metadata than during the forward pass.",
     ERROR, Label.CONFIG_ERROR, "corpus (recammaster-22-zero3-gradient-checkpointing-recomputed-metadata)"),
    ("    [rank1]: torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Recomputed values for the following tensors have different metadata than during the forward pass.",
     ERROR, Label.CONFIG_ERROR, "a public repository's GLM-4V-9B two-GPU fine-tuning notes (DeepSpeed)"),
    ("torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: A different number of tensors was saved during the original forward and recomputation.",
     ERROR, Label.CONFIG_ERROR, "a public repository's training crash notes (its other message)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # the message quoted in a warning that an optional plugin was skipped, and in prose
    "UserWarning: Failed to import diffusers plugin: cannot import name 'CaptionProjection' from 'diffusers.models.embeddings'. You may ignore this warning if you do not need this plugin.",
    # axolotl's warning before it starts
    "qlora + zero3 with use_reentrant: false may result in a CheckpointError about recomputed tensor shapes",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize("line", [
    # the message quoted in prose (a repository's notes): an exception line other rules read, not this form's
    "if you encounter `ImportError: cannot import name 'log' from 'torch.distributed.elastic.agent.server.api'`, it is because DeepSpeed is trying to import log",
    # checkpointing's other message, a backward reading saved tensors twice (a program's mistake, not a set-up)
    "torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once.",
])
def test_other_lines_of_the_words_state_no_set_up_cause(line: str) -> None:
    """Lines holding these words that other rules may read as errors: this round's forms state no cause in them."""
    assert round37a_form(line) is None


def _verdict(tmp_path: Path, lines: list[str]) -> Verdict:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose_paths([str(log)], now=0.0).verdict


@pytest.mark.parametrize("lines", [
    # corpus (simpletuner-1219-flux-multinode-nccl-bootstrap-no-socket-interface): torch's DistBackendError
    ["torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2251, internal error - please report this issue to the NCCL developers, NCCL version 2.21.5",
     "ncclInternalError: Internal check failed.", "Last error:", "Bootstrap : no socket interface found"],
    # transformers' DeepSeek-V3 documentation, under torch's rank prefix
    ["[rank0]: ncclInternalError: Internal check failed.", "[rank0]: Last error:",
     "[rank0]: Bootstrap : no socket interface found"],
], ids=["distbackenderror", "rank-prefix"])
def test_internal_error_explained_by_its_last_error(tmp_path: Path, lines: list[str]) -> None:
    """NCCL's internal error with the check it logged under it (no interface NCCL_SOCKET_IFNAME allows): the line
    under it states the cause, configuration to stop, not a communication failure to restart."""
    verdict = _verdict(tmp_path, lines)
    assert verdict.label is Label.CONFIG_ERROR and verdict.action is Action.STOP
    assert "no socket interface" in verdict.evidence[0].text


def test_internal_error_alone_stays_a_communication_failure(tmp_path: Path) -> None:
    """Without a line under it that states a cause, NCCL's internal error is still read as a communication failure."""
    verdict = _verdict(tmp_path, ["torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, internal error - please report this issue to the NCCL developers, NCCL version 2.18.1"])
    assert verdict.label is Label.COMM_ERROR and verdict.action is Action.RESTART
