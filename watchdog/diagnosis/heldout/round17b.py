"""Failure forms read for the misses of round issue23-heldout-17 (half B): a C/C++ assertion record whose message
states the precondition the program could not meet.

Pure: no I/O. :func:`round17b_cause` is asked by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause
of a line that is already an error (TensorRT-LLM's record carries its own ``[ERROR]`` level: the table's last rule
takes it as an error no rule explains).

The form is read where its program prints it:

* TensorRT-LLM's failed check (cpp/include/tensorrt_llm/common/assert.h ``TLLM_CHECK`` and
  ``TLLM_CHECK_WITH_INFO`` call tllmException.h ``throwRuntimeError``, whose ``TllmException`` formats
  ``"[TensorRT-LLM][ERROR] Assertion failed: %s"`` then, in tllmException.cpp, ``"%s (%s:%zu)\\n%s"``: the message,
  the source file and line, then the numbered native frames). The same ``Assertion failed: <message> (<file>:
  <line>)`` is the convention of many C and C++ projects' assert macros. A bare ``TLLM_CHECK(expr)`` puts the
  expression there (``d == a + length``), which says nothing of a cause; ``TLLM_CHECK_WITH_INFO`` puts a sentence,
  and two kinds of sentence state a set-up that a restart meets again: a GPU architecture the code has no kernel
  for (the fused-MHA runner's and the CUTLASS preprocessors' ``Unsupported architecture``, ``Unsupported Arch``:
  the kernels need sm80 or newer, and the same GPU refuses them again; TensorRT-LLM#320), and a file the program
  could not open (runtime/utils/sessionUtils.cpp loadEngine ``Error opening engine file: <path>``: an engine not
  built where the run looks for it; TensorRT-LLM#693).
"""

from __future__ import annotations

import re

from neuron_watch.events import Label

#: An assertion record: "Assertion failed: <message> (<file>:<line>)" at the end of the line (TensorRT-LLM's
#: record prefixes it with its "[TensorRT-LLM][ERROR]" tag, once or twice as the exception is rethrown)
_ASSERTION = re.compile(r"\bAssertion failed: (\S.*?) \([^()\s]+:\d+\)\s*$")
#: ... whose message says the GPU's architecture is one the code does not support
_UNSUPPORTED_ARCH = re.compile(r"(?i:\bunsupported (?:gpu |sm |cuda |device )?arch(?:itecture)?\b)")
#: ... or that a file could not be opened ("Error opening engine file: <path>", "Failed to open file <path>",
#: "Unable to open the weights file")
_UNOPENED_FILE = re.compile(
    r"(?i:\b(?:error|failed|unable|cannot|can't|could not)(?: to)? open(?:ing)? (?:the )?(?:[\w-]+ ){0,2}file\b)")


def round17b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms: an assertion whose message names a set-up."""
    assertion = _ASSERTION.search(text) if "Assertion failed: " in text else None
    if assertion is None:
        return None
    message = assertion.group(1)
    if _UNSUPPORTED_ARCH.search(message):
        return Label.CONFIG_ERROR, "a failed assertion: a GPU architecture the program has no kernel for"
    if _UNOPENED_FILE.search(message):
        return Label.CONFIG_ERROR, "a failed assertion: a file the program could not open"
    return None
