"""Forms of failure read from where a report is printed, not from its sentence: a traceback's frames inside
a graph compiler or an argument validator, a scheduler that cannot place a job, a pod evicted for its own
limit, Ray's memory monitor killing a task.

Pure: no I/O. :func:`round13b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line`
after the forms whose words state an error.

A traceback is printed from the innermost frame's caller outwards; where the excerpt of a log is cut
(a user pastes the middle of it, a buffer keeps its end), the frames still say where the exception was
raised. A frame inside the compile-time modules of ``torch.compile`` (TorchDynamo's frame conversion and
graph output, Inductor's lowering, code generation and compile entry points) is raised while compiling,
so the cause is the compiler's unless a line of the block states a more specific one (a chained
exception, memory); a frame inside a program's argument validator is a configuration the program
refuses. The modules that run a compiled graph (``eval_frame``'s wrapper, the AOT runtime wrappers,
Inductor's output code) are left out: an exception there is the graph's, at run time.

A scheduler's refusal to place the job, a pod's eviction and Ray's kill of a task end the job's
processes whatever is printed after them (the scheduler retries the same placement, the events go on):
they are crash forms, fatal unless the rank's own progress follows.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: The literals (digit-free, each with a trigger character of the classifier's batch search: the frame's
#: closing quote, a capital, an ``x`` or a ``v``) that every line these forms read holds; the failure
#: forms' needles include them.
NEEDLES: tuple[str, ...] = (
    # a traceback frame in a compile-time module of torch.compile (the quote that closes the frame's path)
    'convert_frame.py", line', 'output_graph.py", line', 'symbolic_convert.py", line',
    'bytecode_transformation.py", line', 'compile_fx.py", line', 'graph.py", line', 'lowering.py", line',
    'codecache.py", line',
    # ... and the statement that re-raises a backend's failure as dynamo's (its source line in the frame)
    "raise BackendCompilerFailed(",
    # a frame in an argument validator; the outermost frame of a traceback in rich's layout
    "validate_args", "validate_arguments", "validate_config", " in <module>",
    # a gang scheduler's refusal, a scheduler's reason, a pod over its own limit, Ray's memory monitor
    "minAvailable", "NotEnoughResources", "exceeds the total limit", "exceeded its local ephemeral",
    "Memory on the node",
)

#: A Python traceback frame (CPython Lib/traceback.py: '  File "<path>", line <n>, in <name>', the path with
#: either separator, as users paste it cut at its start) in a compile-time module of torch.compile:
#: torch/_dynamo/convert_frame.py (the frame conversion), output_graph.py (compile_subgraph, the backend
#: call), symbolic_convert.py (the bytecode tracer), bytecode_transformation.py, and torch/_inductor/graph.py
#: (GraphLowering), lowering.py, codecache.py (C++ and Triton code compiled) and compile_fx.py's entry points.
#: compile_fx.py's ``run`` is left out: torch 2.0 returns the compiled graph wrapped in a ``run`` of that file.
_COMPILER_FRAME = re.compile(
    r"""torch[/\\]_(?:dynamo[/\\](?:convert_frame|output_graph|symbolic_convert|bytecode_transformation)|"""
    r"""inductor[/\\](?:graph|lowering|codecache|compile_fx))\.py", line \d+, in (\w+)""")
#: torch/_dynamo/output_graph.py ``_call_user_compiler``: ``raise BackendCompilerFailed(self.compiler_fn, e)``,
#: the source line under the frame that wraps whatever the backend raised
_BACKEND_RERAISE = re.compile(r"^\s*(?:\[rank\d+\]:\s*)?raise BackendCompilerFailed\(")

#: A frame (a path cut anywhere before its closing quote) in a function that validates the program's
#: arguments or configuration (Megatron-LM's arguments.py ``validate_args``; ``_validate_args``,
#: ``validate_arguments``, ``validate_config``): the exception raised there refuses the configuration.
_VALIDATOR_FRAME = re.compile(r"""\.py", line \d+, in _?(?:validate_args|validate_arguments|validate_config)\b""")

#: The outermost frame of a traceback in rich's layout (rich.traceback, as transformers' and many CLIs' error
#: handlers print an uncaught exception: a box "╭─── Traceback (most recent call last) ───╮", each frame's
#: "│ <path>.py:<line> in <function> │" with its source lines, "│ ❱ <line> │ <code>" marking the line that
#: raised): printed only for an exception that propagated, and the box's first frame is the script's
#: ``<module>``. The exception line follows the box; a log cut inside the box still holds an error.
_RICH_FRAME = re.compile(r"\.py:\d+ in <module>\s*\u2502\s*$")

#: Volcano's gang scheduler (pkg/scheduler/api/job_info.go FitError and the podgroup condition: "<n>/<m>
#: tasks in gang unschedulable: pod group is not ready, <k> Pending, <j> minAvailable", the condition's
#: reason NotEnoughResources): the cluster or the queue cannot give the job what it asks for, so it never
#: starts; a restart asks again for the same.
_GANG_UNSCHEDULABLE = re.compile(r"\b\d+/\d+ tasks in gang unschedulable\b|\bReason:\s+NotEnoughResources\b")

#: The kubelet's eviction of a pod for its own limit (pkg/kubelet/eviction/eviction_manager.go:
#: "Pod ephemeral local storage usage exceeds the total limit of containers %s.", "Container %s exceeded its
#: local ephemeral storage limit %q."): the pod's configuration, which a restart meets again.
_OVER_OWN_LIMIT = re.compile(r"\bephemeral local storage usage exceeds the total limit of containers\b|"
                             r"\bexceeded its local ephemeral storage limit\b")

#: Ray's memory monitor's report as it kills a task or an actor (python/ray/_private/..., the raylet's
#: worker killing policy: "Task was killed due to the node running low on memory.\nMemory on the node (IP:
#: <ip>, ID: <id>) where the task (task ID: ..., name=..., pid=..., memory used=...) was running was <used> /
#: <total> (<fraction>), which exceeds the memory usage threshold of <t>."): printed only by that kill.
_RAY_MEMORY_KILL = re.compile(r"\bMemory on the node \(IP: [\w.:]+, ID: \w+\) where the (?:task|actor)\b")

#: The forms read by their pattern alone, in order: (pattern, kind, what it is, the cause it states).
_FORMS: tuple[tuple[re.Pattern[str], FormKind, str, Label | None], ...] = (
    (_BACKEND_RERAISE, FormKind.ERROR, "dynamo re-raising a compiler backend's failure", Label.COMPILE_ERROR),
    (_VALIDATOR_FRAME, FormKind.ERROR, "a traceback raised in the program's argument validation", Label.CONFIG_ERROR),
    (_RICH_FRAME, FormKind.ERROR, "a traceback in rich's layout", None),
    (_GANG_UNSCHEDULABLE, FormKind.CRASH, "a gang scheduler that cannot place the job's tasks", Label.CONFIG_ERROR),
    (_OVER_OWN_LIMIT, FormKind.CRASH, "a pod evicted for exceeding its own storage limit", Label.CONFIG_ERROR),
    (_RAY_MEMORY_KILL, FormKind.CRASH, "Ray's memory monitor killing a task", Label.OOM),
)


def round13b_form(text: str) -> Form | None:
    """The failure form a frame, a scheduler's refusal or Ray's memory monitor states in ``text``, or None."""
    frame = _COMPILER_FRAME.search(text)
    if frame is not None and not (frame.group(1) == "run" and "compile_fx" in frame.group(0)):
        return Form(FormKind.ERROR, "a traceback through the graph compiler", Label.COMPILE_ERROR)
    for rx, kind, name, label in _FORMS:
        if rx.search(text):
            return Form(kind, name, label)
    return None
