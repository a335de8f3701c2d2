"""Failure forms read for the misses of round issue23-heldout-20 (half A): a check whose received value is not a
number, an operator CANN has no kernel binary for, a library the dynamic loader cannot bind, a module that lacks
the attribute its caller expects, and the error trace Open MPI's runtime logs on its way out.

Pure: no I/O. :func:`round20a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 18, and :func:`round20a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* PaddlePaddle's binary comparison checks (paddle/fluid/platform/enforce.h ``__PADDLE_BINARY_COMPARE``: the
  message "Expected %s <op> %s, but received %s:%s <inverse op> %s:%s.", each value by ``to_string``, under
  "Enforce failed. " in 1.x and in 2.x's "[Hint: ...]" of a ``PreconditionNotMet`` or ``InvalidArgument`` error):
  a received value that is nan or inf (``to_string`` of a float prints "nan", "-nan", "inf") is a value the model
  computed that went non-finite, the check that caught it a guard of an operator's input (round issue23-heldout-20:
  the auc operator's ``predict_data <= 1`` receiving ``-nan``, under Paddle's "C++ Callstacks:" and in an
  ``EnforceNotMet`` exception line). A comparison of finite values states no cause and is left to the other forms.
* CANN's operator kernel loader (the aclnn/op-plugin runtime; torch_npu and the frameworks on Ascend quote it under
  an "EZ9999: Inner Error!" record): "Op <type> does not has any binary." (sic, and the grammatical spelling),
  after "Parse dynamic kernel config fail." or "Cannot parse json for config file [...]" and before "launch failed
  for <type>, errno:561000.": the installed operator package (Ascend-cann-kernels, the opp) holds no kernel for
  that operator on this chip or for this CANN, an installation that does not match, which every run meets at the
  same operator (round issue23-heldout-20: LLaMA-Factory's first Cast on a 910B, twice).
* glibc's dynamic loader (elf/dl-lookup.c, ``_dl_lookup_symbol_x``: "undefined symbol: %s", after the object's
  path, as dlerror() returns it): a shared object was built against a library whose copy here lacks the symbol
  (torch_npu's op plugin against another CANN's libtbe_adapter.so, an extension against another torch). Python's
  ImportError carrying it is signatures.toml's ``python.import_error``; ctypes.CDLL raises it as an OSError, and
  other loaders quote it in their own records: the same environment's fault, which no restart clears.
* CPython's module attribute lookup (Objects/moduleobject.c ``module_getattro``: "module '%U' has no attribute
  '%U'", and "partially initialized module '%U' has no attribute '%U' (most likely due to a circular import)"),
  raised as an AttributeError: the code calls an API the installed module does not have (vllm-ascend calling
  ``torch_npu._npu_flash_attention`` that an unpaired torch-npu lacks, ``numpy.float`` after its removal), a
  mismatch of the installed versions that a restart meets at the same line. An attribute missing from an *object*
  ("'AdamW' object has no attribute ...") is left to the readers of program mistakes (exctaxonomy).
* PRRTE's error trace (PRRTE src/util/error.h ``PRTE_ERROR_LOG``: "PRTE ERROR: %s in file %s at line %d" with
  ``prte_strerror`` of the code; Open MPI 4's ``ORTE_ERROR_LOG`` stays forms_errors' error): a breadcrumb of the
  code path an error came back along, its
  status often empty or generic, printed before the help text that says what failed ("There are not enough slots
  available in the system ..."). It is read as a crash of unknown cause, so that a line of the same process that
  states one replaces it (round issue23-heldout-20: PRRTE's mapper refusing seven ranks on four cores).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free, each with a marker character of the classifier's batch search before its last: a
#: capital, a "v") that the lines these forms read hold, besides the failure forms' needles ("Error" in an
#: OSError or AttributeError line, "ERROR" in the trace)
NEEDLES: tuple[str, ...] = (", but received ", "does not has any binary", "does not have any binary")

#: a value that is not a number, as C++'s to_string and Python's repr print it ("nan", "-nan", "inf", "-inf")
_NON_FINITE = r"[-+]?(?:nan|inf)(?![\w.])"
_OPERATOR = r"(?:==|!=|<=|>=|<|>)"
#: Paddle's comparison check: "Expected A <op> B, but received A:<value> <op> B:<value>."
_PADDLE_COMPARISON = re.compile(
    rf"\bExpected (\S+) {_OPERATOR} (\S+), but received \1:(\S+?) {_OPERATOR} \2:(\S+?)\.?(?:\]|\s|$)")
_NON_FINITE_VALUE = re.compile(rf"^{_NON_FINITE}$")

#: CANN's kernel loader finding no binary for an operator
_NO_OPERATOR_BINARY = re.compile(r"\bOp \w+ does not ha(?:s|ve) any binary\b")

#: the dynamic loader's message for a symbol no loaded object defines ("<path>.so[.N]: undefined symbol: <name>")
_UNDEFINED_SYMBOL = re.compile(r"\.so(?:\.\d+)*: undefined symbol: \S")

#: CPython's missing module attribute, as the AttributeError line prints it (a relay may pad the space after the
#: colon: pytorch/xla#9362's "::DEBUG: [stdout] AttributeError:     module 'jax' ...")
_MODULE_ATTRIBUTE = re.compile(r"\bAttributeError:\s+(?:partially initialized )?module '[\w.]+' has no attribute '\w+'")

#: PRRTE's error trace line ("[host:pid] PRRTE ERROR: <status> in file <path> at line <n>")
_RUNTIME_ERROR_TRACE = re.compile(r"\b(?:PRTE|PRRTE|PMIX)(?: ERROR)?: .{0,80}?\bin file "
                                  r"\S+ at line \d+\s*$")


def round20a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "but received" in text:
        compared = _PADDLE_COMPARISON.search(text)
        if compared is not None and any(_NON_FINITE_VALUE.match(v) for v in compared.group(3, 4)):
            return Form(FormKind.ERROR, "a comparison check whose received value is not finite (nan or inf)",
                        Label.NUMERICAL_ERROR)
    if "any binary" in text and _NO_OPERATOR_BINARY.search(text):
        return Form(FormKind.ERROR, "an operator CANN's installed kernels have no binary for", Label.CONFIG_ERROR)
    if " in file " in text and _RUNTIME_ERROR_TRACE.search(text):
        return Form(FormKind.CRASH, "Open MPI's runtime error trace (a code path an error came back along)")
    return None


def round20a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    if (stated := stated_cause(round20a_form(text))) is not None:
        return stated
    if "undefined symbol" in text and _UNDEFINED_SYMBOL.search(text):
        return Label.CONFIG_ERROR, "the dynamic loader unable to bind a symbol a shared object needs"
    if "has no attribute" in text and _MODULE_ATTRIBUTE.search(text):
        return Label.CONFIG_ERROR, "a module without the attribute its caller expects (versions that do not match)"
    return None
