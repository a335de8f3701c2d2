# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half A of the misses of round issue23-heldout-25, each as a rule of its family, with real lines and
the near misses the rule must leave alone: the header of an uncaught exception's native report and glog's signal
header with words before "received", a batch scheduler's limit kill (PBS, Moab, LSF), Flux's fatal job exception, a
shell's report of a job a signal ended (zsh's status, bash's Terminated), ROCclr's guarantee and HIP's binary
without code for the GPU, and the Kubernetes API refusing an object as invalid. Each line is from the corpus (named by
its excerpt), from a public thread or file (named), or is the format the program's source prints (the source is
named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, read_line
from neuron_watch.diagnosis.lastword import last_word
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import table_tests

ERROR, CRASH = FormKind.ERROR, FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the header of an uncaught exception's report, alone on its line
    ("Unhandled exception:", CRASH, None,
     "corpus (jax-12550-tpu-0319-tcmalloc-huge-alloc-unhandled-exception: the TPU runtime's, before its @ frames)"),
    ("  Unhandled exception:", CRASH, None,
     "flutter_tools under the Dart VM (a flutter doctor paste: 'Exception: idevice_id returned an error:' and #0 frames follow)"),
    # glog's signal header with words between the signal and "received by PID"
    ("*** SIGFPE (@0x7f4c7a8872ec), see go/stacktraces#s15 received by PID 23844 (TID 23844) on cpu 16; stack trace: ***",
     CRASH, None, "corpus (jax-19603-libtpu-init-args-flag-sigfpe)"),
    ("*** SIGSEGV (@0x10), see gl__________43#s15 received by PID 2260154 (TID 2260154) on cpu 10; stack trace: ***",
     CRASH, None, "jax-ml/jax#13043 (libtpu loaded twice)"),
    ("*** SIGSEGV STACK OVERFLOW (see go/cppstackoverflow) received by PID 166152 (TID 166402) on cpu 22; stack trace: ***",
     CRASH, None, "corpus (jax-18874-debug-callback-sigsegv-stack-overflow)"),
    # a batch scheduler's job killed at a limit: time is the submission's, memory the job's
    ("=>> PBS: job killed: walltime 259217 exceeded limit 259200", CRASH, Label.CONFIG_ERROR,
     "corpus (qiime-1048-pbs-job-killed-walltime-exceeded-limit)"),
    ("=>> PBS: job killed: walltime 36059 exceeded limit 36000", CRASH, Label.CONFIG_ERROR,
     "a pVACtools run's notes (followed by zsh's '[1]    22797 terminated  pvacvector run')"),
    ("PBS: job killed: walltime 50 exceeded limit 30", CRASH, Label.CONFIG_ERROR, "an HPC course's PBS lesson (its job's output)"),
    ("mem_per_job=\"15gb\" #=>> PBS: job killed: mem job total 4323312 kb exceeded limit 3145728 kb", CRASH, Label.OOM,
     "a genotyping pipeline's queue settings (the message its earlier run got, kept in a comment)"),
    ("MOAB_INFO:  job exceeded wallclock limit", CRASH, Label.CONFIG_ERROR,
     "corpus (magetbrain-20-moab-job-exceeded-wallclock-limit; Moab's MRMJobCancel prints the same string)"),
    ("TERM_RUNLIMIT: job killed after reaching LSF run time limit.", CRASH, Label.CONFIG_ERROR,
     "an LSF job report (the 'Exited with exit code 140.' and resource summary follow)"),
    ("TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.", CRASH, Label.OOM,
     "LSF's exit reason as a job wrapper documents it beside TERM_RUNLIMIT"),
    # Flux's fatal exception of a job (severity 0)
    ("0.032s: job.exception ƒ6VMWgCM5 type=alloc severity=0 unsatisfiable request: need 1024 slot(s) of 1 core(s), only 8 such slot(s) available (total cores: 8)",
     CRASH, Label.CONFIG_ERROR, "corpus (flux-core-7637-job-exception-unsatisfiable-request)"),
    ("0.576s: job.exception type=exec severity=0 MPI_Abort: N/A", CRASH, None,
     "corpus (flux-core-3894-flux-shell-fatal-mpi-abort-exit-42)"),
    ("261.446s: job.exception type=exec severity=0 rank 102 on host flux-user000001 exited and exit-timeout=30s has expired",
     CRASH, None, "a Flux benchmark's log (a rank the oom plugin ended; 'flux-job: task(s) Killed' follows)"),
    ("0.378s: job.exception type=exec severity=0 shell_init", CRASH, None,
     "a Flux run whose shell plugin 'oom' failed to initialise"),
    ("3.012s: job.exception type=timeout severity=0 resource allocation expired", CRASH, Label.CONFIG_ERROR,
     "the format of flux-core src/cmd/job/attach.c, filled in (t/ tests grep 'job.exception type=timeout')"),
    # a shell's report of a job a signal ended
    ("[1]    2964311 abort (core dumped)  python test.py", CRASH, None,
     "corpus (tensorflow-rocm-21-hip-no-binary-for-gpu-guarantee-abort: zsh)"),
    ("[1]    22797 terminated  pvacvector run", CRASH, None, "a pVACtools run's notes (zsh, after PBS's walltime kill)"),
    ("getting output of UniformTimeClustering:  20% (117/558) [#      ] eta 28:34:54 \\Terminated", CRASH, None,
     "corpus (cbio-cluster-403-pbs-job-terminated-by-root: bash's Terminated after the spinner)"),
    ("Terminated", CRASH, None, "bash's strsignal(SIGTERM) for a foreground job, alone"),
    # ROCclr's guarantee and HIP's binary without code for this GPU
    ("/build/hip-rocclr/src/HIP-rocm-4.0.0/rocclr/hip_code_object.cpp:120: guarantee(false && \"hipErrorNoBinaryForGpu: Coudn't find binary for current devices!\")",
     CRASH, Label.CONFIG_ERROR, "corpus (tensorflow-rocm-21-hip-no-binary-for-gpu-guarantee-abort)"),
    ("/src/external/hip-on-vdi/rocclr/hip_code_object.cpp:120: guarantee(false && \"hipErrorNoBinaryForGpu: Coudn't find binary for current devices!\")",
     CRASH, Label.CONFIG_ERROR, "ROCm/hip#2187 (tensorflow 2.3 on an RX 5700 with ROCm 3.9)"),
    ("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!", ERROR, Label.CONFIG_ERROR,
     "l1na-forever/stable-diffusion-rocm-docker#1; ROCm/legacy-rocm-build#2061 (RX 6600, fixed by HSA_OVERRIDE_GFX_VERSION)"),
    ("hipErrorNoBinaryForGpu: Coudn't find binary for current devices!", ERROR, Label.CONFIG_ERROR,
     "pytorch/pytorch#53738 (an RX470, gfx803, without code in the wheel)"),
    # TensorFlow's TPU C API loader: a function the libtpu it opened lacks
    ("2022-10-18 09:11:20.075933: F ./tensorflow/core/tpu/tpu_library_init_fns.inc:100] TpuEmbeddingEngine_CollateMemory not available in this library.",
     CRASH, Label.CONFIG_ERROR, "corpus (torch-xla-4103-tpu-embedding-engine-not-available-sigabrt)"),
    ("# tpu_library_init_fns.inc:98] TpuEmbeddingEngine_ExecutePartitioner not available in this library.", CRASH,
     Label.CONFIG_ERROR, "a TPU training script's comment on importing TensorFlow before JAX (the record it got)"),
    # the Kubernetes API refusing an object as invalid
    ("2024-12-29T11:17:12.827903197Z 2024-12-29T11:17:12Z\tERROR\tcreating jobs\t{\"controller\": \"jobset\", \"controllerGroup\": \"jobset.x-k8s.io\", \"controllerKind\": \"JobSet\", \"JobSet\": {\"name\":\"torch-test\",\"namespace\":\"kubeflow\"}, \"namespace\": \"kubeflow\", \"name\": \"torch-test\", \"reconcileID\": \"d5ad2e93-6af0-4edd-9207-fad154fd1512\", \"jobset\": {\"name\":\"torch-test\",\"namespace\":\"kubeflow\"}, \"error\": \"job \\\"torch-test-trainer-node-0\\\" creation failed with error: Job.batch \\\"torch-test-trainer-node-0\\\" is invalid: spec.template.spec.containers[0].resources.limi",
     ERROR, Label.CONFIG_ERROR, "corpus (kubeflow-trainer-2363-jobset-creating-jobs-invalid-resources)"),
    ("The Deployment \"nginx\" is invalid: spec.template.spec.containers[0].ports[0].containerPort: Invalid value: -1: must be between 1 and 65535, inclusive",
     ERROR, Label.CONFIG_ERROR, "kubectl apply --dry-run=none in a Kubernetes study note"),
    ("* We can't use oauth2_proxy as alias: Deployment.apps \"oauth2-proxy\" is invalid: spec.template.spec.containers[0].name: Invalid value: \"oauth2_proxy\"",
     ERROR, Label.CONFIG_ERROR, "a Helm chart's notes (an alias with an underscore)"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    # a SIGTERM's report: sent from outside, the handler prints it too (pytorch/xla#3441: a hang the timeout ended)
    "*** SIGTERM received by PID 13084 (TID 13084) on cpu 32 from PID 28473; stack trace: ***",
    # "unhandled exception" in prose, and a header that is not alone on its line
    "//    Handling All unhandled exception:",
    "Here is the unhandled exception: it comes from the data loader",
    # the scheduler's words without a limit kill
    "#PBS -l walltime=00:00:30",
    "If the job exceeds walltime, it will be killed:",
    "TERM_OWNER: job killed by owner.",
    # Flux: somebody's cancel, a non-fatal exception
    "1.204s: job.exception type=cancel severity=0 Canceled by user",
    "0.801s: job.exception type=exec severity=1 lost contact with job shell on broker 3",
    # a shell's job done, and the word in prose
    "[1]  + 81234 done       python train.py",
    "INFO worker 3 terminated after finishing its shard",
    "    guarantee(false, \"Unexpected message\");",
    # the words in prose, not a C API's function
    "That document is not available in this library.",
    # a value refused in other words than the Kubernetes API's
    "Warning: the value \"abc\" is invalid: using the default",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize("line", [
    "Unhandled exception:",
    "*** SIGFPE (@0x7f4c7a8872ec), see go/stacktraces#s15 received by PID 23844 (TID 23844) on cpu 16; stack trace: ***",
])
def test_the_process_that_printed_the_header_does_not_go_on(line: str) -> None:
    """The terminate handler and the Dart VM end the process after their report; glog's handler re-raises the signal."""
    assert last_word(line) is not None


@pytest.mark.parametrize("line", [
    "0.576s: job.exception type=exec severity=0 MPI_Abort: N/A",  # flux-job reports the job's end, and goes on itself
    "=>> PBS: job killed: walltime 259217 exceeded limit 259200",  # pbs_mom's note of another process's end
    "[1]    2964311 abort (core dumped)  python test.py",  # the shell outlives the job it reports
])
def test_a_report_of_another_process_end_is_no_last_word(line: str) -> None:
    assert read_line(line) is not None and last_word(line) is None


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("other_crash/jax-12550-tpu-0319-tcmalloc-huge-alloc-unhandled-exception.log", Label.OTHER_CRASH, Action.RESTART),
    ("config_error/qiime-1048-pbs-job-killed-walltime-exceeded-limit.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/magetbrain-20-moab-job-exceeded-wallclock-limit.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/flux-core-7637-job-exception-unsatisfiable-request.log", Label.CONFIG_ERROR, Action.STOP),
    ("other_crash/flux-core-3894-flux-shell-fatal-mpi-abort-exit-42.log", Label.OTHER_CRASH, Action.RESTART),
    ("config_error/tensorflow-rocm-21-hip-no-binary-for-gpu-guarantee-abort.log", Label.CONFIG_ERROR, Action.STOP),
    ("other_crash/cbio-cluster-403-pbs-job-terminated-by-root.log", Label.OTHER_CRASH, Action.RESTART),
    ("config_error/kubeflow-trainer-2363-jobset-creating-jobs-invalid-resources.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/torch-xla-4103-tpu-embedding-engine-not-available-sigabrt.log", Label.CONFIG_ERROR, Action.STOP),
    ("collective_hang/torch-xla-3441-xrt-execute-hangs-half-hour-sigterm.log", Label.COLLECTIVE_HANG, Action.RESTART),
    ("config_error/desitarget-628-srun-debug-queue-time-limit.log", Label.CONFIG_ERROR, Action.STOP),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_an_uncaught_exception_report_is_not_withdrawn_by_another_process_progress(tmp_path: Path) -> None:
    """In one unmarked stream, a neighbour's steps after the report are another process's: the report stands."""
    report = (CORPUS / "other_crash/jax-12550-tpu-0319-tcmalloc-huge-alloc-unhandled-exception.log").read_text()
    steps = "".join(f"step {n} loss {2.5 - n / 100:.3f}\n" for n in range(1, 30))
    log = tmp_path / "console.log"
    log.write_text(report + steps)
    assert diagnose_paths([str(log)]).verdict.label is not Label.HEALTHY
