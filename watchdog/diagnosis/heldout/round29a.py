"""Failure forms read for the misses of round issue23-heldout-29 (part A: Neuron and AWS): the set-up of a machine or
an image that failed (a package manager's, a driver module's, an image build's failure records), the end of a
SageMaker training job, and a Go program's error naming a file that is not there.

Pure: no I/O. :func:`round29a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 28, and :func:`round29a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* A machine or image whose set-up failed cannot run the job, however often it is restarted: the driver, the
  packages or the image are not there. The set-up tools state it in their own records:

  - dpkg's ``dpkg: error processing package <pkg> (--configure):`` (dpkg ``src/main/errors.c``, print_error_perpackage:
    ``"%s: error processing %s (--%s):\\n %s\\n"``; ``archive`` for a ``.deb`` it could not unpack);
  - DKMS's ``Error! <what failed>`` (the dkms script's ``die()``, ``echo $"Error! $*"``): ``Error! Bad return status
    for module build on kernel: ...``, ``Error! pre_install failed, aborting install.``;
  - Docker's build step that failed: the classic builder's ``The command '<cmd>' returned a non-zero code: <n>``
    (moby ``builder/dockerfile``) and BuildKit's ``process "<cmd>" did not complete successfully: exit code: <n>``.

  aws-neuron-sdk#661 (round issue23-heldout-29 part A: a Dockerfile installing the retired aws-neuron-dkms, read as
  healthy) prints the three; aws-neuron-sdk#945 and #843 end in DKMS's module build on a kernel it does not build
  on. apt's own ``W:`` notices (an index it could not fetch) are not errors and are not read.
* The SageMaker Python SDK follows a training job by printing its status transitions, ``<date> <time> <Status> -
  <message>`` (sagemaker/session.py, the secondary status messages: ``Starting - Starting the training job``,
  ``Training - Training image download completed``, ``Completed - Training job completed``). A job whose last
  status is ``Failed`` failed, whatever the container printed (sagemaker-python-sdk#911, read as healthy: the
  status lines come before the container's log in the notebook's output; #658, #1722 end the same way). The status
  states no cause: the line is a failure form without a label.
* Go's errors from the os package name the operation and the file: ``open /run/infa-map.json: no such file or
  directory`` (os.PathError's ``Op + " " + Path + ": " + Err``, the errno's text in lower case as Go's syscall
  package spells it). In a line that reports an error, a file the program could not open because it does not
  exist is a set-up to fix (the Neuron Kubernetes device plugin's ``Error to get IB device: open
  /run/infa-map.json: no such file or directory``, aws-neuron-sdk#180, the runtime package missing from the AMI,
  read as healthy). A Go program that logs an optional file's absence without calling it an error is not read.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round29a_form` reads hold, besides the needles failureforms already
#: searches: dpkg's and DKMS's records, Docker's failed step, SageMaker's failed status, Go's missing file
NEEDLES: tuple[str, ...] = ("error processing", "Error! ", "returned a non-zero code", "did not complete successfully",
                            "Failed - ", ": no such file or directory")

#: dpkg's, DKMS's and Docker's records of a set-up that failed (a marker of a quoted or prefixed line allowed)
_SETUP_FAILED = re.compile(r"^[\s>|]*(?:dpkg: error processing (?:package|archive) \S|Error! \S)|"
                           r"\bThe command '.*' returned a non-zero code: \d+|"
                           r"\bprocess \".*\" did not complete successfully: exit code: \d+")

#: the SageMaker SDK's status line of a training job that failed
_SAGEMAKER_FAILED = re.compile(r"^[\s>|]*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d Failed - \S")

#: Go's os.PathError for a file that does not exist, in a line that reports an error
_GO_NO_FILE = re.compile(r"\b(?:open|stat|lstat|readlink|chdir) /\S*: no such file or directory\b")
_ERROR_WORD = re.compile(r"\b(?:[Ee]rror|ERROR|[Ff]ailed|FAILED)\b")


def round29a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if (("error processing" in text or "Error! " in text or "returned a non-zero code" in text
         or "did not complete successfully" in text) and _SETUP_FAILED.search(text)):
        return Form(FormKind.ERROR, "a set-up that failed (a package, a driver module or an image build step)",
                    Label.CONFIG_ERROR)
    if "Failed - " in text and _SAGEMAKER_FAILED.match(text):
        return Form(FormKind.ERROR, "a SageMaker training job whose status is Failed")
    if ": no such file or directory" in text and _GO_NO_FILE.search(text) and _ERROR_WORD.search(text):
        return Form(FormKind.ERROR, "an error naming a file that does not exist (Go's os.PathError)",
                    Label.CONFIG_ERROR)
    return None


def round29a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round29a_form(text))
