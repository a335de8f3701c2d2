"""Failure forms read for the misses of round issue23-heldout-37 (part B: single-node inference servers and local
runtimes): the reports of a dynamic loader wrapper that could not load a shared library the program needs (cuDNN 9's
sub-library loader, cuDNN 8's and CTranslate2's), and CPython's import failure quoted inside another exception's
message.

Pure: no I/O. :func:`round37b_form` is asked after the forms of round 36, :func:`round37b_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* cuDNN 9 ships ``libcudnn.so.9`` as a shim that opens its sub-libraries (``libcudnn_ops``, ``libcudnn_cnn``,
  ``libcudnn_adv``...) when a call first needs them. When none of the names it tries opens, it prints ``Unable to
  load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}`` (on Windows the
  ``.dll`` names), then ``Invalid handle. Cannot load symbol cudnnCreateTensorDescriptor`` for the call it could not
  forward, and the caller aborts or raises. Every program built on cuDNN 9 prints it (CTranslate2 4.5 under
  faster-whisper and whisperX, onnxruntime, PaddlePaddle): the cuDNN the process finds is not the one it was built
  for, or is not on the library path (round issue23-heldout-37: faster-whisper#1182 and #1081,
  whisper-ctranslate2#115, linuxserver/docker-faster-whisper#42, read as healthy or as crashes to restart; the fix
  is always the library path or the matching cuDNN/ctranslate2 versions).
* cuDNN 8 on Windows reports a sub-library it cannot find as ``Could not locate cudnn_ops_infer64_8.dll. Please make
  sure it is in your library path!`` and CTranslate2's loader of the CUDA libraries as ``Library cublas64_12.dll is
  not found or cannot be loaded`` (raised as a RuntimeError): the same mistake in the set-up (the forms are quoted in
  the troubleshooting notes of whisperX, faster-whisper front ends and many projects that bundle them).
* CPython's ``No module named 'x'`` (Python/import.c) is the message of ModuleNotFoundError, which the signature
  table reads by its class. A library that catches the import and raises its own exception keeps the message:
  BentoML's ``bentoml.exceptions.MissingDependencyException: None (reason: No module named 'tensorflow')``
  (OpenLLM#104, read as a crash to restart), Ray's ``ray.exceptions.RaySystemError: System error: No module named
  'transformers_modules'`` when a worker cannot unpickle what it was sent. A package missing from the environment:
  a restart meets it again. Read only on a line that is already an error and whose exception is an error's class
  (a warning's "Failed to initialize NumPy: No module named 'numpy'" and xformers' "Error caught was: No module
  named 'triton'" go on).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round37b_form` and :func:`round37b_cause` read hold: cuDNN 9's loader,
#: its failed symbol, cuDNN 8's and CTranslate2's loaders, CPython's import message
NEEDLES: tuple[str, ...] = ("Unable to load any of {", "Cannot load symbol ",
                            "Please make sure it is in your library path", "is not found or cannot be loaded",
                            "No module named '")

#: cuDNN 9's sub-library loader: the names it tried, shared objects or DLLs
_NONE_LOADED = re.compile(r"\bUnable to load any of \{[^}]*?\b\w+\.(?:so|dll|dylib)\b")
#: its report of the call it could not forward
_SYMBOL_NOT_LOADED = re.compile(r"\bInvalid handle\. Cannot load symbol \w+")
#: cuDNN 8's sub-library not found on Windows
_DLL_NOT_LOCATED = re.compile(r"\bCould not locate \S+\.dll\. Please make sure it is in your library path")
#: CTranslate2's loader of the CUDA libraries
_LIBRARY_NOT_LOADED = re.compile(r"\bLibrary \S+\.(?:dll|so|dylib)\S* is not found or cannot be loaded")

#: an exception of an error's class whose message quotes CPython's import failure
_WRAPPED_IMPORT = re.compile(r"\b(?:\w+\.)*\w*(?:Error|Exception): .*\bNo module named '[^']+'")


def round37b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if (("Unable to load any of {" in text and _NONE_LOADED.search(text))
            or ("Cannot load symbol " in text and _SYMBOL_NOT_LOADED.search(text))
            or ("in your library path" in text and _DLL_NOT_LOCATED.search(text))
            or ("cannot be loaded" in text and _LIBRARY_NOT_LOADED.search(text))):
        return Form(FormKind.ERROR, "a shared library the program needs that its loader cannot load (cuDNN's or "
                    "CTranslate2's: a library path or a version that does not match)", Label.CONFIG_ERROR)
    return None


def round37b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    if "No module named '" in text and _WRAPPED_IMPORT.search(text):
        return Label.CONFIG_ERROR, "a module that is not installed, quoted in another exception's message"
    return stated_cause(round37b_form(text))
