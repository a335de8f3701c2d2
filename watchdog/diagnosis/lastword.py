"""A process's last word: the failure forms after which the process that printed them does not go on.

Pure: no I/O. Offline, a log of one stream whose lines name no process (a pasted console, a job's
combined output) mixes processes: the ranks of a job, a launcher and its children, a server and its
workers. The judge reads such a stream as one process, so a line of progress after an error withdraws
the error (the process went on from it). That is right for an error a process survives, and wrong when
the progress is another process's. Some forms say which it is: they end the process that printed them,
so whatever comes after them in the stream is another's. :func:`last_word` reads them, and
:class:`UncaughtTracebacks` the one that needs its context (a Python traceback that reached the top of
the program).

Only the forms whose program ends *itself* are here: a report of another process's death (a worker
killed by a signal, an actor that died, the kernel's segfault record) says nothing of the process that
prints it, which may go on, as a server outliving a worker does.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.exctaxonomy import exception_class, frame_of
from neuron_watch.diagnosis.forms_errors import ARGPARSE_ERROR, crash_form
from neuron_watch.diagnosis.heldout.round25a import ends_its_process

#: the crash forms of :func:`~neuron_watch.diagnosis.forms_errors.crash_form` (by their names there) that
#: end the process that printed them:
#: * glog's LOG(FATAL)/CHECK and its failure signal handler, absl's (glog src/logging.cc LogMessage::Fail
#:   calls abort(); src/signalhandler.cc re-raises the signal after its report);
#: * a Go panic or runtime throw (runtime/panic.go: the program exits with status 2);
#: * nccl-tests' checks (src/common.h NCCLCHECK/CUDACHECK return the error, and main exits);
#: * libstdc++'s terminate handler (libsupc++/vterminate.cc: abort() after its report);
#: * Rust's allocation-error hook (library/std/src/alloc.rs: abort after its message);
#: * the shell's report that the program it ran died of a signal (bash jobs.c: "Segmentation fault
#:   (core dumped)"): the program ended;
#: * the JVM's fatal error report (HotSpot vmError.cpp: the VM aborts after writing it);
#: * Open MPI's mpirun reporting a rank a signal ended (it then aborts the whole job);
#: * MPICH's abort record (MPID_Abort: the rank exits with that code).
#: Left out: a Rust panic and an uncaught Java exception (of one thread, not the process, unless it is
#: main's: :data:`_MAIN_THREAD`), a fatal signal named in prose (often a child's, reported by a parent that
#: goes on), a Ray actor's or worker's death, the kernel's and Slurm's records of another process's end.
_ENDS_ITS_PROCESS = frozenset({
    "a failed CHECK (glog/absl)", "glog's check-failure stack trace", "glog's fatal signal report",
    "a fatal signal report", "a Go panic", "a Go panic's goroutine trace", "a failed check of nccl-tests",
    "an uncaught C++ exception", "a Rust allocation failure", "a fatal signal (the shell's report)",
    "the JVM's fatal error report", "a rank that a signal ended (Open MPI)", "an MPICH abort record",
})

#: a panic or an uncaught exception of the main thread, which ends the program: Rust's default hook
#: (library/std/src/panicking.rs: "thread 'main' panicked at"; the runtime exits with 101) and Java's
#: (ThreadGroup.uncaughtException: "Exception in thread \"main\" "; the JVM exits when main ends)
_MAIN_THREAD = re.compile(r"\bthread 'main' panicked at |\bException in thread \"main\" [\w.$]+")

#: ends of a process in their own words:
#: * CPython's fatal error (Python/pylifecycle.c fatal_error: "Fatal Python error: " then abort(); faulthandler
#:   heads its dump of a fatal signal the same way before the signal ends the process);
#: * Slurm's srun refusing the step (src/srun: "Unable to create step for job %u: %m", then srun exits 1) and its
#:   step daemon failing to run the task (src/slurmd/slurmstepd/task.c exec_task: "execve(): %s: %m", then the
#:   task exits);
#: * MPICH's Hydra failing to spawn the program (hydra_spawn.c HYD_spawn: "execvp error on file %s (%s)");
#: * Open MPI's mpirun ending the job (orte/tools/orterun/help-orterun.txt [orterun:proc-failed]: "Primary job
#:   terminated normally, but 1 process returned a non-zero exit code. Per user-direction, the job has been
#:   aborted."; [orterun:non-zero-exit]: "mpirun detected that one or more processes exited with non-zero
#:   status, thus causing the job to be terminated.").
_OWN_END = re.compile(
    r"^Fatal Python error: |"
    r"\bsrun: error: [Uu]nable to create (?:job )?step\b|\bslurmstepd: error: execve\(\): |"
    r"\bexecvp?e? error on file \S+ \(|"
    r"\bPer user-direction, the job has been aborted\b|"
    r"\bexited with non-zero status, thus causing\s+the job to be terminated\b")


def last_word(text: str) -> str | None:
    """The form of ``text`` if it ends the process that printed it (see the module's docstring), else None."""
    if _OWN_END.search(text) or _MAIN_THREAD.search(text):
        return "a process's own end"
    if ARGPARSE_ERROR.search(text):
        # argparse prints its error and exits with status 2 (CPython Lib/argparse.py ArgumentParser.error)
        return "argparse's usage error"
    form = crash_form(text)
    if form is not None and form.name in _ENDS_ITS_PROCESS:
        return form.name
    # an uncaught exception's report header, a signal header with words between the signal and "received"
    return ends_its_process(text)


#: the outermost frame of a traceback that reached the top of the program: the script's module-level code,
#: or runpy's frame of ``python -m`` (CPython Lib/runpy.py _run_module_as_main) around it
_TOP_FUNCTIONS = frozenset({"<module>", "_run_module_as_main"})


class UncaughtTracebacks:
    """The exception lines of Python tracebacks that reached the top of their program, per stream.

    CPython prints an uncaught exception's traceback from ``sys.excepthook`` and ends the interpreter: its
    outermost frame is the script's module-level code (``in <module>``), or runpy's for ``python -m``. A
    traceback a program caught and printed (``logging.exception``, ``traceback.print_exc()`` in a
    function) starts at the function that caught it; a thread's starts at ``threading``'s bootstrap, a
    ``multiprocessing`` child's at its ``_bootstrap``: those processes may go on. Feed every line of a
    stream in order (``key`` names the stream); :meth:`observe` says whether the line is the exception line
    that ends an uncaught traceback.
    """

    def __init__(self) -> None:
        #: each stream's open traceback: its outermost frame's function, once read ("" before)
        self._open: dict[object, str] = {}

    def observe(self, key: object, text: str) -> bool:
        if "Traceback (most recent call last)" in text:
            self._open[key] = ""
            return False
        outermost = self._open.get(key)
        if outermost is None:
            return False
        frame = frame_of(text)
        if frame is not None:
            if not outermost:
                self._open[key] = frame[1]
            return False
        if exception_class(text) is None:
            return False  # a frame's source line, its markers, or another process's line between them
        del self._open[key]
        return outermost in _TOP_FUNCTIONS
