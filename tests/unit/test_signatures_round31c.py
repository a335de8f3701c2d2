# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""The signatures read for part C of the misses of round issue23-heldout-31 (the newest GPU training stacks): the
NVIDIA driver's records of a GSP firmware that stopped answering (gpu.gsp_timeout) and torch.multinomial's check of
probabilities that are not finite (numerical.sampling_probabilities_not_finite). Their examples and near misses are
in signatures.toml (test_signatures holds them); here, the lines of the same words another rule reads, and the
corpus excerpts. Each line is from the corpus (named by its excerpt) or from a public thread (named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS


@pytest.mark.parametrize(("line", "signature"), [
    # torch's NCCL heartbeat monitor: a collective hang, not the driver's GSP heartbeat
    ("[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
     "gpu.nccl.heartbeat_monitor"),
    # a device assertion of another kernel: a CUDA kernel's failure (the program's), not a sampling of non-finite numbers
    ("../aten/src/ATen/native/cuda/NLLLoss2d.cu:103: nll_loss2d_forward_kernel: block: [5,0,0], thread: [996,0,0] Assertion `t >= 0 && t < n_classes` failed.",
     "gpu.cuda_error"),
    # the Xid the GSP timeout banner comes with (vllm#40652): the Xid rule as before
    ("[Sun Apr 26 23:12:26 2026] NVRM: Xid (PCI:0001:6c:00): 119, pid=10200, name=NvmlTaskRunner, Timeout after 45s of waiting for RPC response from GPU5 GSP! Expected function 76 (GSP_RM_CONTROL) sequence 24174 (0x20801322 0x808).",
     "gpu.xid_hardware"),
])
def test_the_same_words_read_by_another_rule(line: str, signature: str) -> None:
    match = default_knowledge_base().classify(line)
    assert match is not None and match.signature.id == signature


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("hardware_error/open-gpu-kernel-modules-1230-gsp-heartbeat-timeout-memsys-error-driver-595.log",
     Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART),
    ("hardware_error/open-gpu-kernel-modules-1200-gsp-heartbeat-timeout-reset-required.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    ("hardware_error/vllm-40652-a100-gsp-timeout-xid-119.log", Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART),
    ("numerical_error/trl-2996-grpo-generate-device-assert-probability-inf-nan.log", Label.NUMERICAL_ERROR,
     Action.STOP),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
