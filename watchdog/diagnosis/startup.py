"""A process that died setting itself up: configuration, not a crash to restart. Pure: no I/O.

A configuration error restarted gives a job that cannot run a new cluster allocation, and it fails the same
way. firstfailure.mistake_before_progress reads the verdict's *evidence line*; but the line the judge rests a
crash on is often not the exception the process died of: a traceback's header (``Traceback (most recent call
last):``), a wrapper's record around it (Ray's ``ERROR worker.py:78 -- Unhandled error ...``, vLLM's ``EngineCore
failed to start.``), a frame under a logger's prefix. This module reads the *traceback* the failing process
printed last, as structure, whatever line the verdict rests on:

* **its exception**, when the traceback ends in one: a class whose family is the set-up's
  (errorclass.read_error: ``ImportError``, ``FileNotFoundError``, ``*Config*``/``*Version*`` classes...), a
  message in the grammar of a refusal (exctaxonomy.setup_refusal: "expected ... got", "is not supported",
  "please make sure ..."), or a program-mistake class (``ValueError``, ``TypeError``...) raised under a set-up
  function;
* **where it was raised**: a traceback whose innermost frames are ``<module>`` frames of an import chain (a
  package raising while it is imported: a missing toolkit, a library built for another version, an ABI
  mismatch) is the environment, whatever its exception; a traceback cut before its exception line whose
  innermost named frame sets the program up (``__init__``, ``from_pretrained``, ``parse_args``...) died there.

Only before any progress (no step, no progress line from any rank), and never when the exception's own form
states another cause (memory, a connection, a device fault, a compiler): an OOM while loading a model, a CUDA
error raised in ``__init__``, a ``ConnectionRefusedError`` in ``init_process_group`` keep their own reading.

A second form needs no traceback: a process killed by ``SIGILL`` (``Illegal instruction``, exit status 132)
ran a binary built for instructions this CPU lacks (AVX2/AVX-512 builds on an older or virtualised CPU); a
restart on the same host executes the same instruction.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from neuron_watch.diagnosis.errorclass import CONFIG_ADVICE, read_error
from neuron_watch.diagnosis.exctaxonomy import innermost_role, program_mistake, setup_refusal
from neuron_watch.events import Action, Evidence, Label, Verdict


@dataclass(frozen=True)
class RaisedAt:
    """A process's last Python traceback: its frames (file, function), outermost first; its exception
    line and the message that goes on under it (``""`` when the traceback was cut before its exception
    line)."""

    frames: tuple[tuple[str, str], ...]
    exception: str = ""
    message: str = ""


#: frames of the interpreter's import machinery (importlib._bootstrap), printed between two importing modules
_IMPORTLIB = re.compile(r"^<frozen importlib\.")
#: frames that reach another process or host (torch.distributed's rendezvous and stores, sockets, HTTP clients,
#: downloads): a failure there may be the network's, which only its exception line can tell
_REACHING = re.compile(r"(?i:rendezvous|store|connect|socket|barrier|request|urlopen|download|http|grpc)")
#: words of an exception that do not come from the program (the user's interrupt, the interpreter's exit)
_NOT_RAISED_BY_PROGRAM = re.compile(r"^[\s>|`*]*(?:\[[^\]]*\]:?\s*)*(?:KeyboardInterrupt|SystemExit)\b")


def import_chain(frames: Sequence[tuple[str, str]]) -> str | None:
    """The file that raised, when a traceback's innermost frames are an import: the innermost ``<module>``
    frame runs a file that another ``<module>`` frame, or the interpreter's import machinery, imported. A
    module that raises while it is imported finds the environment it was installed into wanting
    (``deepspeed/git_version_info.py`` asking every op builder for a CUDA toolkit; ``torch/__init__.py``
    loading ``libtorch_cuda.so``), and does so on every start. A function its body calls
    (``installed_cuda_version()``) is still the import, unless it runs the work (exctaxonomy.innermost_role)."""
    modules = [i for i, (_, func) in enumerate(frames) if func == "<module>"]
    if not modules:
        return None
    last = modules[-1]
    file = frames[last][0]
    # imported: by another module's body, or through the import machinery. A module run as the program
    # (``python -m torch.distributed.launch``: runpy's _run_code, then launch.py's <module>) is no import.
    if len(modules) < 2 and not (last > 0 and _IMPORTLIB.match(frames[last - 1][0])):
        return None
    # a function called from the module's body: the import is still running, unless that function runs work
    below = list(frames[last + 1:])
    role = innermost_role(below)
    if role is not None and role[0] == "work":
        return None
    return file.rsplit("/", 1)[-1]


def startup_cause(raised: RaisedAt) -> str | None:
    """What the traceback ``raised`` shows, when it is a set-up the program refuses (see the module
    docstring), as a phrase for the verdict's reason; None when it shows another cause or none. Read only of
    a failure before any progress."""
    text = raised.message or raised.exception
    if text and _NOT_RAISED_BY_PROGRAM.match(text):
        return None
    frames = list(raised.frames)
    if text:
        reading = read_error(raised.exception)
        if reading is not None:
            return f"{reading.form}, its class or form the set-up's" if reading.label is Label.CONFIG_ERROR else None
    role = innermost_role(frames)
    chain = import_chain(frames)
    if chain is not None:
        return f"an exception raised while {chain} was being imported"
    if not text:
        # cut before its exception line: only frames that set the program up, and none that reach a peer, a store or
        # a server (a rendezvous cut in TCPStore may be a port in use or a master not up yet: its exception decides)
        if role is None or role[0] != "setup" or any(_REACHING.search(f"{file} {func}") for file, func in frames):
            return None
        return f"a traceback cut in set-up code ({role[1]})"
    if role is not None and role[0] == "work":
        return None
    refusal = setup_refusal(text)
    if refusal is not None:
        return refusal
    name = program_mistake(raised.exception)
    if name is not None and role is not None:
        return f"{name} raised in set-up code ({role[1]})"
    return None


#: a process killed by SIGILL as shells, Python and launchers report it: the shell's "Illegal instruction (core
#: dumped)" (bash's strsignal), Python's faulthandler "Fatal Python error: Illegal instruction", a launcher's
#: "Signal 4 (SIGILL)" / "signal: illegal instruction" (Go's os/exec), an exit status of 132 (128 + 4)
_SIGILL = re.compile(r"(?i:\billegal instruction\b)|\bSIGILL\b|\b(?:exit(?:ed)? (?:with )?(?:code|status)|"
                     r"exitcode)\s*[:=]?\s*(?:132|-4)\b")


def illegal_instruction(text: str) -> str | None:
    """The form, when ``text`` reports a process killed by SIGILL: a binary built for instructions the CPU
    lacks, which the same host meets again."""
    return "a process killed by SIGILL (an instruction this CPU lacks)" if _SIGILL.search(text) else None


def stopped_at_startup(verdict: Verdict, progressed: bool,
                       tracebacks: Sequence[tuple[RaisedAt, Evidence | None]]) -> Verdict | None:
    """``verdict`` as configuration (stop) when it is a crash (``other_crash``) before any progress
    (``progressed`` False, no step) and the failing process's last traceback shows a set-up the program
    refuses (:func:`startup_cause`), or one of its lines reports SIGILL (:func:`illegal_instruction`); None
    otherwise.

    ``tracebacks``: the last traceback of each process the verdict's evidence names, with its exception line
    as evidence (None when it was cut before one), newest first; the first that reads decides, and its
    exception line leads the verdict's evidence."""
    if verdict.label is not Label.OTHER_CRASH or progressed or verdict.step is not None or not verdict.evidence:
        return None
    for raised, line in tracebacks:
        cause = startup_cause(raised)
        if cause is None:
            continue
        evidence = verdict.evidence if line is None or line in verdict.evidence else (line, *verdict.evidence)
        shown = (line.text if line is not None else verdict.evidence[0].text).strip()[:160]
        return dataclasses.replace(
            verdict, label=Label.CONFIG_ERROR, action=Action.STOP, advice=CONFIG_ADVICE, evidence=evidence,
            reason=f"{cause}, before any rank made progress: the process died setting itself up, and a restart "
                   f"meets the same set-up again ({shown})")
    for ev in verdict.evidence:
        form = illegal_instruction(ev.text)
        if form is not None:
            return dataclasses.replace(
                verdict, label=Label.CONFIG_ERROR, action=Action.STOP, advice=SIGILL_ADVICE,
                reason=f"{form}, before any rank made progress: a binary built for another CPU, which this host "
                       f"runs the same way again ({ev.text.strip()[:160]})")
    return None


SIGILL_ADVICE = ("The program executed an instruction this CPU does not have (a build for AVX2/AVX-512 or a "
                 "newer architecture): restarting on this host repeats it. Install a build for this CPU, or "
                 "run on a host whose CPU has the instructions.")
