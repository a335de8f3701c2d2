# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-35 (classic deep RL and robotics), each as a rule of
its family, with real lines and the near misses the rule must leave alone: PhysX's default error callback and its GPU
buffers too small for the scene, its device allocator out of memory, its refusal of an API call it ignores, NVRTC's
refused GPU architecture, and torch.distributions' parameters that are not finite. Each line is from the corpus (named
by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, cause_of, read_quiet
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # PhysX's default error callback: "<file> (<line>) : <code> : <message>"
    ("/buildAgent/work/45f70df4210b2e3e/source/gpunarrowphase/src/PxgNarrowphaseCore.cpp (9908) : internal error : GPU compressContactStage1 fail to launch kernel stage 1!!",
     ERROR, None, "corpus (isaacgymenvs-45-physx-compress-contact-kernel-launch-fail)"),
    ("/buildAgent/work/99bede84aa0a52c2/source/physx/src/NpScene.cpp (3509) : internal error : PhysX Internal CUDA error. Simulation can not continue!",
     ERROR, None, "a public repository's notes of an Isaac Gym run (the same callback)"),
    # a GPU buffer too small for the scene, in the default callback's layout and in omni.physx's record
    ("/buildAgent/work/99bede84aa0a52c2/source/gpunarrowphase/src/PxgNarrowphaseCore.cpp (2185) : internal error : PxgDynamicsMemoryConfig::collisionStackSize buffer overflow detected, please increase its size to at least 1484688128 in the scene desc!",
     ERROR, Label.CONFIG_ERROR, "corpus (isaaclab-1199-physx-collision-stack-size-overflow-large-num-envs)"),
    ("2023-12-19 20:04:05 [5,983,110ms] [Error] [omni.physx.plugin] PhysX error: Patch buffer overflow detected, please increase its size to at least 219146 in the scene desc!                                  ",
     ERROR, Label.CONFIG_ERROR, "corpus (isaaclab-176-physx-patch-buffer-overflow-increase-size)"),
    ("> [Error] [omni.physx.plugin] PhysX error: The application needs to increase PxGpuDynamicsMemoryConfig::totalAggregatePairsCapacity to 16790 , otherwise, the simulation will miss interactions",
     ERROR, Label.CONFIG_ERROR, "corpus (isaaclab-981-physx-increase-total-aggregate-pairs-capacity)"),
    ("`PhysX error: The application needs to increase PxgDynamicsMemoryConfig::totalAggregatePairsCapacity to XXXX",
     ERROR, Label.CONFIG_ERROR, "Zhefan-Xu/NavRL#39 (as pasted, the size replaced by its author)"),
    # PhysX's CUDA device allocator that failed with CUDA's out-of-memory status
    ("PxgCudaDeviceMemoryAllocator fail to allocate memory 339738624 bytes!! Result = 2",
     ERROR, Label.OOM, "corpus (walk-these-ways-20-physx-device-allocator-fail-result-2)"),
    ("    - **错误信息**：PxgCudaDeviceMemoryAllocator fail to allocate memory 339738624 bytes!! Result = 2",
     ERROR, Label.OOM, "a public repository's notes of a legged_gym install on a small GPU"),
    # NVRTC refusing the GPU's architecture
    ("RuntimeError: nvrtc: error: invalid value for --gpu-architecture (-arch)",
     ERROR, Label.CONFIG_ERROR, "corpus (leggedlab-43-nvrtc-invalid-gpu-architecture-5070ti)"),
    ("(fragment shader):399: CUDA: nvrtc: error: invalid value for --gpu-architecture (-arch)",
     ERROR, Label.CONFIG_ERROR, "a public repository's notes of a CUDA shader JIT on a recent GPU"),
    # torch.distributions' parameters that are not finite
    ("ValueError: Expected parameter loc (Tensor of shape (4, 8)) of distribution Normal(loc: torch.Size([4, 8]), scale: torch.Size([4, 8])) to satisfy the constraint Real(), but found invalid values:",
     ERROR, Label.NUMERICAL_ERROR, "corpus (isaaclab-147-skrl-normal-loc-nan-lift-franka)"),
    ("> `ValueError: Expected parameter logits (Tensor of shape (64, 3)) of distribution Categorical to satisfy the constraint IndependentConstraint(Real(), 1), but found invalid values: nan`",
     ERROR, Label.NUMERICAL_ERROR, "a public repository's notes of a PPO agent on raw prices (torch's wording of a Categorical's constraint)"),
    ("RuntimeError: normal expects all elements of std >= 0.0",
     ERROR, Label.NUMERICAL_ERROR, "corpus (legged-lab-15-normal-std-negative-nan-rough-g1)"),
    ("RuntimeError: normal expects all elements of std >= 0.0 (this means graident exploding problem) So decrease grad_norm",
     ERROR, Label.NUMERICAL_ERROR, "a public repository's notes of an Isaac Gym PPO policy"),
]

#: PhysX's refusal of an API call it then ignores (omni.physx logs it at [Error]): quiet
REFUSED_CALLS = [
    "[Error] [omni.physx.plugin] PhysX error: PxArticulationLink::setGlobalPose(): it is illegal to call this method if PxSceneFlag::eENABLE_DIRECT_GPU_API is enabled!, FILE /builds/omniverse/physics/physx/source/physx/src/NpArticulationLink.cpp, LINE 353",  # corpus (marinegym-7-physx-setglobalpose-error-ignorable)
    "2026-03-19 02:21:25 [14,269ms] [Error] [omni.physx.plugin] PhysX error: PxRigidDynamic::setAngularVelocity(): it is illegal to call this method if PxSceneFlag::eENABLE_DIRECT_GPU_API is enabled!, FILE /builds/omniverse/physics/physx/source/physx/src/NpRigidDynamic.cpp, LINE 267",  # a public repository's notes of an OmniDrones run
    "PxArticulationLink::setCMassLocalPose() not allowed while simulation is running. Call will be ignored.",  # PhysX NpArticulationLink.cpp's eINVALID_OPERATION message
]

#: lines of the same words that are not these forms (and, unlike the quiet refusals, stay what they were)
NEAR_MISSES = [
    # the allocator's failure with another CUDA status: the echo of an illegal address met before, not memory
    "PxgCudaDeviceMemoryAllocator fail to allocate memory 675282944 bytes!! Result = 700",  # a public repository's notes of an Isaac Gym run
    # the callback's warnings and a refused call's code are not PhysX's failure
    "/buildAgent/work/99bede84aa0a52c2/source/gpucommon/src/PxgCudaMemoryAllocator.cpp (59) : warning : Failed to allocate pinned memory.",  # corpus (protomotions-222-...)
    # a buffer named in the documentation, and NVRTC's option in its help text
    "Use PxGpuDynamicsMemoryConfig::foundLostPairsCapacity to size the found/lost pairs buffer.",
    "  --gpu-architecture <arch> (-arch)  Specify the name of the class of GPU architectures for which the input must be compiled.",
    *REFUSED_CALLS,
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize("line", REFUSED_CALLS)
def test_refused_call_is_quiet(line: str) -> None:
    """PhysX's refusal of a call it ignores is a record omni.physx prints at [Error] whatever it reports."""
    assert read_quiet(line)


@pytest.mark.parametrize("line", [
    # PhysX's failures in omni.physx's record stay errors
    "2024-11-25 09:13:08 [11,526ms] [Error] [omni.physx.plugin] PhysX error: Synchronizing GPU Narrowphase failed! 700",  # corpus (isaaclab-1460-...)
    "2023-07-24 09:14:09 [250,761ms] [Error] [omni.physx.plugin] PhysX error: SynchronizeStreams cuEventRecord failed with error 700",  # isaac-sim/OmniIsaacGymEnvs#64
])
def test_physx_failure_is_not_quiet(line: str) -> None:
    assert not read_quiet(line)


def test_constraint_other_than_real_states_no_numerical_cause() -> None:
    """A scale refused by GreaterThan(0) may be negative without a NaN: the form of the real numbers alone is read."""
    line = "ValueError: Expected parameter scale (Tensor of shape (4, 8)) of distribution Normal(loc: torch.Size([4, 8]), scale: torch.Size([4, 8])) to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values:"
    stated = cause_of(line)
    assert stated is None or stated[0] is not Label.NUMERICAL_ERROR


def test_refused_calls_alone_are_healthy(tmp_path: Path) -> None:
    """A log of PhysX's refused calls (a run that goes on) is healthy; a buffer overflow beside them is configuration."""
    log = tmp_path / "refused.log"
    log.write_text("\n".join(REFUSED_CALLS[:2] * 3) + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
    overflow = tmp_path / "overflow.log"
    overflow.write_text(REFUSED_CALLS[0] + "\n" + FORMS[3][0] + "\n, FILE /buildAgent/work/74336105e89c4a74/source/gpunarrowphase/src/PxgNarrowphaseCore.cpp, LINE 1240\n")
    assert diagnose_paths([str(overflow)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_default_callback_report_is_no_healthy_log(tmp_path: Path) -> None:
    """Isaac Gym's run whose last words are PhysX's internal errors in the default callback's layout is a failure."""
    log = tmp_path / "physx.log"
    log.write_text(FORMS[0][0] + "\n\n" + FORMS[0][0].replace("(9908)", "(9945)").replace("Stage1", "Stage2") + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OTHER_CRASH
