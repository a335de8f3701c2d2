"""Failure forms read for the misses of round issue23-heldout-29 (part B: schedulers, launchers and cluster
platforms): the platform's own record that the job's container could not start, could not be placed or exited,
and the GPU stack's refusals that stop every container of a node alike.

Pure: no I/O. :func:`round29b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 28, and :func:`round29b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* NVML that cannot start: NVML's callers print ``Failed to initialize NVML: <nvmlErrorString>`` (nvidia-smi,
  Slurm's gpu/nvml plugin ``error("Failed to initialize NVML: %s", nvmlErrorString(rc))``, NVIDIA's device
  plugin ``klog.Infof("Failed to initialize NVML: %s.", err)``): the driver is not loaded, the library is missing
  or of another version than the kernel module (k8s-device-plugin#444 in round 29 part B, read as healthy). The
  node's driver set-up, which every restart meets again; "GPU is lost" is the one status that names the device.
* The NVIDIA container runtime's hook: libnvidia-container's CLI reports the stage that failed as
  ``nvidia-container-cli: <stage> error: <reason>`` (``initialization error: nvml error: driver not loaded``,
  ``requirement error: unsatisfied condition: cuda>=11.0, please update your driver``, ``mount error``,
  ``ldcache error``): the container is not started (dstack#1080, read as a crash to restart).
* The container runtime that cannot start the container: runc's ``standard_init_linux.go:<n>: exec user process
  caused: <errno>`` (the image's entrypoint missing or of another architecture), ``OCI runtime create failed``,
  ``unable to start container process``, containerd's ``failed to create shim task``/``failed to create
  containerd task``. Nothing of the job ran; the same image and command fail again (OpenPAI#5720, whose own exit
  spec guessed a platform failure, read as healthy).
* Kubernetes' scheduler refusing to place a pod: its FailedScheduling message ``0/<n> nodes are available:
  <count> Insufficient nvidia.com/gpu, ...`` (pkg/scheduler: "0/%v nodes are available: %v."). The job never
  starts until the resources it asks for exist (kubeflow#794, read as healthy).
* A platform's record that the job's container or replica exited: Google Cloud ML Engine's and Vertex AI's
  ``The replica <name> exited with a non-zero status of <n>`` (``ran out-of-memory and exited ...`` for a
  memory kill), the Kubeflow training operator's event ``<Kind> <ns>/<name> has failed because <n> <Role>
  replica(s) failed.`` (pkg/controller.v1/*/status.go), Determined's ``pod failed with exit code: <n>`` and
  ``container failed with non-zero exit code: <n>``, YARN's ``Container exited with a non-zero exit code <n>`` and
  the ``Exit code: <n>`` line of its container-launch exception (OpenPAI's summary repeats the launcher's own
  code as ``[ExitCode]: 177`` for "undefined" before the container's: not read, the container's status is). The
  process died: a crash unless the status says more (127: a command the shell could not find, 126: one it could
  not execute). A cause the log states elsewhere outranks it (the judge keeps a specific cause over a generic
  crash).
* curl's failure line ``curl: (<code>) <message>`` (tool_main's exit codes, libcurl-errors(3)), as a download step
  of a launch prints it (enroot importing an image: pyxis#112, read as healthy): a TLS or certificate failure
  (35 CURLE_SSL_CONNECT_ERROR, 51, 58, 59, 60 CURLE_PEER_FAILED_VERIFICATION, 77, 83, 90, 91) or a malformed or
  unsupported URL (1, 3) is the set-up's (a registry spoken to in the wrong scheme, a missing CA), which fails
  again; a connection refused, cut or timed out (7, 28, 52, 55, 56) is the network's. Other codes are not read.
* srun that could not launch the step's tasks: ``srun: error: Application launch failed: <reason>``, ``srun: error:
  Task launch for StepId=<id> failed on node <node>: <reason>``, ``srun: error: task <n> launch failed: <reason>``
  (src/srun launch messages). No task ran: the step's request (a layout the node's CPUs cannot give), the MPI
  plugin, the cluster's credentials (munge keys that differ, an expired credential) refuse it, and srun aborts the
  step; the corpus' four such excerpts are all set-up faults (openpmix#3872 restarted as a crash before this round;
  in snakemake-executor-plugin-slurm#225 and batchtools#201 an earlier srun error that states no cause still
  decides).
* A rendezvous address whose port is 0: c10d's client (torch/csrc/distributed/c10d/socket.cpp) retries "No socket
  on ({host}, {port}) is listening yet, will retry." and reports "The client socket has failed to connect to any
  network address of ({host}, {port})." Port 0 asks the system for any free port when binding, and no server
  listens on it: the address the launcher gave is wrong, and every retry waits for nothing (NeMo-Run#292's
  launcher handing torchrun ``localhost:0`` on one node in Kubernetes, read as healthy).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round29b_form` reads hold, besides the needles failureforms already
#: searches: NVML and its container hook, the container runtimes, the scheduler's refusal, the exit records
NEEDLES: tuple[str, ...] = ("initialize NVML", "nvidia-container-cli", "exec user process", "OCI runtime",
                            "unable to start container process", "shim task", "containerd task",
                            "nodes are available", "exited with a non-zero status of", "replica(s) failed",
                            "failed with exit code", "failed with non-zero exit code", "with a non-zero exit code",
                            "Exit code: ", "curl: (", "is listening yet", "failed to connect to",
                            "launch failed", "Task launch for")

#: NVML's callers' report of an nvmlInit that failed, and the one status of it that names a lost device
_NVML_INIT = re.compile(r"\bFailed to initialize NVML: (.+)", re.IGNORECASE)
_GPU_LOST = re.compile(r"\bGPU is lost\b", re.IGNORECASE)

#: libnvidia-container's CLI: the stage that failed
_CONTAINER_CLI = re.compile(r"\bnvidia-container-cli(?:\.real)?: \w+ error: ")

#: runc/containerd that could not start the container
_RUNTIME_START = re.compile(r"\bexec user process caused\b|\bOCI runtime (?:create|exec|start|run) failed\b|"
                            r"\bunable to start container process\b|"
                            r"\bfailed to (?:create|start) (?:shim|containerd) task\b")

#: a start that the memory limit ended
_MEMORY_KILL = re.compile(r"\bOOM-?kill|\bout of memory\b", re.IGNORECASE)

#: kube-scheduler's FailedScheduling message: no node can take the pod
_UNSCHEDULABLE = re.compile(r"\b0/\d+ nodes are available: ")

#: the exit records: Cloud ML/Vertex's replica status, Determined's pod and container, YARN's container
#: (a status 0 is a success and is not read)
_REPLICA_EXIT = re.compile(r"\bThe replica [\w-]+(?: \d+)? (ran out-of-memory and )?exited with a non-zero status of "
                           r"(\d+)\b")
_CONTAINER_EXIT = re.compile(r"\b(?:pod|container) failed with (?:non-zero )?exit code:? (\d+)\b|"
                             r"\bContainer exited with a non-zero exit code (\d+)\b|"
                             r"^[\s>|]*Exit code: (\d+)\s*$")
#: curl's failure line and the codes read from it: the set-up's (TLS, certificates, URL) and the network's
_CURL = re.compile(r"\bcurl: \((\d+)\) ")
_CURL_CAUSES = {**dict.fromkeys((1, 3, 35, 51, 58, 59, 60, 77, 83, 90, 91), Label.CONFIG_ERROR),
                **dict.fromkeys((7, 28, 52, 55, 56), Label.COMM_ERROR)}
#: srun's launch failure of the step's tasks
_SRUN_LAUNCH = re.compile(r"\bsrun: error: (?:Application launch failed: |Task launch for \S+ failed on node \S+: |"
                          r"task \d+ launch failed: )")
#: c10d's client connecting to a port 0
_C10D_PORT_ZERO = re.compile(r"\[c10d\] (?:No socket on \([^()]*, 0\) is listening yet\b|"
                             r"The client socket has failed to connect to (?:any network address of \([^()]*, 0\)|"
                             r"\S+:0 \())")
#: the Kubeflow training operator's event for a job one of whose replicas failed
_OPERATOR_FAILED = re.compile(r"\bhas failed because \d+ \w+ replica\(s\) failed\b")


def _exit_status(status: int, what: str) -> Form | None:
    """The form of a process that exited with ``status`` as a platform reports it (``what``), or None for 0."""
    if status == 0:
        return None
    if status == 127:
        return Form(FormKind.ERROR, f"{what} exited 127: a command the shell could not find", Label.CONFIG_ERROR)
    if status == 126:
        return Form(FormKind.ERROR, f"{what} exited 126: a command that could not be executed", Label.CONFIG_ERROR)
    return Form(FormKind.ERROR, f"{what} exited with status {status}", Label.OTHER_CRASH)


def round29b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "NVML" in text and (nvml := _NVML_INIT.search(text)) is not None:
        if _GPU_LOST.search(nvml.group(1)):
            return Form(FormKind.ERROR, "NVML cannot start: a GPU is lost", Label.HARDWARE_ERROR)
        return Form(FormKind.ERROR, "NVML cannot start (the node's NVIDIA driver set-up)", Label.CONFIG_ERROR)
    if "nvidia-container-cli" in text and _CONTAINER_CLI.search(text):
        return Form(FormKind.ERROR, "the NVIDIA container hook refused to start the container", Label.CONFIG_ERROR)
    if _RUNTIME_START.search(text):
        if _MEMORY_KILL.search(text):
            # runc's "container init was OOM-killed (memory limit too low?)": the start itself ran out of memory
            return Form(FormKind.ERROR, "a container whose start the memory limit killed", Label.OOM)
        return Form(FormKind.ERROR, "a container runtime that could not start the container", Label.CONFIG_ERROR)
    if "nodes are available" in text and _UNSCHEDULABLE.search(text):
        return Form(FormKind.ERROR, "a pod no node can take (the scheduler's FailedScheduling)", Label.CONFIG_ERROR)
    if "replica(s) failed" in text and _OPERATOR_FAILED.search(text):
        return Form(FormKind.ERROR, "a training job whose replica failed (the operator's status)", Label.OTHER_CRASH)
    if "non-zero status of" in text and (replica := _REPLICA_EXIT.search(text)) is not None:
        if replica.group(1):
            return Form(FormKind.ERROR, "a replica the platform killed for memory", Label.OOM)
        return _exit_status(int(replica.group(2)), "a replica")
    if "xit" in text and (container := _CONTAINER_EXIT.search(text)) is not None:
        return _exit_status(int(container.group(1) or container.group(2) or container.group(3)), "a container")
    if "srun: error: " in text and _SRUN_LAUNCH.search(text):
        return Form(FormKind.ERROR, "srun could not launch the step's tasks", Label.CONFIG_ERROR)
    if "[c10d]" in text and _C10D_PORT_ZERO.search(text):
        return Form(FormKind.ERROR, "a rendezvous address with port 0, where no server listens", Label.CONFIG_ERROR)
    if "curl: (" in text and (curl := _CURL.search(text)) is not None:
        cause = _CURL_CAUSES.get(int(curl.group(1)))
        if cause is not None:
            kind = "a TLS, certificate or URL set-up" if cause is Label.CONFIG_ERROR else "a connection that failed"
            return Form(FormKind.ERROR, f"a download curl could not make ({kind}, curl {curl.group(1)})", cause)
    return None


def round29b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round29b_form(text))
