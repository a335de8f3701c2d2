# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part G of the misses of round issue23-heldout-34 (never kill a healthy job), each as a rule of its
family, with real lines and the near misses the rule must leave alone: XLA's GPU timer reporting a measurement's
accuracy at ERROR, TensorRT's builder skipping a tactic whose check threw, and Hugging Face Trainer's notice of an epoch
without a sample at step 0. Each line is from the corpus (named by its excerpt) or from a public thread or repository
(named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, read_quiet
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
COMPILE = FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Hugging Face Trainer's notice of an epoch without a sample, at step 0
    ("[WARNING|trainer.py:2013] ... >> There seems to be not a single sample in your epoch_iterator, stopping training at step 0! This is expected if you're using an IterableDataset and set num_steps (X) higher than the number of available samples. ",
     ERROR, Label.CONFIG_ERROR, "corpus (yulan-ir-5-trainer-not-a-single-sample-stopping-at-step-0)"),
    ("There seems not to be a single sample in your epoch_iterator, stopping training at step 0! This is expected if you're using an IterableDataset and set num_steps (1000) higher than the number of available samples.",
     ERROR, Label.CONFIG_ERROR, "transformers trainer.py _inner_training_loop's warning, the newer wording, rendered"),
    # the nerfstudio libraries' notice of their CUDA extension's JIT build
    ("# Out: (<infinitly bouncing ball>) NerfAcc: Setting up CUDA (This may take a few minutes the first time)",
     COMPILE, None, "corpus (nerfacc-116-jit-cuda-extension-setting-up-first-time)"),
    ("gsplat: Setting up CUDA with MAX_JOBS=10 (This may take a few minutes the first time)",
     COMPILE, None, "a public repository's notes on gsplat's first run ('silent for several minutes ... normal, not a hang')"),
]

#: XLA's GPU timer on a measurement's accuracy (E and W records of its own source files): quiet
TIMER_NOTICES = [
    "2025-02-10 16:44:23.346297: E external/xla/xla/stream_executor/cuda/cuda_timer.cc:86] Delay kernel timed out: measured time has sub-optimal accuracy. There may be a missing warmup execution, please investigate in Nsight Systems.",  # corpus (tensorflow-73487-xla-delay-kernel-timed-out-e-records)
    "E0000 00:00:1722345736.018872    5295 gpu_timer.cc:183] Delay kernel timed out: measured time has sub-optimal accuracy. There may be a missing warmup execution, please investigate in Nsight Systems.",  # a public repository's saved TensorFlow run (absl's head, XLA's older gpu_timer.cc)
    "2232/2232 ━━━━━━━━━━━━━━━━━━━━ 0s 165ms/step - accuracy: 0.5234 - loss: 1.11832025-10-25 19:35:36.804598: E external/local_xla/xla/stream_executor/cuda/cuda_timer.cc:86] Delay kernel timed out: measured time has sub-optimal accuracy. There may be a missing warmup execution, please investigate in Nsight Systems.",  # a public repository's Keras run: glued to the progress bar's last redraw
]

#: TensorRT's builder skipping a tactic whose implementation check threw: quiet
TACTIC_SKIPS = [
    "E onnxruntime: [2024-09-20 12:15:43   ERROR] Error Code: 9: Skipping tactic 0xaa15e43058248292 due to exception canImplement1 [tensorrt_execution_provider.h:88 onnxruntime::TensorrtLogger::log]",  # corpus (onnxruntime-22164-trt-ep-skipping-tactic-error-records-while-building)
    "[10/21/2023-07:49:30] [TRT] [E] 9: Skipping tactic0x0000000000000000 due to exception PLUGIN_V2 operation not supported within this graph.",  # corpus (tensorrt-llm-54-starcoder-plugin-v2-no-implementation-trt-version)
]

#: lines of the same words that are not these forms (and, unlike the quiet notices, stay what they were)
NEAR_MISSES = [
    # the same words for other work than a CUDA extension's build (a container image, a model's download)
    'echo "Building Docker images (this may take a few minutes the first time)..."',  # a public repository's setup script
    'print("Loading model... (this may take a few minutes the first time)")',  # a public repository's script
    # the Trainer's notice at a later step: an iterable dataset run out, as the notice says
    "There seems not to be a single sample in your epoch_iterator, stopping training at step 1500! This is expected if you're using an IterableDataset and set num_steps (2000) higher than the number of available samples.",
    *TIMER_NOTICES,
    *TACTIC_SKIPS,
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize("line", TIMER_NOTICES + TACTIC_SKIPS)
def test_notice_at_error_is_quiet(line: str) -> None:
    """The timer's and the builder's notices are records their programs print at ERROR whatever they report."""
    assert read_quiet(line)


@pytest.mark.parametrize("line", [
    # the timer's other ERROR is a status that failed; the builder's skips for want of memory are an OOM's evidence
    "2023-09-15 15:37:48.404245: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2593] Execution of replica 0 failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 92198188384 bytes.",  # google-deepmind/weathernext#7
    "[11/07/2023-08:45:41] [TRT] [W] UNSUPPORTED_STATESkipping tactic 2 due to insufficient memory on requested size of 33555480576 detected for tactic 0x000000000000001e.",  # corpus (tensorrt-llm-102-v100-builder-outofmemory-tactics)
])
def test_near_notice_is_not_quiet(line: str) -> None:
    assert not read_quiet(line)


def test_timer_notices_alone_are_healthy(tmp_path: Path) -> None:
    """A log of the timer's E records (a run that goes on) is healthy, not a crash to restart; XLA's OOM in an E
    record of another file is still the failure it states."""
    log = tmp_path / "timer.log"
    log.write_text("\n".join(TIMER_NOTICES[:2] * 3) + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
    oom = tmp_path / "oom.log"
    oom.write_text("2023-09-15 15:37:48.404245: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2593] Execution of replica 0 failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 92198188384 bytes.\n")
    assert diagnose_paths([str(oom)], now=0.0).verdict.label is Label.OOM


def test_tactic_skips_are_no_crash_but_the_failed_build_is(tmp_path: Path) -> None:
    """The builder's tactic skips alone are no error to restart for; the build that then finds no implementation
    is still a failure (its own record states it)."""
    skips = tmp_path / "skips.log"
    skips.write_text(TACTIC_SKIPS[0] + "\n" + TACTIC_SKIPS[0].replace("0xaa15e43058248292", "0xb4fe42a3eed4e892") + "\n")
    assert diagnose_paths([str(skips)], now=0.0).verdict.label is Label.HEALTHY
    failed = tmp_path / "failed.log"
    failed.write_text(TACTIC_SKIPS[1] + "\n[10/21/2023-07:49:30] [TRT] [E] 10: Could not find any implementation for node {ForeignNode[GPTLMHeadModel/layers/0/attention/qkv/CONSTANT_1]}.\n[10/21/2023-07:49:30] [TRT-LLM] [E] Engine building failed, please check the error log.\n")
    assert diagnose_paths([str(failed)], now=0.0).verdict.label not in (Label.HEALTHY, Label.COMPILING)
