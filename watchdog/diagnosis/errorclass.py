"""What an error line says by its form, when no signature knows its words.

Pure: no I/O. The judge asks this of an error line no rule of ``signatures.toml`` explains
(``host.unrecognised_error``) before it calls a failure "cause not recognised". Three forms carry
a cause whatever the message says:

* a Python exception's class, read from its last traceback line (``torch.distributed.DistNetworkError:
  ...``). The class hierarchy is the source: :data:`EXCEPTION_FAMILIES` maps a class and, through
  :data:`EXCEPTION_BASES`, its subclasses (CPython's built-in hierarchy, torch's ``DistError`` family,
  torchelastic's ``RendezvousError`` family, dynamo/inductor's compile errors; a unit test checks
  the table against the installed packages);
* an absl/XLA status code at the head of the message (``RESOURCE_EXHAUSTED: Out of memory ...``,
  tsl/platform/status.h's codes as XLA and PJRT print them);
* argparse's usage error (``prog: error: unrecognized arguments: ...``, Lib/argparse.py);
* where NCCL's WARN comes from: NCCL prints ``<file>:<line> NCCL WARN`` (src/include/debug.h
  ``WARN``), and its source tree says which subsystem failed: ``transport/``, ``misc/socket.cc``,
  ``proxy.cc``, ``bootstrap.cc`` move data between ranks (the network; ``misc/ibvwrap.cc`` is its
  libibverbs wrapper, a failed ``ibv_*`` call is the InfiniBand transport), ``graph/`` reads the host's
  PCI/NVLink topology from /sys (a host that cannot show it will not run NCCL, whatever the retry),
  ``misc/argcheck.cc`` checks the caller's arguments;
* an exception whose message says a file, path or directory does not exist (``ValueError: File
  data/mllm_dome.json not found.``): a missing script or data path, whatever class the program
  raised;
* libfabric's ``fi_getinfo`` finding no provider (``-FI_ENODATA``, "No data available"): no fabric
  for this process, a set-up a restart meets again.

A form that says nothing of a cause (``RuntimeError``, ``ValueError``, a WARN of ``init.cc``) reads
as None: the failure stays "cause not recognised".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from neuron_watch.diagnosis.exctaxonomy import read_structure
from neuron_watch.diagnosis.failureforms import cause_of
from neuron_watch.diagnosis.forms_errors import ARGPARSE_ERROR
from neuron_watch.diagnosis.heldout.round14b import refined_family
from neuron_watch.diagnosis.heldout.round27a import storage_full_cause
from neuron_watch.events import Action, Label


@dataclass(frozen=True)
class Reading:
    """A cause read from an error line's form."""

    label: Label
    action: Action
    #: what the form is, for the verdict's reason ("ModuleNotFoundError", "NCCL graph/xml.cc")
    form: str
    advice: str


CONFIG_ADVICE = ("A mistake in the job's setup (a missing module, file or argument, a setting the "
                 "program refuses): restarting repeats it. Fix the environment or the command line, then start again.")
_CONFIG = ("config_error", CONFIG_ADVICE)
_OOM = ("oom", "Memory ran out. Lower the batch size or sequence length, shard the model further, or use a "
        "node with more memory; then restart from the last complete checkpoint.")
_COMM = ("comm_error", "A connection between ranks (or to the rendezvous store) failed. Restart from the last "
         "complete checkpoint; if it repeats on one node, check its network and drain it.")
_COMPILE = ("compile_error", "The graph compiler failed on this model: restarting repeats it. Read the "
            "compiler's error above, change the model or compiler flags, or run it eagerly.")
_NUMERICAL = ("numerical_error", "The computation produced an invalid floating-point value. Restart from an "
              "earlier checkpoint with a lower learning rate or other precision; restarting as is repeats it.")

_HARDWARE = ("hardware_error", "The kernel reports a hardware fault on this host (a machine check, a memory or PCIe "
             "error). Drain the node and restart the job on healthy nodes from the last complete checkpoint.")
_HANG = ("collective_hang", "A collective did not complete within its timeout: a peer never joined it (a rank "
         "stuck or busy elsewhere, e.g. evaluating on one rank only). Restart from the last complete checkpoint; "
         "if it repeats at the same point, make every rank reach the collective or raise the timeout.")
_ADVICE = {label: advice for label, advice in (_CONFIG, _OOM, _COMM, _COMPILE, _NUMERICAL, _HARDWARE, _HANG)}

_ACTIONS = {
    "config_error": Action.STOP,
    "oom": Action.RESTART,
    "comm_error": Action.RESTART,
    "compile_error": Action.STOP,
    "numerical_error": Action.STOP,
    "hardware_error": Action.DRAIN_AND_RESTART,
    "collective_hang": Action.RESTART,
}

#: Exception classes (the last component of the name Python prints) whose class alone says the
#: cause. Built-ins: CPython's Objects/exceptions.c hierarchy. torch: torch/_C/_distributed_c10d
#: (``DistError`` and its ``DistBackendError``/``DistNetworkError``/``DistStoreError``),
#: torch/cuda ``OutOfMemoryError``, torch/distributed/elastic/rendezvous/api.py (the
#: ``RendezvousError`` family), torch/_dynamo/exc.py ``BackendCompilerFailed``, torch/_inductor/exc.py
#: (``InductorError``, ``LoweringException``, ``CppCompileError``); triton's
#: triton/compiler/errors.py ``CompilationError``; Lightning's ``MisconfigurationException``.
EXCEPTION_FAMILIES: dict[str, tuple[str, str]] = {
    # a restart cannot fix these: the code or the environment is wrong
    "ImportError": _CONFIG,
    "SyntaxError": _CONFIG,
    "FileNotFoundError": _CONFIG,
    "NotADirectoryError": _CONFIG,
    "IsADirectoryError": _CONFIG,
    "PermissionError": _CONFIG,
    "MisconfigurationException": _CONFIG,
    "MemoryError": _OOM,
    "OutOfMemoryError": _OOM,
    # the connection to a peer or to the store
    "ConnectionError": _COMM,
    "DistNetworkError": _COMM,
    "DistStoreError": _COMM,
    "RendezvousConnectionError": _COMM,
    "RendezvousTimeoutError": _COMM,
    # a graph compiler raised
    "BackendCompilerFailed": _COMPILE,
    "CompilationError": _COMPILE,
    "LoweringException": _COMPILE,
    "CppCompileError": _COMPILE,
    "FloatingPointError": _NUMERICAL,
}

#: Subclasses that take their base's family (the same sources): a subclass not listed here and
#: not in :data:`EXCEPTION_FAMILIES` says nothing more than its name.
EXCEPTION_BASES: dict[str, str] = {
    "ModuleNotFoundError": "ImportError",
    "IndentationError": "SyntaxError",
    "TabError": "IndentationError",
    "ConnectionRefusedError": "ConnectionError",
    "ConnectionResetError": "ConnectionError",
    "ConnectionAbortedError": "ConnectionError",
    "BrokenPipeError": "ConnectionError",
    "InductorError": "BackendCompilerFailed",
    "CUDACompileError": "CppCompileError",
}

#: "[pkg.mod.]ClassName: message" or "ClassName" alone, as a traceback's last line (quoted,
#: prefixed by a rank tag such as "[rank3]:" or a launcher's "(pid=12) "). Ray raises a remote call's error as a
#: class of both RayTaskError and the cause's class, named "RayTaskError(<cause class>)" (python/ray/exceptions.py
#: RayTaskError.as_instanceof_cause / make_dual_exception_instance): the class read is the cause's
#: ("ray.exceptions.RayTaskError(ImportError): ray::skyrl_entrypoint() ...", SkyRL#529, round issue23-heldout-32)
_EXCEPTION_LINE = re.compile(
    r"^[\s>|`*\"']*(?:\[[^\]]*\]:?\s*|\(\w+ pid=\d+[^)]*\)\s*)*"
    r"(?:[A-Za-z_]\w*\.)*(?:RayTaskError\()?([A-Z]\w*(?:Error|Exception|Failed))\)?(?::|\s*$)")
#: dynamo's message for a backend that raised (torch/_dynamo/exc.py BackendCompilerFailed:
#: "backend={name!r} raised:"), printed without the class when a UI shows the message alone
_BACKEND_RAISED = re.compile(r"\bbackend='[\w.]+' raised:")
#: absl status codes at the head of an XLA/PJRT message (tsl/platform/status.h)
_STATUS_OOM = re.compile(r"(?:^|[\s:(])RESOURCE_EXHAUSTED: ")
#: argparse's usage error (forms_errors.ARGPARSE_ERROR): the command line is wrong
_ARGPARSE = ARGPARSE_ERROR
#: "<file>:<line> NCCL WARN" (nccl src/include/debug.h) and the subsystem directory of <file>
_NCCL_WARN = re.compile(r"(?:^|\s)((?:[\w.]+/)*[\w.]+\.(?:cc|cu|c|h|cpp)):\d+ NCCL WARN\b")
#: NCCL subsystems by source path (nccl src/ layout): the transports, sockets, proxy and bootstrap
#: carry data between ranks; graph/ reads the host's topology; misc/argcheck.cc checks arguments.
_NCCL_SUBSYSTEMS: tuple[tuple[re.Pattern[str], tuple[str, str]], ...] = (
    # misc/ibvwrap.cc wraps libibverbs (NCCL's own; the rdma-sharp plugin builds it as ibvwrap.c):
    # "Call to ibv_modify_qp failed with 110 Connection timed out" (NVIDIA/nccl#2013)
    (re.compile(r"(?:^|/)(?:transport/|net_ib|net_socket|ib_plugin|p2p_plugin|socket\.cc|proxy\.cc|bootstrap\.cc"
                r"|net\.cc|nccl_ofi|net_ofi|ibvwrap\.)"), _COMM),
    (re.compile(r"(?:^|/)graph/"), ("config_error", "NCCL could not read this host's GPU/PCI topology from /sys "
                                    "(a container or VM that hides it, e.g. WSL): restarting repeats it. Expose /sys "
                                    "to the job, or give NCCL a topology file (NCCL_TOPO_FILE).")),
    (re.compile(r"(?:^|/)argcheck\.cc"), _CONFIG),
)
#: enqueue.cc plans each collective (its algorithm and protocol from the tuning model, within what NCCL_ALGO and
#: NCCL_PROTO allow; its arguments): a WARN of its own is a plan the job's settings leave impossible ("Error : no
#: algorithm/protocol available", NVIDIA/nccl#653 under NCCL_ALGO=CollNet), which every restart plans again.
#: A call it makes that failed ("Cuda failure 'out of memory'", "Call to ... failed") is that call's error.
_NCCL_PLANNER = re.compile(r"(?:^|/)enqueue\.cc$")
_NCCL_CALL_FAILED = re.compile(r"\bfailure\b|\bfailed\b|\bCall to\b", re.I)
#: The subsystem of a WARN says where NCCL failed, not why: a transport's WARN that quotes a call's error in words
#: that state a cause of the machine or of the set-up (transport/p2p.cu "failed to open CUDA IPC handle : %d %s"
#: with cudaGetErrorString's "peer access is not supported between these two devices", horovod#785; a memory that
#: ran out; a hardware fault) is that cause, which the transport's family (a link between ranks) would restart.
_STATED_BEYOND_TRANSPORT = frozenset({Label.CONFIG_ERROR, Label.HARDWARE_ERROR, Label.OOM})


#: the message of an exception that names a missing file or directory, in the words programs use
#: besides FileNotFoundError's own: "File data/mllm_dome.json not found." (LlamaFactory's data loader,
#: hiyouga/LlamaFactory#6191), "path ... does not exist", "No such file or directory" under another class
_MISSING_PATH = re.compile(
    r"\b(?:[Ff]ile|[Pp]ath|[Dd]irectory|[Dd]ir|[Ff]older)\b[^:]{0,200}?\b(?:not found|does not exist|doesn't exist|"
    r"cannot be found|could not be found)|No such file or directory")


#: libfabric's fi_getinfo finding no provider that matches what the caller asked for: "If no matching
#: fabric information is available, info will be set to NULL and the call will return -FI_ENODATA"
#: (libfabric man/fi_getinfo.3.md), which fi_strerror prints as ENODATA's "No data available". The
#: fabric (an EFA or InfiniBand device, its provider library) is not there for this process, before any
#: peer is involved: the node's or container's set-up, which a restart meets again. While the job goes
#: on (NCCL falling back to sockets) the line is only a warning; the judge asks this of a last word.
#: aws-ofi-nccl says the same in its own words (src/nccl_ofi_net.c find_ofi_provider: fi_getinfo's -FI_ENODATA is
#: NCCL_OFI_WARN "Couldn't find any optimal provider", another code "OFI call failed with RC %d, %s" with
#: fi_strerror's words; the plugin's WARN prints its function, not its file: "find_ofi_provider:543 NCCL WARN
#: NET/OFI Couldn't find any optimal provider", an EFA device not given to a container, round issue23-heldout-16).
_FABRIC_ABSENT = re.compile(r"\bfi_getinfo\b.{0,80}?(?:\bNo data available\b|\bFI_ENODATA\b|\(-?61\)|[:=] ?-61\b)|"
                            r"\bNET/OFI (?:Couldn't find any optimal provider\b|OFI call failed with RC -61\b)")


#: the C++ source a c10 error names as where it was raised (c10/util/Exception.cpp: "Exception raised from
#: <function> at <file>:<line>", and before torch 1.5 the message's last line "(<function> at <file>:<line>)"):
#: DDP's reducer (torch/csrc/distributed/c10d/reducer.cpp) checks how the model uses its parameters (some
#: unused in the loss, one marked ready twice, a gradient of another layout), a property of the model and
#: its DDP settings (find_unused_parameters, static_graph) that every restart repeats
_RAISED_IN_REDUCER = re.compile(r"(?:\bException raised from \w+ at |^[\s\"']*\(\w+ at )\S*\breducer\.cpp:\d+")


def family_of(name: str) -> tuple[str, str] | None:
    """The (label, advice) an exception class ``name`` (last component) stands for, through its bases."""
    seen = 0
    while name and seen < 8:
        if name in EXCEPTION_FAMILIES:
            return EXCEPTION_FAMILIES[name]
        name = EXCEPTION_BASES.get(name, "")
        seen += 1
    return None


def _reading(family: tuple[str, str], form: str) -> Reading:
    label, advice = family
    return Reading(Label(label), _ACTIONS[label], form, advice)


def read_error(text: str) -> Reading | None:
    """The cause ``text`` (one error line no signature explains) states by its form, or None."""
    if _FABRIC_ABSENT.search(text):
        return _reading(_CONFIG, "libfabric's fi_getinfo finding no provider (FI_ENODATA)")
    warn = _NCCL_WARN.search(text)
    if warn is not None:
        path = warn.group(1)
        if _NCCL_PLANNER.search(path) and not _NCCL_CALL_FAILED.search(text, warn.end()):
            return _reading(_CONFIG, f"an NCCL WARN of {path}: a collective its settings leave no plan for")
        stated = cause_of(text)
        if stated is None or stated[0] not in _STATED_BEYOND_TRANSPORT:
            for pattern, family in _NCCL_SUBSYSTEMS:
                if pattern.search(path):
                    return _reading(family, f"an NCCL WARN of {path}")
        # another subsystem's WARN says its cause in the words of the call that failed, when it does
        # ("include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device")
        if stated is not None and stated[0].value in _ACTIONS:
            return _reading((stated[0].value, _ADVICE[stated[0].value]), f"an NCCL WARN of {path}: {stated[1]}")
        return None
    if _ARGPARSE.search(text):
        return _reading(_CONFIG, "argparse's usage error")
    if _RAISED_IN_REDUCER.search(text):
        return _reading(_CONFIG, "an error raised by DDP's reducer (how the model uses its parameters)")
    # ENOSPC and EDQUOT under RESOURCE_EXHAUSTED (TensorFlow's IOError: "<path>; No space left on device") or an
    # exception class named for memory: the file system, not memory (heldout.round27a)
    storage = storage_full_cause(text)
    if storage is not None:
        return _reading(_CONFIG, storage[1])
    if _STATUS_OOM.search(text):
        return _reading(_OOM, "an XLA status RESOURCE_EXHAUSTED")
    if _BACKEND_RAISED.search(text):
        return _reading(_COMPILE, "torch.compile's 'backend=... raised'")
    found = _EXCEPTION_LINE.match(text)
    if found is not None:
        known = family_of(found.group(1))
        if known is not None:
            label = refined_family(known[0], text, cause_of(text))
            return _reading(known if label == known[0] else (label, _ADVICE[label]), found.group(1))
        if _MISSING_PATH.search(text, found.end()):
            return _reading(_CONFIG, f"{found.group(1)} naming a missing file")
    # the forms of failure (failureforms.py): a status code, a resource that is not there, a
    # non-finite metric, an uncaught C++ exception's type
    cause = cause_of(text)
    if cause is not None and cause[0].value in _ACTIONS:
        label = cause[0].value
        return _reading((label, _ADVICE[label]), cause[1])
    # the structure of the error (exctaxonomy.py): its exception class's words, an errno
    structure = read_structure(text)
    if structure is not None and structure.label.value in _ACTIONS:
        return _reading((structure.label.value, _ADVICE[structure.label.value]), structure.form)
    return None
