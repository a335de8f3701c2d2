# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part G of the misses of round issue23-heldout-40 (training stacks of the Chinese open-source
ecosystem), each as a rule of its family, with real lines and the near misses the rule must leave alone: the Ascend
CANN runtime's failed call and its reason, XTuner's command line catching its command's failure, and Colossal-AI's
banner for a kernel built at run time. Each line is from the corpus (named by its excerpt) or from a public thread or
repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round40g import round40g_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
RUNNING = FormKind.COMPILE_RUNNING

AICPU_TIMEOUT = "rtStreamSynchronizeWithTimeout execute failed, reason=[aicpu timeout][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:49]"
XTUNER_ENOENT = "05/30 18:04:29 - mmengine - WARNING - WARNING: command error: '[Errno 2] No such file or directory: '/root/autodl-tmp/ft/data/cutlass/CHANGELOG.md''!"
COLOSSAL_BUILD = "No pre-built kernel is found, build and load the cpu_adam kernel during runtime now"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # CANN's failed runtime call, by its reason
    (AICPU_TIMEOUT, ERROR, None, "corpus (hiascend-80rc3-troubleshooting-0145-getnext-aicpu-timeout-e30008)"),
    ("        rtMalloc execute failed, reason=[driver error:out of memory][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]",
     ERROR, Label.OOM, "corpus (llamafactory-6816-npu-ds3-offload-acl-stream-sync-el0004-alloc-failed)"),
    ("[rank1]:        rtGetDeviceIndexByPhyId execute failed, reason=[device id error][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]",
     ERROR, Label.CONFIG_ERROR, "corpus (vllm-ascend-672-dp-ep-hccl-comm-init-device-id-error)"),
    # XTuner's caught command error
    (XTUNER_ENOENT, ERROR, Label.CONFIG_ERROR, "corpus (internlm-tutorial-727-xtuner-train-command-error-no-such-file)"),
    ("09/02 23:42:31 - mmengine - WARNING - WARNING: command error: 'CUDA_HOME does not exist, unable to compile CUDA op(s)'!",
     ERROR, None, "an XTuner fine-tuning guide's notes on WSL2 (found through the code index)"),
    ("08/16 11:26:31 - mmengine - WARNING - WARNING: command error!", ERROR, Label.CONFIG_ERROR,
     "InternLM/xtuner xtuner/entry_point.py (print_log('WARNING: command error!', ...) for a mode it does not know)"),
    # Colossal-AI's runtime kernel build
    (COLOSSAL_BUILD, RUNNING, None, "corpus (colossalai-3359-cpu-adam-kernel-runtime-build)"),
    ("No pre-built kernel is found, build and load the fused_optim kernel during runtime now", RUNNING, None,
     "hpcaitech/ColossalAI colossalai/kernel/op_builder/builder.py (load: print_rank_0 of the kernel's name)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "rtFoo execute failed, reason=[]",  # no reason
    "if the call execute failed, reason=[device id error] is printed by the runtime",  # prose
    "    print_log(f\"WARNING: command error: '{e}'!\", 'current',",  # the source line
    "I got WARNING: command error: 'x'! and then nothing, what does it mean?",  # prose: the words are not at the end
    "Loading a pre-built kernel for cpu_adam",  # the kernel was prebuilt
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 67


def test_reasons_that_state_nothing_are_left_to_the_record() -> None:
    """A stream's or task's timeout, a model stream that failed, a driver's internal error: other readers' (or none)."""
    for line in ("rtStreamSynchronize execute failed, reason=[the model stream execute failed][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:45]",
                 "rtDeviceSynchronize execute failed, reason=[task timeout][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]",
                 "rtGetDevMsg execute failed, reason=[driver error:internal error][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]"):
        assert round40g_form(line) is None, line


def test_getnext_timeout_record_is_a_failure(tmp_path: Path) -> None:
    """CANN's E30008 record with its failed runtime call ends the log: a failure (restart), not a healthy run."""
    log = tmp_path / "getnext.log"
    log.write_text("Error Message is :\nE30008: AI CPU operator execution time out.\n"
                   "TraceBack (most recent call last):\n"
                   "Aicpu kernel execute failed, device_id=0, stream_id=2, task_id=2, fault op_name=aicpu_getnext_IteratorGetNext[FUNC:GetError][FILE:stream.cc][LINE:1133]\n"
                   + AICPU_TIMEOUT + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OTHER_CRASH


def test_xtuner_command_error_ends_the_run(tmp_path: Path) -> None:
    """XTuner's command error at a warning's level after its accelerator probe is the job's end: configuration."""
    log = tmp_path / "xtuner.log"
    log.write_text("[2024-05-30 18:04:29,376] [INFO] [real_accelerator.py:203:get_accelerator] Setting ds_accelerator to cuda (auto detect)\n"
                   + XTUNER_ENOENT + "\n05/30 18:04:29 - mmengine - WARNING - \n"
                   "    Arguments received: ['xtuner', 'train', 'cfg.py']. xtuner commands use the following syntax:\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_colossal_build_then_load_is_not_compiling(tmp_path: Path) -> None:
    """The banner then torch's load record: the build is done and the run goes on."""
    log = tmp_path / "colossal.log"
    log.write_text(COLOSSAL_BUILD + "\nTime to load cpu_adam op: 31.5 seconds\n"
                   "2024-01-01 10:00:00 INFO step 1 loss 0.5\n2024-01-01 10:00:05 INFO step 2 loss 0.4\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is not Label.COMPILING
