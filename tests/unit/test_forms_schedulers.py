# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""A job's state in its scheduler's words (forms_schedulers): Kubernetes' pod statuses and events, Slurm's job
states, Ray's dead worker, with real lines and near misses. Each line is from a public thread or repository (named),
or is the format the scheduler's source prints (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests

ERROR, CRASH = FormKind.ERROR, FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # kubectl get pods: a container that keeps failing, one that never started
    ("mysql-deployment-6c59b6dc4-hwnfp       0/1     CrashLoopBackOff   7 (36s ago)   14m", CRASH, None,
     "a Kubernetes troubleshooting thread (restarts with '(36s ago)', kubectl 1.23+)"),
    ("pod/srl-probes-76b8468567-8pztg   0/1     CrashLoopBackOff   141 (80s ago)   6h54m", CRASH, None,
     "kubectl get all in a public repository's notes (the 'pod/' prefix)"),
    ("kube-flannel         kube-flannel-ds-b9pmh                               0/1     CrashLoopBackOff    6 (111s ago)   8m8s",
     CRASH, None, "kubectl get pods -A (the namespace column) in a cluster set-up guide"),
    ("trainer-worker-0   0/1     Error              0          2m", CRASH, None,
     "kubectl's printer (printPod: the terminated container's reason)"),
    ("trainer-master-0   0/1     ImagePullBackOff   0          2m", ERROR, Label.CONFIG_ERROR,
     "kubectl's printer (the waiting container's reason)"),
    ("trainer-master-0   0/1     CreateContainerConfigError   0          2m", ERROR, Label.CONFIG_ERROR,
     "kubectl's printer (a Secret or ConfigMap the spec names is missing)"),
    # kubectl describe and the kubelet's events; a Job out of retries
    ("      Exit Code:    137", CRASH, None, "kubectl describe pod (a terminated container's state)"),
    ("  Warning  BackOff    2m (x10 over 5m)  kubelet  Back-off restarting failed container trainer in pod trainer-0_default(1234)",
     CRASH, None, "the kubelet's BackOff event in kubectl describe"),
    ("  Warning  BackoffLimitExceeded  1m  job-controller  Job has reached the specified backoff limit", CRASH, None,
     "the Job controller's event (pkg/controller/job)"),
    # Slurm: scontrol's record, sacct's rows
    ("   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)", CRASH, None,
     "scontrol show job (src/common/slurm_protocol_defs.c job_state_string)"),
    ("> 节点故障（`JobState=NODE_FAIL Reason=NodeDown`），于是盘上的 57G 模型、过滤后数据、全部训练日志和 checkpoint", CRASH, None,
     "a MoE training run's notes: the node failed after 4 h 50 min"),
    ("3764934        mem_test       test   rc_admin          1 OUT_OF_ME+    0:125 ", CRASH, Label.OOM,
     "a research-computing center's sacct example"),
    ("1012.batch     00:00:01      1380K OUT_OF_ME+ ", CRASH, Label.OOM,
     "a cluster guide's sacct -j 1012 --format=JobID,Elapsed,MaxRSS,State"),
    ("123            train      gpu        acct          64    TIMEOUT      0:0", CRASH, Label.CONFIG_ERROR,
     "sacct's default columns (the job over its time limit)"),
    # Ray's dead worker, as the exception's message
    ("ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this task. Check python-core-worker-*.log files for more information.",
     CRASH, None, "python/ray/exceptions.py WorkerCrashedError"),
]

#: lines of the same programs that are no failure
NEAR_MISSES = [
    "mysql-deployment-7c697b587c-hjh67   1/1     Running            0             119m",
    "trainer-master-0   0/1     Pending            0          2m",
    "trainer-master-0   0/1     Completed          0          2m",
    "      Exit Code:    0",
    "3764934.ext+     extern              rc_admin          1  COMPLETED      0:0",
    "   JobState=RUNNING Reason=None Dependency=(null)",
    "2023-06-07 15:26:09,573 WARNING worker.py:1986 -- A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker.",
    "tests/test_train.py::test_step_time_budget TIMEOUT skipped on this runner",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize(("lines", "label", "action"), [
    # a PyTorchJob whose worker keeps failing: all the user pasted was kubectl's table
    (["NAME                 READY   STATUS             RESTARTS      AGE",
      "pytorchjob-master-0   1/1     Running            0             12m",
      "pytorchjob-worker-0   0/1     CrashLoopBackOff   5 (40s ago)   12m"], Label.OTHER_CRASH, Action.RESTART),
    # a Slurm job that ran out of memory, as sacct shows it
    (["       JobID    JobName  Partition    Account  AllocCPUS      State ExitCode ",
      "------------ ---------- ---------- ---------- ---------- ---------- -------- ",
      "3764934        mem_test       test   rc_admin          1 OUT_OF_ME+    0:125 ",
      "3764934.bat+      batch              rc_admin          1 OUT_OF_ME+    0:125 ",
      "3764934.ext+     extern              rc_admin          1  COMPLETED      0:0"], Label.OOM, Action.RESTART),
])
def test_diagnose_reads_the_state_in_a_paste(tmp_path: Path, lines: list[str], label: Label, action: Action) -> None:
    log = tmp_path / "state.txt"
    log.write_text("\n".join(lines) + "\n")
    verdict = diagnose_paths([str(log)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
