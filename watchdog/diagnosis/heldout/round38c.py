"""Failure forms read for the misses of round issue23-heldout-38 (part C: robotics, embodied AI and
reinforcement-learning training): the simulators' and their stacks' own words for a broken install, a dataset that is
not there, a transport that closed, a policy whose actions are not finite and a program that cannot fit in device
memory, and Mesa's EGL warnings on a headless renderer.

Pure: no I/O. :func:`round38c_form` is asked after the forms of round 37, :func:`round38c_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error, and
:func:`round38c_quiet` by :func:`neuron_watch.diagnosis.failureforms.read_quiet`.

Each form is read where its program prints it:

* JAX's CUDA plugin (jax_plugins/xla_cuda12/__init__.py, ``_version_check``) checks each CUDA library it needs when it
  initialises and, when one cannot be loaded, raises ``RuntimeError(f"Unable to load {name}. Is it installed?")``
  (cuSPARSE, cuDNN, cuBLAS, cuFFT, cuSOLVER, cuPTI, the CUDA runtime, NCCL); jax logs the traceback and falls back to
  the CPU. The line named no cause, so the traceback read as a crash to restart (round issue23-heldout-38:
  mujoco_playground#137, whose fix was to reinstall jax with its CUDA 12 plugins at matching versions). A library
  missing from the install is there again on restart: a configuration error. The fallback warning itself ("An NVIDIA
  GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed") is left alone: healthy runs of the
  corpus print it (dire-jax#14, kohya-colab#133).
* TensorFlow Datasets (tensorflow_datasets/core/read_only_builder.py) adds to its ``DatasetNotFoundError`` the places it
  looked: ``No builder could be found in the directory: {data_dir} for the builder: {name}.`` and ``The builder
  directory {dir} doesn't contain any versions.``. A paste that keeps the context and not the exception's first line
  said nothing (round issue23-heldout-38: droid_policy_learning#1, DROID never downloaded to DATA_PATH, read as
  healthy). A dataset that is not where the run looks is a configuration error.
* Ray's core worker (src/ray/core_worker/task_manager.cc) records a task that failed with its status,
  ``Task failed: IOError: 14: Socket closed: Type=ACTOR_TASK, ...``: gRPC's status 14 (UNAVAILABLE) in Ray's
  ``IOError`` with the transport's words. "Connection reset by peer" was read already; "Socket closed", "failed to
  connect to all addresses", "Broken pipe" were not and the record read as a crash (round issue23-heldout-38:
  SMARTS#337, an RLlib run whose machine lost its network and its address). The transport that closed is a
  communication error.
* dm_control's physics (dm_control/mujoco/engine.py, ``check_invalid_state``) raises ``PhysicsError("Physics state is
  invalid. Warning(s) raised: mjWARN_...")`` with MuJoCo's warnings. ``mjWARN_BADCTRL`` is MuJoCo's "Nan, Inf or huge
  value in CTRL": the controls the policy sent are not finite (round issue23-heldout-38: dm_control#99, the
  maintainer's answer to a soccer run, read as a crash to restart). A policy whose actions are NaN is a numerical
  error. The other warnings are left to the exception reader: ``mjWARN_CONTACTFULL`` (a contact buffer too small,
  dm_control#155, a crash its maintainer says to discard and go on from) and ``mjWARN_BADQACC`` (a simulation that
  diverged, which a smaller timestep fixes) are not a NaN of the learner.
* XLA's rematerialization pass (xla/service/hlo_rematerialization.cc, later xla/hlo/transforms/simplifiers/) warns
  ``Can't reduce memory use below {budget} by rematerialization; only reduced to ...`` when the program does not fit
  the device's memory limit. A negative budget means the program's parameters and outputs alone exceed the memory:
  no schedule can fit, the allocation that follows fails (round issue23-heldout-38: openpi#280, pi0-FAST fine-tuning
  on a 24 GB card, the paste cut after the warning, read as healthy; mujoco#1431's SAC replay buffer of 30M entries
  printed -30.29GiB before its OOM). A positive budget is left alone: the warning alone does not say the run failed.
* Mesa's EGL (src/egl/main/egllog.c) prints its records as ``libEGL warning: ...``, ``libEGL info: ...``,
  ``libEGL debug: ...``: a warning whatever it says, such as "failed to open /dev/dri/renderD128: Permission denied"
  from a headless MuJoCo renderer that goes on (round issue23-heldout-38: dm_control#214, whose user says the
  program terminates normally, read as a configuration error for the words "Permission denied"). Mesa's fatal
  records (``libEGL fatal:``) are not quieted.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round38c_form` reads hold, besides the needles failureforms already
#: searches: JAX's CUDA plugin's question, TFDS's context of a dataset not found, Ray's status 14 in its IOError,
#: dm_control's physics error for non-finite controls, XLA's rematerialization of a negative budget
NEEDLES: tuple[str, ...] = (
    ". Is it installed?", "No builder could be found in the directory", "doesn't contain any versions",
    "IOError: ", "mjWARN_BADCTRL", "Can't reduce memory use below -",
)

#: JAX's CUDA plugin's RuntimeError for a CUDA library it could not load
_JAX_CUDA_LIBRARY_MISSING = re.compile(r"\bUnable to load (?:cu[A-Za-z]+|CUDA(?: runtime)?|NCCL|NVRTC|nvJitLink)\. "
                                       r"Is it installed\?")

#: TensorFlow Datasets' context of a DatasetNotFoundError: the directory it looked in, the builder's empty directory
_TFDS_NOT_FOUND = re.compile(r"\bNo builder could be found in the directory: \S.* for the builder: \S"
                             r"|\bThe builder directory \S+ doesn't contain any versions\.")

#: Ray's status of a task or call that failed: gRPC's UNAVAILABLE (14) with the words of a transport that closed
_RAY_GRPC_UNAVAILABLE = re.compile(r"\bIOError: 14: (?:Socket closed|Connection reset by peer|Broken pipe"
                                   r"|failed to connect to all addresses|Connection refused|GOAWAY received)")

#: dm_control's physics error whose MuJoCo warnings include the controls' non-finite values
_PHYSICS_BAD_CONTROLS = re.compile(r"\bPhysics state is invalid\. Warning\(s\) raised: [\w, ]*\bmjWARN_BADCTRL\b")

#: XLA's rematerialization pass that cannot fit a program whose parameters alone exceed the memory limit
_REMAT_NEGATIVE_BUDGET = re.compile(r"hlo_rematerialization\.cc:\d+\] Can't reduce memory use below -\d")

#: Mesa's EGL records below an error, after a paste's quoting
_MESA_EGL_NOTICE = re.compile(r"^[\s>|`*\"']*libEGL (?:warning|info|debug): ")


def round38c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ". Is it installed?" in text and _JAX_CUDA_LIBRARY_MISSING.search(text):
        return Form(FormKind.ERROR, "a CUDA library JAX's plugin could not load", Label.CONFIG_ERROR)
    if ("No builder could be found" in text or "doesn't contain any versions" in text) \
            and _TFDS_NOT_FOUND.search(text):
        return Form(FormKind.ERROR, "a dataset TensorFlow Datasets did not find", Label.CONFIG_ERROR)
    if "IOError: 14: " in text and _RAY_GRPC_UNAVAILABLE.search(text):
        return Form(FormKind.ERROR, "a call whose transport closed (gRPC UNAVAILABLE)", Label.COMM_ERROR)
    if "mjWARN_BADCTRL" in text and _PHYSICS_BAD_CONTROLS.search(text):
        return Form(FormKind.ERROR, "a policy's controls that are not finite (MuJoCo's mjWARN_BADCTRL)",
                    Label.NUMERICAL_ERROR)
    if "Can't reduce memory use below -" in text and _REMAT_NEGATIVE_BUDGET.search(text):
        return Form(FormKind.ERROR, "a program whose parameters alone exceed the device's memory (XLA)", Label.OOM)
    return None


def round38c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round38c_form(text))


def round38c_quiet(text: str) -> bool:
    """Whether ``text`` is Mesa's EGL warning, notice or debug record: it holds no failure."""
    return "libEGL " in text and _MESA_EGL_NOTICE.search(text) is not None
