# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""A process's end as whoever waited for it reports it, and a crash report's first line (forms_exits), with real
lines and the near misses the rules must leave alone. Each line is from a public thread or repository (named), or is
the format the reporter's source prints (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests

CRASH = FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # an exit status that is not 0, named as such
    ("command terminated with exit code 137", CRASH, None,
     "kubectl exec of `tail /dev/zero` in a pod with a memory limit (an OOM-kill demo's notes)"),
    ("trainer-1 exited with code 137", CRASH, None, "Docker Compose's log formatter (\"%s exited with code %d\")"),
    ("The job exited with status 1", CRASH, None, "a batch system's end-of-job record"),
    ("srun: error: node01: task 0: Exited with exit code 1", CRASH, None,
     "srun's report of a task that ended (src/srun/srun_job.c: 'task %s: Exited with exit code %d')"),
    ("Job 123 failed: Exited with exit code 1", CRASH, None, "a scheduler's job notice (LSF-style)"),
    ("supervisord: INFO exited: trainer (exit status 137; not expected)", CRASH, None,
     "supervisord's record of a program that ended (supervisor/process.py: 'exited: %s (%s)')"),
    ("Job failed with exit code 127", CRASH, Label.CONFIG_ERROR,
     "a job script whose launcher is not installed (the shell's 127)"),
    ("/entrypoint.sh exited with code 126", CRASH, Label.CONFIG_ERROR, "a container entrypoint that is not executable"),
    # Go's os/exec error after its caller's words
    ("job failed: exit status 1", CRASH, None, "Go's ExitError (os/exec: ProcessState.String) after the caller's words"),
    ("docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'",
     FormKind.ERROR, Label.CONFIG_ERROR, "docker run with the NVIDIA hook failing (NVIDIA/nvidia-container-toolkit threads)"),
    ("Error: building at STEP \"RUN pip install -r requirements.txt\": while running runtime: signal: killed", CRASH, None,
     "podman build killed while it ran pip (Go's ExitError for a signal)"),
    # the first line of a crash report
    ("[pkrvmf6wy0o8zjz:59563] *** Process received signal ***", CRASH, None,
     "a PLUMED CI run under Open MPI (opal/util/stacktrace.c)"),
    ("==1234==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010 at pc 0x0000004f5cb4 bp 0x7ffc5f1c7a30 sp 0x7ffc5f1c7a28",
     CRASH, None, "compiler-rt's AddressSanitizer report head"),
    ("terminate called without an active exception", CRASH, None,
     "a std::thread destroyed unjoined (a C++ threading tutorial's run, then 'Aborted (core dumped)')"),
    ("terminate called recursively", CRASH, None, "libstdc++ libsupc++/vterminate.cc"),
    ("pure virtual method called", CRASH, None, "libstdc++ libsupc++/pure.cc __cxa_pure_virtual"),
]

#: lines of the same words that are not a failed process
NEAR_MISSES = [
    "trainer-1 exited with code 0",
    "Process finished with exit code 0",
    "Request failed with status code 404",
    "INFO: training completed with status: success",
    "HTTP/1.1 200 OK status 200",
    "[2024-05-01 12:00:00] [INFO] [launch.py:351:main] Process 1234 exits successfully.",
    "the supervisor restarts a worker that exited; see docs/restarts.md",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({FormKind.ERROR}))


@pytest.mark.parametrize(("lines", "label", "action"), [
    # a pod's training output lost, kubectl's report all that is left
    (["$ kubectl exec -ti trainer-0 -- torchrun --nproc_per_node 8 train.py", "command terminated with exit code 137"],
     Label.OTHER_CRASH, Action.RESTART),
    # a script whose launcher is missing: the shell's 127, which a restart meets again
    (["+ torchrun --nproc_per_node 8 train.py", "Job failed with exit code 127"], Label.CONFIG_ERROR, Action.STOP),
    # a side process that ended while training went on is no failure of the job
    (["step 10 loss 2.31", "tensorboard exited with code 1", "step 20 loss 2.12", "step 30 loss 2.01"],
     Label.HEALTHY, Action.WAIT),
])
def test_diagnose_reads_the_end_in_a_log(tmp_path: Path, lines: list[str], label: Label, action: Action) -> None:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    verdict = diagnose_paths([str(log)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
