"""Forms of a phase that is open: a compile or JIT build still running or ended, a rank waiting on its peers.

Pure: no I/O. :func:`phase_form` reads a compile's start and end (extension builds, autotuning, JAX,
TensorRT and the Neuron compilers); :func:`alarm_form` the forms printed at an error's severity that
are not errors (XLA's slow-compile alarms, a collective library's stall report, a retried connection).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind

# -- phases ----------------------------------------------------------------------------------------

_COMPILE_RUNNING: tuple[tuple[re.Pattern[str], str], ...] = (
    # torch/utils/cpp_extension.py (and DeepSpeed's op builder through it): "Using <dir> as PyTorch
    # extensions root...", "Emitting ninja build file <f>...", "Building extension module <name>..."
    # (quoted or indented as users paste them)
    (re.compile(r"\b(?:Using \S+ as PyTorch extensions root|Emitting ninja build file \S+|"
                r"Building extension module \w+)\.\.\."), "a C++/CUDA extension build"),
    # Inductor's max-autotune (torch/_inductor/select_algorithm.py: "AUTOTUNE mm(...)" per op, then
    # the benchmarking summary that ends it)
    (re.compile(r"(?:^|[\s>|])AUTOTUNE \w+\("), "Inductor autotuning"),
    # ... and the table's rows under that header, one a choice it timed (select_algorithm.py
    # AlgorithmSelectorCache.log_results: f"  {choice.name} {result:.4f} ms {best_time / result:.1%}
    # {choice.description}"; a Triton template's description is its config, "... num_stages=3, num_warps=4"):
    # a log cut inside the table, without its header, is still a compile at work (round issue23-heldout-17,
    # kandinsky-5-35). Only a Triton choice's row is read (its "num_warps=" is the needle); the aten rows
    # between them ("  mm 0.3848 ms 100.0% ") say nothing a neighbouring row does not.
    (re.compile(r"(?:^|[\s\]:>|]) {2}\w+ \d+\.\d{4} ms \d{1,3}\.\d% .*\bnum_warps=\d"), "Inductor autotuning"),
    # Inductor's IR printed as it lowers or autotunes a kernel (torch/_inductor/ir.py: the reprs of
    # FixedLayout/FlexibleLayout, "FixedLayout('cuda:0', torch.bfloat16, size=[8, 512, 256], stride=[...])",
    # under the StorageBox/ComputedBuffer that hold them, as autotuning's choices and its debug logs print
    # them): these objects exist only inside a compile
    (re.compile(r"\b(?:Fixed|Flexible)Layout\('[\w:]+', torch\.\w+, size=\["), "Inductor lowering a kernel"),
    # JAX (jax/_src/interpreters/pxla.py: "Compiling <fn> with global shapes and types ...")
    (re.compile(r"\bCompiling \S+ with global shapes and types\b"), "a JAX compile"),
    # a TensorRT engine build (minutes to hours for a big network, with nothing printed meanwhile): the
    # sample programs' and serving stacks' own words before it (tensorrtx yolov5.cpp "Building engine,
    # please wait for a while..."; turbo-ocr "Building TRT engine: <onnx> -> <plan>")
    (re.compile(r"\bBuilding engine, please wait\b|\bBuilding (?:a |the )?(?:TRT|TensorRT) engine\b"),
     "a TensorRT engine build"),
    # ... and the builder's own VERBOSE records of its tactic selection, which only an engine build
    # prints (the Python bindings' logger: "[11/27/2024-23:00:09] [TRT] [V] Disabling unused tactic
    # source: ...", "[TRT] [V] Tactic: 0x... Time: ..."; builder/tacticOptimizer)
    (re.compile(r"^(?:\[[^\]]{1,40}\] )?\[TRT\] \[V\] .*\b[Tt]actic\b"), "a TensorRT engine build"),
    # ... and the builder's notice that its timing pass begins (builder: "Local timing cache in use. Profiling
    # results in this builder pass will not be stored." with a private cache, "Global timing cache in use.
    # Profiling results in this builder pass will be stored." with a shared one): the tactics are then timed
    # one by one, minutes for a large network, before "Engine generation completed"
    (re.compile(r"\[TRT\] (?:\[I\] )?(?:Local|Global) timing cache in use\b"), "a TensorRT engine build"),
    # neuronx-cc's pass manager, one line per pass ("<YYYY-MM-DDTHH:MM:SSZ> Running <Pass>", then
    # "<Pass> finished after <s> seconds"; aws-neuron/aws-neuron-sdk#892), and neuron-cc's job pipeline
    # ("<date> INFO <pid> [pipeline.compile.0]: Starting job job.WalrusDriver.3 ...", "[job.<Name>.<n>]:
    # ..."; aws-neuron/aws-neuron-sdk#730): each line is a step of a compile still running
    (re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ [A-Z]\w* finished after \d+(?:\.\d+)? seconds\s*$"),
     "a Neuron compiler pass"),
    (re.compile(r"\bINFO \d+ \[(?:pipeline\.\w+|job\.\w+)\.\d+\]: "), "a neuron-cc job"),
    # ... and any record of neuron-cc's own logger below ERROR: Python logging with the US 12-hour date,
    # the level, the pid (left out at DEBUG) and the component in brackets ("09/11/2024 09:18:21 AM DEBUG
    # [WalrusDriver.0]: ...", aws-neuron/aws-neuron-sdk#978; "02/17/2023 04:18:15 PM INFO 57168
    # [sg0000/Tensorizer/StaticProfiler]: Exit time region", #632): the compiler at work
    (re.compile(r"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d [AP]M (?:DEBUG|INFO|USER)(?: \d+)? \[[\w./-]+\]: "),
     "a neuron-cc log record"),
)
#: XLA's alarm on a slow compile (xla/service/slow_operation_alarm.cc SlowCompilationAlarm: LOG(ERROR)
#: of "****" rules around "[Compiling module <m>] Very slow compile?  If you want to file a bug, ..."
#: (before it, "Slow compile?  XLA was built without compiler optimizations"), and, when the alarmed
#: operation returns, "The operation took <duration>"); xla/service/hlo_constant_folding.cc's
#: "Constant folding an instruction is taking > 1s". The alarm prints at severity ERROR: it is the
#: compiler still working, not an error, so it is read before severities.
_SLOW_COMPILE = re.compile(r"\b(?:Very slow compile\? +If you want|Slow compile\? +XLA was built)|"
                           r"\bConstant folding an instruction is taking > |\bslow_operation_alarm\.cc:\d+\]\s*$")
_SLOW_COMPILE_DONE = re.compile(r"\bslow_operation_alarm\.cc:\d+\] The operation took \d")
#: The same "The operation took" ends whichever alarmed operation returned: after the constant-folding
#: alarm it is one instruction folded, and the compile goes on (the judge reads it so).
_FOLDING_ALARM = re.compile(r"\bConstant folding an instruction is taking > ")
FOLDING_ALARM = "XLA's constant-folding alarm"
SLOW_ALARM = "XLA's slow-compile alarm"
SLOW_ALARM_RETURNED = "XLA's slow-compile alarm: the compile returned"
_COMPILE_DONE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bLoading extension module \w+\.\.\."), "a C++/CUDA extension loaded"),
    # DeepSpeed's op builder once an op is built or loaded (deepspeed/ops/op_builder/builder.py:
    # "Time to load {name} op: {seconds} seconds")
    (re.compile(r"\bTime to load \w+ op: \d"), "a DeepSpeed op loaded"),
    (re.compile(r"\bAUTOTUNE benchmarking takes \d"), "Inductor autotuning done"),
    # jax/_src/dispatch.py log_elapsed_time: "Finished XLA compilation of <fn> in <t> sec"
    (re.compile(r"\bFinished XLA compilation of \S+ in "), "a JAX compile finished"),
    # ... and after it: TensorRT's builder at INFO ("Engine generation completed in <s> seconds."),
    # tensorrtx's "Build engine successfully!", turbo-ocr's "Built: <plan> (<size> MB)"
    (re.compile(r"\bEngine generation completed in \d|\bBuild engine successfully\b|"
                r"(?:^|\s)Built: \S+\.(?:trt|engine|plan) \("), "a TensorRT engine built"),
    # a build that stopped on an error, in the build tools' own words: ninja's (src/ninja.cc / build.cc:
    # "ninja: build stopped: subcommand failed.", "... interrupted by user.") and GNU make's for a recipe that
    # failed (job.c: "make: *** [<target>] Error <n>", "make[2]: *** [Makefile:12: all] Error 2"). The build is
    # over: the compiler's error printed before it is the rank's last word, not output of a compile still running.
    (re.compile(r"^\s*ninja: build stopped: |^\s*(?:g|gnu)?make(?:\[\d+\])?: \*\*\* \[[^\]]+\] Error \d+"),
     "a build that stopped on an error"),
)

#: A rank waiting on a peer, in the forms that say so:
#: * Horovod's stall inspector (horovod/common/stall_inspector.cc CheckForStalledTensors, a glog
#:   WARNING: "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of
#:   ranks and are waiting for remainder of ranks for more than %d seconds"); its shutdown after
#:   HOROVOD_STALL_SHUTDOWN_TIME_SECONDS is an error record of its own;
#: * a connection refused or timed out that the program says it retries (errno ECONNREFUSED /
#:   ETIMEDOUT by strerror or number: c10d's "is not yet listening (errno: 111 - Connection refused),
#:   will retry", gRPC's and NCCL's "... retrying"); gated by the strerror words as strerror spells
#:   them (capitalised), which every such line holds.
_STALL_REPORT = re.compile(r"\bOne or more tensors were submitted to be reduced, gathered or broadcast(?:ed)? by "
                           r"subset of ranks")
_CONNECT_RETRY = re.compile(r"(?i:\b(?:connection refused|connection timed out|errno:? 11[01]\b)"
                            r".{0,120}?\b(?:will retry|retrying|will try again)\b)")


def alarm_form(text: str) -> Form | None:
    """A rank waiting on its peers (a stall report, a connection it retries), or XLA's compile alarms:
    forms printed at an error's severity that are not errors, so they are read before severities."""
    if _STALL_REPORT.search(text):
        return Form(FormKind.COMM_WAIT, "a collective library's stall report")
    if _CONNECT_RETRY.search(text):
        return Form(FormKind.COMM_WAIT, "a connection the program retries")
    if _SLOW_COMPILE_DONE.search(text):
        return Form(FormKind.COMPILE_DONE, SLOW_ALARM_RETURNED)
    if _FOLDING_ALARM.search(text):
        return Form(FormKind.COMPILE_RUNNING, FOLDING_ALARM)
    if _SLOW_COMPILE.search(text):
        return Form(FormKind.COMPILE_RUNNING, SLOW_ALARM)
    return None


def phase_form(text: str) -> Form | None:
    """A compile or JIT build ended, or still running."""
    for rx, name in _COMPILE_DONE:
        if rx.search(text):
            return Form(FormKind.COMPILE_DONE, name)
    for rx, name in _COMPILE_RUNNING:
        if rx.search(text):
            return Form(FormKind.COMPILE_RUNNING, name)
    return None
