# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-36 (accelerators other than NVIDIA and Neuron), each
as a rule of its family, with real lines and the near misses the rule must leave alone: the ROCm runtime's GPU memory
fault and hardware exception, the amdgpu driver's RAS reports of uncorrectable errors, a shell's "(core dumped)" in
any locale, CANN's runtime allocation failure by its code, and torch's printed scalar tensor whose autograd node name
is no finite loss. Each line is from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests

CRASH = FormKind.CRASH
ERROR = FormKind.ERROR
METRIC = FormKind.METRIC

ROCR_FAULT = "Memory access fault by GPU node-1 (Agent handle: 0x55eb9b596570) on address 0x7f66960b2000. Reason: Page not present or supervisor privilege."
AMDGPU_RAS = "[Sat Jan  7 14:25:56 2023] amdgpu 0000:e3:00.0: amdgpu: uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # ROCr's page-fault report (Runtime::VMFaultHandler), then std::abort()
    (ROCR_FAULT, CRASH, None, "corpus (pytorch-109929-rocm56-upscaler-memory-access-fault-abandon)"),
    ("“Memory access fault by GPU node-2 (Agent handle: 0x55fea5592860) on address 0x7fc133800000. Reason: Page not present or supervisor privilege.",
     CRASH, None, "corpus (rocm-legacy-1535-rocm42-training-memory-access-fault-node-2): in the paste's quotation marks"),
    ("Memory access fault by GPU node-1 on address 0x1e4000. Reason: Page not present or supervisor privilege.",
     CRASH, None, "corpus (hiptensorflow-60-resnet-cifar-memory-access-fault-aborted): the release before the agent handle"),
    ("Memory access fault by GPU node-2 (Agent handle: 0x55c77d07fd80) on address 0x7f0800018000. Reason: Unknown.",
     CRASH, None, "ROCm/aiter#1913 (hipBLASLt tuning on MI308X)"),
    ("Memory access fault by GPU node-3 (Agent handle: 0x55c77d07fd80) on address 0x7f0300000000. Reason: SRAM ECC failure.",
     CRASH, Label.HARDWARE_ERROR, "ROCR-Runtime runtime.cpp VMFaultHandler's format rendered with its 'SRAM ECC failure' reason"),
    # ROCr's hardware exception (Runtime::HwExceptionHandler): the GPU reset for a hang or an ECC error
    ("HW Exception by GPU node-4 (Agent handle: 0x1ebc04e0) reason :GPU Hang", CRASH, Label.HARDWARE_ERROR,
     "corpus (rocm-5259-gfx942-torch-training-hw-exception-gpu-hang-node-crash)"),
    ("HW Exception by GPU node-9 (Agent handle: 0x64ff272d8ab0) reason :GPU Hang", CRASH, Label.HARDWARE_ERROR,
     "ROCm/legacy-rocm-build#4021 (MI300X under axolotl)"),
    # amdgpu's RAS: the uncorrectable error interrupt, with or without a RAS event id; the count by block
    (AMDGPU_RAS, ERROR, Label.HARDWARE_ERROR, "corpus (rocm-legacy-1886-mi50-athub-uncorrectable-hardware-error-gpu-reset)"),
    ("[13850.912648] amdgpu 0000:1c:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
     ERROR, Label.HARDWARE_ERROR, "corpus (rocm-4021-mi300x-uncorrectable-hardware-error-aca-entries)"),
    ("[  918.654913] amdgpu 0000:15:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
     ERROR, Label.HARDWARE_ERROR, "a public issue's MI350X kernel log (GEMM kernel, GPU lost from the bus)"),
    ("amdgpu 0000:01:00.0: amdgpu: 2 uncorrectable hardware errors detected in umc block", ERROR, Label.HARDWARE_ERROR,
     "a public repository's fault-injection test of amdgpu's RAS counts"),
    ("amdgpu 0000:de:ad.0: amdgpu: socket: 0 2 uncorrectable hardware errors detected in gfx block", ERROR,
     Label.HARDWARE_ERROR, "a public repository's test fixture of the per-socket count"),
    # a shell's report of a core-dumping signal, in any locale and with the job's prefixes
    ("Abandon (core dumped)", CRASH, None, "corpus (pytorch-109929-rocm56-upscaler-memory-access-fault-abandon): French strsignal"),
    ("14957 segmentation fault (core dumped)  python train.py --pc_list_file ../data/data-split/all-train.txt --data_root",
     CRASH, None, "corpus (point2skeleton-6-segfault-environment): zsh's job status"),
    ('lp_xxl.sh: line 34: 12024 Aborted                 (core dumped) python3 -m t5x.train --gin_search_paths="${T5X_DIR},${FLAXFORMER_DIR},${PROMPT_DIR}"',
     CRASH, None, "corpus (t5x-340-xxl-tpu-pod-aborted-after-train-loop): bash's job status of a script"),
    ("Trace/breakpoint trap (core dumped)", CRASH, None, "bash's report of SIGTRAP (strsignal's description)"),
    # CANN's runtime record of a failed allocation, by its code alone (older releases) and by its title
    ("(EngineCore_DP0 pid=553) EL0004: [PID: 553] 2025-09-17-04:55:13.065.712 Failed to allocate memory.", CRASH,
     Label.OOM, "corpus (vllm-ascend-1993-300i-duo-dma-hardware-error-alloc-device-memory-failed)"),
    ("ERROR 04-09 21:56:46 [diffusion_engine.py:82] [PID: 210907] 2026-04-09-21:56:40.384.694 Memory_Allocation_Failure(EL0004): Failed to allocate memory requested by GE module.",
     CRASH, Label.OOM, "corpus (helios-62-ascend-ge-memory-allocation-failure): the titled record of the same code"),
    # torch's printed scalar loss that is NaN, beside its autograd node's name
    ("loss:  tensor(nan, device='mps:0', grad_fn=<NllLossBackward0>)", METRIC, Label.NUMERICAL_ERROR,
     "corpus (pytorch-107294-mps-nanogpt-logits-nan-loss-tensor-nan)"),
    ("        #loss = tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)", METRIC, Label.NUMERICAL_ERROR,
     "a public repository's code comment recording the loss it printed"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # amdgpu's bookkeeping around a fault, and its counts of none or of correctable errors
    "[Sat Jan  7 14:25:56 2023] amdgpu 0000:e3:00.0: amdgpu: MEM ECC is active.",  # corpus (rocm-legacy-1886-...)
    "[Sat Jan  7 14:25:56 2023] amdgpu 0000:e3:00.0: amdgpu: SRAM ECC is active.",  # corpus (rocm-legacy-1886-...)
    "amdgpu 0000:c3:00.0: amdgpu: no uncorrectable hardware errors detected in umc block",  # a public repository's all-clear test line
    "amdgpu 0000:01:00.0: amdgpu: 1 correctable hardware errors detected in gfx block",  # the fault-injection test above
    "amdgpu 0000:01:00.0: amdgpu: 0 uncorrectable hardware errors detected in umc block",  # amdgpu's count format rendered with zero
    # the record's explanation lines alone
    "        Possible Cause: Available memory is insufficient.",  # corpus (llamafactory-6816-npu-ds3-offload-...)
    # a sentence that quotes a shell's report is not the report
    "I saw Aborted (core dumped) after the first epoch",  # constructed
    # torch's printed finite loss beside its autograd node's name
    "tensor(6.2229, device='cuda:0', grad_fn=<NllLossBackward0>)",  # a public thread's nanoGPT-style log
    "SequenceClassifierOutput(loss=tensor(0.7678, grad_fn=<NllLossBackward0>), ",  # a public repository's notebook output
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_rocm_fault_with_a_localised_abort_is_a_crash(tmp_path: Path) -> None:
    """ROCr's page fault and the French shell's abort: a crash to restart, not a healthy log."""
    log = tmp_path / "fault.log"
    log.write_text(f"{ROCR_FAULT}\nAbandon (core dumped)\n")
    verdict = diagnose_paths([str(log)], now=0.0).verdict
    assert verdict.label is Label.OTHER_CRASH
    assert verdict.action is Action.RESTART


def test_amdgpu_uncorrectable_error_drains_the_node_its_bookkeeping_does_not(tmp_path: Path) -> None:
    """The driver's RAS interrupt among its ECC notices is a hardware fault (drain); the notices alone are healthy."""
    fault = tmp_path / "ras.log"
    fault.write_text("[Sat Jan  7 14:25:56 2023] amdgpu 0000:e3:00.0: amdgpu: MEM ECC is active.\n"
                     f"{AMDGPU_RAS}\n"
                     "[Sat Jan  7 14:25:56 2023] amdgpu 0000:e3:00.0: amdgpu: GPU reset begin!\n")
    verdict = diagnose_paths([str(fault)], now=0.0).verdict
    assert verdict.label is Label.HARDWARE_ERROR
    assert verdict.action is Action.DRAIN_AND_RESTART
    quiet = tmp_path / "ecc.log"
    quiet.write_text("[Sat Jan  7 14:25:56 2023] amdgpu 0000:e3:00.0: amdgpu: MEM ECC is active.\n"
                     "[Sat Jan  7 14:25:56 2023] amdgpu 0000:e3:00.0: amdgpu: SRAM ECC is active.\n")
    assert diagnose_paths([str(quiet)], now=0.0).verdict.label is Label.HEALTHY
