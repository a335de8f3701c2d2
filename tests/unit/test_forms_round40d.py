# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part D of the misses of round issue23-heldout-40 (healthy runs that look frightening, and failures
that look benign), each as a rule of its family, with real lines and the near misses the rule must leave alone:
trtexec building a TensorRT engine and its engine built, icefall's NOTE on a run-down gradient scale, a JIT-built
CUDA backend that found no toolkit, a batch-size retry loop's out of memory. Each line is from the corpus (named by
its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round40d import round40d_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
RUNNING = FormKind.COMPILE_RUNNING
DONE = FormKind.COMPILE_DONE

TRTEXEC_BUILD = "&&&& RUNNING TensorRT.trtexec [TensorRT v8503] # trtexec --fp16 --onnx=4x_fatal_Anime_500000_G.onnx --minShapes=input:1x3x8x8 --optShapes=input:1x3x720x1280 --maxShapes=input:1x3x1080x1920 --saveEngine=fatalESRGAN4x.engine --tacticSources=+CUDNN,-CUBLAS,-CUBLAS_LT --buildOnly"
ICEFALL_NOTE = "        If you see this error, it means that the gradient scale is too small."
GSPLAT_NOTICE = "  0%|          | 0/30000 [00:00<?, ?it/s]gsplat: No CUDA toolkit found. gsplat will be disabled."

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # trtexec's harness banner of a build (a model to parse), and the engine built
    (TRTEXEC_BUILD, RUNNING, None, "corpus (vsgan-tensorrt-docker-31-trtexec-build-only-options-dump)"),
    ("&&&& RUNNING TensorRT.trtexec # ./trtexec --onnx=Resnet34_3inputs_448x448_20200609.onnx --saveEngine=Resnet34_3inputs_448x448_20200609.trt --workspace=6000",
     RUNNING, None, "a TensorRT 7.2 conversion log in a public blog post (the banner without the version)"),
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v100800] [b43] # /usr/src/tensorrt/bin/trtexec --onnx=weights/best.onnx --saveEngine=weights/best.plan --device=1 --fp16",
     RUNNING, None, "a public repository's converter log (TensorRT 10.8, its build tag after the version)"),
    ("[10/11/2023-09:52:10] [I] Engine built in 480.55 sec.", DONE, None,
     "TensorRT samples/common/sampleEngines.cpp (\"Engine built in \" << seconds << \" sec.\")"),
    ("&&&& PASSED TensorRT.trtexec [TensorRT v8401] # trtexec --onnx=robert-wma.onnx --saveEngine=bert_trans_fp16.trt --fp16",
     DONE, None, "TensorRT samples/common/logging.h (the harness's end of a run that passed)"),
    # icefall's NOTE under its grad_scale RuntimeError
    (ICEFALL_NOTE, ERROR, Label.NUMERICAL_ERROR, "corpus (icefall-2069-aishell-zipformer-grad-scale-too-small-note)"),
    # a JIT-built CUDA backend without a toolkit
    (GSPLAT_NOTICE, ERROR, Label.CONFIG_ERROR, "corpus (gsplat-249-no-cuda-toolkit-found-gsplat-disabled)"),
    ("gsplat: No CUDA toolkit found. gsplat will be disabled.", ERROR, Label.CONFIG_ERROR,
     "nerfstudio-project/gsplat#537 (gsplat in a docker container whose nvcc did not run)"),
    ("gsplat (legacy): No CUDA toolkit found. gsplat will be disabled.", ERROR, Label.CONFIG_ERROR,
     "gsplat's legacy backend (gsplat/cuda_legacy/_backend.py)"),
    ("nerfacc: No CUDA toolkit found. NerfAcc will be disabled.", ERROR, Label.CONFIG_ERROR,
     "nerfacc/cuda/_backend.py (the backend gsplat's was copied from)"),
    # a batch-size retry loop's out of memory
    ("OOM Detected, reducing batch/grad size to 12/1.", ERROR, Label.OOM,
     "corpus (sd-dreambooth-extension-852-oom-detected-reducing-batch-size)"),
    ("RuntimeError: No executable batch size found, reached zero.", ERROR, Label.OOM,
     "accelerate/utils/memory.py find_executable_batch_size; d8ahazard/sd_dreambooth_extension#1282"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "&&&& RUNNING TensorRT.trtexec [TensorRT v8502] # /usr/src/tensorrt/bin/trtexec --loadEngine=/models/LPR_net.engine --dumpProfile --verbose",  # loads a built engine
    "&&&& RUNNING TensorRT.trtexec [TensorRT v8503] # D:\\code\\TensorRT\\bin\\trtexec.exe --help",  # the help
    "root@6f2b8ede7bd1:/workspace/tensorrt# trtexec --fp16 --onnx=model.onnx --saveEngine=model.engine",  # the shell's command line
    "&&&& RUNNING TensorRT.sample_onnx_mnist [TensorRT v8503] # ./sample_onnx_mnist",  # a sample, not trtexec
    "2024-01-14 00:03:30,782 WARNING [train.py:1095] (0/4) Grad scale is small: 1e-05",  # icefall's warning it goes on from
    "        To fix this issue, you may need to adjust the value of base_lr accordingly.",  # the NOTE's advice
    "  - Error included: `gsplat: No CUDA toolkit found. gsplat will be disabled.`",  # prose quoting the notice
    "No CUDA toolkit found, skipping the CUDA extension build",  # a setup script's notice at install time
    "def find_executable_batch_size(function=None, starting_batch_size=128):",  # the source
    "the OOM detected reducing batch size message keeps appearing",  # prose
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 67


def test_round_reads_only_its_words() -> None:
    """Other programs' words are other readers' (or none)."""
    for line in ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity)",
                 "        grad_scale is too small, exiting: 5.960464477539063e-08",
                 "Building engine, please wait for a while...",
                 "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root."):
        assert round40d_form(line) is None, line


def test_trtexec_build_ending_in_its_options_is_compiling(tmp_path: Path) -> None:
    """A trtexec build whose log ends in its option dump is a compile still running, not a healthy run."""
    log = tmp_path / "trtexec.log"
    log.write_text(TRTEXEC_BUILD + "\n"
                   "[03/20/2023-21:23:17] [I] === Model Options ===\n"
                   "[03/20/2023-21:23:17] [I] Format: ONNX\n"
                   "[03/20/2023-21:23:17] [I] === Build Options ===\n"
                   "[03/20/2023-21:23:17] [I] Precision: FP32+FP16\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.COMPILING


def test_trtexec_build_that_finished_is_not_compiling(tmp_path: Path) -> None:
    """The engine built and its performance measured: the compile is over."""
    log = tmp_path / "built.log"
    log.write_text("&&&& RUNNING TensorRT.trtexec [TensorRT v8401] # trtexec --onnx=model.onnx --saveEngine=model.trt --fp16\n"
                   "[10/11/2023-09:45:10] [I] === Model Options ===\n"
                   "[10/11/2023-09:52:10] [I] Engine built in 420.5 sec.\n"
                   "[10/11/2023-09:52:12] [I] === Performance summary ===\n"
                   "[10/11/2023-09:52:12] [I] Throughput: 812.3 qps\n"
                   "&&&& PASSED TensorRT.trtexec [TensorRT v8401] # trtexec --onnx=model.onnx --saveEngine=model.trt --fp16\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY


def test_a_retry_the_run_goes_on_from_is_not_the_verdict(tmp_path: Path) -> None:
    """The retry loop's report followed by training steps: the smaller batch fitted, the run is healthy."""
    log = tmp_path / "retried.log"
    log.write_text("Steps:   0%|          | 0/1000 [00:00<?, ?it/s]\n"
                   "OOM Detected, reducing batch/grad size to 12/1.\n"
                   "Steps:   1%|          | 10/1000 [00:10<16:30,  1.00s/it, loss=0.123, lr=2e-06]\n"
                   "Steps:   2%|▏         | 20/1000 [00:20<16:20,  1.00s/it, loss=0.118, lr=2e-06]\n"
                   "Steps:   3%|▎         | 30/1000 [00:30<16:10,  1.00s/it, loss=0.115, lr=2e-06]\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY


def test_no_toolkit_then_a_traceback_is_configuration(tmp_path: Path) -> None:
    """gsplat's notice, then the trainer's traceback cut before its exception: configuration (stop), not a crash to
    restart."""
    log = tmp_path / "gsplat.log"
    log.write_text("Model initialized. Number of GS: 54275\n"
                   + GSPLAT_NOTICE + "\n"
                   "Traceback (most recent call last):\n"
                   "  File \"examples/simple_trainer.py\", line 983, in <module>\n"
                   "    main(cfg)\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
