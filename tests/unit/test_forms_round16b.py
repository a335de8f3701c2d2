# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-16 (pydantic's refusal of a constructor's
arguments, a version requirement stated as what to install, ptxas's located diagnostic and a kernel that needs a
newer GPU, a C++ compiler's error on a source torch.compile generated, an exception whose message ends on a colon
over the output that states its cause), each as a rule of its family, with real lines and the near misses the rule
must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's source
prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

E = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # pydantic's error line for the arguments of a validated constructor (vLLM's config dataclasses)
    ("Value error, User-specified max_model_len (131072) is greater than the derived max_model_len (max_position_embeddings=32768.0 or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA array out-of-bounds error. [type=value_error, input_value=ArgsKwargs((), {'model': ...rocessor_plugin': None}), input_type=ArgsKwargs]",
     E, Label.CONFIG_ERROR, "corpus (longvt-9)"),
    ("(APIServer pid=1)   Value error, num_redundant_experts should be used with EPLB.16. [type=value_error, input_value=ArgsKwargs((), {'pipeline...text_parallel_size': 1}), input_type=ArgsKwargs]",
     E, Label.CONFIG_ERROR, "vLLM ParallelConfig under the API server's prefix (pydantic-core validation_exception.rs)"),
    ("  Missing required argument [type=missing_argument, input_value=ArgsKwargs((), {'y': 0}), input_type=ArgsKwargs]",
     E, Label.CONFIG_ERROR, "pydantic validate_call, a call missing an argument"),
    # a version requirement stated as what to install
    ("To use bfloat16 with native amp you must install torch greater or equal to 1.10.", E, Label.CONFIG_ERROR, "corpus (bevdepth-14)"),
    ("lightning_fabric.utilities.exceptions.MisconfigurationException: To use `precision='bf16' you must install torch greater or equal to 1.10.", E, Label.CONFIG_ERROR, "pytorch_lightning/plugins/precision/bf16.py"),
    ("ImportError: accelerate>=0.21.0 is required for a normal functioning of this module, but found accelerate==0.20.3.", E, Label.CONFIG_ERROR, "transformers/utils/versions.py _compare_versions"),
    # ptxas's diagnostic at its location; a kernel that needs a newer GPU
    ("ptxas /tmp/compile-ptx-src-9e79cc, line 59; error   : Feature '.bf16' requires .target sm_80 or higher", E, Label.CONFIG_ERROR, "corpus (lightning-18070)"),
    ("ptxas /tmp/tmpmfrp_3wp.ptx, line 277; error   : Feature 'cvt.bf16.f32' requires .target sm_80 or higher", E, Label.CONFIG_ERROR, "Triton 3 make_cubin's log on a V100 (LlamaFactory#7417)"),
    ("ptxas error: Feature '.bf16' requires .target sm_80 or higher", E, Label.CONFIG_ERROR, "ptxas unpadded, as a README quotes Triton's error"),
    ("ptxas /tmp/tempfile-host-1.ptx, line 5; fatal   : Unsupported .version 8.3", E, Label.COMPILE_ERROR, "ptxas located, XLA's CompileGpuAsmUsingPtxAs output"),
    ("(EngineCore_0 pid=9492) ptxas fatal   : Value 'sm_110a' is not defined for option 'gpu-name'", E, Label.COMPILE_ERROR, "Triton's ptxas under vLLM's engine prefix (the unlocated form, prefixed)"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    # a request body a server validated (its input is the JSON, not a call's arguments): answered 4xx, the server goes on
    "  Field required [type=missing, input_value={'model': 'llama', 'prompt': 'hi'}, input_type=dict]",
    "  Input should be a valid integer [type=int_parsing, input_value='abc', input_type=str]",
    # the requirement at a quiet level: the program goes on without the feature
    "WARNING: To use flash attention you must install flash-attn greater or equal to 2.1.0; falling back to sdpa",
    "[2024-03-01 00:58:32,151] [WARNING] [engine.py:1:f] you must install deepspeed greater or equal to 0.10 for this path",
    "/usr/lib/python3.10/site-packages/peft/tuners/lora.py:12: UserWarning: To use dora you must install peft greater or equal to 0.9.0.",
    # the words in prose or a path
    "docs: you must install torch to run the examples",
    "/opt/ptxas/README, line 3: see ptxas --help",
    "ptxas info    : Used 32 registers, 384 bytes cmem[0]",
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


#: error lines (the table's unrecognised error, a bare exception line) whose words state a cause: (line, the
#: cause); each from the corpus or the source named beside it
CAUSES: list[tuple[str, Label]] = [
    # pydantic's title for a configuration it refused: vLLM's EngineArgs.create_model_config, under its API
    # server's prefix, and pydantic v1's title of an arguments class
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig", Label.CONFIG_ERROR),
    ("(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig", Label.CONFIG_ERROR),
    ("pydantic.error_wrappers.ValidationError: 2 validation errors for TrainingArguments", Label.CONFIG_ERROR),
    # g++'s and clang's error on a source Inductor generated: corpus pytorch-173626, and clang on Inductor's C++
    # (torch/_inductor/cpp_builder.py)
    ("/tmp/torchinductor_root/xt/cxt5zpg5kszoshsn4o2r52gayl2yu7tb3fg2uu7lfqmlxra7lmaf.main.cpp:800:80: error: cannot convert ‘float’ to ‘co", Label.COMPILE_ERROR),
    ("/tmp/torchinductor_user/td/ctdkbp2rglqvjyxyjjdkxnw3rcthduteujzn3uv5zlyde7qqcmqk.cpp:14:5: error: use of undeclared identifier 'omp_get_max_threads'", Label.COMPILE_ERROR),
]

#: error lines near those forms that state no cause
NO_CAUSE = [
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatCompletionRequest",  # a request, not a configuration
    "csrc/ops/attention.cpp:120:5: error: 'half2' was not declared in this scope",  # a project's own extension build
    "/tmp/torchinductor_root/xt/cxt5.main.cpp:795:49: warning: unused variable 'tmp342'",  # a warning of the compiler
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_pydantic_refusal_is_a_configuration_error_to_stop() -> None:
    reading = read_error("Value error, invalid literal for int() with base 10: '4.0' [type=value_error, input_value=ArgsKwargs((), {'model_co...transfer_config': None}), input_type=ArgsKwargs]")
    assert reading is not None and reading.label is Label.CONFIG_ERROR and reading.action is Action.STOP, reading


# -- whole logs, as the judge reads them ------------------------------------------------------------

LIGHTNING_PTXAS = [
    '  File "/home/lk/anaconda3/envs/weather/lib/python3.10/site-packages/triton/compiler.py", line 1031, in ptx_to_cubin',
    "    return _triton.compile_ptx_to_cubin(ptx, ptxas, compute_capability)",
    "RuntimeError: Internal Triton PTX codegen error: ",
    "ptxas /tmp/compile-ptx-src-9e79cc, line 59; error   : Feature '.bf16' requires .target sm_80 or higher",
    "ptxas /tmp/compile-ptx-src-9e79cc, line 59; error   : Feature 'cvt with .f32.bf16' requires .target sm_80 or higher",
]

ENDINGS = [
    # vLLM's configuration refused by pydantic, the log's last word (corpus longvt-9)
    ([FORMS[0][0]], Label.CONFIG_ERROR, Action.STOP),
    # the title, the error line and pydantic's pointer to its documentation
    (["pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
      "  Value error, Model architectures ['Qwen2ForCausalLM'] failed to be inspected. Please check the logs for more details. [type=value_error, input_value=ArgsKwargs((), {'model': ...nderer_num_workers': 1}), input_type=ArgsKwargs]",
      "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"], Label.CONFIG_ERROR, Action.STOP),
    # Lightning's version requirement (corpus bevdepth-14)
    (["To use bfloat16 with native amp you must install torch greater or equal to 1.10."], Label.CONFIG_ERROR, Action.STOP),
    # Triton's exception whose message, after its colon, is ptxas's output (corpus lightning-18070)
    (LIGHTNING_PTXAS, Label.CONFIG_ERROR, Action.STOP),
    # ... and ptxas failing on the kernel itself
    (["RuntimeError: Internal Triton PTX codegen error: ",
      "ptxas /tmp/compile-ptx-src-1a2b3c, line 812; fatal   : Parsing error near '.extern': syntax error"], Label.COMPILE_ERROR, Action.STOP),
    # g++ refusing Inductor's C++ (corpus pytorch-173626)
    (["/tmp/torchinductor_root/xt/cxt5zpg5kszoshsn4o2r52gayl2yu7tb3fg2uu7lfqmlxra7lmaf.main.cpp: In lambda function:",
      "/tmp/torchinductor_root/xt/cxt5zpg5kszoshsn4o2r52gayl2yu7tb3fg2uu7lfqmlxra7lmaf.main.cpp:800:80: error: cannot convert ‘float’ to ‘co",
      "nst at::vec::CPU_CAPABILITY::VectorizedN<float, 2>&’"], Label.COMPILE_ERROR, Action.STOP),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_a_server_answering_a_bad_request_is_healthy() -> None:
    """A request body pydantic refused is the client's: the server answered and went on."""
    refused = ["ERROR 01-01 00:00:00 [serving_chat.py:200] Error in validating request",
               "  Field required [type=missing, input_value={'model': 'llama'}, input_type=dict]",
               'INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request']
    assert _verdict([*refused, *PROGRESS])[0] is Label.HEALTHY


def test_an_exception_ending_on_a_colon_takes_its_cause_only_from_the_next_line() -> None:
    """Only the line right after the colon continues the message: with a blank line between, the ptxas line is
    not read as the exception's message, and the exception alone states no cause."""
    lines = ["RuntimeError: Internal Triton PTX codegen error: ", "",
             "ptxas /tmp/x.ptx, line 9; error   : Feature '.bf16' requires .target sm_80 or higher"]
    assert _verdict(lines) == (Label.OTHER_CRASH, Action.RESTART)
    assert _verdict([lines[0], lines[2]]) == (Label.CONFIG_ERROR, Action.STOP)
