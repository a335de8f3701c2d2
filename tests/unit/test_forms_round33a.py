# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-33 (hardware faults on clusters), each as a rule of its
family, with real lines and the near misses the rule must leave alone: the Kubernetes device plugin's record of a GPU
it takes out of service, Slurm's reason for a node that rebooted under its jobs, TensorFlow's shutdown hook finding a
worker whose heartbeat stopped, and the kernel's PCIe error records (its verdict on a device it could not recover, its
corrected errors), which are signatures. Each line is from the corpus (named by its excerpt), a public thread (named)
or the program's own format string (named by its source file)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR
KB = default_knowledge_base()

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the device plugin's record of a GPU it takes out of service for an Xid the catalog does not lay on the program
    ("2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the device will go unhealthy.",
     ERROR, Label.HARDWARE_ERROR, "corpus (k8s-device-plugin-189-xid69-xidcriticalerror-device-marked-unhealthy)"),
    ("I1025 02:19:08.048144       1 health.go:160] XidCriticalError: Xid=79 on Device=GPU-1f2eba5a-54f6-7a53-978b-9ab84bd291c0; marking device as unhealthy.",
     ERROR, Label.HARDWARE_ERROR, "k8s-device-plugin internal/rm/health.go's klog format (newer plugins)"),
    ("E0623 18:44:57.120391    1211 health_checker.go:163] XidCriticalError: Xid=48 on Device=nvidia0, uuid=GPU-038869a3-ba5d-11eb-b165-70244e138fa3, the device will go unhealthy.",
     ERROR, Label.HARDWARE_ERROR, "GKE's gpu device plugin health_checker.go's glog format"),
    # Slurm's reason for a node that came back with a boot time it did not order
    ("Date and Time you first noticed it was down: Reason=Node unexpectedly rebooted [slurm@2022-07-23T15:31:00]",
     ERROR, Label.HARDWARE_ERROR, "corpus (arjunausers-164-slurm-reason-node-unexpectedly-rebooted)"),
    ("Node unexpectedly rebooted root      2021-03-05T11:35:16 eureka",
     ERROR, Label.HARDWARE_ERROR, "lyulyul/shine-cluster#7 (sinfo -R after a reboot, reason column widened)"),
    ("[2026-07-17T00:46:12.311] error: Node dgx01 unexpectedly rebooted boot_time=1784249100 last response=1784248000",
     ERROR, Label.HARDWARE_ERROR, "slurmctld's record (src/slurmctld/node_mgr.c format)"),
    # TensorFlow's shutdown hook finding workers whose heartbeat stopped
    ("INFO:tensorflow:ShutdownHook: lame workers found: HeartbeatManager(/job:worker/replica:0/task:0/device:CPU:0)",
     ERROR, Label.HARDWARE_ERROR, "corpus (t5-japanese-1-preemptible-tpu-shutdownhook-lame-workers-freeze)"),
    ("I1105 11:42:07.518420 140413257221952 session_support.py:391] ShutdownHook: lame workers found: HeartbeatManager(/job:tpu_worker/replica:0/task:0/device:CPU:0)",
     ERROR, Label.HARDWARE_ERROR, "tensorflow/python/tpu/session_support.py's record under absl's prefix"),
    # the fabric manager's query of NVSwitch devices answered "nothing to do": no NVSwitch on the machine
    ("Sep 18 03:19:01 ubuntu2404 nvidia-fabricmanager-start.sh[4756]: request to query NVSwitch device information from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]",
     ERROR, Label.CONFIG_ERROR, "corpus (cube-studio-29-fabricmanager-nothing-to-do-on-4090)"),
    ("11月 15 14:15:47 leon-NF5468M6 nv-fabricmanager[4177]: request to query NVSwitch device information from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]",
     ERROR, Label.CONFIG_ERROR, "corpus (gpu-operator-610-fabricmanager-nv-warn-nothing-to-do-a40-nvlink-bridge)"),
    # systemctl's report of a unit it could not start: a failure whose cause is in the unit's log
    ("Job for nvidia-fabricmanager.service failed because the control process exited with error code.",
     ERROR, None, "corpus (gpu-operator-356-systemctl-start-nvidia-fabricmanager-failed-geforce)"),
    ("Job for nvidia-fabricmanager.service failed because the control process exited with error code.",
     ERROR, None, "NVIDIA/nvtrust#128 (systemctl restart on an H20 guest)"),
    ("Job for docker.service failed because a timeout was exceeded.",
     ERROR, None, "systemctl's job result 'timeout' (src/shared/bus-wait-for-jobs.c)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # the plugin skipping an event that is not a critical Xid
    "I1025 02:19:08.002792       1 health.go:151] Skipping non-nvmlEventTypeXidCriticalError event: {Device:{Handle:0x7f0dcf40bdf8} EventType:2 EventData:0 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}",  # gpu-operator#1065
    # the hook's next steps, and a reboot Slurm was told of
    "INFO:tensorflow:ShutdownHook: saving checkpoint to gs://bucket/model/model.ckpt",
    "slurmctld: reboot complete: node dgx01 returned to service",
    # the fabric manager that found its NVSwitches, and its start script's probe
    "Jan 05 14:45:28 TENCENT64 nv-fabricmanager[1120]: Successfully configured all the available NVSwitches to route GPU NVLink traffic. NVLink Peer-to-Peer support will be enabled once the GPUs are successfully registered with the NVLink fabric.",  # nvtrust#128
    "Sep 18 03:19:01 ubuntu2404 nvidia-fabricmanager-start.sh[4753]: Detected Pre-NVL5 system",  # corpus (cube-studio-29-...)
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the device will go unhealthy.", Label.HARDWARE_ERROR),
]
#: an application Xid an older plugin logged (an error line, but nothing said of the device)
NO_CAUSE = ["2019/04/30 08:12:01 XidCriticalError: Xid=31 on Device=GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7, the device will go unhealthy.",
            "2019/04/30 08:12:01 XidCriticalError: Xid=13 on Device=GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7, the device will go unhealthy."]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)

#: the kernel's verdict on a PCIe device it could not recover, from three threads
AER_UNRECOVERED = [
    "nvidia 0000:63:00.0: AER: can't recover (no error_detected callback)",  # corpus (open-gpu-kernel-modules-1229-...)
    "[  +0.000008] pcieport 0000:00:03.0: AER: device recovery failed",  # corpus (returnn-1500-aer-fatal)
    "Aug  8 01:33:27 localhost kernel: [ 3182.673404] pcieport 0000:00:03.1: AER: Device recovery failed",  # an amdgpu thread (older kernel's wording)
]
#: the kernel's records of corrected PCIe errors, from four sources
AER_CORRECTED = [
    "Jun 03 13:30:13 e2e8468 kernel: pcieport 0000:00:1c.0: AER: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)",  # corpus (balena-intel-304-...)
    "pcieport 0000:00:1d.0: AER: Corrected error received: 0000:07:00.0",  # corpus (endlessm-linux-pr-548-...)
    "[   41.670135] pcieport 0000:00:1c.1: AER: Multiple Corrected error received: 0000:00:1c.1",  # archfan/coreboot#2
    "[   24.220626][  T511] pcieport 0000:00:00.0: AER: Correctable error message received from 0000:01:00.0",  # qualcomm-linux/kernel#323
]


def test_a_device_the_kernel_could_not_recover_is_the_hosts_fault() -> None:
    for line in AER_UNRECOVERED:
        match = KB.classify(line)
        assert match is not None and match.signature.id == "host.pcie_aer_unrecovered", line
    assert KB.classify("pcieport 0000:00:1c.0: AER: device recovery successful") is None


def test_corrected_pcie_errors_are_noise_and_uncorrected_ones_are_not() -> None:
    for line in AER_CORRECTED:
        match = KB.classify(line)
        assert match is not None and match.signature.id == "benign.pcie_aer_corrected", line
    fatal = KB.classify("[74889.542044] pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)")
    assert fatal is not None and fatal.signature.category is Label.HARDWARE_ERROR


def test_the_recovery_verdict_outranks_the_unexplained_error_before_it(tmp_path: Path) -> None:
    """An uncorrectable non-fatal error is an error of unknown cause by itself; the kernel's verdict after it that the
    device was not recovered names the cause (open-gpu-kernel-modules#1229's record, corpus)."""
    log = tmp_path / "aer.log"
    log.write_text(
        "pcieport 0000:00:01.2: AER: Uncorrectable (Non-Fatal) error received from 0000:63:00.0\n"
        "snd_hda_intel 0000:63:00.1: PCIe Bus Error: Uncorrectable (Non-Fatal), type=Transaction Layer\n"
        "nvidia 0000:63:00.0: AER: can't recover (no error_detected callback)\n"
        "pcieport 0000:62:00.0: AER: device recovery failed\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HARDWARE_ERROR


def test_a_flood_of_corrected_errors_is_a_healthy_host(tmp_path: Path) -> None:
    log = tmp_path / "corrected.log"
    log.write_text("\n".join(AER_CORRECTED) + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY


def test_a_node_the_plugin_marked_unhealthy_is_drained(tmp_path: Path) -> None:
    log = tmp_path / "plugin.log"
    log.write_text(FORMS[0][0] + "\n2020/08/10 19:09:42 'nvidia.com/gpu' device marked unhealthy: GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HARDWARE_ERROR
