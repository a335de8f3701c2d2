"""Failure forms read for the misses of round issue23-heldout-23 (half B): c10d's report of an NCCL call that failed,
a Kubernetes admission webhook's refusal, a Ray job whose runtime environment could not be set up, a file a native
program could not open, a loss printed as a bracketed key, Inductor's autotuner dropping a candidate, accelerate's
refusal of a mixed precision and SkyPilot's resources that cannot be had.

Pure: no I/O. :func:`round23b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 22, and :func:`round23b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* c10d's check of an NCCL call (torch/csrc/distributed/c10d/NCCLUtils.hpp, ``C10D_NCCL_CHECK``: ``"NCCL error in: "
  + __FILE__ + ":" + __LINE__ + ", " + ncclGetErrorWithVersion(result)``, raised as DistBackendError; torch 1.x
  threw it as a runtime_error with ncclGetErrorString's words): an NCCL call of this process failed. The signature
  table names the causes of the reasons it knows ("unhandled system error", "remote process exited ..."); the form
  says it failed whatever the reason's words are, so a paste whose reason is mangled or new is not read as a
  healthy run (round issue23-heldout-23: pytorch-23363, "unhanled system error" from two docker containers).
* A Kubernetes admission webhook's refusal (k8s.io/apiserver .../admission/plugin/webhook/errors/statuserror.go,
  ``ToStatusErr``: ``fmt.Sprintf("admission webhook %q denied the request", name)`` and ": <reason>" or " without
  explanation"): the cluster's policy refused the object the job's controller tried to create (a pod without the
  PodGroup a gang scheduler asks for, a resource a policy forbids), before anything ran; every retry is refused
  the same: configuration (round issue23-heldout-23: tf-operator under Volcano, volcano-711). A webhook the API
  server could not call ("failed calling webhook ...") is not this form: the webhook's service is down.
* Ray's job whose runtime environment could not be set up (ray/dashboard/modules/job/job_manager.py: a job
  supervisor failing with RuntimeEnvSetupError is put FAILED with ``message=f"runtime_env setup failed: {e}"``,
  which ``ray job submit`` prints as the job's "Status message: ..."; ray/exceptions.py ``RuntimeEnvSetupError``,
  "Failed to set up runtime environment."): the pip/conda packages, the working directory or the container the job
  asks for cannot be installed on the cluster, and a resubmission asks for the same (round issue23-heldout-23:
  ray-22472, a pip package that does not exist).
* A file a native program could not open, in the C library's words (strerror ENOENT, "No such file or directory")
  after the call that failed ("failed to open <path>") under an error head: llama.cpp's loader, "error loading
  model: failed to open <model>: No such file or directory" (round issue23-heldout-23: llama-cpp-2867). A path the
  job names that is not there: configuration. The dynamic loader's "cannot open shared object file" (a library
  not found, which TensorFlow prints as a warning on healthy runs) is not this form.
* A loss printed as a bracketed key and its value between separators, the layout of loggers that write
  ``f'... | [Loss] {loss:.2f} | ...'`` (nv-tlabs/LION trainers/base_trainer.py; "[Epoch] : 500/1000 | [Loss] :
  nan | [MAE] : nan" from ``print(f"[Epoch] : {epoch}/{epochs} | [Loss] : {loss.item():.4f} | ...")``): a NaN/Inf
  loss, which forms_metric reads as ``key=value``, ``key: value`` and the like (round issue23-heldout-23: lion-9,
  read as healthy). A tag in brackets before words ("[loss] NaN/Inf in model weights, skipping episode") or a table
  cell ("| [Gain] | [Loss] |") is not a value.
* Inductor's autotuner rejecting one candidate kernel (torch/_inductor/select_algorithm.py: ``log.error("Runtime
  error during autotuning: \\n%s. \\nIgnoring this choice.", e)``, and the same for "CUDA compilation error during
  autotuning"): a configuration that does not fit the device (more shared memory than the SM has) is dropped and
  the search goes on with the others; projects filter these lines as noise. The autotuner at work: a compile beat,
  as forms_phase reads Inductor's AUTOTUNE tables (round issue23-heldout-23: pytorch-159688, read as OOM).
* accelerate's refusal of the mixed precision the job asks for (accelerate/accelerator.py: ``err = "{mode} mixed
  precision requires {requirement}"``, raised as ValueError with "a GPU" when torch sees no CUDA device, "PyTorch >=
  1.6", "PyTorch >= 1.10 and a supported device"): the machine or the install lacks what the setting needs, and
  every restart meets it (round issue23-heldout-23: kohya-ss-719, a torch without CUDA, read as a crash; the bf16
  variant was already read by forms_errors' device refusal).
* SkyPilot's launch that cannot get the resources the task asks for (sky/exceptions.py ResourcesUnavailableError,
  "Raised when resources are unavailable": no instance in the catalog satisfies the request, every zone refused,
  the quota is out; ResourcesMismatchError, a request the existing cluster cannot meet), as the CLI prints it,
  ``sky.exceptions.ResourcesUnavailableError: ...``: the job never started, and the same request fails the same
  until it is relaxed (or retried until capacity appears, ``--retry-until-up``): configuration, as the corpus reads
  SkyPilot's quota and provisioning refusals (round issue23-heldout-23: skypilot-3454, read as a comm error).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals the lines these forms read hold, besides the failure forms' needles ("loss"/"Loss" among them)
NEEDLES: tuple[str, ...] = ("NCCL error in: ", "denied the request", "runtime_env setup failed: ",
                            "RuntimeEnvSetupError: ", ": No such file or directory", "during autotuning: ",
                            "Ignoring this choice.", " mixed precision requires ", "sky.exceptions.")

#: c10d's NCCL check: the file and line of the call, then the reason in NCCL's words
_NCCL_CHECK_FAILED = re.compile(r"\bNCCL error in: \S+:\d+, \S")

#: an admission webhook's refusal, its name quoted (escaped inside a JSON record's message)
_WEBHOOK_DENIED = re.compile(r'\badmission webhook \\?"[^"\\]+\\?" denied the request\b')

#: Ray's job status of a runtime environment that could not be set up, and the exception it names
_RUNTIME_ENV_FAILED = re.compile(r"\bruntime_env setup failed: (?!\{)\S|\bRuntimeEnvSetupError: \S")

#: a file a native program could not open: an error head, the call that failed, the path, ENOENT's words
_OPEN_FAILED = re.compile(r"(?:^|[\s:\]])(?i:error)\b[\w ]{0,40}: (?:failed to|cannot|could not|unable to) open "
                          r"(?!shared object file)\S.{0,300}?: No such file or directory\b")

#: a loss as a bracketed key, an optional colon, and a non-finite value that ends its field
_BRACKETED_LOSS = re.compile(r"\[(?i:[\w.-]*loss[\w.-]*)\]\s*:?\s*[-+]?(?i:nan|inf(?:inity)?)\b(?=\s*(?:[|,;]|$))")

#: Inductor's autotuner dropping a candidate: the head of its record, and its last line
_AUTOTUNE_REJECTED = re.compile(r"\b(?:Runtime|CUDA compilation) error during autotuning: |\bIgnoring this choice\.")

#: accelerate's refusal of a mixed precision, with what it requires
_PRECISION_REFUSED = re.compile(r"\b\w+ mixed precision requires (?:a |an |PyTorch |torch )\S")

#: SkyPilot's exceptions of resources that cannot be had, as its CLI prints them
_SKY_RESOURCES = re.compile(r"\bsky\.exceptions\.Resources(?:Unavailable|Mismatch)Error: \S")


def round23b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "NCCL error in" in text and _NCCL_CHECK_FAILED.search(text):
        return Form(FormKind.ERROR, "an NCCL call that failed (c10d's NCCL check)")
    if "denied the request" in text and _WEBHOOK_DENIED.search(text):
        return Form(FormKind.ERROR, "a Kubernetes admission webhook's refusal of an object the job needs, the same "
                    "on every retry", Label.CONFIG_ERROR)
    if ("untimeEnvSetup" in text or "runtime_env setup" in text) and _RUNTIME_ENV_FAILED.search(text):
        return Form(FormKind.ERROR, "a Ray job whose runtime environment could not be set up (its packages, "
                    "working directory or container), the same on every resubmission", Label.CONFIG_ERROR)
    if "No such file" in text and _OPEN_FAILED.search(text):
        return Form(FormKind.ERROR, "a file the program could not open: not there (ENOENT)", Label.CONFIG_ERROR)
    if "oss]" in text and _BRACKETED_LOSS.search(text):
        return Form(FormKind.METRIC, "a non-finite loss (a bracketed key)", Label.NUMERICAL_ERROR)
    if ("autotuning" in text or "this choice" in text) and _AUTOTUNE_REJECTED.search(text):
        return Form(FormKind.COMPILE_RUNNING, "Inductor's autotuner dropping a candidate kernel and going on")
    if "mixed precision requires" in text and _PRECISION_REFUSED.search(text):
        return Form(FormKind.ERROR, "a mixed precision the machine or the install cannot give (accelerate's "
                    "refusal), the same on every restart", Label.CONFIG_ERROR)
    if "sky.exceptions." in text and _SKY_RESOURCES.search(text):
        return Form(FormKind.ERROR, "resources the task asks for that the clouds cannot give (SkyPilot's "
                    "launch refused), the same until the request changes", Label.CONFIG_ERROR)
    return None


def round23b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round23b_form(text))
