# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-22 (load_state_dict's refusal of a checkpoint that
does not fit the model, an assertion of ggml's family that failed, Inductor's fallback-kernel hint as a compile at
work, and a model Triton's table lists as
UNAVAILABLE with a load error that states no cause), each as a rule of its family, with real lines and the near
misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt), from a public thread of the same program
(named), or is the format the program's source prints, filled in (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, cause_of
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

E = FormKind.ERROR
C = FormKind.CRASH
R = FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # load_state_dict's refusal (torch/nn/modules/module.py): its head, under a markdown quote
    ("> RuntimeError: Error(s) in loading state_dict for PeftModelForSequenceClassification:", E, Label.CONFIG_ERROR,
     "corpus (peft-554-seqcls-lora-size-mismatch-markdown-quote)"),
    # ... the size mismatch it lists, tab-indented (an adapter trained on another base model)
    ("        size mismatch for base_model.model.model.layers.0.mlp.gate_proj.lora_B.default.weight: copying a param with shape torch.Size([13696, 32]) from checkpoint, the shape in current model is torch.Size([13824, 32]).",
     E, Label.CONFIG_ERROR, "corpus (llamafactory-1320-lora-size-mismatch-13696)"),
    # ... another thread: a LoRA adapter of another rank (huggingface/peft#276)
    ("        size mismatch for base_model.model.transformer.h.0.attn.c_attn.lora_A.default.weight: copying a param with shape torch.Size([32, 1024]) from checkpoint, the shape in current model is torch.Size([16, 1024]).",
     E, Label.CONFIG_ERROR, "huggingface/peft#276"),
    ("RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:", E, Label.CONFIG_ERROR,
     "huggingface/peft#276"),
    # ... the keys it lists (module.py: 'Missing key(s) in state_dict: {}. ', 'Unexpected key(s) in state_dict: {}. '),
    # filled in with a DDP checkpoint loaded into a bare model
    ('\tMissing key(s) in state_dict: "fc.weight", "fc.bias". ', E, Label.CONFIG_ERROR,
     "torch/nn/modules/module.py load_state_dict, filled in"),
    ('\tUnexpected key(s) in state_dict: "module.fc.weight", "module.fc.bias". ', E, Label.CONFIG_ERROR,
     "torch/nn/modules/module.py load_state_dict, filled in"),
    # ggml's assert macro (ggml.h GGML_ASSERT -> ggml_abort(file, line, "GGML_ASSERT(%s) failed", #x))
    ("src/llama.cpp:3504: GGML_ASSERT(cell.has_seq_id(seq_id)) failed", C, None,
     "corpus (llamacpp-9170-mamba-ggml-assert-seq-id)"),
    # ... wrapped by the paste before its expression ended
    ("ik_llama.cpp/ggml/src/./iqk/fa/iqk_fa_templates.h:1175: GGML_ASSERT(S", C, None,
     "corpus (ik-llamacpp-1910-ggml-assert-s-gt-0-sigabrt)"),
    # ... another thread: llama-server on Windows near its context limit (ggml-org/llama.cpp#13359)
    (r"ggml\src\ggml.c:1554: GGML_ASSERT(view_src == NULL || data_size == 0 || data_size + view_offs <= ggml_nbytes(view_src)) failed",
     C, None, "ggml-org/llama.cpp#13359"),
    # ... the macro's older layout (fprintf(stderr, "GGML_ASSERT: %s:%d: %s\n", __FILE__, __LINE__, #x)), filled in
    ("GGML_ASSERT: ggml.c:4785: view_src == NULL || data_size + view_offs <= ggml_nbytes(view_src)", C, None,
     "ggml.h before ggml_abort (Cyberhan123/stable-diffusion-desktop#11 quotes it), filled in"),
    # Inductor's hint of a fallback kernel (torch/_inductor/graph.py perf_hint_log), glued to a sampler's bar
    ("  0%|          | 0/50 [00:00<?, ?it/s]Using FallbackKernel: aten._scaled_dot_product_efficient_attention", R, None,
     "corpus (pytorch-104913-inductor-fallback-kernel-at-zero-percent)"),
    # ... torch 2.0's WARNING record of it, another thread (pytorch/pytorch#93495)
    ("[2022-12-22 14:41:22,477] torch._inductor.ir: [WARNING] Using FallbackKernel: aten.cumsum", R, None,
     "pytorch/pytorch#93495"),
    # Triton's table with a load error that states no cause (a plan this TensorRT cannot deserialize)
    ("| <redacted> | 1       | UNAVAILABLE: Internal: unable to create TensorRT engine |", E, Label.CONFIG_ERROR,
     "corpus (triton-server-3786-model-table-unable-to-create-trt-engine)"),
    # ... another thread's load error in the same table (triton-inference-server/tutorials#34: an ONNX file newer
    # than the server's onnxruntime), filled into the table's layout
    ("| text_detection | 1       | UNAVAILABLE: Internal: onnx runtime error 2: Failed to load model with error: Unknown model file format version |",
     E, Label.CONFIG_ERROR, "triton-inference-server/tutorials#34, filled into server.cc's table"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    # the traceback's source line of the raise, not the refusal (peft-554's own traceback shows it)
    "    raise RuntimeError('Error(s) in loading state_dict for {}:\\n\\t{}'.format(",
    # mmengine's warning of a non-strict load (the run goes on)
    "missing keys in source state_dict: head.fc.weight, head.fc.bias",
    # what a non-strict load returns, printed by a healthy program
    "_IncompatibleKeys(missing_keys=[], unexpected_keys=[])",
    "<All keys matched successfully>",
    # the program's call, in a traceback or a listing
    "    model.load_state_dict(state_dict, strict=False)",
    # the assert macro in source code, its definition, and a call
    "    GGML_ASSERT(ctx != NULL);",
    '#define GGML_ASSERT(x) if (!(x)) ggml_abort(__FILE__, __LINE__, "GGML_ASSERT(%s) failed", #x)',
    # Inductor's lowering call in source, and a pull request's title about the hint
    "    make_fallback(aten.cumsum)",
    "[inductor] Lower fallback kernel warnings from WARNING to INFO",
    # the macro's name in prose
    "fix: GGML_ASSERT(n_tokens > 0) could fail on an empty prompt",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: (line, the cause its form states): causes read from an error line another rule reads as unexplained
CAUSES = [
    ("> RuntimeError: Error(s) in loading state_dict for PeftModelForSequenceClassification:", Label.CONFIG_ERROR),
    ("| <redacted> | 1       | UNAVAILABLE: Internal: unable to create TensorRT engine |", Label.CONFIG_ERROR),
    # a load error that states its own cause keeps it (corpus: a BFC arena's failed allocation in onnxruntime)
    ("| dolly_v1_6b_onnx | 1       | UNAVAILABLE: Internal: onnx runtime error 6: Exception during initialization: /workspace/onnxruntime/onnxruntime/core/framework/bfc_arena.cc:368 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, onnxruntime::WaitNotificationFn) ",
     Label.OOM),
]

#: error lines whose form states no cause: an assertion says the process aborts, not why
NO_CAUSE = [
    "src/llama.cpp:3504: GGML_ASSERT(cell.has_seq_id(seq_id)) failed",
    "GGML_ASSERT: ggml.c:4785: view_src == NULL || data_size + view_offs <= ggml_nbytes(view_src)",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_were_bumped() -> None:
    """What a line reads as changed: the reader's version, part of the classifier's cache key, moved on."""
    assert FORM_RULES >= 30


def test_a_ready_model_in_the_table_is_no_error() -> None:
    assert cause_of("| densenet_onnx | 1       | READY  |") is None


# -- whole logs, as diagnose reads them --------------------------------------------------------------

PROGRESS = [f"step {n} loss 2.{n:02d} lr 1e-4 throughput 410 seq/s" for n in range(1, 30)]

ENDINGS = [
    # the refusal at the end of a traceback (corpus, llamafactory-1320): the set-up is stopped, not restarted
    (["  File \"/usr/local/lib/python3.8/dist-packages/torch/nn/modules/module.py\", line 2041, in load_state_dict",
      "    raise RuntimeError('Error(s) in loading state_dict for {}:\\n\\t{}'.format(",
      "RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:",
      "        size mismatch for base_model.model.model.layers.0.mlp.gate_proj.lora_B.default.weight: copying a param with shape torch.Size([13696, 32]) from checkpoint, the shape in current model is torch.Size([13824, 32])."],
     Label.CONFIG_ERROR, Action.STOP),
    # ggml's assertion, then the gdb its backtrace helper attached (corpus, llamacpp-9170): a crash
    (["INFO [            update_slots] kv cache rm [p0, end) | tid=\"140478308075456\" timestamp=1724599956 id_slot=0 id_task=90 p0=0",
      "src/llama.cpp:3504: GGML_ASSERT(cell.has_seq_id(seq_id)) failed",
      "[Thread debugging using libthread_db enabled]",
      "[Inferior 1 (process 27300) detached]"],
     Label.OTHER_CRASH, Action.RESTART),
    # the C library's assertion (glibc __assert_fail, printed by this machine's glibc with ggml-org/llama.cpp#14506's
    # expression; the table's host.unrecognised_error reads it) and the shell's report of the abort
    (["python: /src/llama-context.cpp:1023: int llama_context::decode(llama_batch&): Assertion `status == LLAMA_MEMORY_STATUS_SUCCESS' failed.",
      "Aborted (core dumped)"],
     Label.OTHER_CRASH, Action.RESTART),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action, tmp_path: Path) -> None:
    log = tmp_path / "rank.log"
    log.write_text("\n".join(lines) + "\n")
    verdict = diagnose_paths([str(log)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_a_non_strict_load_warning_then_training_is_healthy(tmp_path: Path) -> None:
    """A load that only warns of keys it skipped (mmengine's words), then steps: the run goes on."""
    log = tmp_path / "rank.log"
    log.write_text("\n".join(["missing keys in source state_dict: head.fc.weight, head.fc.bias", *PROGRESS]) + "\n")
    assert diagnose_paths([str(log)]).verdict.label is Label.HEALTHY


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/peft-554-seqcls-lora-size-mismatch-markdown-quote.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/llamafactory-1320-lora-size-mismatch-13696.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/triton-server-3786-model-table-unable-to-create-trt-engine.log", Label.CONFIG_ERROR, Action.STOP),
    ("other_crash/llamacpp-9170-mamba-ggml-assert-seq-id.log", Label.OTHER_CRASH, Action.RESTART),
    ("compiling/pytorch-104913-inductor-fallback-kernel-at-zero-percent.log", Label.COMPILING, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
