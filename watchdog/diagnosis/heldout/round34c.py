"""Failure forms read for the misses of round issue23-heldout-34 (part C: managed ML platforms and notebooks): a
notebook's kernel that died (Jupyter's restarter and the notebook server's handlers), the SageMaker training
toolkit's errors of a user module that could not be installed or imported, dstack's code for why a run failed,
the root exception of a traceback a training service folded into its job's one-line error message, RMM's
out-of-memory exception, c10d's socket timeout, and the exception class IPython's cell header names.

Pure: no I/O. :func:`round34c_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 33, :func:`round34c_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* Jupyter's kernel restarter polls the kernel process and restarts it when it is no longer alive
  (jupyter_client/restarter.py ``poll``: ``"KernelRestarter: restarting kernel (%i/%i), %s random ports"``, and
  ``"KernelRestarter: restart failed"`` past its limit); the classic notebook server logs the restarter's callbacks
  (notebook/services/kernels/handlers.py: ``"kernel %s died, noticed by auto restarter"``, ``"kernel %s
  restarted"``, ``"kernel %s restarted failed!"``, on the root logger: ``WARNING:root:kernel <uuid> restarted``). A
  user's restart from the menu goes through ``restart_kernel`` and none of these callbacks: each line is a kernel
  that died under the cell that ran, without a traceback (Colab's runtime log after multi-GB tcmalloc allocations,
  googlecolab/colabtools#813 and #1718, read as healthy; #2646 and #513 print the same line). A crash of a cause the
  line does not name.
* The SageMaker training toolkit raises its own errors for the steps it runs before the user's script
  (sagemaker_training/errors.py: ``InstallModuleError`` and ``InstallRequirementsError`` for a failed ``pip install``
  of the source directory or of its requirements.txt, ``ImportModuleError`` for a module that does not import) and
  formats them ``<Class>:\\nExitCode ...`` (``_CalledProcessError.__str__``); the toolkit logs them at ERROR
  (``sagemaker-containers ERROR    InstallModuleError:``, sagemaker-training-toolkit#19) and the SDK repeats them in
  the job's failure reason. The job's code or its dependencies cannot be set up: a restart meets the same install.
  ``ExecuteUserScriptError`` (the user's script exited non-zero) states no cause and is not read here.
* dstack's CLI ends a failed run with ``Run failed with error code <JobTerminationReason>.`` (cli/services/
  configurators/run.py before 0.19.12; core/models/runs.py lists the reasons). The server's reasons say what
  happened to the machine or the container: ``INTERRUPTED_BY_NO_CAPACITY`` (the cloud took a spot instance back)
  and ``INSTANCE_UNREACHABLE`` are the node lost, as the corpus reads a preempted TPU (dstack#1397, read as
  healthy); ``FAILED_TO_START_DUE_TO_NO_CAPACITY``, ``CREATING_CONTAINER_ERROR``, ``PORTS_BINDING_FAILED``,
  ``VOLUME_ERROR``, ``INSTANCE_ACCESS_REVOKED``, the waiting limits and ``LOG_QUOTA_EXCEEDED`` are resources or
  settings the run cannot have; ``CONTAINER_EXITED_WITH_ERROR`` (dstack#1300) and ``EXECUTOR_ERROR`` are the
  program's or the runner's crash, whose cause is in the run's own log. The reasons of a run stopped on purpose
  (``TERMINATED_BY_USER``, ``ABORTED_BY_USER``, ``DONE_BY_RUNNER``, ``SCALED_DOWN``) are not failures.
* Google's training services report a replica that exited with the whole traceback folded into one message:
  ``The replica worker 4 exited with a non-zero status of 1. Termination reason: Error. Traceback (most recent call
  last): [...] File "...", line 473, in __exit__ ... tensorflow.python.framework.errors_impl.UnavailableError:
  Stream removed During handling of the above exception, another exception occurred: Traceback ...`` (Cloud ML
  Engine, cloudml-samples#175; Vertex AI's ``The replica workerpool1-1 exited with a non-zero status of 1.
  Termination reason: Error. \\nTraceback ...``). The line holds the traceback's header and the exception it
  names: :func:`folded_traceback` tells the judge so, and the cause the line states (errorclass reads
  ``UnavailableError`` as the transport) decides, where a header alone on its line leaves the cause to the lines
  under it. An exception whose class names no cause (``ValueError``, tensorflow/models#2388) leaves the replica's
  exit a crash of unknown cause.
* RMM, the device allocator under cuDF, cuML and XGBoost's GPU algorithms, throws ``rmm::out_of_memory`` (a
  ``std::bad_alloc``) when CUDA cannot give it memory or its pool is at its maximum; its ``what()`` reads
  ``std::bad_alloc: out_of_memory: CUDA error at: .../rmm/mr/device/cuda_memory_resource.hpp:70:
  cudaErrorMemoryAllocation out of memory`` (cuDF's MemoryError, XGBoost's "Memory allocation error on worker 0:
  ...", rapidsai/deployment#523) or ``... RMM failure at: ...pool_memory_resource.hpp: Maximum pool size
  exceeded``. Device memory ran out, whichever library wraps the exception.
* c10d's TCP store sockets throw ``std::runtime_error("Socket Timeout")`` when a receive times out
  (torch/csrc/distributed/c10d/Utils.hpp's SYSCHECK on EAGAIN): ``RuntimeError: Socket Timeout`` from a store
  ``get`` or torch elastic's exit barrier is the store's peer that did not answer (skypilot#825, a worker node
  killed under the job; a Slurm user's notes: "RuntimeError: Socket Timeout - network problem, retry on another
  node"). The transport.
* IPython prints an exception raised in a cell under a header of its class (round33c reads the header as a
  crash): where the class's words name a cause (exctaxonomy.class_cause), the header states it, as the exception
  line under it would (Modal's ``PermissionDeniedError    Traceback (most recent call last)``, a workspace without
  RDMA: modal-projects/training-gym#110).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.exctaxonomy import class_cause
from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round34c_form` reads hold, besides failureforms' own needles (IPython's
#: header holds round33c's "Traceback (most"; the notebook server's handlers log on the root logger, "WARNING:root:")
NEEDLES: tuple[str, ...] = (
    "KernelRestarter: restart", "noticed by auto restarter", ":root:kernel ", "InstallModuleError",
    "InstallRequirementsError", "ImportModuleError", "Run failed with error code ",
    "out_of_memory", "Maximum pool size exceeded", "Socket Timeout")

#: Jupyter's restarter and the notebook server's handlers of its callbacks (a kernel id is a UUID)
_KERNEL_DIED = re.compile(
    r"\bKernelRestarter: (?:restarting kernel \(\d+/\d+\)|restart failed)|"
    r"\bkernel [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} "
    r"(?:died, noticed by auto restarter|restarted(?: failed!)?)\s*$")

#: the training toolkit's errors of the steps before the user's script: the class and ":" that end the record's line
#: (its __str__ goes on with "\nExitCode ...", which the SDK's failure reason may print escaped), or the class under
#: the toolkit's module path; the class named in prose or in a docstring ("Raises: InstallRequirementsError: Error in
#: case of ...") is not its report
_TOOLKIT_SETUP_ERROR = re.compile(
    r"\b(InstallModuleError|InstallRequirementsError|ImportModuleError):[\s*`]*(?:$|ExitCode\b|\\nExitCode\b)|"
    r"\bsagemaker_(?:training|containers)\._?errors\.(InstallModuleError|InstallRequirementsError|ImportModuleError):")

#: dstack's termination reasons of a failed run (core/models/runs.py JobTerminationReason) and what each is
_DSTACK_REASONS: dict[str, Label | None] = {
    "INTERRUPTED_BY_NO_CAPACITY": Label.HARDWARE_ERROR,
    "INSTANCE_UNREACHABLE": Label.HARDWARE_ERROR,
    "FAILED_TO_START_DUE_TO_NO_CAPACITY": Label.CONFIG_ERROR,
    "CREATING_CONTAINER_ERROR": Label.CONFIG_ERROR,
    "PORTS_BINDING_FAILED": Label.CONFIG_ERROR,
    "VOLUME_ERROR": Label.CONFIG_ERROR,
    "INSTANCE_ACCESS_REVOKED": Label.CONFIG_ERROR,
    "WAITING_INSTANCE_LIMIT_EXCEEDED": Label.CONFIG_ERROR,
    "WAITING_RUNNER_LIMIT_EXCEEDED": Label.CONFIG_ERROR,
    "LOG_QUOTA_EXCEEDED": Label.CONFIG_ERROR,
    # the program's or the runner's crash: its cause is in the run's own log
    "CONTAINER_EXITED_WITH_ERROR": None,
    "EXECUTOR_ERROR": None,
    "GATEWAY_ERROR": None,
}
_DSTACK_FAILED = re.compile(r"\bRun failed with error code ([A-Z_]+)\b")

#: a traceback's header, and after it on the same line the exception it names: "[pkg.mod.]Class: message"
_HEADER = "Traceback (most recent call last)"
_FOLDED_EXCEPTION = re.compile(r"(?:^|[\s\]])(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S")

#: RMM's out_of_memory (a std::bad_alloc): CUDA gave it no memory, or its pool reached its maximum
_RMM_OUT_OF_MEMORY = re.compile(r"\bstd::bad_alloc: out_of_memory: (?:CUDA error at|RMM failure at)|"
                                r"\bRMM failure at: \S*pool_memory_resource\.hpp:\d*:? ?Maximum pool size exceeded")

#: c10d's store socket that timed out on a receive (Utils.hpp), as Python raises it
_C10D_SOCKET_TIMEOUT = re.compile(r"\b(?:RuntimeError|DistNetworkError): Socket Timeout\s*$")

#: IPython's header of an exception raised in a cell (as round33c reads it): the class, spaces, the words
_IPYTHON_HEADER = re.compile(r"^[\s>]*(?:-{10,}\s*)?((?:\w+\.)*[A-Z]\w*)\s{3,}Traceback \(most\b")


def folded_traceback(text: str) -> bool:
    """Whether ``text`` is a traceback folded into one line: its header, then the exception it names."""
    _, header, after = text.partition(_HEADER)
    return bool(header) and _FOLDED_EXCEPTION.search(after) is not None


def round34c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("Kernel" in text or "kernel " in text) and _KERNEL_DIED.search(text) is not None:
        return Form(FormKind.CRASH, "a notebook kernel that died (Jupyter's restarter)")
    if "Error:" in text and (toolkit := _TOOLKIT_SETUP_ERROR.search(text)) is not None:
        name = toolkit.group(1) or toolkit.group(2)
        return Form(FormKind.ERROR, f"the SageMaker training toolkit's {name} (the job's code or its requirements "
                                    "could not be set up)", Label.CONFIG_ERROR)
    if "Run failed with error code " in text and (dstack := _DSTACK_FAILED.search(text)) is not None:
        reason = dstack.group(1)
        if reason in _DSTACK_REASONS:
            return Form(FormKind.CRASH, f"a run dstack ended with {reason}", _DSTACK_REASONS[reason])
    if ("out_of_memory" in text or "Maximum pool size" in text) and _RMM_OUT_OF_MEMORY.search(text) is not None:
        return Form(FormKind.ERROR, "RMM's out_of_memory (the device allocator could not allocate)", Label.OOM)
    if "Socket Timeout" in text and _C10D_SOCKET_TIMEOUT.search(text) is not None:
        return Form(FormKind.ERROR, "c10d's store socket that timed out (Socket Timeout)", Label.COMM_ERROR)
    return None


def round34c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already),
    and the cause the class of IPython's cell header names."""
    form = round34c_form(text)
    if form is not None and form.label is not None:
        return form.label, form.name
    if "Traceback (most" in text and (header := _IPYTHON_HEADER.match(text)) is not None:
        cause = class_cause(header.group(1))
        if cause is not None:
            return cause.label, f"{cause.form} in IPython's cell header"
    return None
