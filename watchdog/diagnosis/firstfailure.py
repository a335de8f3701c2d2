"""A program-mistake exception before any progress: configuration, not a crash to restart. Pure.

A ``ValueError``, ``TypeError``, ``KeyError``, ``NameError``, ``AttributeError`` or ``AssertionError``
(:func:`~neuron_watch.diagnosis.exctaxonomy.program_mistake`) is raised by the program on a value it
cannot use. When it is the failure of a log in which no rank ever made progress, the program died
setting itself up (its arguments, its configuration, its model, its first batch): a restart runs the
same command on the same files and meets the same value again. Where the frames say in which
function it was raised, the reason names it; where they are missing (one line pasted) the rule still
holds, since it rests on the exception's class and the absence of progress, not on the frames.

A failure whose message states the set-up it refuses, whatever its class, reads the same way before any
progress (:func:`~neuron_watch.diagnosis.exctaxonomy.setup_refusal`): NCCL's failed CUDA call as NCCL sets
up its communicator, an exception that tells the user what to change ("Make sure ...", "Please remove ...",
"... must be configured at program startup"), an exception or an error record worded in the grammar of a
refusal ("expected ... got", "is not supported", "not found in", "should be ...") without the words of a fault
that passes (a timeout, a connection, a busy device, memory).

Both judges read it at the first failure (diagnosis/crashreading.py: offline over the whole log, live over
the lines the nodes sent around the failure), so a live job is stopped, not restarted into the same error;
``recovery/policy.py``'s crash loop (the same failure before the first step twice) stays the net for a
set-up failure no reader recognises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from neuron_watch.diagnosis.errorclass import CONFIG_ADVICE
from neuron_watch.diagnosis.exctaxonomy import innermost_role, program_mistake, script_not_python, setup_refusal
from neuron_watch.events import Action, Label, RankKey, Verdict

#: a rank's last program-mistake exception: its line, its traceback's frames (file, function),
#: outermost first, and whether the traceback was read whole (from its ``Traceback`` header)
Traceback = tuple[str, list[tuple[str, str]], bool]


def mistake_before_progress(verdict: Verdict, progressed: bool,
                            tracebacks: Mapping[RankKey, Traceback] | None = None,
                            message: str | None = None) -> Verdict | None:
    """``verdict`` as configuration (stop) when it is a crash (``other_crash``) whose evidence is a
    program-mistake exception line, or a line whose message states the set-up it refuses
    (exctaxonomy.setup_refusal), and no rank made progress (``progressed`` False, no step); None otherwise.

    ``tracebacks``: each rank's last program-mistake exception with its frames. Where the evidence's
    frames were read, they decide: the innermost frame that names a role (exctaxonomy.innermost_role)
    must set the program up, or the outermost must run a file that is not Python source (a launcher
    given a configuration file as its script); frames that run the work (``forward``, ``evaluate``) or
    name no role in a traceback read whole (a script's ``<module>`` and its own helpers: the program's
    own bug) keep the crash. Without frames (one pasted line), or with only the innermost frames of
    a traceback cut above them naming no role, the class and the missing progress decide.

    ``message``: the evidence line with the lines that go on with its message
    (exctaxonomy.exception_message), where they were read: a set-up refusal may be worded there.
    """
    if verdict.label is not Label.OTHER_CRASH or progressed or verdict.step is not None or not verdict.evidence:
        return None
    ev = verdict.evidence[0]
    name = program_mistake(ev.text)
    if name is None:
        refusal = setup_refusal(ev.text if message is None or not message.startswith(ev.text) else message)
        if refusal is None:
            return None
        # the message states the refused set-up itself: where it was raised adds nothing
        return dataclasses.replace(
            verdict, label=Label.CONFIG_ERROR, action=Action.STOP, advice=CONFIG_ADVICE,
            reason=f"{refusal} before any rank made progress: a set-up the program refuses, which a restart "
                   f"meets again ({ev.text.strip()[:160]})")
    found = (tracebacks or {}).get(ev.key)
    frames, whole = (found[1], found[2]) if found is not None and found[0] == ev.text else ([], False)
    where = ""
    if frames:
        role = innermost_role(frames)
        script = script_not_python(frames)
        if script is not None:
            where = f" running {script}, which is not a Python program,"
        elif role is not None and role[0] == "setup":
            where = f" in set-up code ({role[1]})"
        elif role is not None or whole:
            return None
    return dataclasses.replace(
        verdict, label=Label.CONFIG_ERROR, action=Action.STOP, advice=CONFIG_ADVICE,
        reason=f"{name} raised{where} before any rank made progress: a value the program refuses as it sets "
               f"itself up, which a restart meets again ({ev.text.strip()[:160]})")
