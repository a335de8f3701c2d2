"""Failure forms read for the misses of round issue23-heldout-36 (part E: the AWS Neuron ecosystem, training side,
part 4): a relay's record of a line its child printed, SageMaker HyperPod's auto-resume records, the Neuron
runtime's refusal to allocate the NeuronCores asked for, gRPC's server that could bind none of its addresses, the AWS
Common Runtime's error for the file-descriptor limit, and TensorFlow's notice of a kernel registered for an op it does
not know (quiet).

Pure: no I/O. :func:`round36e_form` is asked after the forms of round 35, :func:`round36e_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error,
:func:`round36e_quiet` by :func:`neuron_watch.diagnosis.failureforms.read_quiet`.

Each form is read where its program prints it:

* A program that runs another and logs each line the child prints records it at its own level, usually INFO or
  DEBUG, whatever the line says: Airflow's SubprocessHook (airflow/hooks/subprocess.py ``run_command``:
  ``self.log.info("%s", line)`` for every line of the child's stdout, under the task log's head ``[<time>]
  {subprocess.py:<n>} INFO - ``; Airflow 1.x's BashOperator the same from ``bash_operator.py``), and harnesses that
  tag the stream the line came from, ``[stdout]`` or ``[stderr]``, after their own level (a torch-xla nightly test
  run in a Neuron venv, pytorch/xla#9362: ``2025-06-14 04:03:12,952::DEBUG: [stdout] AttributeError: ...``). The
  relay's level is not the child's: an exception line behind it is the child's traceback ending (an Airflow task
  log's ``{subprocess.py:93} INFO - py4j.protocol.Py4JJavaError: ...`` before "Command exited with return code 1";
  the torch-xla run's AttributeError), read as the exception it is. Only the exception's own shape is read behind
  the relay (``<qualified class ending in Error or Exception>: <message>``), and not when the child says it retries.
* SageMaker HyperPod's Slurm auto-resume (``srun --auto-resume=1``) logs into the job's output ``[Auto Resume]
  <level>: JobID: <n> StepID: <n> [TaskID: <n>] <message>``. When a task fails it asks the cluster agent for the
  nodes' health; "Job failed - replacing nodes" and "Job failed - Droping unhealthy nodes" (its spelling) follow the
  agent's finding that a node is unhealthy, the node is taken out (sinfo shows it ``fail``, scontrol's reason
  "Action:Replace") and the step waits for a replacement: a node fault, the job's failure
  (awsome-distributed-training's NxD Llama3 HyperPod README, a health check made to fail; a HyperPod GPU cluster's
  log of a node not responding). "Task failed on node <host>" at Error is a task's failure the record gives no cause
  for; "process_task_init", "Initiating communication with cluster agent", "Job Expansion complete" and "Retrying
  step" are the plugin at work.
* The Neuron runtime's ERROR record from its core allocation (``NRT:nrt_allocate_neuron_cores``) is a refusal of
  the NeuronCores the process asked for: held by another process ("NeuronCore(s) not available - Requested:nc1-nc1
  Available:0", newer runtimes "Logical Neuron Core(s) not available - Requested:lnc0-lnc0 Available:0 Logical Core
  size:2 (cores busy, ret=-16)"), or visible but not contiguous in a container ("Neuron cores are not contiguous",
  the Neuron container troubleshooting page): configuration a restart repeats until the cores are freed or the
  devices passed are fixed. Its INFO record ("Instance info:: device count:1 ...") is not.
* gRPC's server, when it could bind none of the addresses its target resolved to, fails with "No address added out
  of total <n> resolved" (grpc src/core/ext/transport/chttp2/server/chttp2_server.cc, since 2016; grpc-js the same
  words), the bind errors of each address referenced under it ("Address already in use", "Permission denied"): the
  port is held (a previous run's server still alive: the Neuron training guide's XRT server, a TPU job's restart
  looping on '[::]:8431': Address already in use) or not this process's to take, configuration a restart repeats
  until the holder goes. The partial case ("Only <n> addresses added out of total <m> resolved") is a warning.
* The AWS Common Runtime (aws-c-common, aws-c-io: under awscrt, the S3 CRT client, Mountpoint for S3) raises
  AWS_ERROR_MAX_FDS_EXCEEDED (AWS_IO_MAX_FDS_EXCEEDED in aws-c-io) for EMFILE and ENFILE (aws-c-common
  source/posix/file.c and directory.c), its message "The maximum number of fds has been exceeded.": the process's
  open-file limit, the same configuration as "Too many open files" (NxD Training's known issues: a dataset download
  that needs ``ulimit -n 65535``).
* TensorFlow's op registry logs at ERROR, and goes on, when a kernel is registered for an op it does not know
  (tensorflow/core/framework/op_kernel.cc: ``LOG(ERROR) << "OpKernel ('" << kernel_def.ShortDebugString() << "') for
  unknown op: " << kernel_def.op(); continue;`` under "TODO: Make this a hard error"): a library built with kernels
  for ops this TensorFlow lacks (TPURoundRobin under torch-neuronx's XRT, which the Neuron training guide calls
  non-fatal; BestSplits on TF 1.0 for Windows; ZenDNN's _ZenQuantizedAvgPool). The run goes on: a quiet record.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round36e_form` reads hold, besides the needles failureforms already
#: searches: the relays' heads, HyperPod's auto-resume records, the Neuron runtime's core allocation
NEEDLES: tuple[str, ...] = ("[stdout] ", "[stderr] ", "{subprocess.py:", "{bash.py:", "{bash_operator.py:",
                            "[Auto Resume] ", "NRT:nrt_allocate_neuron_cores", "No address added out of total",
                            "_MAX_FDS_EXCEEDED", "maximum number of fds has been exceeded")

#: a relay's head before a line its child printed: Airflow's task log of a subprocess's line ("{subprocess.py:93}
#: INFO - "), or a level then the stream's tag ("::DEBUG: [stdout] ")
_RELAY = re.compile(r"^.{0,80}?(?:\{(?:subprocess|bash|bash_operator)\.py:\d+\} [A-Z]+ - |"
                    r"\b(?:DEBUG|INFO|NOTICE|WARN|WARNING)\W{0,3}\[(?:stdout|stderr)\] )")
#: the last line of a Python traceback as CPython prints it ("<qualified class>: <message>"), the class named as PEP 8
#: names exceptions
_CHILD_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?:\(\w+\))?:\s+\S")

#: HyperPod's auto-resume record: its level and its message
_AUTO_RESUME = re.compile(r"\[Auto Resume\] (Info|Error|Warning): JobID: \d+ (?:StepID: \d+ )?(?:TaskID: \d+ )?(.*)")
#: the plugin replacing the nodes the cluster agent found unhealthy ("Droping" is how it spells it)
_NODES_REPLACED = re.compile(r"^Job failed - (?:replacing nodes|Drop+ing unhealthy nodes)\b")

#: the Neuron runtime's ERROR record from its core allocation (the message may follow on the next line)
_CORES_REFUSED = re.compile(r"\bERROR\s+NRT:nrt_allocate_neuron_cores\b")

#: gRPC's server that bound none of the addresses its target resolved to
_NO_ADDRESS_ADDED = re.compile(r"\bNo address added out of total \d+ resolved\b")
#: the AWS Common Runtime's error for EMFILE/ENFILE, by name or by its message
_CRT_MAX_FDS = re.compile(r"\bAWS_(?:ERROR|IO)_MAX_FDS_EXCEEDED\b|\bThe maximum number of fds has been exceeded\b")

#: TensorFlow's registry of kernels skipping one for an op it does not know: the record is the only one TensorFlow
#: prints as "OpKernel ('" and the kernel definition's text ('op: "<name>" device_type: "<type>"'), read by that
#: structure rather than by its closing words
_UNKNOWN_OP_KERNEL = re.compile(r"\bOpKernel \('op: \"[^\"]+\" device_type: \"[^\"]+\"")


def round36e_quiet(text: str) -> bool:
    """A record its program prints and goes on after, whatever its level: TensorFlow's kernel for an unknown op."""
    return "OpKernel ('op: " in text and _UNKNOWN_OP_KERNEL.search(text) is not None


def _auto_resume(text: str) -> Form | None:
    record = _AUTO_RESUME.search(text)
    if record is None:
        return None
    level, message = record.groups()
    if _NODES_REPLACED.match(message):
        return Form(FormKind.ERROR, "SageMaker HyperPod's auto-resume replacing nodes its cluster agent found "
                    "unhealthy", Label.HARDWARE_ERROR)
    if level == "Error":
        return Form(FormKind.ERROR, "SageMaker HyperPod's auto-resume record of a failed task")
    return None


def round36e_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "[Auto Resume]" in text:
        return _auto_resume(text)
    if "nrt_allocate_neuron_cores" in text and _CORES_REFUSED.search(text):
        return Form(FormKind.ERROR, "the Neuron runtime refusing the NeuronCores asked for (held by another process, "
                    "more than are visible, or not contiguous)", Label.CONFIG_ERROR)
    if "No address added" in text and _NO_ADDRESS_ADDED.search(text):
        return Form(FormKind.ERROR, "gRPC's server that could bind none of its addresses (held by another process, or "
                    "not this process's to take)", Label.CONFIG_ERROR)
    if ("MAX_FDS" in text or "number of fds" in text) and _CRT_MAX_FDS.search(text):
        return Form(FormKind.ERROR, "the AWS Common Runtime's error for the open-file limit (EMFILE)",
                    Label.CONFIG_ERROR)
    relayed = "[stdout] " in text or "[stderr] " in text or ("} " in text and ".py:" in text)
    if relayed and (relay := _RELAY.search(text)) is not None:
        line = text[relay.end():]
        if _CHILD_EXCEPTION.search(line) and "retry" not in line.lower():
            return Form(FormKind.ERROR, "an exception line a relay logged from its child's output")
    return None


def round36e_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round36e_form(text))
