# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for third B of the misses of round issue23-heldout-27 (NCCL's NVLS transport failing a CUDA call, in
either of NCCL's two CUDA-failure formats; a bare AssertionError whose failed statement asserts a value is finite),
as rules of their families, with real lines and the near misses each rule must leave alone. Each line is from the
corpus (named by its excerpt), from a public thread (named), or from a program's source (named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorblock import blocks, decide
from neuron_watch.diagnosis.failureforms import cause_of
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS

KB = default_knowledge_base()

#: NCCL's NVLS transport failing a CUDA call (src/transport/nvls.cc under checks.h's "Cuda failure '%s'" and
#: cudawrap.h's "Cuda failure %d '%s'"), (line, where it is from)
NVLS_FAILURES = [
    ("node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
     "corpus (nccl-1488-nvls-alloc-cuda-failure-after-fabricmanager-restart), NCCL 2.19+'s numbered form"),
    ("h100-kickoff-llama-70b-chat-20230328-bcf75c4f6-gn6nd:843:843 [5] transport/nvls.cc:157 NCCL WARN Cuda failure 1 'invalid argument'",
     "vllm-project/vllm#6732, a vLLM worker on H100s (another thread)"),
    ("transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument'",
     "corpus (nccl-976-nvls-cuda-failure-invalid-argument-fabricmanager), NCCL 2.18's unnumbered form"),
]


@pytest.mark.parametrize(("line", "source"), NVLS_FAILURES)
def test_an_nvls_cuda_failure_is_the_nodes_fabric(line: str, source: str) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.id == "gpu.nccl.nvls_cuda_failure", source
    assert m.signature.category is Label.HARDWARE_ERROR and m.signature.action is Action.DRAIN_AND_RESTART


@pytest.mark.parametrize("line", [
    # NCCL's trace of the failure's return code, after the WARN: not the failure itself (corpus, nccl-1488)
    "node23:12098:12141 [2] NCCL INFO transport/nvls.cc:394 -> 1",
    # a healthy set-up line that names NVLS (corpus, lightning-20434)
    "babel-0-31:2324239:2324522 [3] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer",
])
def test_nvls_lines_that_are_no_failure_are_not_the_fabric(line: str) -> None:
    m = KB.classify(line)
    assert m is None or m.signature.category is not Label.HARDWARE_ERROR


def test_an_nvls_allocation_out_of_memory_stays_memory() -> None:
    # cuMemCreate in nvls.cc can run out of device memory: gpu.nccl.cuda_oom, above the NVLS rule, keeps it
    m = KB.classify("node1:100:200 [0] transport/nvls.cc:357 NCCL WARN Cuda failure 2 'out of memory'")
    assert m is not None and m.signature.category is Label.OOM


def test_nccls_numbered_cuda_failure_elsewhere_is_the_generic_cuda_failure() -> None:
    # cudawrap.h's CUCHECK ("Cuda failure %d '%s'") outside NVLS: the generic rule reads it as it reads checks.h's
    m = KB.classify("node1:100:200 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 1 'invalid argument'")
    assert m is not None and m.signature.id == "gpu.nccl.unhandled_cuda_error"


#: a bare AssertionError under the statement that failed, (traceback lines, where it is from)
ASSERTED_FINITE = [
    (["Traceback (most recent call last):",
      '  File "main.py", line 409, in main',
      "    train_stats = train_one_epoch(",
      '  File "ConvNeXt/engine.py", line 63, in train_one_epoch',
      "    assert math.isfinite(loss_value)",
      "AssertionError"],
     "corpus (convnext-131-amp-loss-not-finite-assertion)"),
    (["[rank0]: Traceback (most recent call last):",
      '[rank0]:   File "/workspace/train.py", line 212, in train_one_epoch',
      "[rank0]:     assert math.isfinite(loss_val)",
      "[rank0]: AssertionError"],
     "a training loop's guard after scaler.update() (code corpus: 'loss_val = loss.item() * grad_acc_steps; assert "
     "math.isfinite(loss_val)'), printed as CPython and torchrun's rank tag print a failed assert"),
    (["Traceback (most recent call last):",
      '  File "train.py", line 88, in step',
      "    assert not torch.isnan(loss).any()",
      "AssertionError"],
     "the guard's torch spelling (the statement's format, filled in)"),
]


def _decided(lines: list[str]) -> Label | None:
    (block,) = blocks(lines)
    decision = decide(block, lines, lambda text: (cause_of(text) or (None, ""))[0])
    return None if decision is None else decision.label


@pytest.mark.parametrize(("lines", "source"), ASSERTED_FINITE)
def test_a_failed_assertion_that_a_value_is_finite_is_numerical(lines: list[str], source: str) -> None:
    assert _decided(lines) is Label.NUMERICAL_ERROR, source


def test_a_failed_assertion_of_something_else_states_no_cause() -> None:
    lines = ["Traceback (most recent call last):",
             '  File "train.py", line 88, in collate',
             "    assert len(batch) > 0",
             "AssertionError"]
    assert _decided(lines) is None


def test_an_assertion_with_its_own_message_is_read_by_its_message() -> None:
    # the statement above is a call that raised: the exception's message, not the statement, is the cause's words
    lines = ["Traceback (most recent call last):",
             '  File "train.py", line 88, in step',
             "    assert math.isfinite(compute_loss(batch))",
             "AssertionError: batch is empty"]
    assert _decided(lines) is None


def test_a_statement_that_is_no_assert_is_not_read_as_one() -> None:
    lines = ["Traceback (most recent call last):",
             '  File "train.py", line 88, in step',
             "    check(math.isfinite(loss))",
             "AssertionError"]
    assert _decided(lines) is None


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("hardware_error/nccl-1488-nvls-alloc-cuda-failure-after-fabricmanager-restart.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    ("hardware_error/nccl-976-nvls-cuda-failure-invalid-argument-fabricmanager.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    ("numerical_error/convnext-131-amp-loss-not-finite-assertion.log", Label.NUMERICAL_ERROR, Action.STOP),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action)
