# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part H of the misses of round issue23-heldout-40 (exporting, converting and compiling trained
models), each as a rule of its family, with real lines and the near misses the rule must leave alone: tf2onnx's,
Paddle2ONNX's, Core ML Tools', OpenVINO's and torch.onnx's refusals of a graph they could not convert, Torch-TensorRT's
compiler core, zsh's status of a command a signal ended, AutoTVM's trial records. Each line is from the corpus (named
by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round40h import round40h_form
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH
COMPILE = FormKind.COMPILE_RUNNING

AUTOTVM_TRIAL = "DEBUG:autotvm:No: 1000  GFLOPS: 0.00/0.00       result: MeasureResult(costs=(InstantiationError('Traceback (most recent call last):\\n  [bt] (1) /opt/tvm/build/libtvm.so(TVMFuncCall+0x65) [0x7fc0db08f915]\\n  [bt] (0) /opt/tvm/build/libtvm"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # tf2onnx's ops without a handler, their count, a handler that raised
    ("ERROR - Tensorflow op [mrcnn_detection/DenseToDenseSetOperation: DenseToDenseSetOperation] is not supported",
     ERROR, Label.COMPILE_ERROR, "corpus (tf2onnx-1555-maskrcnn-densetodensesetoperation-unsupported)"),
    ("ERROR - Unsupported ops: Counter({'DenseToDenseSetOperation': 2})", ERROR, Label.COMPILE_ERROR,
     "corpus (tf2onnx-1555-maskrcnn-densetodensesetoperation-unsupported)"),
    ("**ERROR** - Unsupported ops: Counter({'SigmoidGrad': 2, 'StridedSliceGrad': 1})", ERROR, Label.COMPILE_ERROR,
     "corpus (tf2onnx-1926-gradcam-sigmoidgrad-stridedslicegrad-unsupported)"),
    ("ERROR - Tensorflow op [StatefulPartitionedCall/attend_copy_parse_model/SparseReduceSum: SparseReduceSum] is not supported",
     ERROR, Label.COMPILE_ERROR, "onnx/tensorflow-onnx#1870"),
    ("2020-11-17 18:14:22,032 - ERROR - tf2onnx.tfonnx: Tensorflow op [StatefulPartitionedCall/Postprocessor/BatchMultiClassNonMaxSuppression/MultiClassNonMaxSuppression/ClipToWindow/Where: Where] is not supported",
     ERROR, Label.COMPILE_ERROR, "onnx/tensorflow-onnx#1186"),
    ("2019-10-22 19:16:12,473 - ERROR - tf2onnx.tfonnx: Failed to convert node roi_align_classifier/TopKV2",
     ERROR, Label.COMPILE_ERROR, "onnx/tensorflow-onnx#715"),
    ("2020-11-17 18:14:23,191 - ERROR - tf2onnx.tfonnx: Failed to convert node 'StatefulPartitionedCall/Postprocessor/BatchMultiClassNonMaxSuppression/MultiClassNonMaxSuppression/SortByField_1/TopKV2' (fct=<bound method TopKV2.version_1 of <class 'tf2onnx.onnx_opset.tensor.TopKV2'>>)",
     ERROR, Label.COMPILE_ERROR, "onnx/tensorflow-onnx#1186"),
    # Paddle2ONNX's operators without a mapper, its abort
    ("[Paddle2ONNX] Oops, there are some operators not supported yet, including isnan_v2,", ERROR,
     Label.COMPILE_ERROR, "corpus (paddle2onnx-1415-ppocr-isnan-v2-unsupported-aborted)"),
    ("[ERROR] Due to the unsupported operators, the conversion is aborted.", ERROR, Label.COMPILE_ERROR,
     "corpus (paddle2onnx-1415-ppocr-isnan-v2-unsupported-aborted)"),
    ("[Paddle2ONNX] Oops, there are some operators not supported yet, including ", ERROR, Label.COMPILE_ERROR,
     "PaddlePaddle/Paddle2ONNX#1299 (the list of ops needing a higher opset after it)"),
    # Core ML Tools' PyTorch frontend
    ("ERROR - converting 'scaled_dot_product_attention' op (located at: 'text_encoder/text_model/encoder/0/self_attn'):",
     ERROR, Label.COMPILE_ERROR, "corpus (ml-stable-diffusion-345-coreml-sdpa-scale-not-handled)"),
    ("ValueError: unexpected number of inputs for node 11 (_c", ERROR, Label.COMPILE_ERROR,
     "corpus (coremltools-982-torch17-convolution-unexpected-inputs)"),
    ("CoreML export failure: unexpected number of inputs for node x.2 (_convolution): 13", ERROR,
     Label.COMPILE_ERROR, "ultralytics/yolov5#1649"),
    ("ValueError: node hidden_states.7 (scaled_dot_product_attention) got 6 input(s), expected [7]", ERROR,
     Label.COMPILE_ERROR, "apple/ml-stable-diffusion#204"),
    ("ValueError: node 110 (ones) got 5 input(s), expected 6", ERROR, Label.COMPILE_ERROR,
     "apple/coremltools#847 (coremltools 4.0b2's words, without the list)"),
    ("ValueError: Torch var stride_width.1 not found in context", ERROR, Label.COMPILE_ERROR, "apple/coremltools#1788"),
    ("RuntimeError: PyTorch convert function for op 'scaled_dot_product_attention' not implemented.", ERROR,
     Label.COMPILE_ERROR, "apple/coremltools#1823"),
    # OpenVINO's Model Optimizer and frontends
    ('[ ERROR ]  Cannot infer shapes or values for node "images".', ERROR, Label.COMPILE_ERROR,
     "corpus (openvino-11-mo-tf-resnet-cannot-infer-shapes-summary-image-node)"),
    ('[ ERROR ]  Stopped shape/value propagation at "images" node.', ERROR, Label.COMPILE_ERROR,
     "corpus (openvino-11-mo-tf-resnet-cannot-infer-shapes-summary-image-node)"),
    ('[ ERROR ]  Cannot infer shapes or values for node "activation/IdentityN".', ERROR, Label.COMPILE_ERROR,
     "openvinotoolkit/openvino#499"),
    ('[ ERROR ]  Cannot infer shapes or values for node "output/map/while/SparseToDense".', ERROR,
     Label.COMPILE_ERROR, "openvinotoolkit/openvino#153"),
    ("FrontEnd API failed with OpConversionFailure:", ERROR, Label.COMPILE_ERROR,
     "openvino src/frontends/pytorch/src/frontend.cpp (the newer frontends' failed conversion)"),
    # torch.onnx's exporter
    ("torch.onnx.errors.SymbolicValueError: Unsupported: ONNX export of operator get_pool_ceil_padding, input size not accessible.",
     ERROR, Label.COMPILE_ERROR, "Peterande/D-FINE#260"),
    ("UnsupportedOperatorError: Exporting the operator 'aten::scaled_dot_product_attention' to ONNX opset version 14 is not supported.",
     ERROR, Label.COMPILE_ERROR, "pytorch/pytorch#97262"),
    ("ONNX export failed: Couldn't export operator torchvision::nms", ERROR, Label.COMPILE_ERROR,
     "Tessellate-Imaging/Monk_Object_Detection#88"),
    # Torch-TensorRT's compiler core
    ("RuntimeError: [Error thrown at core/util/trt_util.cpp:283] Expected type to be true but got false", ERROR,
     Label.COMPILE_ERROR, "corpus (torch-tensorrt-954-lowering-aten-to-unsupported-aten-byte)"),
    ("RuntimeError: [Error thrown at core/conversion/conversionctx/ConversionCtx.cpp:149] Building TensorRT engine failed",
     ERROR, Label.COMPILE_ERROR, "pytorch/TensorRT#536"),
    ("RuntimeError: [Error thrown at core/partitioning/shape_analysis.cpp:68] Expected ivalues_maps.count(input) to be true but got false",
     ERROR, Label.COMPILE_ERROR, "pytorch/TensorRT#1768"),
    # zsh's status of a foreground command a signal ended
    ("zsh: killed     python export.py", CRASH, None, "corpus (swift-transformers-120-mistral7b-coreml-export-zsh-killed)"),
    # AutoTVM's trial records
    (AUTOTVM_TRIAL, COMPILE, None, "corpus (tvm-3058-rocm-autotvm-too-many-errors-debug-mode)"),
    ("[Task  1/12]  Current/Best:   22.37/  52.19 GFLOPS | Progress: (20/20) | 13.23 s Done.", COMPILE, None,
     "apache/tvm autotvm/tuner/callback.py progress_bar (the tune_relay tutorials' output)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "2022-08-04 16:42:40,857 - WARNING - '--tag' not specified for saved_model. Using --tag serve",  # tf2onnx's notice
    "[Paddle2ONNX] Due to the operator: hard_swish, requires opset_version >= 14.",  # an opset raised, not an abort
    "[Paddle2ONNX] Use opset_version = 14 for ONNX export.",
    "WARNING:coremltools:Saving value type of int64 into a builtin type of int32, might lose precision!",
    "Getting a `zsh: killed     python3 -m exporters.coreml ...` error due to running out of memory (see issue for more details).",  # prose (huggingface/exporters#83)
    "WARNING:autotvm:Too many errors happen in the tuning. Now is in debug mode",  # the tuner goes on
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 67


def test_round_reads_only_its_words() -> None:
    """Other programs' words, and the stages these forms leave alone, are other readers' (or none)."""
    for line in ("RuntimeError: [Error thrown at core/runtime/execute_engine.cpp:136] Expected compiled_engine->exec_ctx->enqueueV2(gpu_handles.data(), c10::cuda::getCurrentCUDAStream(), nullptr) to be true but got false",
                 "[1]    2964311 abort (core dumped)  python test.py",  # zsh's job-control status: round 25 part A's
                 "NotImplementedError: Unsupported Ops of type: BatchMatMul",
                 "Exporting the operator in opset 17 is supported now",
                 "zsh: command not found: mo",
                 # the optimizer's advice under its error (an error record, not this form), prose quoting a record
                 "[ ERROR ]  Or because the node inputs have incorrect values/shapes.",
                 "[ ERROR ]  Run Model Optimizer with --log_level=DEBUG for more information.",
                 "is the ERROR - converting op message from coremltools or from my script?"):
        assert round40h_form(line) is None, line


def test_a_quoted_traceback_header_is_not_a_raised_exception() -> None:
    """python.traceback reads a traceback's header, not the text of one an exception object was built with."""
    kb = default_knowledge_base()
    raised = kb.classify("Traceback (most recent call last):")
    assert raised is not None and raised.signature.id == "python.traceback"
    quoted = kb.classify(AUTOTVM_TRIAL)
    assert quoted is None or quoted.signature.id != "python.traceback"


def test_autotvm_tuning_with_failed_trials_is_a_compile_running(tmp_path: Path) -> None:
    """AutoTVM's records of trials that failed, and its warning of many, are a tuning at work: wait, not restart."""
    log = tmp_path / "tune.log"
    log.write_text(AUTOTVM_TRIAL + "\nToo many errors happen in the tuning. Now is in debug mode\n"
                   "WARNING:autotvm:Too many errors happen in the tuning. Now is in debug mode\n")
    verdict = diagnose_paths([str(log)], now=0.0).verdict
    assert verdict.label is Label.COMPILING


def test_tf2onnx_errors_in_markdown_bold_stop_the_run(tmp_path: Path) -> None:
    """tf2onnx's unsupported ops pasted with the level in markdown bold end the conversion: a compile error."""
    log = tmp_path / "convert.log"
    log.write_text("**ERROR** - Unsupported ops: Counter({'SigmoidGrad': 2, 'StridedSliceGrad': 1})\n"
                   "**ERROR** - Tensorflow op [x/SigmoidGrad: SigmoidGrad] is not supported\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.COMPILE_ERROR


def test_zsh_killed_command_is_not_a_healthy_run(tmp_path: Path) -> None:
    """A conversion's progress bars, then zsh's status of the command killed: the job ended (restart), not healthy."""
    log = tmp_path / "export.log"
    log.write_text("Running MIL default pipeline: 100%|██████████| 79/79 [11:06<00:00,  8.44s/ passes]\n"
                   "zsh: killed     python export.py\n")
    verdict = diagnose_paths([str(log)], now=0.0).verdict
    assert verdict.label is not Label.HEALTHY
