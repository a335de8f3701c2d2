# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for the misses of round issue23-heldout-20, half A (PaddlePaddle's comparison check with a value that is
not finite, CANN's operator without a kernel binary and the error message around it, the dynamic loader's undefined
symbol outside an ImportError, a module without the attribute its caller expects, Open MPI's and PRRTE's error trace),
each as a rule of its family (a framework's check format, a runtime's error message layout, a loader's error format,
CPython's attribute error, a launcher's trace macro), with real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's source
prints, filled in (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorblock import blocks
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests

E = FormKind.ERROR
C = FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Paddle's comparison check (paddle/fluid/platform/enforce.h __PADDLE_BINARY_COMPARE: "Enforce failed. Expected %s
    # <op> %s, but received %s:%s <inverse op> %s:%s.")
    ("Enforce failed. Expected predict_data <= 1, but received predict_data:-nan > 1:1.", E, Label.NUMERICAL_ERROR,
     "corpus (paddle-models-3146): the auc operator's check under Paddle's 'C++ Callstacks:'"),
    ("paddle.fluid.core.EnforceNotMet: Enforce failed. Expected predict_data <= 1, but received predict_data:-nan > 1:1.",
     E, Label.NUMERICAL_ERROR, "corpus (paddle-32024): the same check as the exception line"),
    ("  [Hint: Expected predict_data <= 1, but received predict_data:nan > 1:1.] (at /paddle/paddle/fluid/operators/metrics/auc_op.h:80)",
     E, Label.NUMERICAL_ERROR, "Paddle 2.x's hint of the same check (PaddlePaddle/Paddle#24343's value), filled in"),
    ("Enforce failed. Expected lhs == rhs, but received lhs:inf != rhs:1.", E, Label.NUMERICAL_ERROR,
     "enforce.h's PADDLE_ENFORCE_EQ with an infinite value, filled in"),
    # CANN's kernel loader (the message torch_npu quotes under "EZ9999: Inner Error!")
    ("        Op Cast does not has any binary.", E, Label.CONFIG_ERROR, "corpus (llamafactory-4610)"),
    ('### Error: "Op FlashAttentionScore does not has any binary"', E, Label.CONFIG_ERROR,
     "a troubleshooting note quoting the loader on a chip without the operator (code corpus)"),
    ("Op Fill does not have any binary.", E, Label.CONFIG_ERROR, "the grammatical spelling, filled in"),
    # Open MPI's and PRRTE's error trace (prrte src/util/error.h PRTE_ERROR_LOG: "PRTE ERROR: %s in file %s at line %d")
    ("[noname:70172] PRRTE ERROR:  in file ../../../../../../../prrte/src/mca/rmaps/round_robin/rmaps_rr.c at line 249",
     C, None, "corpus (ompi-7413): the mapper's trace before the slots help text"),
    ("[host1:04321] PMIX ERROR: UNREACHABLE in file server/pmix_server.c at line 2795", C, None,
     "PMIx's PMIX_ERROR_LOG format, filled in"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "Expected predict_data <= 1, but received predict_data:0.97 > 1:1.",  # a failed check of finite values: no cause of its own
    "Expected 3 tokens in the prompt, but received 2 from the tokenizer.",  # prose, no comparison of values
    "[INFO] kernel cache: Op Cast has a binary for Ascend910B, reusing it",  # the loader finding its binary
    "PRRTE: reading the hostfile in file mode at line 3 of 4",  # the runtime's words, no trace of a code line
    "Found the mapping in file hosts.txt at line 12",  # a location, no runtime's trace
]

#: (line, the cause its form states): causes read from an error line another rule reads as unexplained
CAUSES = [
    # glibc's loader (elf/dl-lookup.c: "undefined symbol: %s") outside an ImportError
    (" OSError: /home/mtp/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/libtbe_adapter.so: undefined symbol: _ZN3Mki2DlC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEb",
     Label.CONFIG_ERROR),  # corpus (ascend-pytorch-99): ctypes.CDLL loading torch_npu's op plugin
    ("(EngineCore_DP0 pid=1228) ERROR 03-30 03:00:55 [patch_core.py:68] OSError: /usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/libtbe_adapter.so: undefined symbol: _ZN3Mki2DlC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEb",
     Label.CONFIG_ERROR),  # Ascend/pytorch#99's second report, under vLLM's EngineCore record
    ("OSError: /opt/conda/lib/libnccl-net.so.1: undefined symbol: ncclNetPlugin_v8", Label.CONFIG_ERROR),  # dl-lookup.c's format, filled in
    # CPython's module attribute lookup (Objects/moduleobject.c module_getattro)
    ("[rank0]: AttributeError: module 'torch_npu' has no attribute '_npu_flash_attention'", Label.CONFIG_ERROR),  # corpus (vllm-ascend-340)
    ("AttributeError: module 'numpy' has no attribute 'float'.", Label.CONFIG_ERROR),  # NumPy 1.24's removal (its own message goes on), filled in
    ("AttributeError: partially initialized module 'torch' has no attribute 'Tensor' (most likely due to a circular import)", Label.CONFIG_ERROR),
]

#: error lines whose form states no cause
NO_CAUSE = [
    "AttributeError: 'NoneType' object has no attribute 'shape'",  # an object's attribute: the program's own value
    "RuntimeError: call aclnnCast failed, detail:EZ9999: Inner Error!",  # CANN's head: the cause is in the lines under it
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_were_bumped() -> None:
    """What a line reads as changed: the reader's version, part of the classifier's cache key, moved on."""
    assert FORM_RULES >= 26


# -- CANN's error message as one block --------------------------------------------------------------

#: torch_npu's exception quoting CANN's error message (corpus, llamafactory-4610)
CANN_MESSAGE = [
    "RuntimeError: call aclnnCast failed, detail:EZ9999: Inner Error!",
    "EZ9999: 2024-06-28-13:05:55.631.066  Parse dynamic kernel config fail.",
    "        TraceBack (most recent call last):",
    "        AclOpKernelInit failed opType",
    "        Op Cast does not has any binary.",
    "        Kernel Run failed. opType: 3, Cast",
    "        launch failed for Cast, errno:561000.",
    "",
    "[ERROR] 2024-06-28-13:05:55 (PID:11591, Device:0, RankID:-1) ERR01005 OPS internal error",
]


def test_canns_message_is_one_block_with_its_head() -> None:
    """The lines that start with the message's code and the inner errors indented under them belong to the block the
    exception line opened: the cause four lines under the head is read as the block's."""
    first = blocks(CANN_MESSAGE)[0]
    assert [line.index for line in first.lines] == [0, 1, 2, 3, 4, 5, 6]


def test_a_code_line_continues_only_a_block_that_carries_canns_message() -> None:
    """A line that starts like a code after an exception that quotes none opens no continuation of it."""
    lines = ["RuntimeError: the dataset reader stopped", "EZ9999: 2024-06-28-13:05:55.631.066  Parse dynamic kernel config fail."]
    assert [line.index for line in blocks(lines)[0].lines] == [0]


def test_the_older_two_space_code_line_continues_the_block() -> None:
    lines = ["RuntimeError: call aclnnCast failed, detail:EZ9999: Inner Error!",
             "EZ9999  Cannot parse json for config file [/usr/local/Ascend/ascend-toolkit/latest/opp/built-in/op_impl/ai_core/tbe//kernel/config/ascend910/cast.json].",
             "        Op Cast does not has any binary."]
    assert [line.index for line in blocks(lines)[0].lines] == [0, 1, 2]


# -- whole logs, as diagnose reads them --------------------------------------------------------------

ENDINGS = [
    (CANN_MESSAGE, Label.CONFIG_ERROR, Action.STOP),
    # Paddle 1.x's error report of the auc check with a NaN prediction (corpus, paddle-models-3146)
    (["C++ Callstacks: ",
      "Enforce failed. Expected predict_data <= 1, but received predict_data:-nan > 1:1.",
      "The predict data must less or equal 1. at [/home/amy/eason/install/Paddle/paddle/fluid/operators/metrics/auc_op.h:80]",
      "PaddlePaddle Call Stacks:"], Label.NUMERICAL_ERROR, Action.STOP),
    # PRRTE's trace lines before the slots help text that states the cause (corpus, ompi-7413)
    (["[noname:70172] PRRTE ERROR:  in file ../../../../../../../prrte/src/mca/rmaps/round_robin/rmaps_rr.c at line 249",
      "[noname:70172] PRRTE ERROR:  in file ../../../../../../prrte/src/mca/rmaps/base/rmaps_base_map_job.c at line 381",
      "--------------------------------------------------------------------------",
      "There are not enough slots available in the system to satisfy the 7",
      "slots that were requested by the application:"], Label.CONFIG_ERROR, Action.STOP),
    # ctypes' OSError for torch_npu's op plugin (corpus, ascend-pytorch-99)
    (["Traceback (most recent call last):",
      '   File "/usr/local/python3/lib/python3.11/ctypes/__init__.py", line 376, in __init__',
      "     self._handle = _dlopen(self._name, mode)",
      " OSError: /home/mtp/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/libtbe_adapter.so: undefined symbol: _ZN3Mki2DlC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEb"],
     Label.CONFIG_ERROR, Action.STOP),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action, tmp_path: Path) -> None:
    log = tmp_path / "rank.log"
    log.write_text("\n".join(lines) + "\n")
    verdict = diagnose_paths([str(log)]).verdict
    assert (verdict.label, verdict.action) == (label, action)


def test_a_finite_paddle_check_after_steps_is_left_to_the_other_readers(tmp_path: Path) -> None:
    """A comparison of finite values states no numerical cause: the check's failure is a crash, not a NaN."""
    log = tmp_path / "rank.log"
    log.write_text("paddle.fluid.core.EnforceNotMet: Enforce failed. Expected predict_data <= 1, but received predict_data:1.5 > 1:1.\n")
    assert diagnose_paths([str(log)]).verdict.label is not Label.NUMERICAL_ERROR
