# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for the misses of round issue23-heldout-16, half A (JAX's Mosaic TPU compiler, an MLIR diagnostic
carried by a status, unittest's comparisons, srun's step refusal, aws-ofi-nccl's provider search, an NCCL
transport's WARN quoting CUDA's words), each as a rule of its family (a compiler's failure report, a status
message, a test framework's message layout, a launcher's refusal in each of its spellings, a plugin's words for
libfabric's FI_ENODATA, the cause a WARN's message states over the subsystem it came from), with real lines and
the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's
source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

E = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    ("[rank0]: The MLIR operation involved:", E, Label.COMPILE_ERROR, "corpus (jax-21408)"),
    ("The MLIR operation involved:", E, Label.COMPILE_ERROR, "corpus (jax-36750); jax/_src/tpu_custom_call.py _run_pass_pipeline"),
    ("RuntimeError: Internal TPU kernel compiler error: Invalid input layout", E, Label.COMPILE_ERROR, "tpu_custom_call.py's head, filled in"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "The MLIR operation involved is printed under the error",  # prose: not the section's header
    "INFO: lowering the MLIR operation involved: tpu.matmul",  # a header followed by more words
    "Internal TPU kernel compiler errors are reported at https://github.com/jax-ml/jax/issues",  # prose
]

#: (line, the cause its form states): causes read from an error line another rule reads as unexplained
CAUSES = [
    ("jax.errors.JaxRuntimeError: INTERNAL: failed to legalize operation 'tpu.reshape':", Label.COMPILE_ERROR),  # corpus (jax-36750)
    ("[rank0]: The MLIR operation involved:", Label.COMPILE_ERROR),  # corpus (jax-21408)
    ("AssertionError: nan not less than 3.0", Label.NUMERICAL_ERROR),  # corpus (pytorch-xla-817)
    ("AssertionError: tensor(nan) not less than or equal to 1.0", Label.NUMERICAL_ERROR),  # case.py's assertLessEqual, a tensor's repr
    ("AssertionError: 2.5 != inf within 7 places (inf difference)", Label.NUMERICAL_ERROR),  # case.py's assertAlmostEqual
    ("AssertionError: -inf not greater than 0.0 : the loss must stay positive", Label.NUMERICAL_ERROR),  # assertGreater with msg
]

#: error lines whose form says nothing of a cause
NO_CAUSE = [
    "AssertionError: 0.9 not less than 0.5",  # a finite value over its bound: the test's, not a numerical fault
    "AssertionError: 'nan' != 'inf'",  # strings compared
    "AssertionError: 12 != 10 within 7 places (2 difference)",  # finite operands
    "NOTE: failed to legalize operation 'tpu.reshape' is retried with the fallback pattern",  # no severity nor status
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_were_bumped() -> None:
    """What a line reads as changed: the reader's version, part of the classifier's cache key, moved on."""
    assert FORM_RULES >= 18


#: (error line, the cause the judge's reading of it states, None when it states none): readers extended where
#: their form belongs
READINGS: list[tuple[str, Label | None]] = [
    # srun's step refusal in each spelling of its versions (exctaxonomy._SRUN_NO_STEP)
    ("srun: error: unable to create step: More processros requested than permitted", Label.CONFIG_ERROR),  # corpus (pysr-891), as pasted
    ("srun: error: Unable to create job step: Requested node configuration is not available", Label.CONFIG_ERROR),  # src/srun/allocate.c's format
    ("srun: error: Unable to create step for job 29004556: Invalid generic resource (gres) specification", Label.CONFIG_ERROR),  # corpus (deephyper-53)
    # aws-ofi-nccl's words for libfabric's FI_ENODATA (errorclass._FABRIC_ABSENT)
    ("find_ofi_provider:543 NCCL WARN NET/OFI Couldn't find any optimal provider", Label.CONFIG_ERROR),  # corpus (aws-efa-nccl-baseami-2)
    ("ip-10-0-1-2:77:77 [0] find_ofi_provider:612 NCCL WARN NET/OFI OFI call failed with RC -61, No data available", Label.CONFIG_ERROR),  # nccl_ofi_net.c's other branch
    # an NCCL transport's WARN quoting CUDA's words for a set-up limit (errorclass.read_error)
    ("HOSTNAME:2753:2762 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 64 peer access is not supported between these two devices", Label.CONFIG_ERROR),  # corpus (horovod-785)
    # ... and a transport's WARN whose words state no such cause stays the transport's
    ("HOSTNAME:4974:4981 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 11 invalid argument", Label.COMM_ERROR),  # corpus (horovod-785)
    ("ip-10-0-1-2:77:90 [0] nccl_net_ofi_init:1415 NCCL WARN NET/OFI OFI call failed with RC -22, Invalid argument", None),  # another RC: not a missing provider
]


@pytest.mark.parametrize(("line", "label"), READINGS, ids=[f"reading:{i}" for i in range(len(READINGS))])
def test_error_reading_states_the_cause(line: str, label: Label | None) -> None:
    reading = read_error(line)
    assert (reading.label if reading is not None else None) is label, reading


# -- whole logs, as the judge reads them ------------------------------------------------------------

MOSAIC_TAIL = [
    "[rank0]: The MLIR operation involved:",
    "[rank0]:   %6936 = \"tpu.matmul\"(%6933, %6934, %6935) <{precision = #tpu.contract_precision<fp32>, transpose_lhs = false, transpose_rhs = true}> : (vector<512x128xbf16>, vector<128x128xbf16>, ",
    "[rank0]: vector<512x128xf32>) -> vector<512x128xf32>",
    "[rank0]: ... additional diagnostics were skipped.",
]

ENDINGS = [
    # Mosaic's report, only its tail under a rank's prefix (corpus, jax-21408)
    (MOSAIC_TAIL, Label.COMPILE_ERROR, Action.STOP),
    # an MLIR legalization failure JAX raises as a status (corpus, jax-36750)
    (["jax.errors.JaxRuntimeError: INTERNAL: failed to legalize operation 'tpu.reshape':",
      "  %470 = \"tpu.reshape\"(%469) : (vector<2x16xbf16>) -> vector<16x2xbf16>",
      "",
      "at location: loc(unknown)",
      "",
      "The MLIR operation involved:",
      "  %470 = \"tpu.reshape\"(%469) : (vector<2x16xbf16>) -> vector<16x2xbf16>",
      "... additional diagnostics were skipped."], Label.COMPILE_ERROR, Action.STOP),
    # a unittest bound on a loss that went nan (corpus, pytorch-xla-817)
    (["Traceback (most recent call last):",
      "  File \"test/test_train_mnist.py\", line 165, in test_accurracy",
      "    self.assertLess(train_mnist(FLAGS), 3.0)",
      "AssertionError: nan not less than 3.0"], Label.NUMERICAL_ERROR, Action.STOP),
    # srun's step refusal, lower case (corpus, pysr-891)
    (["srun: error: unable to create step: More processros requested than permitted"], Label.CONFIG_ERROR, Action.STOP),
    # aws-ofi-nccl finding no provider, the log's last word (corpus, aws-efa-nccl-baseami-2)
    (["find_ofi_provider:543 NCCL WARN NET/OFI Couldn't find any optimal provider"], Label.CONFIG_ERROR, Action.STOP),
    # NCCL's P2P transport refused by CUDA's peer-access limit (corpus, horovod-785)
    (["HOSTNAME:2753:2762 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 64 peer access is not supported between these two devices"],
     Label.CONFIG_ERROR, Action.STOP),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_provider_search_the_job_went_on_from_is_healthy() -> None:
    """NCCL falls back to its socket transport when the plugin finds no provider: steps after it are a run."""
    lines = ["find_ofi_provider:543 NCCL WARN NET/OFI Couldn't find any optimal provider",
             "algo-1:462:462 [0] NCCL INFO NET/Plugin: Failed to initialize NET plugin",
             "algo-1:462:462 [0] NCCL INFO Using network Socket", *PROGRESS]
    assert _verdict(lines)[0] is Label.HEALTHY

