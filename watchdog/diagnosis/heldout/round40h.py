"""Failure forms read for the misses of round issue23-heldout-40 (part H: exporting, converting and compiling trained
models): the model converters' own reports of a graph they could not convert (tf2onnx, Paddle2ONNX, Core ML Tools'
PyTorch frontend, OpenVINO's Model Optimizer and its newer frontends, torch.onnx's exporter), Torch-TensorRT's
compiler core refusing a graph, and zsh's report of a foreground command a signal ended.

Pure: no I/O. :func:`round40h_form` is asked after the forms of round 39, :func:`round40h_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error (an exception
line, an ERROR record).

A converter that cannot lower one of the graph's operations stops: the graph compiler failed (compile_error, a stop:
the same graph meets the same converter again). Each form is read where its program prints it:

* tf2onnx (tf2onnx/tfonnx.py) logs each TensorFlow op it has no handler for, then their count, at ERROR through
  Python's logging (``%(asctime)s - %(levelname)s - %(message)s``, or ``%(name)s:`` before the message):
  ``Tensorflow op [<node>: <op>] is not supported`` and ``Unsupported ops: Counter({'<op>': N})``; a handler that
  raised is ``Failed to convert node <name>`` (older: ``Failed to convert node '<name>' (fct=<handler>)``). Round
  issue23-heldout-40: onnx/tensorflow-onnx#1555 (a Mask R-CNN's DenseToDenseSetOperation, read as configuration)
  and #1926 (a Grad-CAM's SigmoidGrad, pasted with the level in markdown bold, ``**ERROR** -``, read as healthy).
* Paddle2ONNX (paddle2onnx/mapper/exporter.cc) lists the operators it has no mapper for and aborts:
  ``[Paddle2ONNX] Oops, there are some operators not supported yet, including <ops>,`` and ``[ERROR] Due to the
  unsupported operators, the conversion is aborted.`` (Paddle2ONNX#1415, a PaddleOCR graph with isnan_v2, read as a
  crash to restart).
* Core ML Tools' PyTorch frontend (coremltools/converters/mil/frontend/torch/converter.py ``convert_nodes``) logs
  the node it was converting when its op's converter raised, ``ERROR - converting '<kind>' op (located at:
  '<scope>'):``, and the converters raise in their own words: ``PyTorch convert function for op '<kind>' not
  implemented.`` (ops.py, an op it has no converter for), ``node <name> (<kind>) got N input(s), expected [M]``
  (ops.py ``_get_inputs``) and ``unexpected number of inputs for node <name> (<kind>)`` (``_convolution``: an op
  whose signature changed under a newer torch), ``Torch var <name> not found in context`` (the context of the graph
  it translates). Round issue23-heldout-40: apple/ml-stable-diffusion#345 (scaled_dot_product_attention's scale,
  read as a crash to restart) and apple/coremltools#982 (a graph traced with torch 1.7, read as configuration).
* OpenVINO's Model Optimizer (openvino/tools/mo/middle/passes/infer.py) stops its shape propagation at a node it
  cannot infer: ``[ ERROR ]  Cannot infer shapes or values for node "<node>".`` and ``Stopped shape/value
  propagation at "<node>" node.``; it lists operations it cannot convert under ``[ ERROR ]  List of operations that
  cannot be converted to Inference Engine IR:``, and the newer frontends (ovc, convert_model) raise ``FrontEnd API
  failed with OpConversionFailure`` (src/frontends/*/src/frontend.cpp). Round issue23-heldout-40:
  openvinotoolkit/openvino#11 (a tf.summary.image node in an exported ResNet, read as a crash to restart). The
  optimizer's advice lines ("Or because the node inputs have incorrect values/shapes.") are not the form.
* torch.onnx's exporter names the operator it cannot export: ``Exporting the operator '<op>' to ONNX opset version N
  is not supported`` (torch/onnx/errors.py ``UnsupportedOperatorError``), ``Unsupported: ONNX export of <op>``
  (torch/onnx/symbolic_helper.py, raised as ``SymbolicValueError``), ``ONNX export failed: Couldn't export operator
  <op>`` and ``ONNX export failed on an operator with unrecognized namespace`` (older torch/onnx/utils.py); PyTorch
  issues quote them (pytorch#97262, Peterande/D-FINE#260, Tessellate-Imaging/Monk_Object_Detection#88).
* Torch-TensorRT (TRTorch before it) throws from its compiler core with the file and line in the message
  (core/util/Exception.h, ``TORCHTRT_THROW_ERROR``/``TORCHTRT_CHECK``): ``[Error thrown at core/conversion/
  conversionctx/ConversionCtx.cpp:149] Building TensorRT engine failed``, ``[Error thrown at core/util/
  trt_util.cpp:283] Expected type to be true but got false`` (pytorch/TensorRT#954, a lowering bug fixed in PR 958,
  read as configuration). Only its compile stages are read (lowering, partitioning, conversion, ir, util, the
  compiler): an error thrown at core/runtime is the compiled engine failing as it runs, not the compile.
* zsh reports a foreground command a signal ended with ``zsh: `` and the signal's description (Src/jobs.c, the
  descriptions of Src/signames.c: ``killed``, ``terminated``, ``abort``, ``segmentation fault``, ``bus error``,
  ``illegal hardware instruction``, ``floating point exception``), then the command: ``zsh: killed     python
  export.py`` (huggingface/swift-transformers#120, a Core ML export that ran out of memory on a 16 GB Mac, read as
  healthy). The command ended; what killed it the line does not say (a crash of no stated cause). Its job-control
  status (``[1]    4242 killed  python x.py``) is round 25 part A's.
* TVM's AutoTVM tunes each kernel by measuring candidate configurations; its tuner logs each trial at DEBUG
  (tvm/autotvm/tuner/tuner.py ``Tuner.tune``: ``"No: %d\\tGFLOPS: %.2f/%.2f\\tresult: %s\\t%s"``, the result a
  ``MeasureResult`` whose costs hold the error of a trial that failed to build or run) and its progress bar one line
  per task (autotvm/tuner/callback.py ``progress_bar``: ``[Task  1/12]  Current/Best:   22.37/  52.19 GFLOPS |
  Progress: (20/20) | 13.23 s``). A trial that failed (``InstantiationError('Skipped because of invalid gpu
  kernel')``, its traceback quoted inside the repr) is the search rejecting a configuration, which the tuner
  expects and goes on from; after many it warns ``Too many errors happen in the tuning. Now is in debug mode``
  (apache/tvm#3058, ROCm tuning read as a Python traceback to restart). The records are a compile at work: the
  tuning is the model's compile (a compile running, closed as any compile's by progress or an error after it).
  The traceback header inside the repr (``InstantiationError('Traceback (most recent call last):\\n ...``) is a
  captured error's text, not a process raising: the python.traceback signature no longer reads a header right after
  an opening ``('`` or ``("`` (an exception constructed with a traceback's text).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round40h_form` reads hold, besides the needles failureforms already
#: searches: tf2onnx's, Paddle2ONNX's, Core ML Tools', the Model Optimizer's and torch.onnx's refusals, Torch-TensorRT's
#: compiler errors, zsh's status of a signalled command
NEEDLES: tuple[str, ...] = (
    "Tensorflow op [", "Unsupported ops: Counter(", "Failed to convert node ",
    "operators not supported yet, including", "Due to the unsupported operators",
    "ERROR - converting '", "convert function for op '", " input(s), expected ", "unexpected number of inputs for node",
    " not found in context",
    "Cannot infer shapes or values for node", "Stopped shape/value propagation at",
    "cannot be converted to Inference Engine IR", "FrontEnd API failed with OpConversionFailure",
    " to ONNX opset version ", "Unsupported: ONNX export of", "ONNX export failed",
    "[Error thrown at core/",
    "zsh: ",
    "autotvm:No: ", "Current/Best: ",
)

#: tf2onnx's records of ops it has no handler for, their count, a handler that raised
_TF2ONNX = re.compile(r"\bTensorflow op \[[^\]\n]*: \w+\] is not supported\b"
                      r"|\bUnsupported ops: Counter\(\{"
                      r"|(?:ERROR\**\s*-\s*(?:tf2onnx\.\w+:\s*)?|tf2onnx\.tfonnx:\s*)Failed to convert node ['\"]?\S")

#: Paddle2ONNX's list of operators without a mapper and its abort
_PADDLE2ONNX = re.compile(r"\bOops, there are some operators not supported yet, including\b"
                          r"|\bDue to the unsupported operators, the conversion is aborted\b")

#: Core ML Tools' PyTorch frontend: the node it was converting, an op without a converter, an op's inputs it does not
#: expect, a var missing from its context
_COREML_TORCH = re.compile(r"(?:^|[\s>*])ERROR - converting '[\w:.]+' op \(located at: '"
                           r"|\bPyTorch convert function for op '[\w:.]+' not implemented\b"
                           r"|\bnode \S+ \([\w:.]+\) got \d+ input\(s\), expected \[?\d"
                           r"|\bunexpected number of inputs for node \S+ \(\w"
                           r"|\bTorch var \S+ not found in context\b")

#: OpenVINO's Model Optimizer: a node whose shapes it cannot infer, its propagation stopped, its list of operations it
#: cannot convert; the newer frontends' conversion failure
_OPENVINO = re.compile(r"\bCannot infer shapes or values for node \"[^\"\n]+\"\."
                       r"|\bStopped shape/value propagation at \"[^\"\n]+\" node\b"
                       r"|\bList of operations that cannot be converted to Inference Engine IR\b"
                       r"|\bFrontEnd API failed with OpConversionFailure\b")

#: torch.onnx's exporter on an operator it cannot export
_TORCH_ONNX = re.compile(r"\bExporting the operator '?[\w:.]+'? to ONNX opset version \d+ is not supported\b"
                         r"|\bUnsupported: ONNX export of \w"
                         r"|\bONNX export failed: Couldn't export (?:Python )?operator \S"
                         r"|\bONNX export failed on an operator with unrecognized namespace\b")

#: Torch-TensorRT's compiler core (its compile stages, not core/runtime) throwing with its file and line
_TORCH_TRT = re.compile(r"\[Error thrown at core/(?:lowering|partitioning|conversion|ir|util|compiler)[\w./-]*"
                        r"\.(?:cpp|h):\d+\]")

#: zsh's status of a foreground command a signal ended: "zsh: ", the signal's description, spaces, the command
_ZSH_SIGNALLED = re.compile(r"^[\s>*`]*zsh: (?:killed|terminated|abort|segmentation fault|bus error|illegal hardware "
                            r"instruction|floating point exception)(?: \(core dumped\))?\s+\S")


#: AutoTVM's record of a trial it measured (its logger's DEBUG record) and its progress bar's task line
_AUTOTVM_TRIAL = re.compile(r"\bautotvm:No: \d+\s+GFLOPS: [\d.]+/[\d.]+\s+result: MeasureResult\("
                            r"|\[Task\s+\d+/\s*\d+\]\s+Current/Best:\s+[\d.]+/\s*[\d.]+ GFLOPS \| Progress: \(")


def round40h_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("autotvm:No: " in text or "Current/Best: " in text) and _AUTOTVM_TRIAL.search(text):
        return Form(FormKind.COMPILE_RUNNING, "AutoTVM tuning kernels (a trial it measured; a failed trial is the "
                    "search rejecting a configuration)")
    if ("Tensorflow op [" in text or "Unsupported ops" in text or "Failed to convert node" in text) \
            and _TF2ONNX.search(text):
        return Form(FormKind.ERROR, "tf2onnx could not convert the graph's ops to ONNX (an op it has no handler "
                    "for, or one whose handler failed)", Label.COMPILE_ERROR)
    if ("not supported yet, including" in text or "Due to the unsupported operators" in text) \
            and _PADDLE2ONNX.search(text):
        return Form(FormKind.ERROR, "Paddle2ONNX has no mapper for operators of the graph and aborted the "
                    "conversion", Label.COMPILE_ERROR)
    if ("ERROR - converting '" in text or "convert function for op" in text or " input(s), expected" in text
            or "unexpected number of inputs" in text or "not found in context" in text) and _COREML_TORCH.search(text):
        return Form(FormKind.ERROR, "Core ML Tools' PyTorch converter could not convert an op of the graph",
                    Label.COMPILE_ERROR)
    if ("Cannot infer shapes" in text or "Stopped shape/value" in text or "cannot be converted to Inference" in text
            or "OpConversionFailure" in text) and _OPENVINO.search(text):
        return Form(FormKind.ERROR, "OpenVINO's model conversion could not convert a node of the graph",
                    Label.COMPILE_ERROR)
    if ("ONNX opset version" in text or "ONNX export" in text) and _TORCH_ONNX.search(text):
        return Form(FormKind.ERROR, "torch.onnx could not export an operator of the graph", Label.COMPILE_ERROR)
    if "[Error thrown at core/" in text and _TORCH_TRT.search(text):
        return Form(FormKind.ERROR, "Torch-TensorRT's compiler refused the graph (an error thrown in its lowering, "
                    "partitioning or conversion)", Label.COMPILE_ERROR)
    if "zsh: " in text and _ZSH_SIGNALLED.search(text):
        return Form(FormKind.CRASH, "a command a signal ended (zsh's status of a foreground job)")
    return None


def round40h_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round40h_form(text))
