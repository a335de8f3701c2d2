"""Failure forms read for the misses of round issue23-heldout-35 (part C: compilers and kernels in training): LLVM's
and MLIR's fatal errors inside a kernel compiler, XLA's convolution autotuner at work, the error of a candidate
Inductor's autotuner drops, a compiler error inside the C++ standard library's headers, and bitsandbytes' CUDA set-up
finding no CUDA runtime.

Pure: no I/O. :func:`round35c_quiet` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` before any
form (and through ``read_quiet`` by the table's last rule, which then calls no error), :func:`round35c_form` after
the forms of round 34, :func:`round35c_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of
a line that is already an error.

Each form is read where its program prints it:

* LLVM's fatal-error handler prints ``LLVM ERROR: <message>`` and aborts the process that embeds it
  (llvm/lib/Support/ErrorHandling.cpp ``report_fatal_error``): in a training job, a kernel compiler (Triton, XLA,
  Inductor's C++ and Triton back ends) whose lowering failed ("LLVM ERROR: Failed to translate TritonGPU to LLVM IR.",
  pytorch/pytorch#95445; "LLVM ERROR: pthread_join failed: Invalid argument" from Triton 2.2's compile threads,
  pytorch/pytorch#128039; "LLVM ERROR: Cannot select: ..." from instruction selection). MLIR's pass manager failing in
  Triton's pipeline raises ``RuntimeError: PassManager::run failed`` (python/src/ir.cc ``run``: ``throw
  std::runtime_error("PassManager::run failed")``; unslothai/unsloth#2947, #2482, lllyasviel/FramePack#350). Both are
  the compile failing; the same graph fails again after a restart. LLVM's "out of memory" report is left to the
  memory forms.
* XLA's GPU convolution autotuner times each candidate algorithm under a SlowOperationAlarm of one second whose
  message is ``Trying algorithm <alg> for conv <instr> is taking a while...`` (xla/service/gpu/autotuning/
  conv_algorithm_picker.cc; LOG(ERROR) by slow_operation_alarm.cc, and repeated without its head after "The operation
  took <t>"), and compares the candidates' outputs, logging a disagreement at ERROR as ``Results mismatch between
  different convolution algorithms. This is likely a bug/unexpected loss of precision in cudnn.`` (the candidate is
  marked wrong and left out). Both are the autotuner at work while the step compiles (danijar/dreamerv3#126 and #139,
  jax-ml/jax#25461 and #23085, read as crashes to restart): the first a compile running, the second quiet (the
  autotuner's comparison, whatever it found).
* Inductor's max-autotune benchmarks candidate kernels and drops those that fail: ``select_algorithm.py:<n>] Runtime
  error during autotuning: \\n<error>. \\nIgnoring this choice.`` (torch/_inductor/select_algorithm.py, one record
  over three lines under the same head), ``... out of resource: shared memory, Required: ...`` at WARNING (older
  releases) and ``Exception <error> for benchmark choice <choice>``. A candidate that needs more shared memory than the
  GPU has is the commonest (Physical-Intelligence/openpi#654, huggingface/lerobot#2471, HomebrewML/HeavyBall#30,
  pytorch/ao#1065): the autotuner goes on with the others, and when none is left raises an error of its own ("No
  choices to select"). Round 23 part B reads the record's first and last lines as the compile at work; the
  candidate's error between them, under the same head (``select_algorithm.py:<n>] [<frame>] No valid triton
  configs. OutOfResources: out of resource: ...``), was read as a kernel over the device's limit, configuration:
  it is quiet here, as are the older single-record forms. Triton's OutOfResources raised anywhere else (a kernel
  launched, not a candidate benchmarked) stays an error.
* A C++ compiler's error located in the C++ standard library's own headers (``/usr/include/c++/11/bits/
  std_function.h:435:145: error: parameter packs not expanded with '...':``, GCC's ``<file>:<line>:<col>: error:``
  under ``.../include/c++/<version>/`` or libc++'s ``.../include/c++/v1/``): the library's headers are not the
  project's code, and these build everywhere else; an error inside them while nvcc builds an extension is the
  toolkit's front end meeting a host compiler it does not support (CUDA 11.x's nvcc with GCC 11's libstdc++:
  facebookresearch/xformers#484, the RWKV-LM and opm-simulators build notes, NVIDIA/nccl#650: "use gcc-10" or a
  newer CUDA). The pairing of compilers is the environment; a restart builds with the same pair.
* bitsandbytes' CUDA set-up (bitsandbytes/cuda_setup/main.py, releases up to 0.41) searches the environment's paths
  for the CUDA runtime and prints the candidates it found: ``DEBUG: Possible options found for libcudart.so:
  set()`` is none at all, after which it loads its CPU library and raises "CUDA Setup failed despite GPU being
  available" (bitsandbytes-foundation/bitsandbytes#778, #748; with a path in the set, #838 and #1059, the set-up can
  go on: not read). No CUDA runtime where the library looks is the environment.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round35c_form` reads hold, besides the needles failureforms already
#: searches: LLVM's and MLIR's fatal errors, XLA's conv autotuning alarm, bitsandbytes' empty search for the CUDA
#: runtime, a compiler's error in the C++ standard library's headers
NEEDLES: tuple[str, ...] = ("LLVM ERROR: ", "PassManager::run failed", "is taking a while...", "libcudart.so: set()",
                            "/include/c++/")

#: LLVM's fatal-error report (any prefix, even glued: MLIR's "Pass execution failed" before it); "out of memory" is a
#: memory form's
_LLVM_FATAL = re.compile(r"LLVM ERROR: (?!out of memory|Out of memory)\S")

#: MLIR's pass manager failing in Triton's compile pipeline
_PASS_MANAGER_FAILED = re.compile(r"\bPassManager::run failed\b")

#: XLA's conv autotuner timing a candidate past its one-second alarm (with or without the alarm's record head)
_CONV_CANDIDATE_SLOW = re.compile(r"\bTrying algorithm \S+ for conv .* is taking a while\.\.\.")

#: XLA's conv autotuner finding two candidates' outputs disagree (the candidate is left out)
_CONV_RESULTS_MISMATCH = re.compile(r"\bconv_algorithm_picker\.cc:\d+\]\s*Results mismatch between different "
                                    r"convolution algorithms\b")

#: the error of a candidate Inductor's select_algorithm benchmarks and drops, in a record of its own head (the record's
#: first line, "Runtime error during autotuning: ", and last, "Ignoring this choice.", are round 23 part B's)
_AUTOTUNE_CANDIDATE_ERROR = re.compile(r"\bselect_algorithm\.py:\d+\](?:\s*\[[^\]]*\])?\s*(?:No valid triton configs\. "
                                       r"\w+: out of resource\b|out of resource: |Exception .* for benchmark choice\b)")


#: a C/C++ compiler's error located in the C++ standard library's headers (libstdc++'s versioned directory, libc++'s v1)
_STDLIB_HEADER_ERROR = re.compile(r"/include/c\+\+/(?:\d+(?:\.\d+)*|v1)/\S+:\d+(?::\d+)?: error: ")

#: bitsandbytes' search for the CUDA runtime that found no candidate at all
_NO_CUDART_FOUND = re.compile(r"\bPossible options found for libcudart\.so: set\(\)")


def round35c_quiet(text: str) -> bool:
    """Whether ``text`` is an autotuner's record of a candidate it leaves out: XLA's conv picker on two candidates whose
    outputs disagree, the error of a candidate Inductor's select_algorithm drops. It holds no failure."""
    return (("Results mismatch" in text and _CONV_RESULTS_MISMATCH.search(text) is not None)
            or ("select_algorithm.py:" in text and _AUTOTUNE_CANDIDATE_ERROR.search(text) is not None))


def round35c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "LLVM ERROR" in text and _LLVM_FATAL.search(text):
        return Form(FormKind.ERROR, "LLVM's fatal error in a kernel compiler", Label.COMPILE_ERROR)
    if "PassManager" in text and _PASS_MANAGER_FAILED.search(text):
        return Form(FormKind.ERROR, "MLIR's pass manager failed in a kernel compile", Label.COMPILE_ERROR)
    if "is taking a while" in text and _CONV_CANDIDATE_SLOW.search(text):
        return Form(FormKind.COMPILE_RUNNING, "XLA's conv autotuner timing a slow candidate")
    if "/include/c++/" in text and _STDLIB_HEADER_ERROR.search(text):
        return Form(FormKind.ERROR, "a compiler error inside the C++ standard library's headers (a host compiler the "
                    "toolkit does not support)", Label.CONFIG_ERROR)
    if "libcudart" in text and _NO_CUDART_FOUND.search(text):
        return Form(FormKind.ERROR, "bitsandbytes found no CUDA runtime (libcudart.so) in the environment",
                    Label.CONFIG_ERROR)
    return None


def round35c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round35c_form(text))
