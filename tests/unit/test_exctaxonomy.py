"""The readers of structure (exctaxonomy.py): an exception class's words, an errno, reports of known
layout, and where a program-mistake exception was raised.

Table-driven: each row is a line as programs print it (Python's traceback.format_exception_only,
glibc's strerror, C code's "errno N") and the cause it states, or None for a near miss: a class
whose name states nothing, a help text that names a class, an errno whose cause depends on who
reports it, a word that only contains an errno's name.
"""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_lines
from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.exctaxonomy import (
    ERRNOS,
    class_cause,
    errno_cause,
    exception_class,
    frame_of,
    program_mistake,
    raised_in_setup,
    read_structure,
)
from neuron_watch.events import Action, Label, LogLine, RankKey

C, OM, M, P = Label.CONFIG_ERROR, Label.OOM, Label.COMM_ERROR, Label.COMPILE_ERROR

STRUCTURE: list[tuple[str, Label | None]] = [
    # class words: the set-up
    ("omegaconf.errors.ConfigAttributeError: Key 'preprocessing' is not in struct", C),
    ("omegaconf.errors.ConfigKeyError: Key 'launcher' is not in struct", C),
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for TrainingArguments", C),
    ("huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-65)", C),
    ("huggingface_hub.utils._errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache",
     C),
    ("NotImplementedError: Could not run 'aten::empty_strided' with arguments from the 'QuantizedCPU' backend.", C),
    ("click.exceptions.UsageError: No such option: --nproc-per-node", C),
    ("pkg_resources.VersionConflict: (torch 1.13.1 (/opt/conda/lib/python3.8/site-packages), "
     "Requirement.parse('torch>=2.0'))", C),
    # class words: memory
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 978.00 MiB", OM),
    ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.", OM),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape", OM),
    # class words: the peer or the link
    ("requests.exceptions.ConnectTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries "
     "exceeded with url: /api/models", M),
    ("aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected", M),
    ("http.client.RemoteDisconnected: Remote end closed connection without response", M),
    ("tornado.iostream.StreamClosedError: Stream is closed", M),
    ("tensorflow.python.framework.errors_impl.UnavailableError: Socket closed", M),
    # class words: a compiler
    ("CompilationError: at 8:11:", P),
    # errno: by number as Python prints it, by name, by C code's "errno N", by glibc's text
    ("OSError: [Errno 98] Address already in use", C),
    ("OSError: [Errno 28] No space left on device: '/dev/shm/nccl-abc'", C),
    ("PermissionError: [Errno 13] Permission denied: '/root/google_vm_config.lock'", C),
    ("socket.bind failed: EADDRINUSE", C),
    ("RuntimeError: [enforce fail at CPUAllocator.cpp:64] . DefaultCPUAllocator: can't allocate memory: you tried "
     "to allocate 402653184 bytes. Error code 12 (Cannot allocate memory)", OM),
    ("[E socket.cpp:860] [c10d] The client socket has timed out after 900s while trying to connect to "
     "(10.0.0.1, 29500). errno 110", M),
    ("ConnectionResetError: [Errno 104] Connection reset by peer", M),
    # Rust's io::Error ("{text} (os error {code})"), Go's syscall.Errno (glibc's text, first letter in lower case)
    ("Error: Os { code: 98, kind: AddrInUse, message: \"Address already in use\" } (os error 98)", C),
    ("panic: dial tcp 10.0.0.1:8080: connect: connection refused", M),
    ("open /data/train.tfrecord: no such file or directory", C),
    # reports whose structure states the cause
    ("Feb 23 03:28:16 kernel: EDAC sbridge MC1: HANDLING MCE MEMORY ERROR", Label.HARDWARE_ERROR),
    ("[  +0.000013] EDAC skx MC3: HANDLING MCE MEMORY ERROR", Label.HARDWARE_ERROR),
    ("EDAC MC0: 1 UE memory read error on CPU_SrcID#0_Ha#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0x0)",
     Label.HARDWARE_ERROR),
    ("srun: error: Unable to create step for job 16413634: Invalid generic resource (gres) specification", C),
    ("srun: error: Unable to create step for job 17627941: Memory required by task is not available", C),
    # CUDA's error names (cuda.h CUresult, driver_types.h cudaError_t)
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to allocate 1048576 bytes: CUDA_ERROR_OUT_OF_MEMORY: "
     "out of memory", OM),
    ("RuntimeError: CUDA driver error: cudaErrorNoDevice", C),
    ("2023-02-01 10:00:00.000000: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:268] failed call to cuInit: "
     "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", C),
    ("CUDA error: uncorrectable ECC error encountered (cudaErrorECCUncorrectable)", Label.HARDWARE_ERROR),
    ("XlaRuntimeError: INTERNAL: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", None),
    ("failed call to cuInit: CUDA_ERROR_NOT_INITIALIZED: initialization error", None),
    ("CUDA_ERROR_NO_DEVICES_FOUND_IN_THE_LOG is no enumeration", None),
    # near misses: a corrected memory error, a build step's exit (a wrapper of the compiler's error),
    # srun's other words
    ("EDAC MC1: 1 CE memory scrubbing error on CPU_SrcID#1_Ha#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0xee30a0)",
     None),
    ("subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.", None),
    ("subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 1.", None),
    ("srun: error: DEL2212S020: task 0: Terminated", None),
    # near misses: classes whose name says nothing, a class named in a help text, causes that depend
    # on who reports them, a word that only holds an errno's letters, prose with a capitalised word
    # (errorclass's own table knows DistStoreError through torch's class hierarchy, not by its words)
    ("[rank1]: torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients.", None),
    ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269", None),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", None),
    ("ValueError: invalid literal for int() with base 10: 'abc'", None),
    ("  --timeout TIMEOUT  seconds before a ConnectTimeout is raised (default: 30)", None),
    ("BlockingIOError: [Errno 11] Resource temporarily unavailable", None),
    ("OSError: [Errno 22] Invalid argument", None),
    ("EBUSYNESS is not a word either", None),
    ("Timeout: 30s per request, retried 3 times", None),
    ("failed to read (os error 11)", None),  # EAGAIN says nothing of a cause
    ("WARNING: the ConfigError of the previous run was ignored", None),
    ("[Errno 99999] unknown", None),
]


@pytest.mark.parametrize(("line", "label"), STRUCTURE)
def test_read_structure(line: str, label: Label | None) -> None:
    cause = read_structure(line)
    assert (cause.label if cause is not None else None) is label, (line, cause)


@pytest.mark.parametrize(("name", "label"), [
    ("OOMError", OM), ("CUDAOutOfMemoryError", OM), ("ReadTimeout", M), ("ConnectionClosedError", M),
    ("ServiceUnavailable", M), ("MisconfigurationException", C), ("UnsupportedOperation", C),
    ("LoweringException", P), ("RuntimeError", None), ("CalledProcessError", None), ("NCCLError", None),
    ("ChildFailedError", None), ("KeyboardInterrupt", None), ("RendezvousClosedError", None),
])
def test_class_cause_reads_the_words_of_the_name(name: str, label: Label | None) -> None:
    cause = class_cause(name)
    assert (cause.label if cause is not None else None) is label, (name, cause)


def test_exception_class_is_the_line_head_only() -> None:
    assert exception_class("[rank3]: torch.OutOfMemoryError: CUDA out of memory.") == "torch.OutOfMemoryError"
    assert exception_class("> requests.exceptions.ReadTimeout: timed out") == "requests.exceptions.ReadTimeout"
    assert exception_class("the run raised torch.OutOfMemoryError: CUDA out of memory") is None


def test_errno_table_numbers_and_texts_are_distinct() -> None:
    """Each Linux number and each glibc text names one errno (the reverse maps lose none)."""
    assert len({n for n, _, _ in ERRNOS.values()}) == len(ERRNOS)
    assert len({t for _, t, _ in ERRNOS.values()}) == len(ERRNOS)
    for name, (number, text, label) in ERRNOS.items():
        for form in (name, f"[Errno {number}] x", f"errno={number}", text, f"x (os error {number})",
                     text[0].lower() + text[1:]):
            cause = errno_cause(form)
            assert cause is not None and cause.label is label and name in cause.form, (form, cause)


@pytest.mark.parametrize(("line", "label", "action"), [
    ("aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected", M, Action.RESTART),
    ("omegaconf.errors.ConfigAttributeError: Key 'use_fused_kernels' is not in struct", C, Action.STOP),
    ("OSError: [Errno 28] No space left on device", C, Action.STOP),
])
def test_read_error_asks_the_structure_last(line: str, label: Label, action: Action) -> None:
    """errorclass reads the structure of an error line no earlier form explains, with the label's action."""
    reading = read_error(line)
    assert reading is not None and (reading.label, reading.action) == (label, action)


# -- where a program-mistake exception was raised ---------------------------------------------------

#: real tracebacks: huggingface/text-generation-inference#425 (an assert in set-up), facebookresearch/
#: deepcluster#2 (os.environ's KeyError under init_distributed_mode: the standard library's frame is
#: the caller's), DeepDeblur-PyTorch#49 (a KeyError in the evaluation pass), FairMOT#242 (in forward)
TGI = [
    '  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/models/__init__.py", line 169, in get_model',
    "    return BLOOMSharded(",
    '  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/models/bloom.py", line 80, in __init__',
    "    self.process_group, rank, world_size = initialize_torch_distributed()",
    '  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/utils/dist.py", line 15, in '
    "initialize_torch_distributed",
    '    assert world_size <= torch.cuda.device_count(), "Each process is one gpu"',
    "AssertionError: Each process is one gpu",
]
DEEPCLUSTER = [
    '  File "main.py", line 115, in main',
    '  File "/media/.../deepcluster/deepcluster/core/src/utils.py", line 66, in init_distributed_mode',
    '  File "/home/.../dev/miniconda/envs/deepcluster/lib/python3.7/os.py", line 678, in __getitem__',
    "KeyError: 'RANK'",
]
DEEPDEBLUR = [
    '  File "main.py", line 54, in main_worker',
    '  File "/home/DeepDeblur-PyTorch-master/src/train.py", line 196, in test',
    '  File "/home/DeepDeblur-PyTorch-master/src/train.py", line 182, in evaluate',
    '  File "/home/DeepDeblur-PyTorch-master/src/loss/__init__.py", line 311, in get_loss_desc',
    "KeyError: 10",
]
FAIRMOT = [
    '  File "/home/ubuntu/anaconda3/envs/FairMOT/lib/python3.7/site-packages/torch/nn/modules/module.py", line 532, '
    "in __call__",
    '  File "/home/ubuntu/FairMOT/src/lib/trains/mot.py", line 49, in forward',
    "KeyError: 'dense_wh_mask'",
]


def _frames(lines: list[str]) -> list[tuple[str, str]]:
    return [f for f in map(frame_of, lines) if f is not None]


@pytest.mark.parametrize(("lines", "function"), [
    (TGI, "initialize_torch_distributed"),
    (DEEPCLUSTER, "init_distributed_mode"),
    (DEEPDEBLUR, None),  # the evaluation pass runs the work
    (FAIRMOT, None),  # forward
    ([], None),
])
def test_setup_function_reads_where_the_exception_was_raised(lines: list[str], function: str | None) -> None:
    assert raised_in_setup(_frames(lines)) == function


@pytest.mark.parametrize(("line", "name"), [
    ("AssertionError: Each process is one gpu", "AssertionError"),
    ("KeyError: 'RANK'", "KeyError"),
    ("[rank6]: ValueError: File data/mllm_dome.json not found.", "ValueError"),
    ("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)", "JSONDecodeError"),
    ("RuntimeError: CUDA error: invalid device ordinal", None),
    ("the ValueError: raised above is ignored", None),
])
def test_program_mistake(line: str, name: str | None) -> None:
    assert program_mistake(line) == name


def _diagnose(lines: list[str]) -> tuple[Label, Action]:
    v, _ = diagnose_lines(LogLine(RankKey("n0", 0), t, 1000.0 + i, 1000.0 + i, "rank-0.log", i + 1)
                          for i, t in enumerate(lines))
    return v.label, v.action


STEPS = [f"step {s} loss 2.{s:03d} step_time 0.5s" for s in range(1, 4)]


@pytest.mark.parametrize(("lines", "verdict"), [
    (["Traceback (most recent call last):", *TGI], (Label.CONFIG_ERROR, Action.STOP)),
    (["Traceback (most recent call last):", *DEEPDEBLUR], (Label.OTHER_CRASH, Action.RESTART)),
    # after progress the same set-up error is a crash of the running program
    ([*STEPS, "Traceback (most recent call last):", *TGI], (Label.OTHER_CRASH, Action.RESTART)),
])
def test_diagnose_reads_a_setup_mistake_before_progress_as_configuration(
        lines: list[str], verdict: tuple[Label, Action]) -> None:
    assert _diagnose(lines) == verdict
