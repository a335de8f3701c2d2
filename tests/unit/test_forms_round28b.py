# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-28, each as a rule of its family, with real lines and
the near misses the rule must leave alone: a loss scaler that gave up and stopped the run (gpt-neox's overflow
monitor, fairseq's minimum loss scale), and a build whose CMake configuration failed. Each line is from the corpus
(named by its excerpt), from a public thread (named), or is the format the program's source prints (the source is
named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a loss scaler that gave up: the training loop's own exception when every step overflows
    ("Exception: Skipped 50 iterations in a row due to Overflow - Exiting training.", ERROR, Label.NUMERICAL_ERROR,
     "corpus (gpt-neox-482-skipped-50-iterations-overflow)"),
    ("[rank3]: Exception: Skipped 50 iterations in a row due to Overflow - Exiting training.", ERROR,
     Label.NUMERICAL_ERROR, "gpt-neox megatron/utils.py OverflowMonitor.check, under torch's rank prefix, filled in"),
    ("FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the learning rate, using gradient clipping or increasing the batch size.",
     ERROR, Label.NUMERICAL_ERROR, "fairseq/optim/dynamic_loss_scaler.py DynamicLossScaler.check_overflow, filled in"),
    # CMake's failed configuration: its error record and the end of the configure step
    ("    CMake Error at cmake/FindCUDNN.cmake:19 (find_library):", ERROR, Label.CONFIG_ERROR,
     "corpus (transformerengine-954-cmake-cudnn-not-found)"),
    ("    -- Configuring incomplete, errors occurred!", ERROR, Label.CONFIG_ERROR,
     "corpus (transformerengine-954-cmake-cudnn-not-found)"),
    ("CMake Error at CMakeLists.txt:9 (cmake_minimum_required):", ERROR, Label.CONFIG_ERROR,
     "a bamtools build on a host with CMake 2.8 ('CMake 3.0 or higher is required')"),
    ("CMake Error at src/crypto/wallet/CMakeLists.txt:39 (monero_crypto_autodetect):", ERROR, Label.CONFIG_ERROR,
     "a monero release build ('Unknown CMake command')"),
    ("npm ERR! -- Configuring incomplete, errors occurred!", ERROR, Label.CONFIG_ERROR,
     "a nodegui install whose cmake-js build failed under npm"),
    ("CMake Error: CMake was unable to find a build program corresponding to \"Ninja\".  CMAKE_MAKE_PROGRAM is not set.  You probably need to select a different build tool.",
     ERROR, Label.CONFIG_ERROR, "an engine's build report: the Ninja generator not installed"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # CMake's status lines: an optional package it did not find, a configuration that succeeded
    "-- Could NOT find OpenMP_C (missing: OpenMP_C_FLAGS OpenMP_C_LIB_NAMES)",
    "-- Configuring done",
    # prose about CMake errors, not CMake's record
    "If you see a CMake Error about cuDNN, install cudnn first.",
    # a loss scaler still at work: one skipped step, the scale lowered (read by the metric form only below fp16's
    # smallest subnormal)
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 131072.0",
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
    # Megatron's count of skipped iterations on a healthy step
    " iteration      100/    1000 | consumed samples:        6400 | loss scale: 65536.0 | number of skipped iterations:   0 | number of nan iterations:   0 |",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("Exception: Skipped 50 iterations in a row due to Overflow - Exiting training.", Label.NUMERICAL_ERROR),
    ("CMake Error at cmake/FindCUDNN.cmake:19 (find_library):", Label.CONFIG_ERROR),
]
#: error lines of a failed build whose form states no cause (pip's record of the wheel that failed)
NO_CAUSE = [
    "ERROR: Failed building wheel for transformer-engine",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("numerical_error/gpt-neox-482-skipped-50-iterations-overflow.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("config_error/transformerengine-954-cmake-cudnn-not-found.log", Label.CONFIG_ERROR, Action.STOP),
    # fairseq's scaler that gave up stays numerical
    ("numerical_error/fairseq-1215-floatingpointerror-minimum-loss.log", Label.NUMERICAL_ERROR, Action.STOP),
    # a loss scaler still at work on a healthy run stays healthy (one overflow between iterations)
    ("healthy/yolact-359-gradient-overflow-continues.log", Label.HEALTHY, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
