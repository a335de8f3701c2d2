# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part H of the misses of round issue23-heldout-39 (training on frameworks other than the PyTorch-first
stacks), each as a rule of its family, with real lines and the near misses the rule must leave alone: PaddlePaddle's
allocator report of a device out of memory, DyNet's memory pools and allocator out of memory, MXNet's shape inference
refusing its inputs, Caffe's proto reader's file not found and Darknet's file_error. Each line is from the corpus
(named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round39h import round39h_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH

PADDLE_OOM = "Out of memory error on GPU 0. Cannot allocate 18.062744MB memory on GPU 0, available memory is only 17.537501MB."
DARKNET_FILE_ERROR = "> Couldn't open file: /home//darknet/backup//yolo-obj_last.weights"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Paddle's allocator report
    (PADDLE_OOM, ERROR, Label.OOM, "corpus (paddledetection-3100-yolov3-roadsign-gpu-out-of-memory)"),
    ("报错信息：Out of memory error on GPU 0. Cannot allocate 1.531250GB memory on GPU 0, available memory is only ",
     ERROR, Label.OOM, "corpus (paddle-26892-aistudio-paper-repro-gpu-out-of-memory)"),
    ("Out of memory error on GPU 0. Cannot allocate 48.473877MB memory on GPU 0, 7.900513GB memory has been allocated and available memory is only 29.437500MB.",
     ERROR, Label.OOM, "PaddleDetection#3679 (roi_align's BadAlloc, Paddle 2.1's cuda_allocator.cc)"),
    ("Out of memory error on GPU 0. Cannot allocate 80.000000MB memory on GPU 0, 10.647278GB memory has been allocated and available memory is only 108.750000MB.",
     ERROR, Label.OOM, "PaddleVideo#502"),
    # DyNet's pools and allocator
    ("dynet is out of memory, try increasing with --dynet-mem (current capacity: 178257920)", ERROR, Label.OOM,
     "corpus (dynet-292-language-model-out-of-memory-dynet-mem)"),
    ("dynet is out of memory, try increasing with --dynet-mem (current capacity: 1746927616)", ERROR, Label.OOM,
     "dynet#132 (an LSTM NMT under --dynet_mem 5000)"),
    ("RuntimeError: FXS is out of memory, try increasing with --dynet-mem (current capacity: 536870912). See http://dynet.readthedocs.io/en/latest/commandline.html for details.",
     ERROR, Label.OOM, "DyNet 2 dynet/aligned-mem-pool.cc (the forward pool's name, thrown as std::runtime_error)"),
    ("cnn is out of memory, try increasing with --cnn-mem", ERROR, Label.OOM,
     "cnn (DyNet's predecessor) aligned-mem-pool.h"),
    ("**CPU memory allocation failed n=2097152000 align=32**", ERROR, Label.OOM,
     "corpus (dynet-983-cpu-memory-allocation-failed-trainer-update)"),
    ("**RuntimeError: CPU memory allocation failed**", ERROR, Label.OOM,
     "corpus (dynet-983-cpu-memory-allocation-failed-trainer-update)"),
    ("Memory allocation failed n=1073741824 align=32", ERROR, Label.OOM,
     "cnn/mem.cc cnn_mm_malloc (std::cerr << \"Memory allocation failed n=\" << n << \" align=\" << align)"),
    # MXNet's shape inference
    ("MXNetError: InferShape Error in softmax's label argument", ERROR, Label.CONFIG_ERROR,
     "corpus (mxnet-794-softmax-label-shape-inconsistent)"),
    ("Shape inconsistent, Provided =(100, 1), inferred shape=(100)", ERROR, Label.CONFIG_ERROR,
     "corpus (mxnet-794-softmax-label-shape-inconsistent)"),
    ("mxnet.base.MXNetError: Shape inconsistent, Provided = [4096,25088], inferred shape=(4096,2048)", ERROR,
     Label.CONFIG_ERROR, "apache/mxnet#15077 (a VGG11 of CIFAR-10 inputs against ImageNet weights)"),
    ("[20:55:24] /home/dsu/mxnet/dmlc-core/include/dmlc/logging.h:235: [20:55:24] src/symbol/symbol.cc:155: Symbol.InferShapeKeyword argument name bbox_target not found.",
     ERROR, Label.CONFIG_ERROR, "corpus (mx-rcnn-50-infershape-bbox-target-not-found)"),
    ("mxnet.base.MXNetError: [11:55:39] src/c_api/c_api_symbolic.cc:508: InferShapeKeyword argument name xyz not found.\"",
     ERROR, Label.CONFIG_ERROR, "corpus (mxnet-neuron-guide-infershape-keyword-argument-not-found)"),
    # Caffe's proto readers: a glog check failure (a crash) whose message states the file not found
    ("Check failed: fd != -1 (-1 vs. -1) File not found: numbers_iter.solverstate", CRASH, Label.CONFIG_ERROR,
     "corpus (caffe-speech-recognition-7-snapshot-solverstate-not-found)"),
    ("F0427 12:48:27.036200 24162 io.cpp:36] Check failed: fd != -1 (-1 vs. -1) File not found: ./reference_models/solver.prototxt",
     CRASH, Label.CONFIG_ERROR, "corpus (deepnetsforeo-23-caffe-solver-prototxt-not-found)"),
    # Darknet's file_error
    (DARKNET_FILE_ERROR, ERROR, Label.CONFIG_ERROR, "corpus (darknet-2449-backup-dir-missing-couldnt-open-weights)"),
    ("Couldn't open file: data/obj.names", ERROR, Label.CONFIG_ERROR,
     "AlexeyAB/darknet src/utils.c file_error (a names file that is not there)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "Please check whether there is any other process using GPU 0.",  # the OOM report's advice
    "2. If no, please decrease the batch size of your model.",
    "I got Out of memory error on GPU 0 although nvidia-smi shows the card is free",  # prose: no allocation in it
    "WARNING: memory allocation failed, retrying with a smaller buffer",  # a warning of no size, no exception
    "    fprintf(stderr, \"Couldn't open file: %s\\n\", s);",  # the source line
    "it says \"Couldn't open file: yolo.cfg\" so the path must be wrong",  # prose quoting the words
    "why does the shape inconsistent error happen with InferShape?",  # prose
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 64


def test_round_reads_only_its_words() -> None:
    """Other allocators' and programs' words are other readers' (or none)."""
    for line in ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity)",
                 "ResourceExhaustedError: Fail to alloc memory of 564023296 size, error code is 12.",
                 "Check failed: proto.SerializeToOstream(&output) "):
        assert round39h_form(line) is None, line


def test_paddle_report_without_severity_is_oom(tmp_path: Path) -> None:
    """Paddle's report pasted alone (no ResourceExhaustedError, no severity) ends the log: out of memory, not a
    healthy run."""
    log = tmp_path / "paddle.log"
    log.write_text(PADDLE_OOM + "\n\nPlease check whether there is any other process using GPU 0.\n"
                   "1. If yes, please stop them, or start PaddlePaddle on another GPU.\n"
                   "2. If no, please decrease the batch size of your model.\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OOM


def test_darknet_exit_on_a_missing_file_is_configuration(tmp_path: Path) -> None:
    """Darknet's file_error after its saving record ends the run: configuration (stop), not a healthy run."""
    log = tmp_path / "darknet.log"
    log.write_text(" 100: 443.011078, 808.351807 avg loss, 0.000000 rate, 20.684246 seconds, 6400 images\n"
                   " Saving weights to /home/rtc/darknet/backup//yolo-obj_last.weights\n"
                   "Couldn't open file: /home/rtc/darknet/backup//yolo-obj_last.weights\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_a_file_error_the_run_outlives_is_not_the_verdict(tmp_path: Path) -> None:
    """The same words printed by a program that goes on (a warning) do not end a run that keeps training."""
    log = tmp_path / "goes_on.log"
    log.write_text("2024-01-01 10:00:00 INFO step 1 loss 0.5\n"
                   "Couldn't open file: data/labels/32_0.png\n"
                   "2024-01-01 10:00:05 INFO step 2 loss 0.4\n"
                   "2024-01-01 10:00:10 INFO step 3 loss 0.3\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
