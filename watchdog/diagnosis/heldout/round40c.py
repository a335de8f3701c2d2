"""Failure forms read for the misses of round issue23-heldout-40 (part C: classic NLP and sequence-to-sequence
training): the report of the CUDA error-checking idiom ``gpuAssert`` that Marian's first trainer and a great many CUDA
programs print before they exit, and TensorFlow's refusal of a lookup table's text file (a vocabulary) whose content
it cannot read.

Pure: no I/O. :func:`round40c_form` is asked after the forms of round 39, :func:`round40c_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* The ``gpuAssert`` idiom (the error check written once on Stack Overflow and copied into Marian's
  src/kernels/cuda_helpers.h of 2017, cudamat and many CUDA programs since) prints ``fprintf(stderr, "GPUassert: %s
  %s %d\\n", cudaGetErrorString(code), file, line)`` and exits with the error's code (or throws, in Marian's
  ``util::Exception``). The line is a CUDA call that failed: an error, whatever the program prints after it; its
  cause is the CUDA error string's (``out of memory`` is the device's memory exhausted, which cause_of already reads
  in those words), so the form states none itself. Marian's later trainer prints the same failure as ``Error: CUDA
  error 2 'out of memory' - <file>:<line>: cudaMalloc(...)`` at its error level, which other forms read already
  (round issue23-heldout-40: marian#120, a 95000 MB workspace the device could not reserve, read as a crash of no
  cause from the ``Aborted (core dumped)`` after it). Only the line that begins with the word (after a quote mark,
  a rank tag or a timestamp) and ends in the file and line the idiom prints is the form: a sentence that quotes it,
  or the source's format string, is not.
* TensorFlow's ``TextFileLineIterator`` (tensorflow/core/kernels/lookup_util.cc), which fills a lookup table (a
  vocabulary's index, ``index_table_from_file``, ``TextFileInitializer``) from a text file, refuses the file's
  content with ``InvalidArgument``: ``Invalid content in <file>: empty line found at position <n>.``, ``Invalid
  number of columns in <file> line <n> (<line>) : expected [at least] <k> got <m>``, ``Invalid number of values in
  <file> line <n> ...`` (the vector-valued table) and ``Invalid vocab_size in <file>: expected <n> but got <m>``.
  The kernel logs them as ``W ... OP_REQUIRES failed at lookup_table_init_op.cc:<n> : Invalid argument: ...`` and
  the session raises them as ``InvalidArgumentError``: the file the job was given is malformed, which a restart
  reads again (round issue23-heldout-40: tensorflow/nmt#321, a vocabulary with an empty line, read as a crash of
  no cause from the traceback after it). The kernel's warning-level record is this form whatever its level: the
  op failed and the table is not built.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round40c_form` reads hold, besides the needles failureforms already
#: searches: the gpuAssert idiom's report, TensorFlow's lookup-table file iterator's refusals
NEEDLES: tuple[str, ...] = (
    "GPUassert: ",
    ": empty line found at position ", "Invalid number of columns in ", "Invalid number of values in ",
    "Invalid vocab_size in ",
)

#: The idiom's report at the head of its line: "GPUassert: <cudaGetErrorString> <file> <line>" (a quote mark, a rank
#: tag or a timestamp in brackets before it)
_GPU_ASSERT = re.compile(
    r"^(?:[>\s]*|\[[^\]\n]{1,40}\]\s*)GPUassert: [A-Za-z][^\n]*? \S+\.(?:cu|cuh|cpp|cc|c|h|hpp) \d+\s*$",
    re.MULTILINE)

#: TensorFlow's TextFileLineIterator refusing a table file's content (lookup_util.cc)
_TF_TABLE_FILE = re.compile(
    r"\bInvalid content in \S+: empty line found at position \d+"
    r"|\bInvalid number of (?:columns|values) in \S+ line \d+ \("
    r"|\bInvalid vocab_size in \S+: expected -?\d+ but got \d+")


def round40c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "GPUassert: " in text and _GPU_ASSERT.search(text):
        return Form(FormKind.ERROR, "a CUDA call failed (the gpuAssert idiom's report)", None)
    if "Invalid " in text and _TF_TABLE_FILE.search(text):
        return Form(FormKind.ERROR, "TensorFlow could not read a lookup table's file (a vocabulary's content)",
                    Label.CONFIG_ERROR)
    return None


def round40c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round40c_form(text))
