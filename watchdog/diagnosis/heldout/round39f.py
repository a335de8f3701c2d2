"""Failure forms read for the misses of round issue23-heldout-39 (part F: model compression runs -- quantization,
pruning, distillation, GGUF conversion): llama.cpp's quantizer reporting that it failed, a linear-algebra routine that
met a matrix it cannot factor (GPTQ's Hessian), a native extension module whose import failed named later in the
library's code, PyTorch's dispatcher finding no kernel of an operator for the tensors' backend, and an installed
package without a constant its caller names.

Pure: no I/O. :func:`round39f_form` is asked after the forms of round 38, :func:`round39f_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* llama.cpp's quantizer (src/llama-quant.cpp ``llama_model_quantize``: the whole quantization runs in a ``try``,
  and ``catch (const std::exception & err)`` logs ``"%s: failed to quantize: %s\\n", __func__, err.what()`` and
  returns 1; tools/quantize/quantize.cpp then prints ``"%s: failed to quantize model from '%s'\\n"`` and exits 1;
  ik_llama.cpp prints the same). Neither line has a level, so the run read as healthy (round issue23-heldout-39:
  meta-llama/llama3#130). The output file is an ``std::ofstream`` with ``exceptions(failbit)``: when it cannot be
  opened or written (a directory that does not exist, a path mistyped, no permission) ``what()`` is libstdc++'s
  ``basic_ios::clear: iostream error`` (``ios_base::clear: unspecified iostream_category error`` from libc++): a
  path the command names, which a restart meets again (configuration); so is an input the model loader refuses
  (``llama_model_loader: failed to load model from ...``). Any other ``what()`` (an assertion of the quantizer's own,
  "Bad layer 40 for tensor ...") states no cause.
* a linear-algebra routine's failure on its input matrix. ``torch.linalg`` raises ``torch.linalg.LinAlgError``,
  printed under its C name ``torch._C._LinAlgError`` (aten/src/ATen/native/BatchLinearAlgebra.cpp
  ``_linalg_check_errors``: "linalg.cholesky: The factorization could not be completed because the input is not
  positive-definite (the leading minor of order N is not positive-definite).", "linalg.inv: The diagonal element N
  is zero, the inversion could not be completed because the input matrix is singular.", "linalg.svd: The algorithm
  failed to converge because the input matrix is ill-conditioned or has too many repeated singular values");
  NumPy's and SciPy's ``numpy.linalg.LinAlgError`` says "Singular matrix", "Matrix is not positive definite", "SVD
  did not converge". The private class name (a leading underscore) is read by no exception reader, so GPTQ's
  Cholesky of a Hessian that lost positive-definiteness read as healthy (round issue23-heldout-39: Intel Neural
  Compressor's PR 1965, whose fix is a larger damping). A matrix the routine cannot factor is a numerical failure
  of the job's values (numerical_error); a shape LinAlgError ("Last 2 dimensions of the array must be square") is the
  program's mistake, an error with no cause. The routine's source line in a traceback (``H =
  torch.linalg.cholesky(H)``) and a handler that catches it (``except torch._C._LinAlgError:``) are no failure.
* a native extension module whose import failed, named later: libraries that ship compiled kernels import them
  in a ``try`` and go on without them (AutoAWQ's awq/modules/linear/gemm.py ``try: import awq_ext`` ... ``except``,
  GPTQ-for-LLaMa's ``quant_cuda``, AutoGPTQ's ``autogptq_cuda_64``/``autogptq_cuda_256``, exllama's
  ``exllama_ext``); the first call that needs the kernels then raises ``NameError: name 'awq_ext' is not defined``.
  The extension is missing or was built for another torch/CUDA: configuration (round issue23-heldout-39:
  QwenLM/Qwen3#221, read as a crash to restart; AutoAWQ_kernels built from source fixed it). The name reads as an
  extension by its suffix (``_ext``, ``_cuda`` with or without its block width, ``_kernels``); any other undefined
  name is left to the readers of exceptions.
* PyTorch's dispatcher when an operator has no kernel for the backend of its arguments
  (c10/core/dispatch/OperatorEntry.cpp ``reportError``: "Could not run '<ns>::<op>' with arguments from the
  '<Backend>' backend. This could be because the operator doesn't exist for this backend, or was omitted during
  the selective/custom build process ..."), raised as RuntimeError (NotImplementedError in newer releases): the
  tensors are on a device the operator does not support (quantized kernels on CUDA, a QAT model converted before
  it was moved to the CPU) or the build lacks the backend (torchvision's CPU-only wheel): configuration, which a
  restart meets again (round issue23-heldout-39: pytorch/pytorch#49331, the QAT tutorial's convert).
* an installed package without a constant its caller names: ``AttributeError: type object 'MODEL_ARCH' has no
  attribute 'ARCEE'`` (llama.cpp's convert_hf_to_gguf.py defining a model class against an older ``gguf``
  package's ``MODEL_ARCH`` enum). An UPPER_CASE attribute of a type object is an enum member or a class constant,
  which exists or not by the version installed: a script and a package of two versions, configuration
  (round issue23-heldout-39: ggml-org/llama.cpp#14315). A lower-case attribute (a method, a field set at run time)
  is left to the readers of exceptions.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round39f_form` reads hold, besides the needles failureforms already
#: searches: llama.cpp's quantizer's failure, LinAlgError, an undefined name, the dispatcher's missing kernel, a type
#: object's missing attribute
NEEDLES: tuple[str, ...] = (
    ": failed to quantize",
    "LinAlgError",
    "' is not defined",
    "with arguments from the '",
    "type object '",
)

#: llama.cpp's quantizer: "llama_model_quantize: failed to quantize: <what()>", "main: failed to quantize model from
#: '<path>'" (a function name, then the words, at the head of the line)
_QUANTIZE_FAILED = re.compile(r"^\s*\w+: failed to quantize(?:: (?P<what>.*)| model from ')")
#: what() of a stream whose failbit was set: the output file could not be opened or written (libstdc++, libc++)
_STREAM_FAILED = re.compile(r"\biostream error\b|\biostream_category error\b")
#: the model loader refusing the input file
_LOAD_FAILED = re.compile(r"\bllama_model_loader: failed to load model\b|\bunknown model architecture\b")

#: a LinAlgError at the head of a line (a rank's tag or a quote before it): torch's C name, torch.linalg's, NumPy's,
#: SciPy's, bare; then its message
_LINALG = re.compile(r"^(?:\[[^\]]{1,40}\]:?\s*|>\s*)*\s*(?:[\w.]+\.)?_?LinAlgError: (?P<msg>\S.*)")
#: the words of a matrix the routine cannot factor or whose iteration did not converge
_NOT_FACTORABLE = re.compile(
    r"(?i)\bnot positive[- ]definite\b|\bis singular\b|\bsingular matrix\b|\bsingular U\b|\bfailed to converge\b"
    r"|\bdid not converge\b|\bill-conditioned\b")

#: an undefined name that is a native extension module by its suffix; a file's extension held in a variable
#: (``file_ext``, ``img_ext``) is a script's own name, not a module
_EXTENSION_UNDEFINED = re.compile(
    r"\bNameError: name '(?!(?:file|img|image|audio|video|out|src|dst|data|text|path)_ext')"
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*?(?:_ext|_cuda(?:_?\d+)?|_kernels?))' is not defined\b")

#: PyTorch's dispatcher: no kernel of the operator for the arguments' backend, as the exception it raises
_NO_KERNEL = re.compile(r"\b(?:RuntimeError|NotImplementedError): Could not run '[\w.:]+' with arguments from the "
                        r"'\w+' backend\b")

#: an UPPER_CASE attribute missing from a type object (an enum member, a class constant)
_MISSING_CONSTANT = re.compile(
    r"\bAttributeError: type object '\w+' has no attribute '(?P<attr>[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)'(?:\s|$|[.`\"])")


def round39f_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ": failed to quantize" in text and (m := _QUANTIZE_FAILED.match(text)) is not None:
        what = m.group("what")
        if what is not None and (_STREAM_FAILED.search(what) or _LOAD_FAILED.search(what)):
            return Form(FormKind.ERROR, "llama.cpp's quantizer could not open its input or output file",
                        Label.CONFIG_ERROR)
        return Form(FormKind.ERROR, "llama.cpp's quantizer failed")
    if "LinAlgError" in text and (m := _LINALG.match(text)) is not None:
        if _NOT_FACTORABLE.search(m.group("msg")):
            return Form(FormKind.ERROR, "a matrix the linear-algebra routine could not factor", Label.NUMERICAL_ERROR)
        return Form(FormKind.ERROR, "a linear-algebra routine's error")
    if "' is not defined" in text and _EXTENSION_UNDEFINED.search(text):
        return Form(FormKind.ERROR, "a native extension whose import failed", Label.CONFIG_ERROR)
    if "with arguments from the '" in text and _NO_KERNEL.search(text):
        return Form(FormKind.ERROR, "an operator with no kernel for its arguments' backend", Label.CONFIG_ERROR)
    if "type object '" in text and _MISSING_CONSTANT.search(text):
        return Form(FormKind.ERROR, "a constant the installed package does not define", Label.CONFIG_ERROR)
    return None


def round39f_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round39f_form(text))
