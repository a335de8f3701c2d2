"""Failure forms read for the misses of round issue23-heldout-35 (part D: Kubernetes-native training): NVML's status
of a lost GPU as its callers print it, TensorFlow's failed status check that names memory exhaustion, and the STATUS
column of ``kubectl get pods`` with its NAMESPACE column, gRPC Python's report of an RPC the server was unavailable for.

Pure: no I/O. :func:`round35d_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 34, :func:`round35d_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a
line that is already an error.

Each form is read where its program prints it:

* NVML's return code NVML_ERROR_GPU_IS_LOST (15), "GPU is lost" in ``nvmlErrorString``: the GPU stopped answering
  the driver (fallen off the bus, a fatal Xid) and needs a reset or a reboot. Its callers print it in their own
  words: the Go bindings NVIDIA's device plugin long used return ``errors.New("nvml: " + nvmlErrorString(r))``
  (gpu-monitoring-tools bindings.go; its pure-Go table spells ``"nvml: gpu is lost"``), which the plugin wraps into
  the kubelet's admission error ``Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed ...:
  error creating nvml.Device 5: nvml: GPU is lost, which is unexpected`` (kubernetes#97131, read as a crash to
  restart; k8s-device-plugin#231); go-nvml's callers print the code's name, ``ERROR_GPU_IS_LOST`` (gpud: "failed to
  get device remapped rows: ERROR_GPU_IS_LOST"). A restart lands on the same lost GPU: the node is drained. Only a
  report of a call that failed is read (the "nvml:" prefix, or the code's name after a failure's words): a source's
  table of codes (``ERROR_GPU_IS_LOST = 15``) or prose that names the status is none. The Python binding, pynvml
  (nvidia-ml-py's pynvml.py), turns each return code into an exception class, ``NVMLError_`` and the code's name in
  CamelCase: this one raises ``NVMLError_GpuIsLost``, whose text is "GPU is lost" (W&B vendored it as
  wandb.vendor.pynvml.pynvml; round issue23-heldout-40 part B: wandb#1280, W&B's system-metrics thread raising it in
  an offline run after the GPU was lost, read as a crash to restart). Only its exception line is read: a source line
  that catches or raises the class is not.
* TensorFlow's (and XLA's, tsl's) status check: ``TF_CHECK_OK(val)`` logs ``Non-OK-status: <expr> status:
  <status>`` at FATAL when the call returned an error (tsl/platform/status.h; XLA's newer macro puts the status on
  a line of its own, "Status: ", which this line reader does not join). Its status says what failed; when that is
  memory exhausted, the process died out of memory: a kernel launch that CUDA refused with
  cudaErrorMemoryAllocation (``GpuLaunchKernel`` returns ``errors::Internal(cudaGetErrorString(err))``: "Internal:
  out of memory", kubeflow/trainer#1158 on 2 GB cards, read as healthy) or an allocation's ``RESOURCE_EXHAUSTED``.
  A check's other statuses (an invalid configuration, an illegal address, a compiler's) are not read here.
* ``kubectl get pods`` with the NAMESPACE column (``-A``/``--all-namespaces``) and ``-o wide``: round 14 part A reads
  the STATUS ``OOMKilled`` of a pod's row without it; the same row after its namespace (``kyverno
  kyverno-admission-controller-...  0/1  OOMKilled  1 (20s ago)  178m``), or cut after its STATUS in a markdown
  quote (alauda/kubeflow-chart#45, the training operator killed by its memory limit, read as healthy), is the same
  report: the container ran out of its memory limit.
* gRPC Python's error of a finished call, ``<_InactiveRpcError of RPC that terminated with:`` (``_Rendezvous`` in
  grpcio before 1.26, ``AioRpcError`` in grpc.aio), whose next lines are ``\tstatus = StatusCode.<CODE>`` and
  ``\tdetails = "..."`` (grpc/_channel.py ``_rpc_state_string``). Code UNAVAILABLE is, in gRPC's own words
  (doc/statuscodes.md), "most likely a transient condition, which can be corrected by retrying with a backoff": the
  peer could not be reached ("failed to connect to all addresses"). An ElasticDL worker on Kubernetes whose
  parameter-server pods' channels were not ready yet (sql-machine-learning/elasticdl#1494, read as healthy: the repr
  has no level and no exception line of its own). Only the repr's status line is read, on its own line or after
  "terminated with:" in an escaped message; a status in brackets inside a record (``[StatusCode.UNAVAILABLE]``, a
  client's INFO) is that record's.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round35d_form` reads hold, besides the needles failureforms already
#: searches: NVML's lost GPU in its callers' spellings, TensorFlow's failed status check
NEEDLES: tuple[str, ...] = ("GPU is lost", "gpu is lost", "GPU_IS_LOST", "NVMLError_GpuIsLost", "Non-OK-status",
                            "status = StatusCode.UNAVAILABLE")

#: NVML's GPU_IS_LOST as a failed call reports it: the Go bindings' "nvml: " prefix before nvmlErrorString's words,
#: or the code's name after a failure's words on the same line
_NVML_GPU_LOST = re.compile(r"\bnvml: gpu is lost\b|"
                            r"\b(?:fail\w*|error|unable|cannot|could not)\b.*\b(?:NVML_)?ERROR_GPU_IS_LOST\b",
                            re.IGNORECASE)
#: ... and pynvml's exception for it as an exception line: the class (after its module) at the head of the line, its
#: message or nothing after it; not a source line that catches or raises it
_PYNVML_GPU_LOST = re.compile(r"^[\s>*]*(?:[A-Za-z_][\w.]*\.)?NVMLError_GpuIsLost(?::|\s*$)")

#: TF_CHECK_OK's report of a status check that failed, the status after it on the same line
_STATUS_CHECK = re.compile(r"\bNon-OK-status: .*?\b[Ss]tatus: (.*)$")
#: a status whose code or message is memory exhausted (cudaGetErrorString's "out of memory", an allocator's)
_MEMORY_STATUS = re.compile(r"^\s*(?:\w+: )?(?:out of memory\b|OOM\b)|\bRESOURCE_EXHAUSTED\b|^Resource exhausted\b",
                            re.IGNORECASE)

#: an ISO-8601 stamp a collector may put before a line that a single line gives no envelope to strip
_STAMP = r"(?:\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\s+)?"

#: a ``kubectl get pods`` row after its NAMESPACE column (or cut after STATUS): namespace, name, READY, OOMKilled
_POD_ROW_OOM = re.compile(r"^" + _STAMP + r"[\s`>|#]*[a-z0-9][\w.-]*\s+[a-z0-9][\w.-]*\s+\d+/\d+\s+"
                          r"OOMKilled(?:\s|[`'\"。]|$)")

#: gRPC Python's repr of a finished call whose status is UNAVAILABLE: the status line of its own, or after the repr's
#: head in a message that escapes its newlines
_GRPC_UNAVAILABLE = re.compile(r"^" + _STAMP + r"[\s>|#]*status = StatusCode\.UNAVAILABLE\b|"
                               r"of RPC that terminated with:(?:\\n|\s)*(?:\\t)?status = StatusCode\.UNAVAILABLE\b")


def round35d_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if (("is lost" in text or "GPU_IS_LOST" in text) and _NVML_GPU_LOST.search(text)) \
            or ("GpuIsLost" in text and _PYNVML_GPU_LOST.search(text)):
        return Form(FormKind.ERROR, "NVML's status of a lost GPU (it needs a reset or a reboot)",
                    Label.HARDWARE_ERROR)
    if "Non-OK-status" in text and (check := _STATUS_CHECK.search(text)) is not None \
            and _MEMORY_STATUS.search(check.group(1)):
        return Form(FormKind.ERROR, "a status check that failed: memory exhausted", Label.OOM)
    if "OOMKilled" in text and _POD_ROW_OOM.search(text):
        return Form(FormKind.CRASH, "a container the OOM killer ended (kubectl's STATUS OOMKilled)", Label.OOM)
    if "StatusCode.UNAVAILABLE" in text and _GRPC_UNAVAILABLE.search(text):
        return Form(FormKind.COMM_WAIT, "an RPC whose server could not be reached yet (gRPC's UNAVAILABLE: retry "
                    "with backoff)")
    return None


def round35d_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round35d_form(text))
