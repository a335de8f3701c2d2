"""Failure forms read for the misses of round issue23-heldout-34 (part F: multi-node and disaggregated inference
serving): a KV cache the prefill and decode servers could not hand over, ProcessGroupNCCL's dump signal of a
collective that timed out, a c10d store read that timed out, vLLM's wait for a Ray placement group the cluster cannot
give, the kubelet's liveness probe and its kill, a DeepGEMM JIT compile still at work, TensorRT-LLM's check of a world
size against its parallel layout, and an exception saying what the job asks is not supported.

Pure: no I/O. :func:`round34f_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 33, :func:`round34f_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* Disaggregated serving hands a request's KV cache from the prefill server to the decode server over a transfer
  engine (Mooncake, NIXL) and says so when the hand-over failed. SGLang's connectors raise ``KVTransferError``, whose
  ``__str__`` is ``KVTransferError(bootstrap_room=<room>): <reason>`` (python/sglang/srt/disaggregation/*/conn.py),
  and the scheduler logs it as ``Decode transfer failed for request rank=... with exception KVTransferError(...)`` or
  ``Prefill transfer failed for request ...`` (sglang#10560 "Failed due to an unknown reason from another rank",
  sglang#7338 "Failed to get kvcache from prefill instance, it might be dead"); vLLM's and vLLM-Ascend's Mooncake
  connectors log ``Mooncake transfer failed for request ...`` (vllm-ascend#7846) or raise ``KV transfer failed for
  request ...``; Mooncake's store reports its ErrorCode ``TRANSFER_FAIL`` (-800, "Transfer operation failed",
  mooncake-store types.h; vllm-ascend#7792). The transport between the two servers failed: comm_error, even while
  the server goes on answering its health checks (the requests that needed the hand-over fail). Only those
  engines' words are read: "transfer failed" after another noun (a kernel driver's ``i2c_transfer failed``) is not.
* ProcessGroupNCCL's heartbeat monitor, when a collective timed out, logs ``Received a dump signal due to a
  collective timeout from this local rank`` (or ``from rank <n>``) ``and we will try our best to dump the debug
  info. Last enqueued NCCL work: ..., last completed NCCL work: ...`` (torch/csrc/distributed/c10d/
  ProcessGroupNCCL.cpp ``getNCCLWatchdogTimeoutErrorMsg``) before it aborts the process: a collective that never
  completed (sglang#10216, two nodes of DeepSeek-V3, read as a crash of unknown cause by its glog ``E`` head).
* c10d's socket to its store warns ``waitForInput: socket SocketImpl(...) timed out after <ms>ms`` (torch/csrc/
  distributed/c10d/socket.cpp) when the store's peer did not answer within the timeout: the rendezvous store between
  the nodes failed, comm_error (sglang#3398, two nodes whose scheduler then raised in its set-up, read as
  configuration).
* vLLM's Ray executor waits for the placement group of its workers' GPUs and, while Ray cannot give it, logs
  ``Waiting for creating a placement group of specs for <s> seconds. specs=[...]. Check `ray status` ...`` with a
  doubling interval until it gives up with ``ValueError: Cannot provide a placement group of
  placement_group_specs=[...] within <s> seconds`` (vllm/executor/ray_utils.py ``_wait_until_pg_ready``): the job
  asks for devices the cluster does not have where it asks (vllm#14997: TP 2 x PP 2 under CUDA_VISIBLE_DEVICES=2,3,
  read as healthy). An error while the log goes on (the group came), configuration as the last word.
* The kubelet reports a failed probe as an event ``Liveness probe failed: HTTP probe failed with statuscode: <n>``
  (pkg/probe/http/http.go) and kills the container: ``Container <name> failed liveness probe, will be restarted``
  (Normal Killing; kubectl describe prints the events' table, Azure Container Apps the same message in JSON). The
  kill is a crash; a liveness or startup probe answered 404 asks a path the server does not serve, configuration
  (llm-d-inference-sim#45, restarted 6 times, read as healthy). A readiness probe that fails while a model loads is
  the server not ready yet, and is not read.
* SGLang JIT-compiles DeepGEMM's kernels for every M at warm-up and says so first (python/sglang/srt/layers/
  quantization/deep_gemm_wrapper/compile_utils.py: ``Entering DeepGEMM JIT Pre-Compile session. It may take a long
  time (typically 10-20 mins) ...``, ``Try DeepGEMM JIT Compiling for <GEMM_...> N=..., K=...``): a log that ends
  there is compiling (sglang#15891, read as healthy).
* TensorRT-LLM checks its world against the engine's parallel layout (cpp/tensorrt_llm/executor/executorImpl.cpp
  ``TLLM_CHECK_WITH_INFO(worldSize == tp * pp * cp, "With communicationMode kLEADER, MPI worldSize is expected to be
  equal to tp*pp*cp when participantIds are not specified")``; the runtime's ``Number of GPUs per node <n> must be at
  least as large as TP (<t>) * PP (<p>)``): the job was launched with a world the engine was not built for,
  configuration (TensorRT-LLM#2021, tensorrtllm_backend#283).
* An exception of a builtin class whose message says that what the job asks is not supported (``RuntimeError: PD
  Disaggregation does NOT support PD`` with different TP sizes on prefill and decode, llm-d#2433; ``ValueError: Your
  setup doesn't support bf16/gpu``) refuses the job's set-up: configuration. A compiler's refusal (``Mosaic failed to
  compile TPU kernel: Target does not support this comparison``) is the compile's own failure and is left to it; a
  warning that falls back from what a library does not support is not an exception line and is not read.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round34f_form` reads hold, besides the needles failureforms already
#: searches: the KV-cache hand-over's failure words, the dump signal of a timed-out collective, vLLM's placement-group
#: wait and its refusal, the kubelet's probe events, DeepGEMM's JIT session, TensorRT-LLM's layout checks
NEEDLES: tuple[str, ...] = (
    "KVTransferError(bootstrap_room=", " transfer failed", "TRANSFER_FAIL", "Transfer slice failed with status",
    "waitForInput: socket", "Received a dump signal due to a collective timeout",
    "ProcessGroupNCCL preparing to dump debug info", "Observed flight recorder dump signal from another rank",
    "does not support", "does NOT support", "doesn't support",
    "Waiting for creating a placement group of specs", "Cannot provide a placement group of",
    "failed liveness probe, will be restarted", "probe failed: HTTP probe failed with statuscode",
    "DeepGEMM JIT Pre-Compile session", "Try DeepGEMM JIT Compiling for",
    "worldSize is expected to be equal to tp*pp", "must be at least as large as TP (")

#: the KV-cache hand-over that failed, in the transfer engines' and connectors' words
_KV_TRANSFER_FAILED = re.compile(
    r"\bKVTransferError\(bootstrap_room=\d+|"
    r"\b(?:Prefill|Decode|KV(?: ?[Cc]ache)?|Mooncake|NIXL) transfer failed\b|"
    r"(?<![\w-])TRANSFER_FAIL\b|\bTransfer slice failed with status\b")

#: ProcessGroupNCCL's report, before it dumps and aborts, of a collective that timed out here or on a peer, the
#: flight recorder's dump it then makes, and a peer's dump signal seen through the store
_DUMP_ON_TIMEOUT = re.compile(r"Received a dump signal due to a collective timeout from\s+(?:this local rank|rank \d+)|"
                              r"\bProcessGroupNCCL preparing to dump debug info\b|"
                              r"\bObserved flight recorder dump signal from another rank\b")

#: c10d's socket to the store that got no answer within its timeout (torch/csrc/distributed/c10d/socket.cpp
#: ``C10D_WARNING("waitForInput: socket {} timed out after {}ms", ...)``): the store's peer never answered
_STORE_READ_TIMED_OUT = re.compile(r"\bwaitForInput: socket\b.*\btimed out after \d+ ?ms\b")

#: vLLM's Ray executor waiting for, then refusing, a placement group the cluster cannot give
_PLACEMENT_GROUP_WAIT = re.compile(r"\bWaiting for creating a placement group of specs for \d+ seconds\b|"
                                   r"\bCannot provide a placement group of\b")

#: the kubelet's kill of a container whose liveness probe failed
_LIVENESS_KILL = re.compile(r"\bfailed liveness probe, will be restarted\b")
#: a liveness or startup probe answered "not found": the path asked is not one the server serves
_PROBE_NOT_FOUND = re.compile(r"\b(?:Liveness|Startup) probe failed: HTTP probe failed with statuscode: 404\b")

#: SGLang's DeepGEMM JIT pre-compile of every M at warm-up
_DEEPGEMM_JIT = re.compile(r"\bEntering DeepGEMM JIT Pre-Compile session\b|\bTry DeepGEMM JIT Compiling for\b")

#: TensorRT-LLM's checks of the world it was launched in against the engine's tensor and pipeline parallelism
_LAYOUT_NOT_WORLD = re.compile(r"\bworldSize is expected to be equal to tp\*pp\b|"
                               r"\bNumber of GPUs per node \d+ must be at least as large as TP \(\d+\) \* PP \(\d+\)")


#: an exception whose message says that what the job asks is not supported ("PD Disaggregation does NOT support PD
#: with different TP sizes", "Your setup doesn't support bf16/gpu"): a refusal of the job's set-up, which a restart
#: repeats; a compiler's refusal ("Mosaic failed to compile TPU kernel: Target does not support ...") is the
#: compile's own failure and is left to it
_REFUSED_SUPPORT = re.compile(r"^\W*(?:\[[^\]]*\]:?\s*)?(?:[\w.]+\.)?(?:RuntimeError|ValueError|NotImplementedError|"
                              r"AssertionError|TypeError|Exception): (?!.*\bcompile)"
                              r".*\b(?i:does(?:n't| not) support)\b")


def round34f_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("KVTransferError" in text or "ransfer failed" in text or "TRANSFER_FAIL" in text
            or "ransfer slice failed" in text) \
            and _KV_TRANSFER_FAILED.search(text):
        return Form(FormKind.ERROR, "a KV-cache hand-over between disaggregated servers that failed",
                    Label.COMM_ERROR)
    if "waitForInput" in text and _STORE_READ_TIMED_OUT.search(text):
        return Form(FormKind.ERROR, "a read from the c10d store that timed out (its peer never answered)",
                    Label.COMM_ERROR)
    if "dump" in text and _DUMP_ON_TIMEOUT.search(text):
        return Form(FormKind.ERROR, "a collective that timed out (ProcessGroupNCCL's dump signal)",
                    Label.COLLECTIVE_HANG)
    if "placement group" in text and _PLACEMENT_GROUP_WAIT.search(text):
        return Form(FormKind.ERROR, "a Ray placement group the cluster cannot give (vLLM's wait for it)",
                    Label.CONFIG_ERROR)
    if "probe" in text:
        if _PROBE_NOT_FOUND.search(text):
            return Form(FormKind.ERROR, "a liveness probe of a path the server does not serve (404)",
                        Label.CONFIG_ERROR)
        if _LIVENESS_KILL.search(text):
            return Form(FormKind.CRASH, "a container the kubelet killed for its failed liveness probe")
    if "DeepGEMM JIT" in text and _DEEPGEMM_JIT.search(text):
        return Form(FormKind.COMPILE_RUNNING, "a DeepGEMM JIT compile")
    if "support" in text and _REFUSED_SUPPORT.search(text):
        return Form(FormKind.ERROR, "an exception saying a component does not support what the job asks",
                    Label.CONFIG_ERROR)
    if _LAYOUT_NOT_WORLD.search(text):
        return Form(FormKind.ERROR, "a world that does not fit the engine's tensor/pipeline parallelism",
                    Label.CONFIG_ERROR)
    return None


def round34f_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round34f_form(text))
