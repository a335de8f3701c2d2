"""Failure forms read for the misses of round issue23-heldout-34 (part A: recommendation, graph and tabular training):
CatBoost's iteration row with a loss that is not finite, the frames Open MPI's fault handler prints, Dask's nanny
reporting a worker process that died, LightGBM's socket errors, and TorchRec's sharding planner finding no plan.

Pure: no I/O. :func:`round34a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 33, :func:`round34a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* CatBoost prints one row per iteration when verbose: the iteration, ``learn`` and the training metric's value, then
  ``test`` and ``best`` with an eval set, ``total`` and ``remaining`` (catboost/private/libs/logging: ``39:\\tlearn:
  0.9479396\\ttest: 0.9194317\\tbest: 0.9212250 (24)\\ttotal: 24.3s\\tremaining: 2h 56s``, catboost#1028); releases of
  2018 printed the value without a colon and glued to ``passed:`` (``61:     learn 0.1211191019passed: 17.7 sec``,
  catboost#274). A ``learn`` or ``test`` value printed ``nan`` is a loss that is not finite (catboost#274: every
  iteration from 65 on printed ``learn nanpassed:``, read as healthy). Only a row that starts with the iteration
  counter and ``learn`` is read: a table's missing values or prose with the word are not.
* c10's backtrace frames (``frame #<n>: <symbol> + 0x<offset> (0x<address> in <object>)``) are not read alone: c10d
  prints the same frames under a warning for an error it caught and went on from (torchcomms#2358's TCPStore
  ``[W ... TCPStore.cpp:125] recvValue failed``, then connected), so only their message says whether the process
  failed (torchrec#197, cut to its frames, stays a miss).
* Open MPI's (and PRRTE's) fault handler prints ``*** Process received signal ***``, the signal, then the process's
  backtrace, one frame a line after the host and pid (opal/util/stacktrace.c: ``[<host>:<pid>] [<n>] <frame>``, the
  frame as glibc's backtrace_symbols writes it, ``<object>(<symbol>+0x<offset>)[0x<address>]``). The handler is
  installed for the fault signals only (MCA ``opal_signal``, default ``6,7,8,11``: SIGABRT, SIGBUS, SIGFPE,
  SIGSEGV), never for a SIGTERM sent from outside, so a frame of it is a process that faulted even when the paste
  kept only the frames (DeepRec#838: SOK's libcore crashing under mpirun's ``[1,2]<stderr>:``, read as healthy;
  NVTabular#1334's HugeCTR abort).
* Dask's nanny watches its worker process and says how it ended (distributed/nanny.py ``_on_exit`` and the
  process's exit message: ``Worker process %d was killed by signal %d``, ``Worker process %d was killed by unknown
  signal``, ``Worker process %d exited with status %d``), then restarts it: the worker and the tasks it ran are lost
  (xgboost#6388: xgboost.dask's worker killed by signal 9 halfway through training, read as healthy; dask/
  distributed#1863's workers killed by signal 15 at start-up). A worker that exited with status 0 did not fail.
* LightGBM's socket layer (src/network/socket_wrapper.hpp) ends the process with ``Log::Fatal("Socket recv error,
  %s (code: %d)", strerror(err), err)`` (``send``, ``accept`` alike; ``Socket recv error (code: %d)`` on Windows,
  ``Socket recv error, code: %d`` before 3.0), which Python raises as ``LightGBMError``: the connection between the
  machines of a distributed training failed (LightGBM#4116's ECONNRESET 54 on macOS, read as a crash of unknown
  cause; LightGBM#6363's 104).
* TorchRec's sharding planner fails before training when no plan fits the model on the topology: its enumerator
  raises ``RuntimeError("No available sharding type and compute kernel combination after applying user provided
  constraints for {table}...")`` (``No available sharding types`` / ``compute kernels`` alike: the user's
  ParameterConstraints leave no option; torchrec/distributed/planner/enumerators.py), its planner ``PlannerError(
  "Unable to find a plan for this model because of insufficient storage" | "... because of the strict
  constraints")`` with the remedies (more devices, a smaller model or batch, fewer constraints; planners.py), its
  partitioner ``PartitionError("Unable to find a plan for this model. Possible solutions: ...")``. The model, the
  topology or the constraints must change; a restart plans the same (torchrec#1614, restarted). Only the raised
  exception's line is read: the enumerator's warnings for one sharder (another may still shard the table) are not.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round34a_form` reads hold, besides the needles failureforms already
#: searches ("nan", a metric's value; "Error", "Fatal"), in the line as in its template (the line without digits):
#: Open MPI's frame after its host and pid (frames 0 to 9, the first a paste keeps, pad their number:
#: "[ 3]"), Dask's nanny on its worker
NEEDLES: tuple[str, ...] = ("] [ ", "Worker process ")

#: CatBoost's iteration row: the counter (which a reader of launcher tags may have taken off as a rank's, srun's
#: "<n>: "), "learn" (a colon since 2019), the value (glued to "passed:" in the releases of 2018), a "test" value after
#: it when an eval set is given, and always the time it took in total
_CATBOOST_ROW = re.compile(r"^\s*(?:\d+:\s+)?learn:?\s+(\S+?)(?:passed:|\s)(?:.*?\btest:?\s+(\S+?)\s)?"
                           r".*\btotal: \d")
_NONFINITE = frozenset({"nan", "-nan", "inf", "-inf"})

#: a frame of Open MPI's fault handler: "[<host>:<pid>] [<n>] <object>(<symbol>+0x<off>)[0x<address>]"
_OPAL_FRAME = re.compile(r"\[[\w.-]+:\d+\] \[ ?\d+\] \S.*\[0x[0-9a-fA-F]+\]\s*$")

#: Dask's nanny on its worker process that ended (an exit status of 0 is no failure)
_NANNY_EXIT = re.compile(r"\bWorker process \d+ (?:was killed by (?:signal \d+|unknown signal)|"
                         r"exited with status [1-9]\d*)")

#: LightGBM's socket layer's fatal error: the call, then strerror's words and the code, or the code alone
_LIGHTGBM_SOCKET = re.compile(r"\bSocket (?:send|recv|accept) error(?:, [^()]*?)?(?: \(code: |, code: )-?\d+")


#: TorchRec's planner refusing to plan: the exception raised (its class, then its message)
_TORCHREC_NO_PLAN = re.compile(r"\b(?:RuntimeError|PlannerError|PartitionError): (?:No available (?:sharding types?|"
                               r"compute kernels)\b.*?\bafter applying user provided constraints\b|"
                               r"Unable to find a plan for this model\b)")


def _catboost_not_finite(text: str) -> bool:
    row = _CATBOOST_ROW.match(text)
    return row is not None and any(v is not None and v.lower() in _NONFINITE for v in row.groups())


def round34a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "nan" in text and "learn" in text and _catboost_not_finite(text):
        return Form(FormKind.METRIC, "a NaN/Inf loss in CatBoost's iteration row", Label.NUMERICAL_ERROR)
    if "] [" in text and _OPAL_FRAME.search(text):
        return Form(FormKind.CRASH, "a frame of Open MPI's fault handler's backtrace (a process that faulted)")
    if "Worker process" in text and _NANNY_EXIT.search(text):
        return Form(FormKind.CRASH, "a worker process Dask's nanny saw die (a signal or an error status)")
    if ("user provided constraints" in text or "find a plan" in text) and _TORCHREC_NO_PLAN.search(text):
        return Form(FormKind.ERROR, "TorchRec's planner finding no sharding plan for the model (its constraints, "
                                    "the devices' storage)", Label.CONFIG_ERROR)
    if "ocket" in text and _LIGHTGBM_SOCKET.search(text):
        return Form(FormKind.ERROR, "LightGBM's socket error between the machines of a distributed training",
                    Label.COMM_ERROR)
    return None


def round34a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round34a_form(text))
