"""Failure forms read for the misses of round issue23-heldout-35 (part B: classic deep RL and robotics): PhysX's own
error report (its default error callback's layout and its GPU buffers too small for the scene), PhysX's refusal of an
API call it ignores, NVRTC refusing a GPU architecture it does not know, and torch.distributions' checks of a policy's
parameters that are no longer finite.

Pure: no I/O. :func:`round35b_quiet` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` before any
form (and through ``read_quiet`` by the table's last rule), :func:`round35b_form` after the forms of round 34,
:func:`round35b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already
an error.

Each form is read where its program prints it:

* PhysX reports every error through its error callback with a code (``PxErrorCode``). The default callback
  (PxDefaultErrorCallback, which Isaac Gym and the PhysX samples keep) prints ``"%s (%d) : %s : %s\\n"``: the source
  file, its line, the code's name (``internal error``, ``abort``, ``out of memory``, ``invalid operation``, ``invalid
  parameter``, ``warning``, ``performance warning``, ``info``) and the message, with no logger's head, so no severity
  reader saw it (isaac-sim/IsaacGymEnvs#45, a run whose GPU contact kernels failed to launch, read as healthy). An
  ``internal error`` or ``abort`` is PhysX's own failure: an error whose cause the message states or not; ``out of
  memory`` is one of memory. The codes of an API call refused (``invalid operation``/``invalid parameter``) and the
  warnings are not read here.
* PhysX's GPU pipeline works in buffers sized once, by the scene's ``PxGpuDynamicsMemoryConfig`` (Isaac Lab's
  ``PhysxCfg.gpu_*``, Isaac Gym's ``sim_params.physx``); when a step needs more it says how much and drops what did not
  fit: ``<Patch|Contact|PxgDynamicsMemoryConfig::collisionStackSize> buffer overflow detected, please increase its size
  to at least <n> in the scene desc!`` (gpunarrowphase) or ``The application needs to increase
  PxGpuDynamicsMemoryConfig::<capacity> to <n> , otherwise, the simulation will miss interactions`` (gpubroadphase),
  in either layout (the default callback's, or omni.physx's ``PhysX error: <message>, FILE <f>, LINE <n>`` record).
  A setting too small for the scene, which a restart repeats: configuration (IsaacLab#176, #981, #1199;
  Zhefan-Xu/NavRL#39).
* PhysX's CUDA device allocator says ``PxgCudaDeviceMemoryAllocator fail to allocate memory <n> bytes!! Result = <r>``
  with CUDA's status; 2 is CUDA's out-of-memory (walk-these-ways#20 on a small GPU, read as healthy; the same line is
  the JAX-beside-Isaac note of skrl's documentation). Another status (700, an illegal address met before) is the
  earlier failure's echo, not read.
* PhysX refuses an API call that its scene's mode forbids and ignores it: ``Px<Class>::<method>(): it is illegal to
  call this method if PxSceneFlag::eENABLE_DIRECT_GPU_API is enabled!`` (raised as ``eINVALID_OPERATION`` in
  NpArticulationLink.cpp, NpRigidDynamic.cpp ...), ``... not allowed while simulation is running. Call will be
  ignored.``. omni.physx logs every PhysX report at [Error], but the simulation goes on (Marine-RL/MarineGym#7: "can
  be ignored", read as a crash to restart): quiet.
* NVRTC, the runtime compiler TorchScript's fuser and CuPy use for the kernels they generate, is given the GPU's
  ``--gpu-architecture=compute_<cc>``; a toolkit older than the GPU does not know the value and refuses the option:
  ``nvrtc: error: invalid value for --gpu-architecture (-arch)`` (Hellod035/LeggedLab#43 on an RTX 5070 Ti, fixed by
  a newer torch; the same on a 4090 with torch 1.8, RFDesign#58, HIMLoco#14). The build does not support the device:
  configuration.
* torch.distributions validates a distribution's parameters: ``Expected parameter loc (Tensor of shape ...) of
  distribution Normal(...) to satisfy the constraint Real(), but found invalid values:`` (constraints.real fails only
  on NaN and infinity; a Categorical's logits are ``IndependentConstraint(Real(), 1)``), and ``torch.normal``
  checks ``normal expects all elements of std >= 0.0``, which a NaN std (or one a diverging update drove negative)
  fails. A policy's outputs that left the finite numbers: the training diverged (legged_gym and rsl_rl runs, skrl's
  lift task, IsaacLab#147; read as configuration or a crash): numerical.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round35b_form` reads hold, besides the needles failureforms already
#: searches: PhysX's default callback's codes, its buffers' and allocator's words, NVRTC's refused architecture,
#: torch.distributions' checks
NEEDLES: tuple[str, ...] = (
    ") : internal error : ", ") : abort : ", ") : out of memory : ",
    "buffer overflow detected, please increase its size", "DynamicsMemoryConfig::",
    "Allocator fail to allocate memory", "invalid value for --gpu-architecture",
    "to satisfy the constraint", "normal expects all elements of std")

#: PhysX's default error callback's line: "<file> (<line>) : <code> : <message>" (PxDefaultErrorCallback)
_PHYSX_REPORT = re.compile(r"\S\.(?:cpp|h|hpp|cu|cuh|inl) \(\d+\) : (internal error|abort|out of memory) : (.*)")

#: a GPU buffer of the scene too small for a step, with the size PhysX asks for
_CAPACITY_TOO_SMALL = re.compile(r"\bbuffer overflow detected, please increase its size to at least \d+ in the "
                                 r"scene desc|\bneeds to increase Px\w*DynamicsMemoryConfig::\w+")

#: PhysX's CUDA allocator that failed with CUDA's out-of-memory status (2)
_DEVICE_ALLOC_OOM = re.compile(r"\bPx\w*Allocator fail to allocate memory \d+ bytes!* Result = 2(?!\d)")

#: PhysX refusing, and ignoring, an API call its scene's mode forbids
_CALL_REFUSED = re.compile(r"\bPx\w+::\w+\(\)\s*:?\s*(?:it is illegal to call this method (?:if|while)\b|"
                           r".*\bnot allowed while simulation is running\. Call will be ignored\.)")

#: NVRTC refusing the GPU architecture it was given (a toolkit older than the device)
_NVRTC_ARCH = re.compile(r"\bnvrtc: error: invalid value for --gpu-architecture\b")

#: torch.distributions' check of a parameter against the real numbers, and torch.normal's check of its std
_NOT_FINITE_PARAMETER = re.compile(r"\bto satisfy the constraint (?:IndependentConstraint\()?Real\(\)(?:, \d+\))?, "
                                   r"but found invalid values\b|\bnormal expects all elements of std >= 0\.0\b")


def round35b_quiet(text: str) -> bool:
    """Whether ``text`` is PhysX's refusal of an API call it then ignores (omni.physx logs it at [Error]): no
    failure."""
    return ("Px" in text and ("illegal to call" in text or "Call will be ignored" in text)
            and _CALL_REFUSED.search(text) is not None)


def round35b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("buffer overflow" in text or "DynamicsMemoryConfig::" in text) and _CAPACITY_TOO_SMALL.search(text):
        return Form(FormKind.ERROR, "a PhysX GPU buffer too small for the scene (its configured capacity)",
                    Label.CONFIG_ERROR)
    if "Allocator fail to allocate" in text and _DEVICE_ALLOC_OOM.search(text):
        return Form(FormKind.ERROR, "PhysX's device allocator out of memory (CUDA status 2)", Label.OOM)
    if " : " in text:
        report = _PHYSX_REPORT.search(text)
        if report is not None:
            if report.group(1) == "out of memory":
                return Form(FormKind.ERROR, "PhysX's report of memory it could not get", Label.OOM)
            return Form(FormKind.ERROR, f"PhysX's report of an {report.group(1)}")
    if "nvrtc" in text and _NVRTC_ARCH.search(text):
        return Form(FormKind.ERROR, "NVRTC refusing the GPU's architecture (a toolkit older than the device)",
                    Label.CONFIG_ERROR)
    if ("constraint" in text or "normal expects" in text) and _NOT_FINITE_PARAMETER.search(text):
        return Form(FormKind.ERROR, "a distribution's parameters that are not finite (the policy diverged)",
                    Label.NUMERICAL_ERROR)
    return None


def round35b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round35b_form(text))
