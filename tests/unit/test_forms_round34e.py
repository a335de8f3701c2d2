# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part E of the misses of round issue23-heldout-34 (the AWS Neuron ecosystem), each as a rule of its
family, with real lines and the near misses the rule must leave alone: the SageMaker SDK's status of a job that failed,
Kubernetes' CrashLoopBackOff, torch-neuron's record of a graph its trace could not compile, torch-neuron's summary
of a compile that ended, git's failed checkout, and TensorFlow's record of the XRT compile op's failure. Each line is from the corpus (named by its excerpt) or from a public thread or repository
(named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH
DONE = FormKind.COMPILE_DONE

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the SageMaker SDK's status of a job that did not complete: the job's type and the reason's attribution
    ("UnexpectedStatusException: Error for Compilation job effB3-ns-Neo-Inf1-2021-06-03-11-34-34-242: Failed. Reason: ClientError: CompilationError: Unable to compile model for ml_inf1:', 'Please implement aten::alias in native_ops/aten.py')",
     ERROR, Label.COMPILE_ERROR, "corpus (ai-accelerators-examples-1-neo-inf1-compilation-job-aten-alias)"),
    ("UnexpectedStatusException: Error for Training job: Failed. Reason: ClientError: ",
     ERROR, Label.CONFIG_ERROR, "a public book on SageMaker (a VPC without an S3 endpoint; 'Data download failed' on the next line)"),
    ("UnexpectedStatusException: Error for Training job finetune-distilbert-base-cased-2022-02-19-16-56-02: Failed. Reason: AlgorithmError: ExecuteUserScriptError:",
     ERROR, None, "a public course repository's notes (END 3.0 session 13, a DistilBERT training job)"),
    # Kubernetes' state of a container that keeps crashing: kubectl describe, kubectl get pods, the kubelet's event
    ("      Reason:       CrashLoopBackOff",
     CRASH, None, "corpus (aws-cdk-29262-eks-neuron-device-plugin-crashloopbackoff); a kube-flannel pod's describe in a public set-up log"),
    ("kube-flannel   kube-flannel-ds-qq7gf             0/1     CrashLoopBackOff    4 (64s ago)     2m36s",
     CRASH, None, "a public cluster set-up log (kubectl get pods -A on kubeadm)"),
    ("  Warning  BackOff    12s (x5 over 67s)  kubelet            Back-off restarting failed container kube-flannel in pod kube-flannel-ds-qq7gf_kube-flannel(c16f4b48-8e2c-423a-9c5a-ae62ae07e4f9)",
     CRASH, None, "the same set-up log (kubectl describe's events)"),
    # torch-neuron's record of a graph its trace could not compile
    ("_WARNING:Neuron:torch.neuron.trace failed on <torch_neuron.graph.Graph object at 0x7fbfc9e8c9b0>; falling back to native python function call",
     ERROR, Label.COMPILE_ERROR, "corpus (aws-neuron-sdk-172-torch-neuron-trace-data-type-not-understood-tf114), in markdown's italics"),
    ("WARNING:Neuron:torch.neuron.trace error: data type not understood_",
     ERROR, Label.COMPILE_ERROR, "corpus (aws-neuron-sdk-172-...)"),
    ("2022-12-19 02:32:20,123 : WARNING : torch.neuron.trace failed on _NeuronGraph$876; falling back to native python function call",
     ERROR, Label.COMPILE_ERROR, "corpus (aws-neuron-sdk-618-neuron-cc-status-error): the user's own log format"),
    ("WARNING:Neuron:torch.neuron.trace failed on _NeuronGraph$2460; falling back to native python function call",
     ERROR, Label.COMPILE_ERROR, "corpus (aws-neuron-sdk-656-inf1-mixed-model-neuron-cc-failed-fallback)"),
    # torch-neuron's summary of a compile that ended, and neuron-cc's last record
    ("09/05/2023 08:51:57 PM INFO 53658 [root]: Compiler status PASS                                                                                        INFO:Neuron:Number of arithmetic operators (post-compilation) before = 565, compiled = 548, percent compiled = 96.99%                                 ",
     DONE, None, "corpus (aws-neuron-sdk-677-byoc-bert-trace-compiler-status-pass): neuron-cc's record glued to torch-neuron's"),
    ("INFO:Neuron:Neuron successfully compiled 1 sub-graphs, Total fused subgraphs = 1, Percent of model sub-graphs successfully compiled = 100.0%          ",
     DONE, None, "corpus (aws-neuron-sdk-677-...)"),
    ("        Compiler status PASS",
     DONE, None, "corpus (aws-k8s-tester-559-neuron-unit-test-iterations): torch-neuronx's compile in a kubetest2 run"),
    # git's refusal to check out a revision a set-up pinned
    ("error: pathspec 'cd2e09c' did not match any file(s) known to git",
     ERROR, Label.CONFIG_ERROR, "corpus (optimum-neuron-947-flux-inpaint-editable-install-pathspec-mismatch): a Dockerfile's pinned commit"),
    (">>   error: pathspec 'origin/master' did not match any file(s) known to git.",
     ERROR, Label.CONFIG_ERROR, "git's mailing list (a clone's submodule qtbase, 'Unable to setup cloned submodule'), quoted"),
    # TensorFlow's record of the XRT compile op's failure
    ("2023-11-10 14:00:10.681526: W tensorflow/core/framework/op_kernel.cc:1830] OP_REQUIRES failed at xrt_compile_ops.cc:216 : INTERNAL: Unknown custom-call API version enum value: 0 (API_VERSION_UNSPECIFIED)",
     ERROR, Label.COMPILE_ERROR, "corpus (aws-neuron-sdk-788-xrt-compile-unknown-custom-call-api-version): a TPU graph given to Neuron"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # a container still starting, or running, in kubectl's words
    "kube-system    coredns-58767d876d-5g4ns          0/1     ContainerCreating   0               3s",  # the set-up log above
    "kube-system    etcd-worker1                      1/1     Running             1               5m52s",  # the same
    "      Reason:       Completed",  # a container's last state that ended well (a public set-up log)
    # torch-neuron's analysis before the compile, which says nothing of its result
    "INFO:Neuron:Number of arithmetic operators (pre-compilation) before = 216, fused = 216, percent fused = 100.0%",  # aws-neuron-sdk#721
    # git's messages of a checkout that went through
    "HEAD is now at 1aff011 Method to register SW",  # a public project's notes, before its failed checkout
    "Switched to branch 'task-custom-response'",  # the same notes, after the branch was created
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_a_trace_fallback_is_a_compile_error_not_healthy(tmp_path: Path) -> None:
    """torch-neuron's records of a graph it left on the CPU, as the log's only words, are a compile that failed (its
    action stops the job as a configuration error's does), not a healthy run."""
    log = tmp_path / "trace.log"
    log.write_text(FORMS[6][0] + "\n" + FORMS[7][0] + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.COMPILE_ERROR


def test_a_trace_that_reported_its_compile_is_not_compiling(tmp_path: Path) -> None:
    """A torch-neuron trace whose last records are its compile's result is over: healthy, not a compile in progress;
    the same log cut before the result is still compiling."""
    done = tmp_path / "done.log"
    done.write_text(FORMS[10][0] + "\n" + FORMS[11][0] + "\nINFO:Neuron:Compiled these operators (and operator counts) to Neuron:\n")
    assert diagnose_paths([str(done)], now=0.0).verdict.label is Label.HEALTHY
    running = tmp_path / "running.log"
    running.write_text("02/17/2023 04:18:15 PM INFO 57168 [sg0000/Tensorizer/StaticProfiler]: Exit time region: delta=0.057s\n")
    assert diagnose_paths([str(running)], now=0.0).verdict.label is Label.COMPILING


def test_a_crash_looping_container_is_a_crash(tmp_path: Path) -> None:
    """kubectl describe of a pod whose container keeps crashing is a crash of unstated cause; one whose container runs
    stays healthy."""
    looping = tmp_path / "looping.log"
    looping.write_text("    State:          Waiting\n" + FORMS[3][0] + "\n")
    assert diagnose_paths([str(looping)], now=0.0).verdict.label is Label.OTHER_CRASH
    running = tmp_path / "running.log"
    running.write_text(NEAR_MISSES[1] + "\n")
    assert diagnose_paths([str(running)], now=0.0).verdict.label is Label.HEALTHY
