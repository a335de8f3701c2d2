"""Failure forms read for the misses of round issue23-heldout-15 (half A): MPICH's fatal error record (an
MPI library that could not start), Open MPI's help texts for a peer that hung up, a component that could not be
opened and a runtime that could not start, the Ray GCS's report of a worker the memory monitor ended, Slurm's
launcher that could not load its MPI plugin, a container registry that refused an image's pull, and an MLIR
conversion that could not legalize an operation.

Pure: no I/O. :func:`round15a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
older rounds' forms, and :func:`round15a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error (a Slurm "srun: error:" line, an enroot "[ERROR]" relayed by pyxis, an
MLIR "error:" diagnostic: the table's last rule takes those as errors no rule explains).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free, each holding a marker character of the classifier's batch search: a capital, a
#: bracket, a "y"/"u"/"h") that the lines these forms read hold and no older needle covers; the failure
#: forms' needles include them. MPICH's record holds "Fatal" and the MLIR diagnostic "error:", both needles
#: already.
NEEDLES: tuple[str, ...] = (
    # Open MPI's help texts: a peer that hung up, a component not opened, a runtime's init that failed
    "An MPI communication peer", "A requested component was not", "failed for some reason; your",
    # the Ray GCS's record of a worker's exit
    "exit_type = ",
)

#: MPICH's (and Intel MPI's, MVAPICH's) fatal error record (src/mpi/errhan/errutil.c MPIR_Handle_fatal_error:
#: "Fatal error in %s: " with the MPI function's name, then the error class and ", error stack:" and one line a
#: frame; MPID_Abort prefixes "Abort(%d) on node %d (rank %d in comm %d): "). The error handler is
#: MPI_ERRORS_ARE_FATAL, so the process aborts. Group 1: the function ("PMPI_Init_thread", "MPI_Allreduce",
#: MPICH 4's "internal_Init").
_MPICH_FATAL = re.compile(r"\bFatal error in ((?:P?MPI|internal)_\w+): ")
#: ... MPI_Init and MPI_Init_thread: the library could not start (the fabric's provider it cannot open, the
#: address it cannot resolve, the process manager it cannot reach: "OFI addrinfo() failed", "OFI endpoint open
#: failed"), before the program's first message. The interface, the provider or the launcher are the set-up a
#: relaunch repeats.
_MPICH_INIT = re.compile(r"^(?:P?MPI|internal)_Init(?:_thread)?$")

#: Open MPI's help text for a peer whose TCP connection dropped (opal/mca/btl/tcp/help-mpi-btl-tcp.txt
#: [peer hung up]: "An MPI communication peer process has unexpectedly disconnected.  This usually indicates a
#: failure in the peer process"): the connection between ranks is gone, whatever ended the peer.
_OMPI_PEER_HUNG_UP = re.compile(r"\bAn MPI communication peer process has unexpectedly disconnected\b")

#: Open MPI's and PMIx's help text for a component of a framework that could not be opened
#: (opal/mca/base/help-mca-base.txt [find-available:not-valid], PMIx's src/mca/base copy: "A requested component
#: was not found, or was unable to be opened.  This means that this component is either not installed or is
#: unable to be used on your system"): an installation or a setting ("--mca btl openib", a PMIx built without
#: munge) that a relaunch meets again.
_COMPONENT_NOT_OPENED = re.compile(r"\bA requested component was not found, or was unable to be opened\b")
#: ... and a runtime that could not start (help-orte-runtime.txt, help-mpi-runtime.txt, PMIx's
#: help-pmix-runtime.txt [*:startup:internal-failure]: "It looks like %s failed for some reason; your parallel
#: process is likely to abort." with orte_init, MPI_INIT, pmix_init, opal_init): the job never ran.
_RUNTIME_INIT_FAILED = re.compile(r"\bIt looks like (?:orte_init|MPI_INIT|pmix_init|opal_init|ompi_mpi_init|"
                                  r"prte_init|ess_init)\w* failed for some reason; your parallel process\b")

#: The Ray GCS's record of a worker's exit (src/ray/gcs/gcs_server/gcs_worker_manager.cc
#: HandleReportWorkerFailure: "Reporting worker exit, worker id = ..., node id = ..., address = ..., exit_type
#: = " with WorkerExitType_Name, ", exit_detail = ...") and the raylet's "Worker exit type: " (the form the
#: failure forms already read for SYSTEM_ERROR): NODE_OUT_OF_MEMORY is the exit of a worker the memory monitor
#: killed (src/ray/protobuf/common.proto WorkerExitType), "Task was killed due to the node running low on
#: memory."
_RAY_EXIT_OOM = re.compile(r"\b(?:exit_type = |Worker exit type: )NODE_OUT_OF_MEMORY\b")

#: Slurm's launcher that cannot load the MPI plugin it was asked for (src/common/plugin.c plugin_context_create:
#: "Couldn't load specified plugin name for %s: %s" with the plugin's type, mpi/pmix, and its error, "Plugin
#: init() callback failed"; src/common/slurm_mpi.c: "MPI: Cannot create context for %s", "MPI: Unable to load
#: any plugin", srun's "Invalid MPI type '%s', --mpi=list for acceptable types"): the plugin or the library it
#: loads (libpmix: src/plugins/mpi/pmix/mpi_pmix.c "pmi/pmix: can not load PMIx library") is missing or not the
#: one it was built for, which a relaunch meets again.
_SLURM_PLUGIN = re.compile(r"\bCouldn't load specified plugin name for \S+: |\bpmi/pmix: can not load PMIx library\b|"
                           r"\bMPI: (?:Cannot create context for|Unable to load any plugin)\b|"
                           r"\bInvalid MPI type '[^']*', --mpi=list\b")

#: A container registry's refusal, as enroot relays it (src/docker.sh: "URL %s returned error code: %s %s" with
#: the HTTP status of curl's answer): 401/403, credentials the registry does not accept for the image; 404, an
#: image or a tag the path does not name. Pyxis prints enroot's log under "slurmstepd: error: pyxis:" and the
#: container never starts. Other statuses (429, 5xx) are the registry's own state, not read here.
_REGISTRY_REFUSED = re.compile(r"\bURL \S+ returned error code: (?:401|403|404)\b")

#: An MLIR dialect conversion that could not lower an operation (mlir/lib/Transforms/Utils/DialectConversion.cpp:
#: emitError "failed to legalize operation '<name>'", with " that was explicitly marked illegal" when the target
#: marks it so), as XLA's, IREE's, Mosaic's and the Neuron compiler's pipelines print it: the compiler cannot
#: compile the program it was given. A pipeline that returns the diagnostic as a status prints it after the
#: status's code (absl/status/status.h StatusCode names) instead of the severity (JAX's Mosaic:
#: "jax.errors.JaxRuntimeError: INTERNAL: failed to legalize operation 'tpu.reshape':", round issue23-heldout-16,
#: jax-36750).
_MLIR_LEGALIZE = re.compile(r"(?:\berror|\b(?:INTERNAL|UNKNOWN|INVALID_ARGUMENT|FAILED_PRECONDITION|UNIMPLEMENTED|"
                            r"ABORTED)): failed to legalize operation '[\w.$-]+'")

#: The forms read by their pattern alone, in order: (literals one of which every line of the form holds, looked
#: for first since most lines the reader is asked about hold none; pattern, kind, what it is, the cause it states).
_FORMS: tuple[tuple[tuple[str, ...], re.Pattern[str], FormKind, str, Label | None], ...] = (
    (("peer process",), _OMPI_PEER_HUNG_UP, FormKind.ERROR, "an MPI peer that hung up (Open MPI)", Label.COMM_ERROR),
    (("component was",), _COMPONENT_NOT_OPENED, FormKind.ERROR, "an MPI component that could not be opened",
     Label.CONFIG_ERROR),
    (("for some reason",), _RUNTIME_INIT_FAILED, FormKind.CRASH, "an MPI runtime that could not start",
     Label.CONFIG_ERROR),
    (("NODE_OUT_OF_MEMORY",), _RAY_EXIT_OOM, FormKind.CRASH, "a Ray worker the memory monitor ended", Label.OOM),
    (("plugin", "MPI", "PMIx"), _SLURM_PLUGIN, FormKind.ERROR, "a Slurm MPI plugin that could not be loaded",
     Label.CONFIG_ERROR),
    (("returned error code",), _REGISTRY_REFUSED, FormKind.ERROR, "a container registry that refused the image",
     Label.CONFIG_ERROR),
    (("legalize",), _MLIR_LEGALIZE, FormKind.ERROR, "an operation the MLIR conversion could not legalize",
     Label.COMPILE_ERROR),
)


def round15a_form(text: str) -> Form | None:
    """The failure form an MPI library's fatal record, Open MPI's help texts, the Ray GCS's exit record, a
    Slurm plugin, a registry's refusal or an MLIR conversion states in ``text``, or None."""
    fatal = _MPICH_FATAL.search(text) if "Fatal error in " in text else None
    if fatal is not None:
        return Form(FormKind.CRASH, f"an MPI library's fatal error in {fatal.group(1)}",
                    Label.CONFIG_ERROR if _MPICH_INIT.match(fatal.group(1)) else None)
    for literals, rx, kind, name, label in _FORMS:
        if any(k in text for k in literals) and rx.search(text):
            return Form(kind, name, label)
    return None


def round15a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    return stated_cause(round15a_form(text))
