# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part D of the misses of round issue23-heldout-35 (Kubernetes-native training), each as a rule of its
family, with real lines and the near misses the rule must leave alone: NVML's status of a lost GPU as its callers
print it, TensorFlow's failed status check that names memory exhausted, ``kubectl get pods``' STATUS OOMKilled after a
NAMESPACE column, and gRPC Python's report of a call whose server was UNAVAILABLE. Each line is from the corpus (named
by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.heldout.round35d import round35d_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH
WAIT = FormKind.COMM_WAIT

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # NVML's GPU_IS_LOST as its callers print it
    ("`Message:        Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc error: code = Unknown desc = Unable to retrieve list of available devices: error creating nvml.Device 5: nvml: GPU is lost, which is unexpected",
     ERROR, Label.HARDWARE_ERROR, "corpus (kubernetes-97131-unexpected-admission-error-nvml-gpu-is-lost)"),
    ("> Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc error: code = Unknown desc = Unable to retrieve list of available devices: error creating nvml.Device 3: nvml: GPU is lost, which is unexpected",
     ERROR, Label.HARDWARE_ERROR, "corpus (k8s-device-plugin-231-allocate-failed-nvml-gpu-is-lost)"),
    ("failed to get remapped rows for GPU-ac896b35-5782-c478-4b2a-a661de07770f: failed to get device remapped rows: ERROR_GPU_IS_LOST",
     ERROR, Label.HARDWARE_ERROR, "leptonai/gpud#604 (go-nvml's code name)"),
    # TensorFlow's status check whose status is memory exhausted
    ("Non-OK-status: GpuLaunchKernel (FillPhiloxRandomKernelLaunch <Distribution>, num_blocks, block_size, 0, d.stream (), gen, data, size, dist) status: Internal: out of memory",
     ERROR, Label.OOM, "corpus (trainer-1158-tfjob-gpulaunchkernel-internal-out-of-memory)"),
    # kubectl get pods' STATUS OOMKilled after the NAMESPACE column
    ("`kubeflow                    training-operator-8569f97489-zkxbt                            0/1     OOMKilled`。",
     CRASH, Label.OOM, "corpus (kubeflow-chart-45-training-operator-pod-oomkilled-status)"),
    ("kyverno              kyverno-admission-controller-58cb4b76c9-wd45p    0/1     OOMKilled          1 (20s ago)   178m",
     CRASH, Label.OOM, "a public repository's kyverno notes (kubectl get pods -n kyverno)"),
    ("argo        hdf5-tick-backfill-wf-z9xk2        0/1     OOMKilled          0          8m14s",
     CRASH, Label.OOM, "a public repository's runbook (kubectl get pods -A)"),
    # gRPC Python's repr of a call whose server could not be reached
    ("\tstatus = StatusCode.UNAVAILABLE",
     WAIT, None, "corpus (elasticdl-1494-worker-grpc-unavailable-ps-channel-not-ready)"),
    ("               status = StatusCode.UNAVAILABLE",
     WAIT, None, "a public repository's log of a GRPCClient's AioRpcError (Connection refused)"),
    ("grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:\\n\\tstatus = StatusCode.UNAVAILABLE\\n\\tdetails = \"failed to connect to all addresses\"\\n\\tdebug_error_string = \"{\"created\":\"@1677105084.883333000\",\"description\":\"Failed to pick subchannel\"}\"",
     WAIT, None, "a public repository's error-chain fixture (the repr in an escaped message)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # NVML's code in a source's table of codes, not a call that failed
    "    ERROR_GPU_IS_LOST = 15",  # a public repository's NVML bindings
    "    const ERROR_GPU_IS_LOST: Return = 15;",  # a public repository's Rust bindings
    # kubectl's header and a running pod's row
    "NAMESPACE     NAME                                   READY   STATUS    RESTARTS   AGE",
    "kube-system   nvidia-device-plugin-daemonset-42pzg   1/1     Running   0          3d20h",
    # another status code of the repr: not read here
    "    status = StatusCode.UNIMPLEMENTED",  # a public repository's notes on gRPC errors
]

#: a wait states no cause of its own (an error line of the same connection would): causes are checked for errors
test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({ERROR, CRASH}))


@pytest.mark.parametrize("line", [
    # a status check's other statuses are not memory exhausted: this round reads none of them
    "2020-06-23 19:11:09.754024: F .\\tensorflow/core/kernels/random_op_gpu.h:227] Non-OK-status: GpuLaunchKernel(FillPhiloxRandomKernelLaunch<Distribution>, num_blocks, block_size, 0, d.stream(), gen, data, size, dist) status: Internal: invalid configuration argument",  # tensorflow/tensorflow#40656
    "F0000 00:00:1713630999.125092  494916 pjrt_computation_client.cc:158] Non-OK-status: tpu_status status: INVALID_ARGUMENT: Mismatched PJRT plugin PJRT API version (0.47) and framework PJRT API version 0.40).",  # corpus (pytorch-xla-6949-mismatched-pjrt-plugin-api-version)
    # a client's INFO record naming the code in brackets
    "2022-03-02 08:25:11.39 INFO[client.py:85] Model add_sub_config_default load failed: [StatusCode.UNAVAILABLE] explicit model load / unload is not allowed if polling is enabled",  # corpus (model-analyzer-335-explicit-load-not-allowed-polling)
])
def test_round_leaves_other_statuses_alone(line: str) -> None:
    assert round35d_form(line) is None


def test_all_namespaces_table_with_one_oom_killed_pod(tmp_path: Path) -> None:
    """``kubectl get pods -A``: a row OOMKilled among running pods is the memory limit; the same table running is
    healthy."""
    rows = ["NAMESPACE     NAME                                   READY   STATUS      RESTARTS   AGE",
            "kube-system   nvidia-device-plugin-daemonset-42pzg   1/1     Running     0          3d20h",
            "kubeflow      training-operator-8569f97489-zkxbt     0/1     OOMKilled   3          5m"]
    killed = tmp_path / "killed.log"
    killed.write_text("\n".join(rows) + "\n")
    assert diagnose_paths([str(killed)], now=0.0).verdict.label is Label.OOM
    running = tmp_path / "running.log"
    running.write_text("\n".join(rows[:2]) + "\n")
    assert diagnose_paths([str(running)], now=0.0).verdict.label is Label.HEALTHY


def test_lost_gpu_is_drained(tmp_path: Path) -> None:
    """The kubelet's admission error that NVML lost a GPU: the node is drained, not the job restarted on it."""
    log = tmp_path / "admission.log"
    log.write_text(FORMS[0][0] + "\n")
    verdict = diagnose_paths([str(log)], now=0.0).verdict
    assert verdict.label is Label.HARDWARE_ERROR
    assert verdict.action.value == "drain_and_restart"
