"""Failure forms read for the misses of round issue23-heldout-33 (part A: hardware faults on GPU, TPU and NPU
clusters): the Kubernetes device plugin's record of a GPU it takes out of service, Slurm's reason for a node that
rebooted under its jobs, TensorFlow's shutdown hook finding a worker whose heartbeat stopped, NVIDIA's fabric manager
finding no NVSwitch to manage and systemctl's report of a unit that did not start. (The kernel's PCIe
error records of the same round are signatures: ``host.pcie_aer_unrecovered``, ``benign.pcie_aer_corrected``.)

Pure: no I/O. :func:`round33a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 32, :func:`round33a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* NVIDIA's Kubernetes device plugin watches NVML's critical Xid events and logs the GPU it takes out of service:
  "XidCriticalError: Xid=%d on Device=%s, the device will go unhealthy." (internal/rm/health.go, older
  nvidia.go/server.go; newer "...; marking device as unhealthy."). It skips the Xids NVIDIA's catalog lays on the
  application (13, 31, 43, 45, 68, 109; older plugins only 31, 43, 45), so a record of another Xid is the node's
  own health check declaring the device faulty (k8s-device-plugin#189, Xid 69): drain. An application Xid in an
  older plugin's record says nothing of the device.
* Slurm's controller marks a node that came back with a new boot time it did not order DOWN with the reason "Node
  unexpectedly rebooted" (src/slurmctld/node_mgr.c, logged as "Node %s unexpectedly rebooted boot_time=%u last
  response=%u"): a power loss or a crash of the host under its jobs (Slurm's FAQ; ArjunaCluster/ArjunaUsers#164).
* TensorFlow's ShutdownHook polls the workers' heartbeats and logs "ShutdownHook: lame workers found: %s"
  (tensorflow/python/tpu/session_support.py) before it saves and stops the session: a worker (a TPU host, a
  preempted VM) stopped answering under the job (megagonlabs/t5-japanese#1): the host, not the program.
* NVIDIA's fabric manager asks the NVSwitch driver for its devices at start and reports the driver's NV_STATUS by
  its text and name ("request to query NVSwitch device information from NVSwitch driver failed with error:WARNING
  Nothing to do [NV_WARN_NOTHING_TO_DO]"): there is no NVSwitch on the machine (two cards on an NVLink bridge,
  GeForce cards), so the service the install started has nothing to manage and exits (gpu-operator#610,
  cube-studio#29): the node's set-up, not its devices.
* systemctl reports a unit it could not start in its own words (src/systemctl/systemctl-util.c, the job results of
  src/shared/bus-wait-for-jobs.c): "Job for %s failed because the control process exited with error code." (or
  "... a timeout was exceeded.", "... a fatal signal was delivered to the control process.", "... the service did
  not take the steps required by its unit configuration."), then "See \"systemctl status %s\" ...": the service the
  job needs did not start (gpu-operator#356, #610; nvtrust#128). The cause is in the unit's own log: a failure whose
  cause this line does not state.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round33a_form` reads hold, besides the needles failureforms already
#: searches: the device plugin's critical Xid, Slurm's reboot reason, TensorFlow's shutdown hook, the fabric manager
#: with no NVSwitch, systemctl's failed job
NEEDLES: tuple[str, ...] = ("XidCriticalError: Xid=", "unexpectedly rebooted", "lame workers found",
                            "NV_WARN_NOTHING_TO_DO", "failed because ")

#: the device plugin's record of a GPU it takes out of service for a critical Xid
_PLUGIN_XID = re.compile(r"\bXidCriticalError: Xid=(\d+) on (?:Device=\S+|unknown device)"
                         r"(?:.*\b(?:the device will go unhealthy|marking device as unhealthy))?")

#: the Xids NVIDIA's catalog lays on the application, which the plugin skips (and older plugins logged)
_APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})

#: Slurm's reason, and its controller's record, for a node that rebooted without being told to
_SLURM_REBOOTED = re.compile(r"\bNode unexpectedly rebooted\b|\bNode \S+ unexpectedly rebooted boot_time=\d")

#: TensorFlow's shutdown hook finding workers whose heartbeat stopped
_LAME_WORKERS = re.compile(r"\bShutdownHook: lame workers found: \S")


#: the fabric manager's query of NVSwitch devices that the driver answers with "nothing to do": no NVSwitch here
_NO_NVSWITCH = re.compile(r"\bNVSwitch device information from NVSwitch driver failed with error:.*"
                          r"\[NV_WARN_NOTHING_TO_DO\]")

#: systemctl's report of a job that did not start its unit
_SYSTEMCTL_JOB_FAILED = re.compile(r"\bJob for \S+ failed because (?:the control process exited with error code|"
                                   r"a timeout was exceeded|a fatal signal was delivered to the control process|"
                                   r"the service did not take the steps required by its unit configuration)")

def round33a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "XidCriticalError: Xid=" in text and (plugin := _PLUGIN_XID.search(text)) is not None:
        if int(plugin.group(1)) in _APPLICATION_XIDS:
            return None
        return Form(FormKind.ERROR, f"a GPU the device plugin took out of service for Xid {plugin.group(1)}",
                    Label.HARDWARE_ERROR)
    if "unexpectedly rebooted" in text and _SLURM_REBOOTED.search(text):
        return Form(FormKind.ERROR, "a node Slurm found rebooted under its jobs", Label.HARDWARE_ERROR)
    if "lame workers found" in text and _LAME_WORKERS.search(text):
        return Form(FormKind.ERROR, "a worker whose heartbeat stopped (TensorFlow's shutdown hook)",
                    Label.HARDWARE_ERROR)
    if "NV_WARN_NOTHING_TO_DO" in text and _NO_NVSWITCH.search(text):
        return Form(FormKind.ERROR, "a fabric manager with no NVSwitch to manage", Label.CONFIG_ERROR)
    if "failed because " in text and _SYSTEMCTL_JOB_FAILED.search(text):
        return Form(FormKind.ERROR, "a unit systemctl could not start")
    return None


def round33a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round33a_form(text))
