"""Failure forms read for the misses of round issue23-heldout-26 (half B): a shell's own record of a command it
could not run, the linker's library it could not find, a traceback through Inductor's code generation, an
address the host cannot use (EADDRNOTAVAIL), and flashinfer's JIT build as a phase.

Pure: no I/O. :func:`round26b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 25, and :func:`round26b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* A shell's (or env's) own record of a command it could not run: bash's ``"%s: %s"`` of ``strerror(errno)``
  after a failed exec (execute_cmd.c: "bash: /usr/bin/python: No such file or directory", "-bash: ./train.sh:
  Permission denied", with "line N: " in a script), dash's "sh: 1: <cmd>: Permission denied", coreutils env's
  ``error (..., "%s", quote (argv))`` ("/usr/bin/env: 'python': No such file or directory"), and a script whose
  ``#!`` names no interpreter ("bad interpreter: No such file or directory"). The program the job runs is not
  where the command says, or is not executable: the environment or the command line, which a restart runs
  again (round issue23-heldout-26: skypilot-5462, under SkyPilot's task prefix, read as healthy). The shell's
  "command not found" and dash's "not found" are read by the failure forms already. Gated by the record's head:
  the same strerror words from another program ("ls: cannot access ...") say nothing of the job's command.
* The linker's library it could not find: GNU ld's ``"%P: cannot find %s"`` (ldfile.c; "-lcuda", with
  ``": %E"`` since binutils 2.38: "/usr/bin/ld: cannot find -lcuda: No such file or directory") and lld's
  "unable to find library -l<name>". A build at run time (Inductor's and Triton's launcher stubs, a JIT
  extension) links a library the environment lacks or does not put on the link path (libcuda.so only as
  libcuda.so.1, pip's CUDA wheels without the unversioned soname): configuration, which the same build meets
  again, not the compiler failing on the model (round issue23-heldout-26: pytorch-103417, read compile_error).
* A traceback through Inductor's code generation (``torch/_inductor/codegen/<backend>.py``: simd.py,
  triton.py, cpp.py, wrapper.py, the kernels' source generated for a graph), with either path separator, as a
  Windows traceback prints it: the frames exist only inside a compile, and a log cut inside them, without the
  traceback's header or its exception line, still holds a compile that failed (round issue23-heldout-26:
  triton-windows-49, read as healthy).
* An address the host cannot use: EADDRNOTAVAIL in the C library's words ("Cannot assign requested address",
  errno 99: a bind to an address that is not the host's) and Windows' (WSAEADDRNOTAVAIL, 10049: "The requested
  address is not valid in its context", a connect to 0.0.0.0 or a bind to a foreign address; Python prints it
  "[WinError 10049]", c10d "system error: 10049"). The address the job was given is wrong for this host: a
  setting, which a restart uses again (round issue23-heldout-26: mlflow-11274, a tracking URI of 0.0.0.0; round
  23's yolo-world-201, c10d's store at the desktop's own name; both restarted as a peer's fault). A cause, not a
  form of its own: the line is an error by another form (an exception, a warning the job died on).
* A path already there where the run creates it: EEXIST in Python's words (FileExistsError, "[Errno 17] File
  exists: '<path>'", from os.mkdir, Path.mkdir without exist_ok, os.symlink, and shm_open for a shared-memory
  segment) and the C library's. An earlier run's leftover (an output directory, a cache, a shared-memory segment a
  killed run did not unlink) or a path two ranks both create: the same state meets the next start again, until
  the path is cleared (round 25's streaming-781, stale shared memory after Ctrl+C, restarted as a crash). A cause,
  not a form of its own: the line is an exception already.
* ProcessGroupNCCL's notice before it takes the process down (ProcessGroupNCCL.cpp, the watchdog's handling of a
  work's exception: "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels,
  subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we are taking the
  entire process down."), printed at E: NCCL work that did not complete. A cause, as the corpus reads a collective
  that never completed and no more specific cause: a transport's error or the watchdog's timeout line, when the
  log holds one, is a rule of the table and keeps its precedence (round issue23-heldout-26: yolov7-714, the notice
  and the launcher's exit 1, read as a crash of unknown cause).
* flashinfer's JIT build as a phase (flashinfer/jit/core.py ``logger.info(f"Loading JIT ops: {name}")`` before
  it builds or loads a kernel module, ``"Finished loading JIT ops: {name}"`` after; the module's logger
  "flashinfer.jit"): the first call of a kernel compiles it with nvcc for minutes with nothing printed between
  (SGLang, vLLM and TensorRT-LLM call it at start-up or at the first request). A log that ends after a start
  without its end is a compile at work (round issue23-heldout-26: flashinfer-972, read as healthy).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals the lines these forms read hold, besides the failure forms' needles (digit-free; "Permission
#: denied" and "_inductor" lines hold a needle of the failure forms or of these already)
NEEDLES: tuple[str, ...] = ("No such file or directory", "Permission denied", "cannot execute", "bad interpreter",
                            "cannot find -l", "unable to find library -l", "_inductor", "JIT ops",
                            "Cannot assign requested address", "not valid in its context")

#: a shell's or env's record of a command it could not run: the shell's name (bash's "-bash" for a login shell,
#: dash's "sh: 1:", a script's "line N:"), the command as the user gave it (env quotes it), then the errno's
#: words or bash's own for a file it cannot execute, and nothing after them
_SHELL_CANNOT_RUN = re.compile(
    r"(?:^|[\s)\]>|])-?(?:(?:/usr)?/bin/)?(?:env|bash|sh|dash|zsh|ksh)(?:: line \d+|: \d+)?: "
    r"(?:[\w.-]+: )?['\u2018\"]?[^\s:'\u2019\"]+['\u2019\"]?: "
    r"(?:No such file or directory|Permission denied|cannot execute(?: binary file)?(?:: [\w ]+)?|"
    r"(?:/\S+: )?bad interpreter: No such file or directory)\s*$")
#: the linker's library it could not find: GNU ld's (ldfile.c "cannot find %s", the name as -l<lib>) and lld's
_LIBRARY_NOT_FOUND = re.compile(r"\bcannot find -l[\w.+-]+|\bunable to find library -l[\w.+-]+")
#: a Python traceback frame in Inductor's code generation, either separator ('  File "<path>", line <n>, in <f>')
_CODEGEN_FRAME = re.compile(r"""torch[/\\]_inductor[/\\]codegen[/\\]\w+\.py", line \d+, in \w+""")
#: EADDRNOTAVAIL in the C library's and Windows' words and numbers
_ADDRESS_NOT_AVAILABLE = re.compile(r"\bCannot assign requested address\b|"
                                    r"\bThe requested address is not valid in its context\b|"
                                    r"\[WinError 10049\]|\bsystem error: 10049\b|\bEADDRNOTAVAIL\b")
#: EEXIST in Python's and the C library's words: a path an earlier run (or another rank) left where this run creates it
_ALREADY_THERE = re.compile(r"\bFileExistsError\b|\[Errno 17\] File exists\b|\bEEXIST\b")
#: ProcessGroupNCCL's notice before it aborts the process (ProcessGroupNCCL.cpp, the watchdog's handling of a work's
#: exception: "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, ...")
_NCCL_ABORT_NOTICE = re.compile(r"\bSome NCCL operations have failed or timed out\b")
#: flashinfer's JIT records: a kernel module's build starting, and ending (the module's name after the colon, with
#: or without its space as a paste in prose keeps it)
_JIT_LOADING = re.compile(r"(?:^|[\s:\]-])Loading JIT ops: ?\w")
_JIT_FINISHED = re.compile(r"\bFinished loading JIT ops: ?\w")


def round26b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("No such file" in text or "Permission denied" in text or "cannot execute" in text) and (
            _SHELL_CANNOT_RUN.search(text)):
        return Form(FormKind.ERROR, "a shell that could not run the command (not there, or not executable)",
                    Label.CONFIG_ERROR)
    if ("cannot find -l" in text or "find library -l" in text) and _LIBRARY_NOT_FOUND.search(text):
        return Form(FormKind.ERROR, "the linker could not find a library the build links", Label.CONFIG_ERROR)
    if "_inductor" in text and "codegen" in text and _CODEGEN_FRAME.search(text):
        return Form(FormKind.ERROR, "a traceback through the graph compiler's code generation", Label.COMPILE_ERROR)
    if "JIT ops" in text:
        if _JIT_FINISHED.search(text):
            return Form(FormKind.COMPILE_DONE, "flashinfer's JIT build of a kernel module")
        if _JIT_LOADING.search(text):
            return Form(FormKind.COMPILE_RUNNING, "flashinfer's JIT build of a kernel module")
    return None


def round26b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (the line is an error already)."""
    if ("address" in text or "10049" in text or "EADDRNOTAVAIL" in text) and _ADDRESS_NOT_AVAILABLE.search(text):
        return Label.CONFIG_ERROR, "an address the host cannot use (EADDRNOTAVAIL)"
    if ("Exist" in text or "File exists" in text or "EEXIST" in text) and _ALREADY_THERE.search(text):
        return Label.CONFIG_ERROR, "a path already there that the run creates (EEXIST): a leftover to clear"
    if "NCCL operations" in text and _NCCL_ABORT_NOTICE.search(text):
        return Label.COLLECTIVE_HANG, "ProcessGroupNCCL aborting the process: NCCL work that failed or timed out"
    return stated_cause(round26b_form(text))
