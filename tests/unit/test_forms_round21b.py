# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-21 (autograd's refusal to run a backward pass over
tensors outside the graph), as a rule of its family, with real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or from a public log of the same program
(named), or is the format the program's source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import cause_of
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

#: error lines whose words state a cause: (line, the cause)
CAUSES: list[tuple[str, Label]] = [
    # THPEngine_run_backward's check (torch/csrc/autograd/python_engine.cpp), under PEFT's LoRA with gradient
    # checkpointing (corpus peft-137)
    ("RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn", Label.CONFIG_ERROR),
    # ... under a rank prefix, as torchrun's ranks print it (a detached loss in a DDP job, the same check)
    ("[rank1]: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
     Label.CONFIG_ERROR),
    # ... older torch's wording (THPUtils_assert "element %d of variables does not require grad and does not have a
    # grad_fn", torch 0.3's python_engine.cpp), filled in
    ("RuntimeError: element 0 of variables does not require grad and does not have a grad_fn", Label.CONFIG_ERROR),
    # the same function's checks of torch.autograd.grad's inputs (python_engine.cpp), filled in
    ("RuntimeError: One of the differentiated Tensors does not require grad", Label.CONFIG_ERROR),
    ("RuntimeError: One of the differentiated Tensors appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior.",
     Label.CONFIG_ERROR),
]

#: error lines near that form that state no cause
NO_CAUSE = [
    # the engine's refusal while it runs, not its argument check: a freed graph walked twice (a program's bug met
    # mid-run, not a set-up the checks refuse)
    "RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.",
    # an in-place modification autograd detected: also met while running
    "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.cuda.FloatTensor [4096]] is at version 3; expected version 2 instead.",
    # the words in a path or a tensor's repr, not in the refusal
    "RuntimeError: CUDA error: an illegal memory access was encountered (grad_fn=<AddmmBackward0>)",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize("line", [
    # torch.utils.checkpoint's warning that none of its inputs requires grad: a warning on a run that may go on
    # (the corpus's peft-137 thread has it on the baichuan run before the refusal)
    "/opt/conda/envs/trl/lib/python3.10/site-packages/torch/utils/checkpoint.py:31: UserWarning: None of the inputs have requires_grad=True. Gradients will be None",
    # a tensor's repr with its grad_fn, printed by a healthy program
    "out = tensor([0.7311, 0.8808, 0.9526], grad_fn=<SigmoidBackward0>)",
    # a log line that talks about requires_grad without any refusal (PEFT's trainable parameters)
    "trainable params: 4194304 || all params: 6742609920 || trainable%: 0.06220594176090199",
])
def test_healthy_line_states_no_cause(line: str) -> None:
    assert cause_of(line) is None


#: the refusal at the end of a traceback, as the corpus's excerpt shows it
REFUSED = [
    "Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
    "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
]
#: checkpoint's warning, then training that goes on
WARNED = [
    "/opt/conda/envs/trl/lib/python3.10/site-packages/torch/utils/checkpoint.py:31: UserWarning: None of the inputs have requires_grad=True. Gradients will be None",
    '  warnings.warn("None of the inputs have requires_grad=True. Gradients will be None")',
]


@pytest.mark.parametrize(("lines", "label", "action"), [
    # a run that refuses its first backward: the set-up is stopped, not restarted
    ([*REFUSED], Label.CONFIG_ERROR, Action.STOP),
    # ... after steps of another phase (the refusal decides, wherever it falls)
    ([*PROGRESS, *REFUSED], Label.CONFIG_ERROR, Action.STOP),
    # checkpoint's warning followed by progress: healthy
    ([*WARNED, *PROGRESS], Label.HEALTHY, Action.WAIT),
], ids=["refused", "refused-after-progress", "warned-then-progress"])
def test_log_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_the_corpus_excerpt() -> None:
    verdict = diagnose_paths([str(CORPUS / "config_error/peft-137-lora-checkpointing-no-grad-fn.log")]).verdict
    assert (verdict.label, verdict.action) == (Label.CONFIG_ERROR, Action.STOP), verdict.reason
