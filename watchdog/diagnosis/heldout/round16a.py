"""Failure forms read for the misses of round issue23-heldout-16 (half A): the report of a TPU kernel the
Mosaic compiler could not lower, and a unittest comparison whose operand is not finite.

Pure: no I/O. :func:`round16a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 15, and :func:`round16a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error. (The other forms of this round extend the readers they belong to: an
MLIR legalization failure carried by a status, heldout.round15a._MLIR_LEGALIZE; srun's step refusal in its other
spellings, exctaxonomy._SRUN_NO_STEP; aws-ofi-nccl's words for a fabric with no provider, errorclass._FABRIC_ABSENT;
an NCCL WARN whose message states a set-up cause, errorclass.read_error.)

Each form is read where its program prints it:

* JAX's lowering of a Pallas/Mosaic TPU kernel (jax/_src/tpu_custom_call.py ``_run_pass_pipeline``): when an MLIR
  pass fails it raises ``RuntimeError`` with "Internal TPU kernel compiler error: <diagnostic>", then, for the
  diagnostic's note "see current operation: ...", the line "The MLIR operation involved:" and the operation, then
  "... additional diagnostics were skipped." when there were more; the C++ pipeline that replaced it (jaxlib's
  Mosaic) prints "INTERNAL: Mosaic failed to compile TPU kernel: <reason>", "at location: ...", and the same
  "The MLIR operation involved:" section (JAX's error-code pages quote it under "Sample Error Messages"). Only a
  kernel that does not compile prints that section, so it says so even when an excerpt keeps only the tail (each
  line under a rank's "[rank0]: " prefix): the kernel as written fails on every run.
* unittest's comparisons (CPython Lib/unittest/case.py: ``assertLess`` "%s not less than %s",
  ``assertLessEqual`` "%s not less than or equal to %s", ``assertGreater`` / ``assertGreaterEqual`` likewise,
  ``assertEqual``'s "%s != %s" and ``assertAlmostEqual``'s "%s != %s within %r places", each operand by
  ``safe_repr``), raised as "AssertionError: <message>": an operand that is nan or inf (bare, or inside a repr
  such as "tensor(nan)" or "np.float64(nan)") is a value that went non-finite, the check that caught it
  a test of a loss or a gradient's bound.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free, each with a marker character of the classifier's batch search before its last: a
#: capital) that the lines these forms read hold, besides the failure forms' needles they hold already ("error:"
#: in the compiler error's head); the failure forms' needles include them. The causes read of a line already an
#: error need none.
NEEDLES: tuple[str, ...] = ("MLIR operation involved",)

#: Mosaic's report of a kernel it could not lower: the section that names the operation, and the head
#: tpu_custom_call.py raises (the C++ head, "Mosaic failed to compile TPU kernel", is signatures.toml's
#: xla.mosaic_compile_failed)
_MOSAIC_REPORT = re.compile(r"(?:^|[\s:\]])The MLIR operation involved:\s*$|\bInternal TPU kernel compiler error: ")

#: a unittest comparison's message whose operand is not finite: "nan not less than 3.0", "3.0 != nan",
#: "tensor(nan) not less than 3.0", "inf != 1.0 within 7 places (inf difference)"
_NON_FINITE = r"(?:[\w.]+\()?[-+]?(?:nan|inf)\b"
_COMPARISON = r"(?:!=|not (?:less|greater) than(?: or equal to)?)"
_UNITTEST_NON_FINITE = re.compile(
    rf"\bAssertionError: (?:{_NON_FINITE}\)? {_COMPARISON} |\S+ {_COMPARISON} {_NON_FINITE})")


def round16a_form(text: str) -> Form | None:
    """The failure form Mosaic's report of a kernel it could not lower states in ``text``, or None."""
    if ("MLIR operation" in text or "TPU kernel" in text) and _MOSAIC_REPORT.search(text):
        return Form(FormKind.ERROR, "Mosaic's report of a TPU kernel it could not compile", Label.COMPILE_ERROR)
    return None


def round16a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    if (stated := stated_cause(round16a_form(text))) is not None:
        return stated
    if "AssertionError" in text and _UNITTEST_NON_FINITE.search(text):
        return Label.NUMERICAL_ERROR, "a unittest comparison with a value that is not finite (nan or inf)"
    return None
