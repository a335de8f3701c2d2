"""Failure forms read for the misses of round issue23-heldout-38 (part A: forecasting, tabular and recommender
training): Hydra's report of a job that raised, the Hugging Face Hub's file that is not there, LightGBM's command line
stopping on an exception and Boost.Compute's OpenCL errors under it, CatBoost's refusal of an option for the device it
trains on, XGBoost's refusal of two processes on one GPU, GluonTS's NaN in the first epoch.

Pure: no I/O. :func:`round38a_form` is asked after the forms of round 37, :func:`round38a_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* Hydra (hydra-core) runs the task function of a ``@hydra.main`` program; when it raises, ``JobReturn.return_value``
  (hydra/core/utils.py) writes ``"Error executing job with overrides: [...]"`` to stderr and re-raises, and
  ``run_and_report`` (hydra/_internal/utils.py) prints the exception without Hydra's frames, or, for a
  ``CompactHydraException``, its message alone, and exits 1. ``hydra.utils.instantiate``'s failures are such compact
  exceptions (hydra/_internal/instantiate/_instantiate2.py): ``"Error in call to target '<target>':\\n" + repr(e)
  + "\\nfull_key: <key>"`` when the configured callable raised, ``"Error locating target '<target>', set env var
  HYDRA_FULL_ERROR=1 to see chained exception."`` when the configured path does not import. None of these lines is
  in a logging level or ends in an exception class's name, and the exception under them is printed as its
  ``repr``, ``TypeError("...")``, not as ``TypeError: ...``: two uni2ts (Moirai) fine-tunings stopped at
  instantiation were read as healthy (round issue23-heldout-38: uni2ts#91, a TypeError of the module's missing
  arguments from the wrong model config; uni2ts#206, the Hub's 404 for a checkpoint file the config names). The
  record of the job is an error (the program exits 1 after it); a target that does not import is configuration; the
  exception's repr states what its ``Class: message`` line would. A program that calls ``instantiate`` itself
  (SAM2's ``training/train.py``) lets the exception end its traceback under its class's name,
  ``hydra.errors.InstantiationException: Error locating target '...'``, and an outer instantiate quotes an inner
  one's as the repr ``InstantiationException("Error locating target '...'...")`` under its own ``Error in call to
  target '<outer>':`` (round issue23-heldout-40 part A: sam2#415, a VOSDataset that did not import because
  torchvision was built for another CUDA than torch, read as a crash to restart): the same records after the class.
* huggingface_hub's ``hf_raise_for_status`` (huggingface_hub/utils/_http.py) words a 404 of the Hub as
  ``"<status> Client Error.\\n\\nEntry Not Found for url: <url>."`` (``EntryNotFoundError``), ``"Repository Not Found
  for url: ..."`` (``RepositoryNotFoundError``) or ``"Revision Not Found for url: ..."`` (``RevisionNotFoundError``):
  a file, repository or revision the Hub does not have, which a restart asks for again (uni2ts#206, the message's
  second line on its own line of the paste).
* LightGBM's command line (src/main.cpp) catches what the application throws, prints ``"Met Exceptions:"`` and on the
  next line the exception's ``what()`` to stderr, and exits -1; its GPU learner builds on Boost.Compute, whose
  exceptions say ``"No OpenCL device found"`` (boost/compute/exception/no_device_found.hpp: no platform offers a
  device, the OpenCL runtime or its ICD is not installed for the GPU) and, for a failed OpenCL call,
  ``opencl_error::to_string``'s title-case names (``"Device Not Found"``, ``"Memory Object Allocation Failure"``,
  ``"Build Program Failure"``, ...), or ``"Unknown OpenCL Error (<code>)"`` for a status no OpenCL version defines.
  Both LightGBM runs that stopped so were read as healthy (LightGBM#586, no device; LightGBM#1410, status 221 of an
  OpenCL set-up that ``clinfo`` failed on too, fixed by the driver). The header is an error of no stated cause; the
  device that is not there is configuration, the allocation failure memory, the program build a compile error, an
  unknown status no cause (NVIDIA's -9999 is a kernel's fault, 221 a broken driver): the line is the message alone,
  or after LightGBM's ``LightGBMError: `` and ``[LightGBM] [Fatal] `` heads.
* CatBoost raises ``CatBoostError`` (``_catboost.CatboostError`` in older builds) with the location of the check that
  failed, ``"<catboost path>:<line>: <message>"`` (``CB_ENSURE`` under util's ``ythrow``). The checks of
  catboost/libs/options/ validate the parameters, and a message naming the task type refuses a parameter or a mode
  on the device it was asked for (custom_loss on GPU, cv on GPU): configuration, which a restart repeats; both were
  read as crashes of unknown cause (catboost#276, catboost#375).
* XGBoost's GPU communicator checks that no two workers of its group share a device: ``"Check failed: n_uniques ==
  world ... : Multiple processes within communication group running on same CUDA device is not supported"``
  (src/common/device_helpers.cu, later src/collective/); NCCL says the same as "Duplicate GPU detected", which the
  table reads as configuration. Ten Dask workers on one GPU were read as a crash of unknown cause (xgboost#6344).
* GluonTS's MXNet trainer (gluonts/mx/trainer/_base.py, formerly gluonts/trainer/_base.py) raises
  ``GluonTSUserError("Got NaN in first epoch. Try reducing initial learning rate.")`` when every batch of the first
  epoch gave a NaN loss: a numerical failure, not an exception of unknown cause (gluonts#519). Its warning that a
  batch "gave NaN loss and it will be ignored" is a NaN it skipped and is not this form.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round38a_form` reads hold, besides the needles failureforms already
#: searches: Hydra's job and instantiate records, the Hub's 404 words, LightGBM's header and Boost.Compute's words
NEEDLES: tuple[str, ...] = (
    "Error executing job with overrides", "Error in call to target", "Error locating target",
    "Not Found for url: ", "Met Exceptions:", "OpenCL",
    "Device Not Found", "Device Not Available", "Compiler Not Available", "Memory Object Allocation Failure",
    "Out of Host Memory", "Build Program Failure",
)

#: Hydra's record of a task function that raised, and its instantiate's failures (the head of the line: quoting or
#: a launcher's rank tag before it)
_LEAD = r"^[\s>|`*\"']*(?:\[[^\]]*\]:?\s*)*"
_HYDRA_JOB = re.compile(_LEAD + r"Error executing job with overrides: \[")
#: (the instantiate records may follow the exception's class: a traceback's last line, or, for a target that does not
#: import, the repr an outer instantiate quotes)
_INSTANTIATION = r"(?:[a-z_]\w*\.)*InstantiationException"
_HYDRA_CALL = re.compile(_LEAD + rf"(?:{_INSTANTIATION}:[ \t]+)?Error in call to target '[\w.<>]+':\s*$")
_HYDRA_LOCATE = re.compile(_LEAD + rf"(?:{_INSTANTIATION}(?::[ \t]+|\(['\"]))?Error locating target '[\w.<>]+'")

#: the exception under Hydra's "Error in call to target": its repr, the class (a module path optional) and its
#: opening quote at the head of the line
_EXCEPTION_REPR = re.compile(_LEAD + r"((?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception))\((['\"])(.*)")

#: CPython's TypeError when a call's arguments do not bind to the callable's signature (Python/ceval.c, getargs.c)
_BINDING = re.compile(r"\bmissing \d+ required (?:positional|keyword-only) arguments?\b"
                      r"|\bgot an unexpected keyword argument\b"
                      r"|\btakes (?:from )?\d+ (?:to \d+ )?positional arguments? but \d+ (?:were|was) given\b")

#: the Hub's 404 in huggingface_hub's words, and its exception classes
_HUB_NOT_FOUND = re.compile(r"(?:^|\b[\w.]*Error: |[\s>'\"(])(?:Entry|Repository|Revision) Not Found for url: https?://")
_HUB_NOT_FOUND_CLASS = re.compile(r"\b(?:Entry|Repository|Revision)NotFoundError\b")

#: LightGBM's command line stopping on an exception: the header alone on its line
_LGBM_MET_EXCEPTIONS = re.compile(r"^\s*Met Exceptions:\s*$")

#: Boost.Compute's exception messages as LightGBM prints them: the message alone, or after LightGBM's heads
_OPENCL_HEAD = r"^\s*(?:(?:lightgbm\.basic\.)?LightGBMError: |\[LightGBM\] \[Fatal\] )?"
_OPENCL_MESSAGES: tuple[tuple[re.Pattern[str], Label | None, str], ...] = (
    (re.compile(_OPENCL_HEAD + r"(?:No OpenCL device found|Device Not Found|Platform Not Found|Device Not Available"
                r"|Compiler Not Available)\s*$"),
     Label.CONFIG_ERROR, "no OpenCL device or platform to run on (the OpenCL runtime for the GPU is not set up)"),
    (re.compile(_OPENCL_HEAD + r"(?:Memory Object Allocation Failure|Out of Host Memory)\s*$"),
     Label.OOM, "an OpenCL allocation that failed"),
    (re.compile(_OPENCL_HEAD + r"Build Program Failure\s*$"),
     Label.COMPILE_ERROR, "an OpenCL program that did not build"),
    (re.compile(_OPENCL_HEAD + r"Unknown OpenCL Error \(-?\d+\)\s*$"),
     None, "an OpenCL status no OpenCL version defines"),
)

#: CatBoost's error with the location of its failed check: a parameter check of libs/options, or a message that
#: refuses something for the task type
_CATBOOST_OPTION = re.compile(
    r"\bCat[Bb]oostError: \S*libs/options/\S+:\d+: |\bCat[Bb]oostError: \S+\.(?:h|cpp):\d+: .*\btask[ _]type\b")

#: XGBoost's refusal of two workers of a communication group on one device
_XGB_SAME_DEVICE = re.compile(r"\bMultiple processes within communication group running on same CUDA device\b")

#: GluonTS's stop when the whole first epoch's loss was NaN
_GLUONTS_FIRST_EPOCH_NAN = re.compile(r"\bGot NaN in first epoch\b")


def round38a_repr(text: str) -> str | None:
    """The ``Class: message`` line an exception's repr at the head of ``text`` stands for, or None (failureforms'
    cause_of reads the cause of that line: a repr states what the line would)."""
    m = _EXCEPTION_REPR.search(text) if ("Error(" in text or "Exception(" in text) else None
    return None if m is None else f"{m.group(1)}: {m.group(3)}"


def _repr_label(m: re.Match[str]) -> Label | None:
    """The cause this round's rules read in an exception's repr (``m``, of :data:`_EXCEPTION_REPR`): CPython's failed
    binding of a call's arguments (Hydra's instantiate prints the repr of what the configured target raised), the
    Hub's missing file."""
    if m.group(1).rsplit(".", 1)[-1] == "TypeError" and _BINDING.search(m.group(3)):
        return Label.CONFIG_ERROR
    if _HUB_NOT_FOUND_CLASS.search(m.group(1)):
        return Label.CONFIG_ERROR
    return None


def round38a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "Error " in text:
        if _HYDRA_JOB.search(text):
            return Form(FormKind.CRASH, "Hydra's record of a job whose task function raised", None)
        if _HYDRA_LOCATE.search(text):
            return Form(FormKind.ERROR, "a target Hydra's instantiate could not import", Label.CONFIG_ERROR)
        if _HYDRA_CALL.search(text):
            return Form(FormKind.CRASH, "Hydra's instantiate of a configured target that raised", None)
    if "Not Found for url: " in text and _HUB_NOT_FOUND.search(text):
        return Form(FormKind.ERROR, "a file, repository or revision the Hugging Face Hub does not have",
                    Label.CONFIG_ERROR)
    if "Met Exceptions:" in text and _LGBM_MET_EXCEPTIONS.search(text):
        return Form(FormKind.CRASH, "LightGBM's command line stopped on an exception", None)
    if ("Error(" in text or "Exception(" in text) and (found := _EXCEPTION_REPR.search(text)) is not None:
        label = _repr_label(found)
        return Form(FormKind.ERROR, "a configured target called with arguments its signature does not take"
                    if label is Label.CONFIG_ERROR and "NotFound" not in text else "an exception printed as its repr",
                    label)
    if "Open" in text or " Not " in text or " of " in text or "Failure" in text:
        for pattern, label, name in _OPENCL_MESSAGES:
            if pattern.search(text):
                return Form(FormKind.ERROR, name, label)
    return None


def round38a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    if "NotFoundError" in text and _HUB_NOT_FOUND_CLASS.search(text):
        return Label.CONFIG_ERROR, "a file, repository or revision the Hugging Face Hub does not have"
    if "oostError: " in text and _CATBOOST_OPTION.search(text):
        return Label.CONFIG_ERROR, "a CatBoost parameter or mode its checks refuse (for the task type asked)"
    if "same CUDA device" in text and _XGB_SAME_DEVICE.search(text):
        return Label.CONFIG_ERROR, "two processes of a communication group on one GPU"
    if "Got NaN" in text and _GLUONTS_FIRST_EPOCH_NAN.search(text):
        return Label.NUMERICAL_ERROR, "a trainer's stop on a NaN loss in every batch of the first epoch"
    return stated_cause(round38a_form(text))
