# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half A of the misses of round issue23-heldout-23, each as a rule of its family, with real lines and
the near misses the rule must leave alone: torch-neuron's records of a compile by neuron-cc, a gRPC status an RPC
client's record carries as a number, MindSpore's report sections under an exception, and XLA's slow-compile alarm
whose returned record repeats its banner. Each line is from the corpus (named by its excerpt), from a public
thread or document (named), or is the format the program's source prints (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorblock import Role, blocks
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

RUNNING, DONE = FormKind.COMPILE_RUNNING, FormKind.COMPILE_DONE

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    ("INFO:Neuron:Compiling function _NeuronGraph$619 with neuron-cc", RUNNING, None,
     "corpus (neuron-sdk-352-neuron-cc-trace-prints-dots-forever: the log's last line, dots for 8 hours after it)"),
    ("INFO:Neuron:Compiling function _NeuronGraph$950 with neuron-cc", RUNNING, None,
     "corpus (aws-neuron-sdk-365-neuron-cc-io-config-tensor-in-both)"),
    ("INFO:Neuron:Compile command returned: 1", DONE, None,
     "corpus (aws-neuron-sdk-365-neuron-cc-io-config-tensor-in-both: after Compiler status ERROR)"),
    ("INFO:Neuron:Compile command returned: 0", DONE, None,
     "signatures.toml (the near miss of the -9 rule: a compile that succeeded)"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    "        logger.info('Compiling function %s with neuron-cc', name)",  # the logging call in source
    "Compiling function bodies with neuron-cc takes longer for large graphs",  # prose
    "The compile command returned nothing, see the log",  # no exit code
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: (line, the cause its form states): error lines
CAUSES = [
    ("F1222 19:03:46.287559 19021 grpc_client.cc:414] SendRPC name:[softmax_b@GRAD.trainer_0], ep:[10.90.145.38:62004], status:[-1] meets grpc error, error_code:4 error_message:Deadline Exceeded error_details:",
     Label.COMM_ERROR),  # corpus (paddle-21881-pserver-grpc-deadline-exceeded-glog-f)
    ("[1,0]<stderr>:2024-09-08 11:46:07.494499: E ./trainer/core/rpc/grpc/grpc_client.h:91] /sniper.Sniper/PushGrad meets grpc error, error_code: 4, error_message: Deadline Exceedederror_details:",
     Label.COMM_ERROR),  # another parameter-server trainer's client under mpirun (a design note in the code corpus)
    ("E0101 00:00:00.000000 100 grpc_client.cc:300] GetVariable meets grpc error, error_code:14 error_message:failed to connect to all addresses error_details:",
     Label.COMM_ERROR),  # Paddle's format (grpc_client.cc) filled in with UNAVAILABLE's number and gRPC's message
]
NO_CAUSE = [
    # INTERNAL (13) says nothing of a cause: the service's own failure
    "[1,0]<stderr>:2024-09-28 18:16:53.530248: E ./trainer/core/rpc/grpc/grpc_client.h:91] /sniper.Sniper/PushGrad meets grpc error, error_code: 13, error_message: push grad",
    # an error code that is not gRPC's
    "E0101 00:00:00.000000 100 decoder.cc:77] frame rejected, error_code: 4 (bad header)",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("compiling/neuron-sdk-352-neuron-cc-trace-prints-dots-forever.log", Label.COMPILING, Action.WAIT),
    ("compile_error/aws-neuron-sdk-365-neuron-cc-io-config-tensor-in-both.log", Label.COMPILE_ERROR, Action.STOP),
    ("oom/aws-neuron-sdk-439-torch-neuron-bert-compile-returned-minus-9.log", Label.OOM, Action.STOP),
    ("comm_error/paddle-21881-pserver-grpc-deadline-exceeded-glog-f.log", Label.COMM_ERROR, Action.RESTART),
    ("config_error/mindyolo-273-mindspore-unsupported-device-target-ascend.log", Label.CONFIG_ERROR, Action.STOP),
    ("healthy/jax-26098-xla-slow-compile-alarm-operation-took.log", Label.HEALTHY, Action.WAIT),
    ("healthy/xla-23924-slow-operation-alarm-compile-finished.log", Label.HEALTHY, Action.WAIT),
    ("healthy/tapnet-53-slow-operation-alarm-jit-apply-fn.log", Label.HEALTHY, Action.WAIT),
    ("compiling/dm-haiku-539-xla-constant-folding-slow-alarm.log", Label.COMPILING, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_a_compile_handed_to_neuron_cc_that_returned_then_training_is_healthy(tmp_path: Path) -> None:
    """The compile's start then its exit code then steps: nothing is left open."""
    log = tmp_path / "rank.log"
    log.write_text("INFO:Neuron:Compiling function _NeuronGraph$295 with neuron-cc\n"
                   "INFO:Neuron:Compile command returned: 0\n"
                   + "".join(f"step {n} loss 2.{n:02d} lr 1e-4 throughput 410 seq/s\n" for n in range(1, 30)))
    assert diagnose_paths([str(log)]).verdict.label is Label.HEALTHY


#: the alarm's first record and its returned record, as XLA prints them (jax#26098; openxla/xla#23924 in the corpus)
_ALARM = ("2024-06-17 11:40:02.931165: E external/xla/xla/service/slow_operation_alarm.cc:65] \n"
          "********************************\n"
          "[Compiling module xxx] Very slow compile? If you want to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.\n"
          "********************************\n")
_RETURNED = ("2024-06-17 11:40:31.962458: E external/xla/xla/service/slow_operation_alarm.cc:133] The operation took 2m29.0445135s\n"
             "\n"
             "********************************\n"
             "[Compiling module xxx] Very slow compile? If you want to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.\n"
             "********************************\n")


def test_the_banner_under_the_returned_record_opens_no_compile(tmp_path: Path) -> None:
    log = tmp_path / "rank.log"
    log.write_text(_ALARM + _RETURNED)
    assert diagnose_paths([str(log)]).verdict.label is Label.HEALTHY


def test_a_new_alarm_after_the_returned_one_is_a_compile_at_work(tmp_path: Path) -> None:
    """A second alarm opens with a record of its own: that compile has not returned."""
    log = tmp_path / "rank.log"
    log.write_text(_ALARM + _RETURNED + _ALARM.replace("11:40:02.931165", "11:45:12.000001"))
    assert diagnose_paths([str(log)]).verdict.label is Label.COMPILING


#: MindSpore's report under an exception, from another thread than the corpus' (a MindSpore 2.10 bug report in the
#: issues corpus: a graph compile refusing a keyword)
_MS_REPORT = """RuntimeError: Got an unexpected keyword argument 'other'

----------------------------------------------------
- C++ Call Stack: (For framework developers)
----------------------------------------------------
mindspore/core/ir/func_graph_extends.cc:161 GenerateKwParams

----------------------------------------------------
- The Traceback of Net Construct Code:
----------------------------------------------------
# 0 In file reproducer.py:8, 15~48
        return x.bitwise_left_shift(other=shift)
""".splitlines()


def test_mindspore_s_sections_stay_in_the_exception_s_block_and_its_stacks_are_frames() -> None:
    (block,) = blocks(_MS_REPORT)
    roles = {bl.index: bl.role for bl in block.lines}
    assert roles[0] is Role.MESSAGE
    assert [roles[i] for i in (2, 3, 4)] == [Role.SEPARATOR] * 3  # a rule, the title, a rule
    assert roles[5] is Role.FRAME  # the C++ call stack
    assert roles[10] is Role.FRAME and roles[11] is Role.FRAME  # the net's traceback
    assert block.end == len(_MS_REPORT) - 1


def test_a_message_section_is_the_exception_s_detail(tmp_path: Path) -> None:
    """The section's line states the cause (the loader's refusal) under an exception that states none."""
    lines = (CORPUS / "config_error/mindyolo-273-mindspore-unsupported-device-target-ascend.log").read_text().splitlines()
    (block,) = blocks(lines)
    detail = [bl for bl in block.lines if "cannot open shared object file" in lines[bl.index]]
    head = next(bl for bl in block.lines if lines[bl.index].startswith("RuntimeError:"))
    assert detail and all(bl.role is Role.MESSAGE and bl.depth > head.depth for bl in detail)


def test_dashes_that_are_no_section_end_the_block() -> None:
    """Open MPI's help text after an exception: a rule, then no section title."""
    lines = ["RuntimeError: boom", "-" * 74, "Primary job  terminated normally, but 1 process returned"]
    found = blocks(lines)
    assert found and found[0].start == 0 and all(bl.index != 2 for bl in found[0].lines)


def test_an_error_record_after_an_announced_compile_is_the_compile_s_failure(tmp_path: Path) -> None:
    """A compile torch-neuron announced, then an error record no rule knows and nothing after it: the compile's
    last word is its failure (as for a compile a compiler process opened), not a compile still at work. The
    lines are the corpus' aws-neuron-sdk-709 with its last record's words replaced (bench_form_robustness's
    words perturbation, seed 23)."""
    head = (CORPUS / "compile_error/aws-neuron-sdk-709-inf1-neuron-cc-sig-abort-fallback.log").read_text().splitlines()[:3]
    log = tmp_path / "rank.log"
    log.write_text("\n".join(head) + "\nERROR:Alternate:neuron-cc abgebrochen entire autoscaler clipnorm receive intent call:\n")
    verdict = diagnose_paths([str(log)]).verdict
    assert (verdict.label, verdict.action) == (Label.COMPILE_ERROR, Action.STOP), verdict.reason


def test_mindspore_s_sections_under_its_c_plus_plus_error_record() -> None:
    """MindSpore's C++ log prints the same sections under an ERROR record (a reliability test's log in the issues
    corpus); the traceback after the blank line is another block."""
    lines = [
        "[ERROR] DEVICE(164104,ffff841795d0,python):2022-12-01-03:58:52.033.355 [mindspore/ccsrc/runtime/device/kernel_runtime_manager.cc:138] WaitTaskFinishOnDevice] SyncStream failed, exception:The pointer[stream] is null.",
        "",
        "----------------------------------------------------",
        "- C++ Call Stack: (For framework developers)",
        "----------------------------------------------------",
        "mindspore/ccsrc/runtime/device/kernel_runtime.cc:124 LockRuntime",
        "",
        "Traceback (most recent call last):",
        '  File "train.py", line 377, in <module>',
    ]
    first, second = blocks(lines)
    assert first.end == 5 and first.lines[-1].role is Role.FRAME
    assert second.start == 7
