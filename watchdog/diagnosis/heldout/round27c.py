"""Failure forms read for the misses of round issue23-heldout-27 (third C: serving stacks, Ray, ROCm, Ascend/CANN,
Paddle, data loaders): a child process ended by a fatal signal in Go's words, an AMD GPU its driver could not reset,
a connection refused by the host itself, the Ascend runtime unable to count its devices, an operator CANN has no
kernel binary for, an archive that is corrupt, Paddle's data-loader bus error, llama.cpp's model loader refusing a
model, and TensorRT's engine build that failed.

Pure: no I/O. :func:`round27c_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 26, and :func:`round27c_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* Go's ``os.(*ProcessState).String`` reports a child that a signal ended as ``"signal: " +
  status.Signal().String()`` (os/exec_posix.go; `` (core dumped)`` appended when it dumped core), the signal by its
  name in the syscall package's table (zerrors_linux_*.go: "illegal instruction", "aborted", "bus error",
  "floating point exception", "killed", "segmentation fault"; "abort trap" on the BSDs). Every Go supervisor that
  runs a worker prints it as the worker's exit: Ollama's "llama runner process has terminated: signal: illegal
  instruction (core dumped)", its older "llama.go:451: signal: illegal instruction" (round issue23-heldout-27:
  ollama-1603, read as healthy). A fatal signal is a crash of unknown cause; SIGILL's instruction the CPU lacks is
  read as configuration by the judge's start-up reading (startup.illegal_instruction), as the shell's words are.
  A signal others send to stop a process (terminated, interrupt, hangup) and Go's "stop signal: " are not read.
* The amdgpu kernel driver's GPU recovery reports a reset that failed: ``dev_err(adev->dev, "GPU mode1 reset
  failed\\n")`` (amdgpu_device_mode1_reset), ``"ASIC reset failed with error, %d for drm dev, %s"``
  (amdgpu_do_asic_reset), ``"GPU reset(%d) failed\\n"`` (amdgpu_device_gpu_recover). The device did not come back
  from the reset its driver tried after a hang or a fault: until the node is recovered (a reboot, a reseat) it is
  not usable, a hardware matter for the watchdog (round issue23-heldout-27: legacy-rocm-build-2494, multi-GPU
  training whose two GPUs' resets failed and whose PSP did not resume, read as healthy). A reset that succeeded
  ("GPU reset(2) succeeded!") is the driver's recovery and is not read.
* A connection refused by the host itself: ECONNREFUSED ("Connection refused", "connect error", "Failed to
  connect to", urllib3's "Failed to establish a new connection") to a loopback address (localhost, 127.0.0.0/8,
  ::1). Nothing listens at that port on this host: the service the program needs (etcd, a tracking server, a
  store, sshd) was not started, or the address resolves to the host where the job meant a peer (a hostname mapped
  to 127.0.1.1). The corpus labels these configuration (mlflow-12154/-12173, pytorch-15592, aws-do-eks-50,
  deepspeedexamples-894); ai-dynamo's runtime failing to reach etcd at localhost:2379 read as a peer's failure
  (round issue23-heldout-27: dynamo-1188, dynamo-851). A line that says it will retry is a wait, not read here.
* The Ascend runtime unable to count its devices: CANN's ``DRV_ERROR_PROCESS(drvRet, "Call drvGetDevNum,
  drvRetCode=%d.", ...)`` (FacadeDriver::GetDeviceCount), ``rtGetDeviceCount:ErrCode=507899, desc=[driver
  error:internal error]`` and ACL's ``aclrtGetDeviceCountImpl:get device count failed``: no device is usable by
  this process (the devices not mounted into the container, held by another service, the driver not loaded), the
  set-up, as CUDA's device count that fails is (round issue23-heldout-27: vllm-ascend-2542, a second vLLM service
  on a 310P card, restarted as a crash).
* CANN's operator library finding no kernel binary for an operator, in the aclnn runtime's own words
  (``OP_LOGE(ACLNN_ERR_INNER, "Cannot find binary for op %s.", ...)`` and the bin selector's "Cannot find bin of
  op %s, integral key ..."): the same installation that does not match as round 20's "Op <type> does not has any
  binary." (heldout.round20a), the installed kernels holding none for this chip, dtype or CANN (round
  issue23-heldout-27: vllm-ascend-37, PromptFlashAttention in bf16 on an Atlas 310P, restarted as a crash).
* An archive or compressed file that is corrupt or cut short, in the Python standard library's exceptions:
  tarfile's ``ReadError`` ("unexpected end of data", "file could not be opened successfully"), zipfile's
  ``BadZipFile`` ("File is not a zip file"), gzip's ``BadGzipFile`` and the ``EOFError`` "Compressed file ended
  before the end-of-stream marker was reached". The data file has to be written or fetched again; a restart reads
  the same bytes (the corpus labels corrupt files configuration: a checkpoint's header, a truncated zip; round
  issue23-heldout-27: webdataset-142, a truncated shard, restarted as a crash).
* Paddle's data-loader signal handler for SIGBUS (paddle/fluid/imperative/data_loader.cc): "ERROR: Unexpected BUS
  error encountered in DataLoader worker. This might be caused by insufficient shared memory (shm), please check
  whether use_shared_memory is set and storage space in /dev/shm is enough" -- PyTorch's handler says the same in
  other words, which the signature table reads (host.dataloader_worker_memory): /dev/shm full, host memory as the
  corpus labels it (round issue23-heldout-27: paddleocr-9391, read as a crash of unknown cause).
* llama.cpp's model loader (llama_model_load: ``LLAMA_LOG_ERROR("%s: error loading model: %s\\n", ...)``), bare
  or under a front end (LM Studio, Ollama, llama-box): a model the engine cannot load. Its reason
  ``unknown model architecture: '<arch>'`` (llama-arch.cpp) is a model newer than the engine, which only an
  upgrade fixes: configuration (round issue23-heldout-27: lmstudio-820, gemma3n on an older runtime, read as
  healthy; the same words for gemma4, qwen35 and deepseek3_2 in other threads).
* TensorRT's engine build that failed: TensorRT-LLM's ``[TRT-LLM] [E] Engine building failed``, optimum-nvidia's
  ``TRT Engine build failed...``, polygraphy's "Invalid Engine. Please ensure the engine was built correctly" and
  the builder's "Could not find any implementation for node ..." (Error Code 10: no tactic for a node). Building an
  engine is compiling the network: a failed build is a compile error, unless the build states a set-up cause of
  its own (an OutOfMemory record is read before it; round issue23-heldout-27: optimum-nvidia-58 and
  tensorrt-llm-54, restarted as crashes; round 13's tensorrt-llm-1478).
* A program's own report of a loss that went non-finite: "NaN/Inf detected" (or "NaN or Inf", "nan/inf", always
  with "detected") said of a loss named after it: QuickAnnotator's Ray Train
  worker "[NaN/Inf detected] Loss 'seg_dice' is invalid. Setting to zero." (round issue23-heldout-27:
  quickannotator-137, every loss term, read as healthy), the many training loops that print "NaN/Inf detected in
  loss at step %d" before they skip a batch or stop. A numerical failure, withdrawn like every metric form by the
  rank's progress after it (a loop that skips the batch and goes on). The same words of another subject
  (TensorBoard's "NaN or Inf found in input tensor" for a histogram, on healthy runs in the corpus) and a loss
  scaler's "inf/nan found in gradients, skipping the step" (fp16 training that goes on) are not read.
* oneCCL's ATL that could not start its transport: its exception ``oneCCL: <file>:<line> <function>: EXCEPTION:
  failed to initialize ATL`` and atl_ofi_helper's "fi_getinfo error: ret -61, providers 0" (FI_ENODATA, no
  libfabric provider) when a quoted copy lost the record's leading bar (round 24's reader wants ``|CCL_ERROR|``):
  the transport the job was told to use is not there for this process, configuration as round 24 reads it (round
  issue23-heldout-27: llm-d-2270, FI_PROVIDER_PATH unset in an XPU image).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round27c_form` reads hold, besides the needles failureforms already
#: searches: Go's status of a signalled child, amdgpu's failed resets, the Ascend runtime's device count, CANN's
#: missing binary, Paddle's bus error, llama.cpp's loader
NEEDLES: tuple[str, ...] = ("signal: ", "reset failed", "GPU reset(", "GetDeviceCount", "Cannot find bin",
                            "BUS error", "error loading model")

#: Go's ProcessState of a child a fatal signal ended (not "stop signal: ", and not the signals others send to stop)
_GO_SIGNALLED = re.compile(r"(?<!stop )(?<![\w-])signal: (?:illegal instruction|aborted|abort trap|bus error|"
                           r"floating point exception|killed|segmentation fault)(?: \(core dumped\))?(?![\w-])")

#: the amdgpu driver's report of a GPU reset that failed
_AMDGPU_RESET_FAILED = re.compile(r"\bGPU mode[12] reset failed\b|\bASIC reset failed with error, -?\d+\b|"
                                  r"\bGPU reset\(\d+\) failed\b")

#: a connection that was refused or could not be made ...
_REFUSED = re.compile(r"\bConnection refused\b|\bconnect error\b|\b[Ff]ailed to connect to\b|\bECONNREFUSED\b|"
                      r"\bFailed to establish a new connection\b")
#: ... to a loopback address (the host itself)
_LOOPBACK = re.compile(r"(?<![\w.:-])(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?![\w.-])")
#: ... said to be tried again: a wait, read by the forms of retries
_RETRIED = re.compile(r"(?i:\bretry|\bretrying\b|\bwill retry\b)")

#: the Ascend runtime (CANN's driver facade, ACL) failing to count the devices
_ASCEND_DEVICE_COUNT = re.compile(r"\bGetDeviceCount:Call drvGetDevNum, drvRetCode=[1-9]\d*|"
                                  r"\brtGetDeviceCount:ErrCode=\d+|"
                                  r"\baclrtGetDeviceCount\w*: ?get device count failed\b")

#: CANN's aclnn runtime finding no kernel binary for an operator
_CANN_NO_BINARY = re.compile(r"\bCannot find bin(?:ary)? (?:of|for) op \w+")

#: the standard library's exceptions for an archive or a compressed stream that is corrupt or truncated
_ARCHIVE_CORRUPT = re.compile(r"\btarfile\.ReadError\b|\b(?:zipfile\.)?BadZipFile\b|\bgzip\.BadGzipFile\b|"
                              r"\bEOFError: Compressed file ended before the end-of-stream marker was reached\b")

#: Paddle's data-loader handler for SIGBUS, which states shared memory as the cause
_PADDLE_LOADER_BUS = re.compile(r"\bUnexpected BUS error encountered in DataLoader worker\b")

#: llama.cpp's model loader that failed, and the reason it gives for a model newer than the engine
_LLAMA_LOAD_FAILED = re.compile(r"(?:^|[\s:])error loading model(?: architecture)?: \S")
_UNKNOWN_ARCHITECTURE = re.compile(r"\bunknown model architecture: '?[\w.-]+'?")

#: TensorRT's engine build that failed, in TensorRT-LLM's, optimum-nvidia's, polygraphy's and the builder's words
_ENGINE_BUILD_FAILED = re.compile(r"\[TRT-LLM\] \[E\] Engine building failed\b|\bTRT Engine build failed\b|"
                                  r"\bInvalid Engine\. Please ensure the engine was built correctly\b|"
                                  r"\bCould not find any implementation for node\b")

#: a program's report of a non-finite value ("NaN/Inf detected", "NaN or Inf detected") ...
_NOT_FINITE_DETECTED = re.compile(r"\b(?:NaN|nan|Inf|inf)(?:\s*/\s*(?:NaN|nan|Inf|inf)| or (?:NaN|nan|Inf|inf))? "
                                  r"(?:detected|DETECTED)\b")
#: ... said of a loss (a word after the report)
_LOSS = re.compile(r"(?i:\bloss(?:es)?\b)")

#: oneCCL's ATL that could not start its transport: its exception, or fi_getinfo's FI_ENODATA in atl_ofi's words
_CCL_ATL_FAILED = re.compile(r"\boneCCL: \S+ \w+: EXCEPTION: failed to initialize ATL\b|"
                             r"\bfi_getinfo error: ret -61, providers 0\b")


def round27c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "signal: " in text and _GO_SIGNALLED.search(text):
        return Form(FormKind.CRASH, "a child process ended by a fatal signal (Go's ProcessState)")
    if ("reset failed" in text or "GPU reset(" in text) and _AMDGPU_RESET_FAILED.search(text):
        return Form(FormKind.ERROR, "the amdgpu driver's GPU reset that failed: the device did not come back",
                    Label.HARDWARE_ERROR)
    if "GetDeviceCount" in text and _ASCEND_DEVICE_COUNT.search(text):
        return Form(FormKind.ERROR, "the Ascend runtime unable to count its devices (none usable by this process)",
                    Label.CONFIG_ERROR)
    if "Cannot find bin" in text and _CANN_NO_BINARY.search(text):
        return Form(FormKind.ERROR, "an operator CANN's installed kernels have no binary for", Label.CONFIG_ERROR)
    if "BUS error" in text and _PADDLE_LOADER_BUS.search(text):
        return Form(FormKind.CRASH, "Paddle's data-loader worker killed by SIGBUS (shared memory)", Label.OOM)
    if ("NaN" in text or "nan" in text or "Inf" in text) and (found := _NOT_FINITE_DETECTED.search(text)) \
            and _LOSS.search(text, found.end()):
        return Form(FormKind.METRIC, "a program's report of a loss that is not finite")
    if "error loading model" in text and _LLAMA_LOAD_FAILED.search(text):
        if "unknown model architecture" in text and _UNKNOWN_ARCHITECTURE.search(text):
            return Form(FormKind.ERROR, "a model architecture the engine does not know (the engine is older than "
                        "the model)", Label.CONFIG_ERROR)
        return Form(FormKind.ERROR, "llama.cpp's model loader that failed")
    return None


def round27c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    form = stated_cause(round27c_form(text))
    if form is not None:
        return form
    if _REFUSED.search(text) and _LOOPBACK.search(text) and not _RETRIED.search(text):
        return Label.CONFIG_ERROR, "a connection refused by this host itself: the service it needs is not running here"
    if _ARCHIVE_CORRUPT.search(text):
        return Label.CONFIG_ERROR, "an archive or compressed file that is corrupt or truncated"
    if "unknown model architecture" in text and _UNKNOWN_ARCHITECTURE.search(text):
        return Label.CONFIG_ERROR, "a model architecture the engine does not know (the engine is older than the model)"
    if _ENGINE_BUILD_FAILED.search(text):
        return Label.COMPILE_ERROR, "TensorRT's engine build that failed"
    if ("CCL" in text or "fi_getinfo" in text) and _CCL_ATL_FAILED.search(text):
        return Label.CONFIG_ERROR, "oneCCL's ATL unable to start its transport (no libfabric provider)"
    return None
