"""Failure forms read for the misses of round issue23-heldout-26 (half A): argparse's refusal of a choice, a client
that cannot reach the local daemon it needs, a C++/CUDA extension whose JIT build failed, Slurm's accounting killing
a job over its memory limit, OneFlow's graph compiler at work, and oneCCL's error records.

Pure: no I/O. :func:`round26a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 25, and :func:`round26a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* argparse refuses a value outside an argument's choices with ``invalid choice: %(value)r (choose from
  %(choices)s)`` (CPython Lib/argparse.py ``_check_value``; 3.14 adds ``, maybe you meant %(closest)r?``), raised as
  an ArgumentError and printed by ``ArgumentParser.error`` as ``%(prog)s: error: %(message)s`` before it exits 2.
  The message names the argument (``argument --model-type: invalid choice: ...``, already read with argparse's
  other messages by forms_errors.ARGPARSE_ERROR) unless it has no name: a sub-command's choice is
  ``argument {onnx,tflite}: invalid choice: 'neuron'`` (3.9 and later name it by its choices in braces) or bare,
  ``error: invalid choice: 'neuron' (choose from 'onnx', 'tflite')`` (optimum-cli without the neuron exporter
  registered, round issue23-heldout-26: optimum-neuron-532, restarted as a crash; optimum-neuron#623 prints the
  braced form). The command line or the installed tool is wrong: configuration.
* A client that cannot reach the daemon it needs at its local socket says so and asks whether it runs: Docker's
  CLI ``Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?``, the
  Neuron 1.x framework's ``The Neuron Runtime GRPC server at address unix:/run/neuron.sock is unavailable. Is
  neuron-rtd running?`` (aws-neuron-sdk#361, in a TorchServe worker's log, restarted as a crash). The daemon is not
  running or its socket is not mounted into the container: the set-up, which a restart meets again. Only a unix
  socket's address followed by the question is read: the question alone is prose.
* torch.utils.cpp_extension builds an extension just in time with ninja (``_run_ninja_build``: ``subprocess.run``
  of ``['ninja', '-v']``, with ``'-j', N`` when MAX_JOBS is set, raising ``RuntimeError("Error building extension
  '<name>'")`` from the CalledProcessError, whose text is ``Command '['ninja', '-v']' returned non-zero exit status
  1.``): DeepSpeed's ops (fused_adam, cpu_adam), SwissArmyTransformer's fused optimizers and every repository's
  custom kernels fail here when the toolchain does not fit (nvcc against the GPU's architecture, a missing header, a
  compiler the CUDA release refuses). The corpus labels these builds configuration (deepspeed-3299,
  deepspeedexamples-103, finetune-llms-11); a paste cut before the RuntimeError keeps only the CalledProcessError
  (round issue23-heldout-26: deepspeed-6892, restarted as a crash). Before a build, ``verify_ninja_availability``
  raises ``RuntimeError("Ninja is required to load C++ extensions")`` when ninja cannot be run (not installed, or a
  venv's bin not on PATH): the same set-up, read the same way.
* Slurm's job accounting kills a step over its memory limit and says so in the job's output: jobacct_gather's
  ``error("%ps exceeded memory limit (%"PRIu64" > %"PRIu64"), being killed", ...)`` (``Job 7518 exceeded memory
  limit (626359956 > 512000000), being killed`` in the releases before %ps, ``StepId=123.0`` after). The job's
  memory ran out, as the cgroup's OOM kill under Slurm is (round issue23-heldout-26: coqui-stt-2238, read as a crash
  of unknown cause).
* OneFlow's nn.Graph compiler logs each pass it runs through glog (oneflow/core/job/job_build_and_infer_ctx.cpp:
  ``<graph> start compiling with pass <n>-<Pass>`` / ``finish compiling with pass ...``) and, with its cost log on,
  each stage's cost (``[count log]{"loc":"[GraphCompile]<graph> <stage>", ... "time_cost":"433 seconds"}``): a
  large graph spends minutes to hours here with nothing else printed (round issue23-heldout-26: oneflow-9198,
  oneflow-10180, both read as healthy). Only the starts and the cost records are read as a compile at work; the
  log after the compile (the graph's first run, training steps) says it ended.
* oneCCL logs through its own logger with the level between bars (src/common/log/log.hpp: ``<date>:(<pid>)
  |CCL_ERROR| <file>:<line> <function>: <message>``; the other levels are ``|CCL_WARN|``, ``|CCL_INFO|``,
  ``|CCL_DEBUG|``, ``|CCL_TRACE|``), which no severity reader knew: a log whose failure is only oneCCL's error
  record read as healthy. ``|CCL_ERROR|`` is an error line (``global.cpp:150 getenv_local_coord: condition ...
  failed`` under accelerate's launcher, accelerate-2340; ``base_thread.cpp:36 start: error while creating worker
  thread #0 pthread_create returns 22``, torch-ccl-54; ``ze_fd_manager.cpp:214 fill_device_fds: condition
  fds[dev_idx] > 0 failed`` in a vLLM XPU container). Its words say a cause where a reader knows them (round 24's
  libfabric provider records); the level alone states none. ``|CCL_WARN|`` records (a launcher's variables not
  found, a fallback to ATL/OFI) are oneCCL's notes on runs that go on, and are not read.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round26a_form` reads hold, besides the needles failureforms already
#: searches (each literal more is a cost of the classifier's batch search on every line)
NEEDLES: tuple[str, ...] = ("invalid choice: ", " running?", "'ninja', '-v'", "Error building extension",
                            "Ninja is required to load C++ extensions",
                            "exceeded memory limit", "start compiling with pass", "[GraphCompile]")

#: argparse's refusal of a choice, with the argument's name (braced choices included) or without one
_ARGPARSE_CHOICE = re.compile(r"\berror: (?:argument [^:\n]{1,120}: )?invalid choice: '[^'\n]*'"
                              r"(?:, maybe you meant '[^'\n]*'\?)? \(choose from ")

#: a client that cannot reach a daemon at its unix socket, asking whether it runs
_DAEMON_UNREACHABLE = re.compile(r"\bunix:/{1,3}[\w./-]+\b.{0,160}?\bIs (?:the )?[\w.-]+(?: daemon)? running\?")

#: torch.utils.cpp_extension's JIT build that failed: ninja's non-zero exit, or the RuntimeError raised from it
_EXTENSION_BUILD_FAILED = re.compile(r"\bCommand '\['ninja', '-v'(?:, '-j', '\d+')?\]' returned non-zero exit "
                                     r"status \d+|\bError building extension '[\w.-]+'|"
                                     r"\bNinja is required to load C\+\+ extensions\b")

#: Slurm's job accounting killing a job or step over its memory limit (jobacct_gather)
_SLURM_MEMORY_KILL = re.compile(r"\b(?:Job \d+|Step \d+\.\d+|StepId=\d+\.\w+|JobId=\d+) exceeded memory limit "
                                r"\(\d+ > \d+\), being killed\b")

#: OneFlow's graph compiler at work: a pass it starts, or its cost log of a compile stage
_ONEFLOW_COMPILING = re.compile(r"\] \S+ start compiling with pass \S|\[count log\]\{\"loc\":\"\[GraphCompile\]")

#: oneCCL's error level between its bars, before the record's location
_CCL_ERROR_RECORD = re.compile(r"\|CCL_ERROR\| \S")


def round26a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "invalid choice: " in text and _ARGPARSE_CHOICE.search(text):
        return Form(FormKind.ERROR, "argparse's refusal of a choice", Label.CONFIG_ERROR)
    if " running?" in text and _DAEMON_UNREACHABLE.search(text):
        return Form(FormKind.ERROR, "a local daemon the program needs that it cannot reach", Label.CONFIG_ERROR)
    if ("'ninja', '-v'" in text or "Error building extension" in text or "Ninja is required" in text) \
            and _EXTENSION_BUILD_FAILED.search(text):
        return Form(FormKind.ERROR, "a C++/CUDA extension's JIT build that failed", Label.CONFIG_ERROR)
    if "exceeded memory limit" in text and _SLURM_MEMORY_KILL.search(text):
        return Form(FormKind.CRASH, "a job Slurm's accounting killed over its memory limit", Label.OOM)
    if ("start compiling with pass" in text or "[GraphCompile]" in text) and _ONEFLOW_COMPILING.search(text):
        return Form(FormKind.COMPILE_RUNNING, "a OneFlow graph compile")
    if "|CCL_ERROR|" in text and _CCL_ERROR_RECORD.search(text):
        return Form(FormKind.ERROR, "a oneCCL error record")
    return None


def round26a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    form = round26a_form(text)
    return None if form is None or form.label is None else (form.label, form.name)
