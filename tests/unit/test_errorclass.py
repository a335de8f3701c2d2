"""What an error line says by its form (watchdog/diagnosis/errorclass.py): real lines no signature knows, the
near misses that must say nothing, and the class table checked against the installed packages."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

import builtins
import importlib

import pytest

from neuron_watch.diagnosis.errorclass import EXCEPTION_BASES, EXCEPTION_FAMILIES, family_of, read_error
from neuron_watch.events import Action, Label

#: real lines (the excerpt named beside each) and what their form says
READS = [
    # NCCL's WARN by the subsystem that printed it (nccl src/ layout)
    ("SHJS-PF4ZKYLL:92777:92889 [0] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:01/../../0000:01:00.0", Label.CONFIG_ERROR),  # NVIDIA/nccl#573
    ("gpu5:35917:35994 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129", Label.COMM_ERROR),  # NVIDIA/nccl-tests#24
    ("[2026-05-04 19:55:27] GPU-606:534134:535429 [1] transport/net_ib/p2p_resiliency.cc:325 NCCL WARN NET/IB: ncclIbResiliencyHandleDeviceFailure: Device 0 marked as failed. Initiating recovery? Yes (send comm=0x7f03e8086000, outstandingRecovery=0)", Label.COMM_ERROR),
    ("user:16901:16967 [2] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3", Label.COMM_ERROR),
    ("[2026-03-13 22:26:02] host-01.example.com:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx_x:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:xxx.xx.xx.xx, remote GID ::ffff:xxx.xx.xxx.xx", Label.COMM_ERROR),  # NVIDIA/nccl#2013
    ("container-e275-1553839402050-12124-01-000057:815:864 [0] misc/ibvwrap.cu:220 NCCL WARN Call to ibv_get_async_event failed", Label.COMM_ERROR),  # NVIDIA/nccl#230
    ("9306dc444753:248281:248306 [1] misc/argcheck.cc:39 NCCL WARN AllReduce : invalid root 4 (root should be in the 0..4 range)", Label.CONFIG_ERROR),
    # libfabric's fi_getinfo with no matching provider (-FI_ENODATA): no fabric for this process
    ("[2025-10-16 22:16:08] ip-172-31-3-90:1929:1937 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available", Label.CONFIG_ERROR),  # aws/aws-ofi-nccl#1020
    # a Python exception's class
    ("CompilationError: at 8:11:", Label.COMPILE_ERROR),  # kijai/ComfyUI-WanVideoWrapper#252 (triton)
    ("backend='inductor' raised:", Label.COMPILE_ERROR),
    ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:", Label.COMPILE_ERROR),
    ("[rank0]: ModuleNotFoundError: No module named 'flash_attn'", Label.CONFIG_ERROR),
    ("> FileNotFoundError: [Errno 2] No such file or directory: '/data/train.jsonl'", Label.CONFIG_ERROR),
    ("torch.distributed.DistNetworkError: Connection reset by peer", Label.COMM_ERROR),
    ("ConnectionRefusedError: [Errno 111] Connection refused", Label.COMM_ERROR),
    ("(RayTrainWorker pid=954, ip=10.67.132.202) torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", Label.COMM_ERROR),
    ("FloatingPointError: Minimum loss scale reached (0.0001).", Label.NUMERICAL_ERROR),
    # a message that names a missing file, under a class that says nothing
    ("[rank3]: ValueError: File data/mllm_dome.json not found.", Label.CONFIG_ERROR),  # hiyouga/LlamaFactory#6191
    ("AssertionError: checkpoint path /ckpt/step_100 does not exist", Label.CONFIG_ERROR),
    ("OSError: [Errno 2] No such file or directory: 'configs/train.yaml'", Label.CONFIG_ERROR),
    # argparse's usage error (Lib/argparse.py)
    ("`error: unrecognized arguments: --local_rank=0`", Label.CONFIG_ERROR),  # yangjianxin1/Firefly#154
    ("fine-tune.py: error: unrecognized arguments: --local_rank=1 --deepspeed llms/flan-t5-fp16-z3.json", Label.CONFIG_ERROR),
    ("train.py: error: the following arguments are required: --model_name_or_path", Label.CONFIG_ERROR),
    ("main.py: error: argument --lr: invalid float value: 'x'", Label.CONFIG_ERROR),
    # an XLA status code
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4.7 GB", Label.OOM),
]

#: error lines whose form says nothing of a cause: they stay "cause not recognised"
SAYS_NOTHING = [
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "ValueError: When using `deepspeed_config_file`, the following accelerate config variables will be ignored: ['gradient_accumulation_steps', 'gradient_clipping',",
    "AttributeError: Neuron executable (neff) is empty. Please check neuron-cc is installed and working properly (`pip install neuron-cc` to install neuron-cc).",
    "RuntimeError: connect() timed out. Original timeout was 60000 ms.",
    "gpu5:35917:35917 [1] init.cu:194 NCCL WARN Cuda failure 'an illegal memory access was encountered'",
    # a class that names a family only inside its message is not that family
    "KeyError: 'ConnectionError'",
    "2024-04-12 07:13:06,123 - ERROR - trainer - could not write the metrics file",
    "gcc: error: unrecognized command-line option '-mavx512'",
    "Error: the metrics server refused the upload: unrecognized arguments in the payload",
    # RendezvousClosedError is the job finishing, not a broken connection (torch/distributed/elastic/rendezvous/api.py)
    "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
    # fi_getinfo failing otherwise (a device that errs, not one that is absent) says nothing of a cause
    "ip-10-0-0-1:12:12 [0] nccl_net_ofi_init:1033 NCCL WARN NET/OFI OFI fi_getinfo() call failed: Input/output error",
    # "not found" about something that is not a file
    "KeyError: 'dense_wh_mask' not found in batch",
    "ValueError: Tokenizer class LlamaTokenizer does not exist or is not currently imported.",
]


@pytest.mark.parametrize(("line", "label"), READS)
def test_the_form_says_the_cause(line: str, label: Label) -> None:
    reading = read_error(line)
    assert reading is not None, line
    assert reading.label is label
    assert reading.advice


@pytest.mark.parametrize("line", SAYS_NOTHING)
def test_a_form_without_a_cause_reads_nothing(line: str) -> None:
    assert read_error(line) is None


def test_what_a_restart_cannot_fix_stops_the_job() -> None:
    for line, label in READS:
        reading = read_error(line)
        assert reading is not None
        expected = Action.STOP if label in (Label.CONFIG_ERROR, Label.COMPILE_ERROR, Label.NUMERICAL_ERROR) else Action.RESTART
        assert reading.action is expected, line


def test_subclasses_take_their_base_family() -> None:
    assert family_of("ModuleNotFoundError") == family_of("ImportError")
    assert family_of("TabError") == family_of("SyntaxError")
    assert family_of("InductorError") == family_of("BackendCompilerFailed")
    assert family_of("RuntimeError") is None


def _cls(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module) if module else builtins, name)  # type: ignore[no-any-return]


#: where each name of the table lives in the installed packages (triton is not installed here)
WHERE = {
    "ImportError": "ImportError", "ModuleNotFoundError": "ModuleNotFoundError", "SyntaxError": "SyntaxError",
    "IndentationError": "IndentationError", "TabError": "TabError", "FileNotFoundError": "FileNotFoundError",
    "NotADirectoryError": "NotADirectoryError", "IsADirectoryError": "IsADirectoryError",
    "PermissionError": "PermissionError", "MemoryError": "MemoryError", "ConnectionError": "ConnectionError",
    "ConnectionRefusedError": "ConnectionRefusedError", "ConnectionResetError": "ConnectionResetError",
    "ConnectionAbortedError": "ConnectionAbortedError", "BrokenPipeError": "BrokenPipeError",
    "FloatingPointError": "FloatingPointError",
    "OutOfMemoryError": "torch.OutOfMemoryError",
    "DistNetworkError": "torch.distributed.DistNetworkError", "DistStoreError": "torch.distributed.DistStoreError",
    "RendezvousConnectionError": "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError",
    "RendezvousTimeoutError": "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
    "BackendCompilerFailed": "torch._dynamo.exc.BackendCompilerFailed",
    "InductorError": "torch._inductor.exc.InductorError",
    "LoweringException": "torch._inductor.exc.LoweringException",
    "CppCompileError": "torch._inductor.exc.CppCompileError",
    "CUDACompileError": "torch._inductor.exc.CUDACompileError",
    "MisconfigurationException": "lightning.fabric.utilities.exceptions.MisconfigurationException",
}


def test_the_table_is_the_installed_class_hierarchy() -> None:
    """Every class of the table exists where its source says, and every base the table names is
    a real base of it (the hierarchy is read from the packages, not assumed)."""
    assert set(EXCEPTION_FAMILIES) - {"CompilationError"} <= set(WHERE)  # triton's is not installed here
    for name, base in EXCEPTION_BASES.items():
        assert issubclass(_cls(WHERE[name]), _cls(WHERE[base])), f"{name} is not a {base}"
    for name in EXCEPTION_FAMILIES:
        if name in WHERE:
            assert _cls(WHERE[name]).__name__ == name
    # the torch.distributed family the table does not list says nothing by its class alone
    assert issubclass(_cls("torch.distributed.DistNetworkError"), _cls("torch.distributed.DistError"))
    assert family_of("DistError") is None
