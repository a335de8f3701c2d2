"""Failure forms read for the misses of round issue23-heldout-13: a launcher's spawn and exit banner (MPICH's
Hydra), a build that lacks what the launch or the run needs (a version it was compiled against, a support it
was not built with), a rendezvous server that could not bind its port, a fabric library's error return, a
graph compiler's own check failing inside one of its passes, and a resource that is not there in an error line
logged at a warning's level.

Pure: no I/O. :func:`round13a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms that state an error in their words, and :func:`round13a_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.diagnosis.forms_errors import RESOURCE
from neuron_watch.diagnosis.forms_severity import QUIET_LEVELS, head_level
from neuron_watch.events import Label

#: MPICH's process manager (Hydra, and Intel MPI's build of it) failing to start a program on a node
#: (src/pm/hydra/lib/utils/.../hydra_spawn.c HYD_spawn: "execvp error on file %s (%s)", the file and
#: strerror): the program is not at that path or cannot be run there (an unset variable in the path, a
#: binary not installed on that node), and a relaunch spawns the same path again
_SPAWN_EXEC_FAILED = re.compile(r"\bexecvp?e? error on file \S+ \((?:No such file or directory|Permission denied|"
                                r"Exec format error|Not a directory)\)")

#: MPICH's and Intel MPI's banner when a rank ended badly (src/pm/hydra/mpiexec/mpiexec.c: "BAD TERMINATION OF
#: ONE OF YOUR APPLICATION PROCESSES", then "RANK .. PID .. RUNNING AT ..", "EXIT CODE: N" or "KILLED BY SIGNAL:
#: N"): the launcher's word that the job is over, framed by a line of "=" (its cause is what the rank said
#: before it)
_BAD_TERMINATION = re.compile(r"^[=\s]*BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\b")

#: a program that checks the version it was built against and refuses the one installed, in the sentence such
#: checks print (DeepSpeed's op builder: "Installed CUDA version 11.0 does not match the version torch was
#: compiled with 10.1, unable to compile cuda/cpp extensions without a matching cuda version."; "compiled with
#: CUDA 11.8 but the installed driver supports 11.4"): the installation on this machine, a restart repeats it
_BUILT_AGAINST_MISMATCH = re.compile(
    r"\bdoes(?: not|n't) match the (?:version|one) (?:that )?[\w.-]+ (?:was |is )?(?:compiled|built) "
    r"(?:with|against)\b|"
    r"\b(?:compiled|built) (?:with|against) [\w.-]+ (?:version )?v?\d[\w.]*,? but (?:the |this )?"
    r"(?:installed|found|loaded|runtime|system)\b")

#: a build without a support the launch needs, stated with the refusal that follows from it (Open MPI's
#: [pmi-not-built] help text: "... but OMPI was not built with SLURM's PMI support and therefore cannot
#: execute."; "PyTorch was not compiled with NCCL support, ... required"): how the software was built, which a
#: restart does not change. A warning that the program goes on without it is no refusal.
_NOT_BUILT_WITH = re.compile(r"\b(?:was|is|were|are) not (?:built|compiled) with [\w'.+-]+(?: [\w'.+-]+){0,3} "
                             r"support\b")
#: ... and a launcher's refusal for a build that has none of the supports it could run with (horovod's runner,
#: horovod/runner/launch.py: "Neither MPI nor Gloo support has been built. Try reinstalling Horovod ensuring that
#: either MPI is installed (MPI) or CMake is installed (Gloo)."; round issue23-heldout-17, horovod-1329): the
#: sentence is the refusal, the launcher exits before it runs anything
_NONE_BUILT = re.compile(r"\bNeither [\w.+-]+ nor [\w.+-]+ support (?:has|have|was|were) (?:been )?built\b")
_REFUSES = re.compile(r"\b(?:cannot|can't|unable|therefore|required|requires|must)\b")
_GOES_ON = re.compile(r"\w+Warning\b|(?i:\bfall(?:ing|s)? back\b|\bdisabl(?:ed|ing)\b|\bignor(?:ed|ing)\b)")

#: a libfabric call's error return as its callers print it (fabtests' and many programs' FT_PRINTERR:
#: "%s: %d (%s)", the call, the negative errno and fi_strerror: "fi_getinfo: -61 (No data available)"),
#: the line a program prints when the fabric refused it, whatever the provider's warnings said before;
#: its cause is the call's (errorclass: fi_getinfo's ENODATA is no provider for this process)
_FABRIC_CALL_FAILED = re.compile(r"^\s*fi_\w+(?:\(\))?: -\d+ \([\w ,'-]+\)\s*$")

#: a server that could not listen on its port, as c10d's TCP store says it (torch/csrc/distributed/c10d/
#: socket.cpp: "The server socket has failed to listen on any local network address.", then per address "The
#: server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."): the port is taken
#: (another job or launcher on the node holds it) or not the job's to use, and a relaunch on the same port
#: meets it again; the errno's number names it when the words are cut or wrapped (98 EADDRINUSE, 99
#: EADDRNOTAVAIL, 13 EACCES)
_SERVER_CANNOT_BIND = re.compile(r"\bserver socket has failed to (?:listen on any local network|bind to)\b|"
                                 r"\(errno: (?:98|99|13) - ")

#: a graph compiler's internal check (XLA's RET_CHECK: "RET_CHECK failure (<file>:<line>) <condition>",
#: xla/status_macros.cc) raised in one of its passes, the file a pass or a lowering (TF1's TPU rewrite
#: "distributed_tpu_rewrite_pass.cc", "*_compiler.cc", "*_emitter.cc", "hlo_verifier.cc"): the compile of
#: this model failed, and recompiling it repeats the check
_CHECK_IN_COMPILER_PASS = re.compile(
    r"\bRET_CHECK failure \((?:\S*/)?\w*(?:_pass|rewrite\w*|compiler|_lowering|emitter|legalize\w*|verifier)"
    r"\.cc:\d+\)")

#: Open MPI's error log (opal/util/error.h OPAL_ERROR_LOG: "OPAL ERROR: %s in file %s at line %d", the error
#: code's string) when the code is OPAL_ERR_UNREACH ("Unreachable") and the file is the PMIx client's
#: (opal/mca/pmix/pmix3x/pmix3x_client.c, ext2x, ext3x): a rank started without a PMIx server to reach, as
#: when srun launches it directly and Open MPI was not built with Slurm's PMI support (mpi4py#141): how the
#: job is launched or the library built, which a relaunch repeats
_PMIX_UNREACHABLE = re.compile(r"\bOPAL ERROR: Unreachable in file \S*(?:pmix\w*|ext\dx)_client\.c\b")


def round13a_form(text: str) -> Form | None:
    """A launcher's spawn failure or its exit banner, a build refused, a fabric call that failed, or None."""
    if _SPAWN_EXEC_FAILED.search(text):
        return Form(FormKind.ERROR, "a process manager that could not run a program (execvp)", Label.CONFIG_ERROR)
    if _BAD_TERMINATION.search(text):
        return Form(FormKind.CRASH, "MPICH's banner of a rank that ended badly")
    if head_level(text) in QUIET_LEVELS:
        return None
    if _BUILT_AGAINST_MISMATCH.search(text):
        return Form(FormKind.ERROR, "a version installed that is not the one the program was built against",
                    Label.CONFIG_ERROR)
    refused = _NOT_BUILT_WITH.search(text) and _REFUSES.search(text) and not _GOES_ON.search(text)
    if refused or _NONE_BUILT.search(text):
        return Form(FormKind.ERROR, "a build without a support the job needs", Label.CONFIG_ERROR)
    if _FABRIC_CALL_FAILED.search(text):
        return Form(FormKind.ERROR, "a libfabric call's error return")
    return None


def round13a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    if _SERVER_CANNOT_BIND.search(text):
        return Label.CONFIG_ERROR, "a server that could not listen on its port"
    if _PMIX_UNREACHABLE.search(text):
        return Label.CONFIG_ERROR, "a rank with no PMIx server to reach (a launch without the launcher's support)"
    if _CHECK_IN_COMPILER_PASS.search(text):
        return Label.COMPILE_ERROR, "a compiler's internal check failing in one of its passes"
    # a resource that is not there (forms_errors: the errno strings, the loader's, CUDA's), in an error line
    # logged at a warning's level: NCCL prints a failed system call as "NCCL WARN Call to posix_fallocate failed
    # : No space left on device" and returns the error (a /dev/shm too small for its segments)
    if RESOURCE.search(text):
        return Label.CONFIG_ERROR, "a resource that is not there"
    return None
