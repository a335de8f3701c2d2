# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part D of the misses of round issue23-heldout-38 (healthy runs that look frightening, part 5), each
as a rule of its family, with real lines and the near misses the rule must leave alone: DeepStream building the
TensorRT engine it found no file for (its ERROR of the missing file quiet), the user stack Inductor prints when it skips
CUDA graphs (not a traceback a log was cut in), and the shell's "Killed" glued to Keras's progress bar. Each line is
from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, read_quiet
from neuron_watch.diagnosis.heldout.round38d import round38d_form, round38d_warning_stack
from neuron_watch.diagnosis.logtext import logical_lines
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

RUNNING = FormKind.COMPILE_RUNNING

DS_REBUILD = "0:00:05.332771870  1168   0x7f3c0022d0 WARN                 nvinfer gstnvinfer.cpp:635:gst_nvinfer_logger:<primary_gie> NvDsInferContext[UID 1]: Warning from NvDsInferContextImpl::generateBackendContext() <nvdsinfer_context_impl.cpp:1996> [UID = 1]: deserialize backend context from engine from file :/opt/nvidia/deepstream/deepstream-6.0/sources/DeepStream-Yolo/model_b1_gpu0_fp32.engine failed, try rebuild"
DS_MISSING = "ERROR: Deserialize engine failed because file path: /opt/nvidia/deepstream/deepstream-6.0/sources/DeepStream-Yolo/model_b1_gpu0_fp32.engine open error"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    (DS_REBUILD, RUNNING, None, "corpus (deepstream-yolo-277-no-cached-engine-try-rebuild)"),
    ("0:00:07.211343392  6142 0x3d14c30 INFO                 nvinfer gstnvinfer.cpp:638:gst_nvinfer_logger:<primary_gie> NvDsInferContext[UID 1]: Info from NvDsInferContextImpl::buildModel() <nvdsinfer_context_impl.cpp:1914> [UID = 1]: Trying to create engine from model files",
     RUNNING, None, "DeepStream's nvdsinfer_context_impl.cpp buildModel(), as DeepStream-Yolo's and NVIDIA forum users' logs print it"),
    ("WARN nvinfer gstnvinfer.cpp:677:gst_nvinfer_logger:<primary-inference> NvDsInferContext[UID 1]: Warning from NvDsInferContextImpl::generateBackendContext() <nvdsinfer_context_impl.cpp:2080> [UID = 1]: deserialize backend context from engine from file :/models/yolov8s.onnx_b1_gpu0_fp16.engine failed, try rebuild",
     RUNNING, None, "the same record under DeepStream 6.2's line numbers (nvdsinfer_context_impl.cpp:2080), as DeepStream-Yolo users paste it"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    DS_MISSING,  # the cache miss itself: quiet, not a compile (the rebuild record says that)
    "Please try rebuild the docker image with --no-cache",  # prose
    "skipping cudagraphs due to cpu device (arg2_1). Found from : ",  # Inductor's header: an advisory, read as nothing
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_tensorrts_own_rebuild_advice_is_not_this_form() -> None:
    """TensorRT's error of an engine of another version advises a rebuild in its own words; it is an error (read by
    the error forms), not nvinfer's rebuild under way."""
    assert round38d_form("ERROR: [TRT]: 3: Cannot deserialize serialized engine built with TensorRT version 8.5, "
                         "try rebuilding the engine with this version") is None


def test_missing_engine_error_is_quiet() -> None:
    """nvinfer's ERROR of the engine file not there yet is the cache miss before the rebuild: a warning."""
    assert read_quiet(DS_MISSING)
    assert not read_quiet("ERROR: Deserialize engine failed because file path: /models/model.engine is corrupted")


#: Inductor's header over the user frames of a graph it will not capture, and a stack under it (the corpus's
#: wan21-332-inductor-skipping-cudagraphs-cpu-device, torch/_inductor/cudagraph_utils.py's message)
INDUCTOR_STACK = [
    "/home/dell/miniconda3/envs/js-flux/lib/python3.10/site-packages/torch/_inductor/lowering.py:1612: UserWarning: Torchinductor does not support code generation for complex operators. Performance may be worse than eager.",
    "",
    "skipping cudagraphs due to skipping cudagraphs due to cpu device (arg1303_1). Found from : ",
    '   File "/home/dell/miniconda3/envs/js-flux/lib/python3.10/site-packages/diffusers/models/transformers/transformer_wan.py", line 420, in forward',
    "    rotary_emb = self.rope(hidden_states)",
    '  File "/home/dell/miniconda3/envs/js-flux/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1562, in _call_impl',
    "    return forward_call(*args, **kwargs)",
]


def test_frames_under_inductors_header_are_a_warning_stack() -> None:
    assert round38d_warning_stack(INDUCTOR_STACK)


@pytest.mark.parametrize("header", [
    "Traceback (most recent call last):",  # a traceback: its frames stay one
    "[rank0]: Traceback (most recent call last):",
    "W0907 12:16:49.651000 2105 torch/utils/_sympy/interp.py:176] [7/0_1] failed while executing pow_by_natural([VR[0, int_oo], VR[-1, -1]])",  # another line above the frames
    "The stack that found it: Found from : ",  # the words without Inductor's header
])
def test_frames_under_another_header_are_not(header: str) -> None:
    assert not round38d_warning_stack([header, *INDUCTOR_STACK[3:]])


def test_frames_among_another_processs_lines_are_still_the_warning_stack() -> None:
    """Two processes writing one unmarked stream put one's progress records among the other's frames: the header
    above them still owns the frames (bench_form_robustness's interleave of this excerpt with paddlespeech-675's
    records); a traceback's header nearer the end than Inductor's owns them instead."""
    progress = "[INFO 2021/06/19 16:01:40 model.py:61] Train: Rank: 0, epoch: 1, step: 5312, batch : 1561/1876, lr: 0.00000000"
    interleaved = [*INDUCTOR_STACK[:5], progress, progress, *INDUCTOR_STACK[5:]]
    assert round38d_warning_stack(interleaved)
    assert not round38d_warning_stack([*INDUCTOR_STACK[:5], "Traceback (most recent call last):", *INDUCTOR_STACK[5:]])
    assert not round38d_warning_stack([progress, *INDUCTOR_STACK[3:]])  # no header above at all


def test_a_log_ending_on_inductors_stack_is_healthy(tmp_path: Path) -> None:
    """A compiled run whose log ends on the frames of Inductor's skipped CUDA graphs went on: healthy, not a crash cut
    inside a traceback; the same frames under a traceback's header stay one."""
    log = tmp_path / "compile.log"
    log.write_text("\n".join(INDUCTOR_STACK) + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
    log.write_text("\n".join(["Traceback (most recent call last):", *INDUCTOR_STACK[3:]]) + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is not Label.HEALTHY


def test_a_log_ending_on_nvinfers_rebuild_is_compiling(tmp_path: Path) -> None:
    log = tmp_path / "deepstream.log"
    log.write_text("Using winsys: x11\n" + DS_MISSING + "\n" + DS_REBUILD + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.COMPILING


@pytest.mark.parametrize(("line", "parts"), [
    ("249/441 [===============>..............] - ETA: 17:56 - loss: 26.6288 - location_loss: 5.6755 - confidence_loss: 12.4886 - class_loss: 2.3435Killed",
     ["249/441 [===============>..............] - ETA: 17:56 - loss: 26.6288 - location_loss: 5.6755 - confidence_loss: 12.4886 - class_loss: 2.3435", "Killed"]),  # corpus (keras-yolov3-42-multiscale-training-killed)
    ("63/63 ━━━━━━━━━━━━━━━━━━━━ 1s 20ms/step - accuracy: 0.1634 - loss: 1.4387e-04Killed",
     ["63/63 ━━━━━━━━━━━━━━━━━━━━ 1s 20ms/step - accuracy: 0.1634 - loss: 1.4387e-04", "Killed"]),  # Keras 3's bar (TrackNetV4#3's layout)
])
def test_shell_report_glued_to_keras_bar_is_its_own_line(line: str, parts: list[str]) -> None:
    assert logical_lines(line) == parts


@pytest.mark.parametrize("line", [
    "Epoch 3: model checkpoint saved; process 12 Killed",  # prose: no Keras bar
    "249/441 [===============>..............] - ETA: 17:56 - status: NotKilled",  # a word ending in Killed after a letter
])
def test_other_killed_words_are_left_alone(line: str) -> None:
    assert logical_lines(line) == [line]


def test_a_keras_bar_then_killed_is_a_killed_process(tmp_path: Path) -> None:
    log = tmp_path / "keras.log"
    log.write_text("11/100 :\n" + "249/441 [===============>..............] - ETA: 17:56 - loss: 26.6288 - class_loss: 2.3435Killed\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is not Label.HEALTHY


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 63
