"""Failure forms read for the misses of round issue23-heldout-14 (half A): a Slurm SPANK plugin that could not
set a task up, Ascend CANN's coded error records, an error record printed by a memory allocator's own source,
MPICH Hydra's error record, a Kubernetes container the OOM killer ended, an operator's exception PaddlePaddle
rethrows, the Neuron runtime daemon's records, and a program that could not be executed.

Pure: no I/O. :func:`round14a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` before the
forms that read a record's level (a PaddlePaddle operator's exception is logged at a warning's level and is
rethrown all the same), and :func:`round14a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for
the cause of a line that is already an error.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: The literals (digit-free, each holding a marker character of the classifier's batch search: a bracket, a
#: capital, an ``x``) that the lines these forms read hold and no older needle covers; the failure forms'
#: needles include them.
NEEDLES: tuple[str, ...] = (
    # Hydra's record prefix (mpiexec's and a proxy's), Kubernetes' OOMKilled, Paddle's rethrown exception
    "[proxy:", "[mpiexec@", "OOMKilled", "raises an exception", "raises an unknown exception",
    # the Neuron runtime 1.x daemon's bracketed records, a program that could not be executed
    "[NMGR:", "[NRTD:", "[KMGR:", "failed to execute",
)

#: Slurm's plugin stack refusing a task: a SPANK plugin the site requires failed in the hook that sets the task
#: up (src/common/spank.c _do_call_stack: "spank: required plugin %s: %s() failed with rc=%d"), and slurmstepd
#: giving up on the step (src/slurmd/slurmstepd/mgr.c: "Failed to invoke spank plugin stack"; slurmd's
#: "Plugin stack initialization failed."). The plugin (a container runtime such as pyxis/enroot, X11, a
#: credential plugin) could not prepare the task, so the program never ran: an image path, a runtime directory,
#: a registry's credentials, a disk it writes to, which a relaunch meets again.
_SPANK_REFUSED = re.compile(r"\bspank: required plugin \S+: \w+\(\) failed with rc=-?\d+|"
                            r"\berror: (?:Failed to invoke spank plugin stack|Plugin stack initialization failed)\b")

#: Ascend CANN's error message manager (the registries REG_FORMAT_ERROR_MSG loads, e.g. HCCL's hcomm
#: err_msg: {"errTitle": "Communication_Error_Timeout", "ErrCode": "EI0002", ...}) prints a reported error as
#: "<ErrCode>: <time> <message>" and, in later releases, "<errTitle>(<ErrCode>): <message>", then its
#: "Possible Cause:" and "Solution:" lines. The code is "E", the component's letter and four digits.
_CANN_RECORD = re.compile(r"(?:^|[\s\]>:|])(?:([A-Z][A-Za-z]*(?:_[A-Za-z0-9]+)+)\((E[A-Z]\d{4})\)|(E[A-Z]\d{4})):\s")
#: The causes the registries' entries state, by code (HCCL's EI codes and HCCP's EJ codes, hcomm's registry):
#: a configuration the collective library refuses, a collective a peer never joined (EI0002's notify wait), a
#: connection that failed, device memory, a device held by a process that is still running (EJ0001). EI0009 is
#: the registry's Communication_Error_Initialize_Transport ("Device %s transport init error. Reason: %s.").
_CANN_CODES = {
    "EI0001": Label.CONFIG_ERROR, "EI0002": Label.COLLECTIVE_HANG, "EI0003": Label.CONFIG_ERROR,
    "EI0004": Label.CONFIG_ERROR, "EI0005": Label.CONFIG_ERROR, "EI0006": Label.COMM_ERROR, "EI0007": Label.OOM,
    "EI0008": Label.CONFIG_ERROR, "EI0009": Label.COMM_ERROR, "EI0010": Label.COMM_ERROR, "EI0011": Label.OOM,
    "EI0013": Label.COMM_ERROR,
    "EI0014": Label.CONFIG_ERROR, "EI0016": Label.CONFIG_ERROR, "EI0017": Label.CONFIG_ERROR,
    "EJ0001": Label.CONFIG_ERROR, "EJ0003": Label.CONFIG_ERROR, "EJ0004": Label.CONFIG_ERROR,
    # the runtime's Memory_Allocation_Failure, which releases before the titled records print by its code alone
    # ("EL0004: [PID: n] <time> Failed to allocate memory.", vllm-project/vllm-ascend#1993)
    "EL0004": Label.OOM,
}
#: ... and by the title's words, which name the class of every entry (the runtime's "Memory_Allocation_Failure"
#: (EL0004), HCCL's "Resource_Error_Insufficient_Device_Memory", "Config_Error_Ranktable", "Package_Error_...")
_CANN_TITLES: tuple[tuple[re.Pattern[str], Label], ...] = (
    (re.compile(r"Memory_Allocation|Insufficient_Device_Memory|^Resource_Error$"), Label.OOM),
    (re.compile(r"^(?:Config_Error|Invalid_Argument|Package_Error|Ranktable_|HCCP_Process_Initialization)"),
     Label.CONFIG_ERROR),
    (re.compile(r"^Communication_Error_Timeout$"), Label.COLLECTIVE_HANG),
    (re.compile(r"^Communication_Error"), Label.COMM_ERROR),
)

#: An error record whose source location is a memory allocator's own file: MindSpore's log head
#: ("[ERROR] PRE_ACT(54175,...,python):<time> [mindspore/ccsrc/backend/common/mem_reuse/mem_dynamic_allocator.cc:392]
#: AddMemBlock...] ..."), CANN's trace lines ("... [FUNC:Alloc][FILE:device_allocator.cc][LINE:72]"), glog's
#: "<file>:<line>]". An allocator reports an error when it cannot give the memory asked for; the words after
#: the location are its own (a total exceeded, a malloc that failed).
_ALLOCATOR_SOURCE = re.compile(r"(?:[\[/\s]|FILE:)\w*(?:allocator|mem_reuse|memory_pool|mem_pool|caching_alloc)\w*"
                               r"\.(?:cc|cpp|c|h)(?::\d+\]|\]\[LINE:\d+\])")
_ERROR_HEAD = re.compile(r"^.{0,60}?(?:\[ERROR\]|\bERROR\b|\b[EF]\d{4} \d\d:)")

#: MPICH's process manager (Hydra, and Intel MPI's build of it) reports an error as "[<who>] <function>
#: (<file>:<line>): <message>" (src/pm/hydra/lib/utils: HYDU_error_printf prints HYDU_dump_prefix's "[%s] "
#: (mpiexec@<host>, proxy:<pgid>:<id>@<host>), then "%s (%s:%d): " with __func__, __FILE__, __LINE__): every
#: such line is an error, and Hydra stops the launch after it.
#: Intel MPI 2021's mpiexec also prints a record with its level in place of the location ("[mpiexec@<host>] Error:
#: Unable to run bstrap_proxy on localhost:2 (pid 13546, exit code 65280)", round issue23-heldout-18: warpx-6980).
_HYDRA_ERROR = re.compile(r"^\s*(?:\[\d+\]\s*)?\[(?:mpiexec|proxy:[\d:]+)@[\w.-]+\] "
                          r"(?:\w+ \((?:[\w.]+/)*[\w.]+:\d+\)|Error): ")
#: ... the words of its launch stage, where the proxies that run the program on each host are started
#: (ui_cmd_cb "Launch proxy failed.", HYDU_sock_connect "unable to get host address for %s" / "unable to connect
#: to server %s at port %d (check for firewalls!)", Intel's "unable to run bstrap_proxy on %s", "error setting up
#: the bootstrap proxies"): the program never started, and the host list, the interface or the bootstrap
#: (ssh, the scheduler's launcher) is the set-up a relaunch repeats. HYDU_ERR_POP's "create process returned
#: error" follows a failed HYDU_create_process (fork, exec, the CPU binding) of a proxy or, in a proxy's
#: launch_procs, of the program itself (and "launch_procs returned error" after it): nothing was started either
#: (round issue23-heldout-21: khiops-164, Hydra's binding with no topology library in Debian's mpich). That
#: binding's own record (tools/topo/topo.c HYDT_topo_bind: "no topology library available", when a binding is
#: asked of a Hydra built without hwloc) is the same launch.
_HYDRA_LAUNCH = re.compile(r"\b(?:Launch proxy failed|unable to get host address for|unable to connect to server|"
                           r"[Uu]nable to run bstrap_proxy|error setting up the bootstrap proxies|"
                           r"(?:create process|launch_procs) returned error|no topology library available)\b")

#: A Kubernetes container the kernel's OOM killer ended: the container status' terminated reason, "OOMKilled",
#: as the runtime sets it (containerd's CRI: reason "OOMKilled" when the task exited on an OOM event), printed by
#: ``kubectl get pod -o yaml`` ("reason: OOMKilled"), ``kubectl describe`` ("Reason:       OOMKilled") or the
#: JSON ("\"reason\": \"OOMKilled\""), and in ``kubectl get pods``' STATUS column ("name  0/1  OOMKilled  3  5m").
_K8S_OOM_KILLED = re.compile(r"^[\s\-|]*\"?[Rr]eason\"?\s*:\s*\"?OOMKilled\"?,?\s*$|^\S+\s+\d+/\d+\s+OOMKilled\s+\d+\b")

#: PaddlePaddle's operator runner, as an operator throws (paddle/fluid/framework/operator.cc OperatorBase::Run,
#: new_executor/interpretercore: LOG(WARNING) << Type() << " raises an exception " << demangle(typeid(ex).name())
#: << ", " << ex.what(); then std::rethrow_exception): logged at a warning's level, and the exception goes on up,
#: so the step fails. Group 1: the exception's type; the message after it says the rest.
_PADDLE_RETHROW = re.compile(r"\b\w+ raises an (?:unknown exception\s*$|exception (\w+(?:::\w+)+)(?:, (.*)|\s*$))")
_PADDLE_TYPES = {"paddle::memory::allocation::BadAlloc": Label.OOM, "std::bad_alloc": Label.OOM}

#: The Neuron runtime 1.x daemon and its managers (neuron-rtd: "nrtd[<pid>]: [NRTD:nrtd_main] ...", journald's
#: "<time> <host> nrtd[<pid>]: [NMGR:kmgr_create_eg] ..."): a bracketed "[<component>:<function>]" record. A
#: record of one of them that says a call failed is an error of the runtime, which fails the model's load.
_NRTD_RECORD = re.compile(r"\[(?:NRTD|NMGR|KMGR|TDRV):\w+\] ")
_NRTD_FAILED = re.compile(r"\bfailed\b|\bFailed\b|\bNot enough\b|\berror\b")
#: ... and its words for NeuronCores another process holds (NRT_LOAD_NOT_ENOUGH_NC, the daemon's
#: NERR_RESOURCE_NC: "Not enough free NCs to allocate %d members group", "insufficient NCs"): a restart meets
#: the same held cores until the old runs release them.
_NCS_HELD = re.compile(r"\b(?:[Nn]ot enough free|[Ii]nsuffici?ent) (?:NCs|NeuronCores)\b")

#: A program that could not be executed, as the tools that start one say it (err(3)'s "<prog>: failed to
#: execute: <path>: <strerror>", enroot-switchroot.c; "failed to exec"): the file is not there in the
#: image or the machine (a shell-less image, a binary never installed), or not runnable, which a relaunch
#: meets again.
_EXEC_FAILED = re.compile(r"\bfailed to exec(?:ute)?:? (?:\S+: )?(?:No such file or directory|Permission denied|"
                          r"Exec format error|Not a directory)\b")


def round14a_form(text: str) -> Form | None:
    """The failure form a plugin stack's refusal, a coded CANN record, a launcher's or a runtime's error
    record, an OOM-killed container, a rethrown operator exception or a failed exec states in ``text``."""
    if _SPANK_REFUSED.search(text):
        return Form(FormKind.CRASH, "a required Slurm SPANK plugin that could not set the task up",
                    Label.CONFIG_ERROR)
    if _K8S_OOM_KILLED.search(text):
        return Form(FormKind.CRASH, "a container the OOM killer ended (Kubernetes' reason OOMKilled)", Label.OOM)
    rethrown = _PADDLE_RETHROW.search(text)
    if rethrown is not None:
        return Form(FormKind.ERROR, "an operator's exception PaddlePaddle rethrows", _rethrown_cause(rethrown))
    if _HYDRA_ERROR.search(text):
        return Form(FormKind.ERROR, "MPICH Hydra's error record",
                    Label.CONFIG_ERROR if _HYDRA_LAUNCH.search(text) else None)
    if _NRTD_RECORD.search(text) and _NRTD_FAILED.search(text):
        return Form(FormKind.ERROR, "a Neuron runtime daemon's record of a failed call",
                    Label.CONFIG_ERROR if _NCS_HELD.search(text) else None)
    if _EXEC_FAILED.search(text):
        return Form(FormKind.ERROR, "a program that could not be executed", Label.CONFIG_ERROR)
    cann = _cann_cause(text)
    if cann is not None:
        return Form(FormKind.CRASH, f"an Ascend CANN error record ({cann[1]})", cann[0])
    return None


def round14a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    cann = _cann_cause(text)
    if cann is not None:
        return cann[0], f"an Ascend CANN error record ({cann[1]})"
    if _ALLOCATOR_SOURCE.search(text) and _ERROR_HEAD.search(text):
        return Label.OOM, "an error record from a memory allocator's own source"
    form = round14a_form(text)
    if form is not None and form.label is not None:
        return form.label, form.name
    return None


def _cann_cause(text: str) -> tuple[Label, str] | None:
    """(cause, code) of a CANN coded record whose code or title the registries give a cause, else None."""
    m = _CANN_RECORD.search(text)
    if m is None:
        return None
    title, code = m.group(1), m.group(2) or m.group(3)
    if code in _CANN_CODES:
        return _CANN_CODES[code], code
    for pattern, label in _CANN_TITLES if title else ():
        if pattern.search(title):
            return label, f"{title}({code})"
    return None


def _rethrown_cause(m: re.Match[str]) -> Label | None:
    """The cause of a rethrown operator exception: its type's, or the status its message names."""
    thrown = m.group(1)
    if thrown in _PADDLE_TYPES:
        return _PADDLE_TYPES[thrown]
    message = m.group(2) or ""
    if re.search(r"\bResourceExhaustedError\b|\bOut of memory\b", message):
        return Label.OOM
    return None
