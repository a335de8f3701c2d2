"""Failure forms read for the misses of round issue23-heldout-34 (part E: the AWS Neuron ecosystem): the SageMaker
Python SDK's status of a job that failed, Kubernetes' state of a container that keeps crashing, torch-neuron's record
of a graph its trace could not compile, torch-neuron's summary of a trace whose compile ended, git's refusal to
check out a revision a set-up asked for, and TensorFlow's record of the XRT compile op's failure.

Pure: no I/O. :func:`round34e_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 33, :func:`round34e_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* The SageMaker Python SDK raises ``UnexpectedStatusException`` when a job it waits on ends in a status other than
  Completed (sagemaker/session.py ``_check_job_status``: ``job_type = status_key_name.replace("JobStatus", " job")``,
  ``"Error for {job_type} {job_name}: {status}. Reason: {reason}"``, later SDKs append "Check troubleshooting guide
  ..."; a Stopped job is only warned about). The job's type says what failed: a ``Compilation job`` is SageMaker Neo
  compiling the model (for ml_inf1, the Neuron compiler; ai-accelerators-examples#1: "Failed. Reason: ClientError:
  CompilationError: Unable to compile model for ml_inf1"): the model did not compile, a compile error. For the other
  types the reason's prefix is SageMaker's attribution (its FailureReason): ``ClientError`` is the request's fault
  (data it could not download, a role, an input: "Error for Training job: Failed. Reason: ClientError: Data download
  failed", a public book on SageMaker), a configuration that a resubmission repeats; ``AlgorithmError`` and the others
  are the job's own code failing, whose cause is in its log (HF forum's "Error for Training job
  finetune-distilbert-...: Failed. Reason: AlgorithmError: ExecuteUserScriptError"): a failure stated without it.
* Kubernetes' kubelet keeps a container that exits again and again waiting before its next restart, its state's
  reason ``CrashLoopBackOff`` (pkg/kubelet/images and kuberuntime: ``"CrashLoopBackOff"``, the event "Back-off
  restarting failed container"), which ``kubectl describe pod`` prints as ``State: Waiting`` / ``Reason:
  CrashLoopBackOff`` and ``kubectl get pods`` in its STATUS column: the container crashes each time it starts
  (aws-cdk#29262: the Neuron device plugin's daemonset pod; a flannel pod's describe in a public thread). The cause
  is in the container's previous log (``kubectl logs --previous``), not in the state: a crash of unstated cause.
  Another waiting reason (ContainerCreating, PodInitializing) is a container still starting and is not read.
* torch-neuron's trace (torch_neuron/convert.py, logger "Neuron") hands each partitioned graph to neuron-cc; when
  the compile of one fails it logs at WARNING ``torch.neuron.trace failed on <graph>; falling back to native python
  function call`` (then, for an error the compile raised, ``torch.neuron.trace error: <message>``) and leaves that
  graph on the CPU. The graph did not compile for Neuron (aws-neuron-sdk#656, #618, #709 and #291 under neuron-cc's
  own error records; #172 with nothing else in the paste, its cause a TensorFlow 1.14 where neuron-cc needs 1.15):
  a compile error, whatever the trace returns afterwards.
* torch-neuron's trace reports the compile's result when it has ended (the same logger at INFO: ``Number of
  arithmetic operators (post-compilation) before = <n>, compiled = <m>, percent compiled = <p>%``, ``Neuron
  successfully compiled <k> sub-graphs, Total fused subgraphs = <n>, ...``) after neuron-cc's ``Compiler status
  PASS`` (the compiler's last record, which a terminal may glue to the next: aws-neuron-sdk#677): the compile is
  over. A log that ends there is not a compile still running.
* git's checkout of a revision it does not have (builtin/checkout.c, ``error(_("pathspec '%s' did not match any
  file(s) known to git"), ...)``, the same for a branch, a tag or a commit a clone lacks): a set-up that pins a
  source revision (a Dockerfile's ``git checkout cd2e09c`` before ``pip install -e .``, optimum-neuron#947; a clone
  whose submodule's ``origin/master`` is not there, "Unable to setup cloned submodule", git's mailing list) goes on
  with another revision or none, and what it installs does not match what the job was built for: configuration,
  which every rerun of the set-up repeats.
* TensorFlow logs a kernel's failed ``OP_REQUIRES`` at WARNING as ``OP_REQUIRES failed at <file>:<line> : <status>:
  <message>`` (core/framework/op_kernel.cc). In ``xrt_compile_ops.cc`` (XRTCompileOp, the op torch_xla's XRT client
  runs to build a graph for TPU, GPU or Neuron) the failing call is the compile cache's ``CompileIfKeyAbsent``
  around ``client->Compile``, or its input checks: an ``INTERNAL``, ``UNIMPLEMENTED`` or ``FAILED_PRECONDITION``
  there is XLA refusing the graph (aws-neuron-sdk#788: "Unknown custom-call API version", a TPU graph given to the
  Neuron backend; pytorch/xla#2650 reports the same op's "Failed precondition: Expected comparison type" under
  ``{{node XRTCompile}}``): a compile error. ``RESOURCE_EXHAUSTED`` (a compile out of memory) and
  ``INVALID_ARGUMENT`` (also a device assignment the op rejects) are left to the readers of those statuses.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round34e_form` reads hold: the SDK's status sentence, the kubelet's
#: waiting reason and its event, torch-neuron's records of a failed graph and of the compile's result, neuron-cc's
#: last record, git's failed checkout, TensorFlow's record of the XRT compile op's failure
NEEDLES: tuple[str, ...] = (". Reason: ", "CrashLoopBackOff", "Back-off restarting failed container",
                            "torch.neuron.trace failed on ", "torch.neuron.trace error: ",
                            "(post-compilation) before = ", "Neuron successfully compiled ", "Compiler status PASS",
                            "did not match any file(s) known to git",
                            "OP_REQUIRES failed at xrt_compile_ops.cc")

#: the SDK's status of a job that did not complete: its type, its (possibly empty) name, the status, the reason
_SAGEMAKER_JOB = re.compile(r"\bError for ([A-Z][A-Za-z ]*?) job(?: \S+)?: (Failed)\. Reason: ?(\S*)")

#: the kubelet's state of a container that keeps crashing: kubectl describe's reason field, kubectl get pods' STATUS
#: column (NAME READY STATUS RESTARTS, NAMESPACE first with -A), the kubelet's event
_CRASH_LOOP = re.compile(r"^[\s>|#-]*Reason:\s+CrashLoopBackOff\s*$|"
                         r"^\s*(?:\S+\s+){1,2}\d+/\d+\s+CrashLoopBackOff\s+\d+|"
                         r"\bBack-off restarting failed container\b")

#: torch-neuron's WARNING records of a graph its trace could not compile
_TRACE_FAILED = re.compile(r"\btorch\.neuron\.trace (?:failed on .+?; falling back to native python function call|"
                           r"error: \S)")

#: torch-neuron's INFO records of the compile's result, and neuron-cc's last record
_COMPILE_RESULT = re.compile(r"\bNumber of arithmetic operators \(post-compilation\) before = \d|"
                             r"\bNeuron successfully compiled \d+ sub-graphs\b|\bCompiler status PASS\b")


#: git's refusal to check out a revision it does not have, as error() prints it (a quote or a paste's prefix before)
_GIT_PATHSPEC = re.compile(r"^[\s>*`]*error: pathspec '[^']+' did not match any file\(s\) known to git\.?[\s`]*$")

#: TensorFlow's record of the XRT compile op's failure, its status one XLA's compile returns for a graph it refuses
_XRT_COMPILE_FAILED = re.compile(r"\bOP_REQUIRES failed at xrt_compile_ops\.cc:\d+ : "
                                 r"(?:INTERNAL|Internal|UNIMPLEMENTED|Unimplemented|FAILED_PRECONDITION|"
                                 r"Failed precondition): \S")


def _sagemaker_job_failed(text: str) -> Form | None:
    job = _SAGEMAKER_JOB.search(text)
    if job is None:
        return None
    if job.group(1) == "Compilation":
        return Form(FormKind.ERROR, "a SageMaker compilation job that failed (the SDK's job status)",
                    Label.COMPILE_ERROR)
    if job.group(3).startswith("ClientError"):
        return Form(FormKind.ERROR, "a SageMaker job that failed on its request (the SDK's status, a ClientError)",
                    Label.CONFIG_ERROR)
    return Form(FormKind.ERROR, "a SageMaker job that failed (the SDK's job status)")


def round34e_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ". Reason: " in text and (form := _sagemaker_job_failed(text)) is not None:
        return form
    if ("CrashLoopBackOff" in text or "Back-off restarting" in text) and _CRASH_LOOP.search(text):
        return Form(FormKind.CRASH, "a container that keeps crashing (Kubernetes' CrashLoopBackOff)")
    if "torch.neuron.trace " in text and _TRACE_FAILED.search(text):
        return Form(FormKind.ERROR, "a graph torch-neuron's trace could not compile (its fallback record)",
                    Label.COMPILE_ERROR)
    if "known to git" in text and _GIT_PATHSPEC.search(text):
        return Form(FormKind.ERROR, "a revision git could not check out (a set-up's pinned source)", Label.CONFIG_ERROR)
    if "xrt_compile_ops" in text and _XRT_COMPILE_FAILED.search(text):
        return Form(FormKind.ERROR, "a graph XLA would not compile (TensorFlow's XRT compile op)", Label.COMPILE_ERROR)
    if "ompile" in text and _COMPILE_RESULT.search(text):
        return Form(FormKind.COMPILE_DONE, "torch-neuron's compile result (or neuron-cc's PASS)")
    return None


def round34e_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round34e_form(text))
