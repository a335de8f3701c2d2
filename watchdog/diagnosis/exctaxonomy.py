"""What an exception's class and an errno say of a failure's cause.

Pure: no I/O. Three readers of *structure*, for an error line no signature explains, that a
phrase table cannot cover because programs name their own exceptions and wrap the C library's
errors in their own words:

* :func:`class_cause`: the words of an exception class's name. Libraries name their exception
  classes after what went wrong, in a few stems shared across ecosystems: ``*Timeout*``,
  ``*Unavailable*``, ``*Disconnect*``, ``*ConnectionClosed*``, ``*Unreachable*`` (the peer or the link:
  requests/urllib3 ``ConnectTimeout``/``ReadTimeout``, aiohttp ``ServerDisconnectedError``,
  http.client ``RemoteDisconnected``, websockets ``ConnectionClosedError``, tornado
  ``StreamClosedError``, TensorFlow ``UnavailableError``/``DeadlineExceededError``);
  ``*OutOfMemory*``, ``*OOM*``, ``*ResourceExhausted*`` (memory); ``*Config*``,
  ``*Misconfiguration*``, ``*Validation*``, ``*Usage*``, ``*NotFound*``, ``*PermissionDenied*``,
  ``*Unauthenticated*``, ``*NotImplemented*``, ``*Unsupported*``/``*NotSupported*``,
  ``*Incompatible*``, ``*Version*`` (the set-up: omegaconf ``ConfigKeyError``, pydantic
  ``ValidationError``, click ``UsageError``, TensorFlow ``NotFoundError``/``PermissionDeniedError``/
  ``UnimplementedError``, CPython ``NotImplementedError``); ``*Compil*``, ``*Lowering*`` (a
  compiler). A name holding none of them (``RuntimeError``, ``ChildFailedError``) says nothing.
* :func:`errno_cause`: an errno by name (``EADDRINUSE``), by number where the program prints the
  number as Python's ``OSError`` does (``[Errno 98] ...``) or as C code does (``errno 28``,
  ``errno=12``), and by the C library's text of it. Numbers are Linux's (asm-generic/errno-base.h,
  asm-generic/errno.h), texts glibc's strerror (sysdeps/gnu/errlist.h): the jobs run on Linux,
  whatever machine reads their logs later. A resource not there or held (``EADDRINUSE``,
  ``ENOSPC``, ``EBUSY``, ``EACCES``, ``ENOENT``, ``ENODEV``...) is configuration; ``ENOMEM`` is
  memory; a connection refused, reset, timed out or unreachable is the transport.
* :func:`program_mistake` and :func:`raised_in_setup`: CPython's exceptions for a value the code
  cannot use (``ValueError``, ``TypeError``, ``KeyError``, ``NameError``, ``AttributeError``,
  ``AssertionError``) say nothing of a cause by their class: where they were raised does. Under a
  function that sets the program up (``__init__``, ``setup``, ``parse_args``, ``load_*``,
  ``build_*``, ``check_*``...) and none that runs the work (``forward``, ``train_*``, ``step``,
  ``__getitem__``...), before any progress, they are a setting the program refuses: configuration.
* :func:`report_cause`: reports whose layout states the cause, whatever the program around them:
  the kernel's EDAC decode of a memory machine check (hardware), srun refusing to create a step
  (configuration), CUDA's error enumerations by name (``CUDA_ERROR_OUT_OF_MEMORY``,
  ``cudaErrorNoDevice``, ``CUDA_ERROR_ECC_UNCORRECTABLE``...). A build step's non-zero
  exit (ninja's CalledProcessError) is no such report: it wraps the compiler's error printed before
  it, which the judge looks for first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from neuron_watch.diagnosis.forms_severity import head_level
from neuron_watch.events import Label


@dataclass(frozen=True)
class Cause:
    """A cause read from a form, and what the form is (for the verdict's reason)."""

    label: Label
    form: str


# -- exception class names -------------------------------------------------------------------------

#: Stems of an exception class's name (its CamelCase words, compared case-sensitively from the start
#: of a word) and the cause each states; the first stem found, in this order, decides. Order puts the
#: specific before the broad: "ConnectTimeout" is the transport, "ConfigNotFound" the set-up.
_CLASS_STEMS: tuple[tuple[tuple[str, ...], Label], ...] = (
    (("OutOfMemory", "OOM", "ResourceExhausted"), Label.OOM),
    (("Config", "Configuration", "Misconfiguration", "Validation", "Usage", "NotFound", "PermissionDenied",
      "Permission", "Unauthenticated", "Unauthorized", "NotImplemented", "Unimplemented", "Unsupported",
      "NotSupported", "Incompatible", "Version", "MissingMandatory"), Label.CONFIG_ERROR),
    # only a connection, stream, socket or channel that closed: a rendezvous closed is the job ending
    # (torch/distributed/elastic/rendezvous/api.py RendezvousClosedError)
    (("Timeout", "TimedOut", "Unavailable", "Unreachable", "Disconnect", "Disconnected", "ConnectionClosed",
      "StreamClosed", "SocketClosed", "ChannelClosed",
      "ConnectionReset", "ConnectionAborted", "ConnectionRefused", "DeadlineExceeded"), Label.COMM_ERROR),
    (("Compilation", "Compile", "Compiler", "Lowering"), Label.COMPILE_ERROR),
)
#: a CamelCase word: an acronym (OOM in "OOMError", up to the next capitalised word) or a capitalised word
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b|_)|[A-Z][a-z]+|[a-z]+|\d+")

#: The exception line itself: "[pkg.mod.]ClassName: message" or the class alone, after quoting and a
#: rank or worker prefix, as Python's traceback.format_exception_only prints it; the class ends in a
#: word exception classes end in (Error, Exception, Timeout, ...) or is dotted into a module.
_EXCEPTION_LINE = re.compile(
    r"^[\s>|`*]*(?:\[[^\]]*\]:?\s*|\((?:\w+ )?pid=\d+[^)]*\)\s*)*"
    r"((?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failed|Failure|Timeout|Exceeded|Unavailable|Closed|"
    r"Disconnected|Refused|Reset|NotFound|Denied)|(?:[a-z_]\w*\.)+[A-Z]\w*)(?:\(\w+\))?(?::\s|:?\s*$)")


def exception_class(text: str) -> str | None:
    """The class an exception line names (dotted as printed), or None when the line is not one."""
    m = _EXCEPTION_LINE.match(text)
    return m.group(1) if m is not None else None


def class_cause(name: str) -> Cause | None:
    """The cause the words of exception class ``name`` state (its last dotted component), or None."""
    short = name.rsplit(".", 1)[-1]
    words = _WORD.findall(short)
    joined = ["".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, min(i + 4, len(words) + 1))]
    for stems, label in _CLASS_STEMS:
        for stem in stems:
            if stem in joined:
                return Cause(label, f"an exception class named {short} ('{stem}')")
    return None


# -- errno -----------------------------------------------------------------------------------------

#: errno name -> (Linux number, glibc strerror text, cause). Only the errnos whose cause does not
#: depend on who reports them: EINVAL, EIO, EAGAIN, EINTR say nothing of a cause and are not here.
ERRNOS: dict[str, tuple[int, str, Label]] = {
    # a resource that is not there, or that another process holds: a restart meets it again
    "EPERM": (1, "Operation not permitted", Label.CONFIG_ERROR),
    "ENOENT": (2, "No such file or directory", Label.CONFIG_ERROR),
    "ENXIO": (6, "No such device or address", Label.CONFIG_ERROR),
    "ENOEXEC": (8, "Exec format error", Label.CONFIG_ERROR),
    "EACCES": (13, "Permission denied", Label.CONFIG_ERROR),
    "EBUSY": (16, "Device or resource busy", Label.CONFIG_ERROR),
    "ENODEV": (19, "No such device", Label.CONFIG_ERROR),
    "EMFILE": (24, "Too many open files", Label.CONFIG_ERROR),
    "ENOSPC": (28, "No space left on device", Label.CONFIG_ERROR),
    # a user's or a project's quota spent (a cluster file system's scratch): the storage, as ENOSPC is
    "EDQUOT": (122, "Disk quota exceeded", Label.CONFIG_ERROR),
    "EROFS": (30, "Read-only file system", Label.CONFIG_ERROR),
    # a lock the file system cannot take: flock/fcntl on an NFS mount without its lock manager, a FUSE or
    # Databricks mount (datasets' FileLock, HDF5's "unable to lock file, errno = 37"); each retry meets it again
    "ENOLCK": (37, "No locks available", Label.CONFIG_ERROR),
    "EADDRINUSE": (98, "Address already in use", Label.CONFIG_ERROR),
    "EADDRNOTAVAIL": (99, "Cannot assign requested address", Label.CONFIG_ERROR),
    # a socket of an address family the host does not have (IPv6 disabled, no interface of the family)
    "EAFNOSUPPORT": (97, "Address family not supported by protocol", Label.CONFIG_ERROR),
    # memory
    "ENOMEM": (12, "Cannot allocate memory", Label.OOM),
    # the peer or the link
    "EPIPE": (32, "Broken pipe", Label.COMM_ERROR),
    "ENETDOWN": (100, "Network is down", Label.COMM_ERROR),
    "ENETUNREACH": (101, "Network is unreachable", Label.COMM_ERROR),
    "ECONNABORTED": (103, "Software caused connection abort", Label.COMM_ERROR),
    "ECONNRESET": (104, "Connection reset by peer", Label.COMM_ERROR),
    "ETIMEDOUT": (110, "Connection timed out", Label.COMM_ERROR),
    "ECONNREFUSED": (111, "Connection refused", Label.COMM_ERROR),
    "EHOSTDOWN": (112, "Host is down", Label.COMM_ERROR),
    "EHOSTUNREACH": (113, "No route to host", Label.COMM_ERROR),
}
_BY_NUMBER = {number: name for name, (number, _, _) in ERRNOS.items()}
_BY_TEXT = {text: name for name, (_, text, _) in ERRNOS.items()}
#: Go prints glibc's text with its first letter in lower case (syscall's errors table, which
#: Errno.Error() returns: "dial tcp 10.0.0.1:8080: connect: connection refused")
_BY_TEXT.update({text[0].lower() + text[1:]: name for text, name in list(_BY_TEXT.items())})
#: the errno as a name, as a number where a program prints one ("[Errno 98]", "errno 28", "errno=12",
#: "errno: 111", "(errno 2)", Rust's io::Error "Address already in use (os error 98)"), or as glibc's text
_ERRNO = re.compile(
    r"\b(" + "|".join(ERRNOS) + r")\b|\[Errno (\d+)\]|\berrno\s*[:=]?\s*-?(\d+)\b|\(os error (\d+)\)|"
    r"\b(" + "|".join(re.escape(t) for t in _BY_TEXT) + r")\b")


def errno_cause(text: str) -> Cause | None:
    """The cause the first errno ``text`` names (by name, number or text) states, or None."""
    for m in _ERRNO.finditer(text):
        if m.group(1):
            name = m.group(1)
        elif m.group(2) or m.group(3) or m.group(4):
            found = _BY_NUMBER.get(int(m.group(2) or m.group(3) or m.group(4)))
            if found is None:
                continue
            name = found
        else:
            name = _BY_TEXT[m.group(5)]
        return Cause(ERRNOS[name][2], f"errno {name} ({ERRNOS[name][1]})")
    return None


# -- reports whose structure states the cause -----------------------------------------------------

#: CUDA's error enumerations, by the names programs print (the driver API's CUresult, cuda.h
#: "CUDA_ERROR_<NAME>"; the runtime's cudaError_t, driver_types.h "cudaError<Name>"): memory that ran
#: out; a device that is not there, not this process's, or that the driver or toolkit cannot serve
#: (configuration); an uncorrectable ECC or NVLink error, an error the GPU's containment fenced off
#: (cudaErrorContained: an invalid peer access over NVLink or a hardware error; heldout.round20b) (the device).
#: The others (an illegal address, a launch failure, not initialised) say nothing of a cause by their name.
_CUDA_ERRORS: dict[str, Label] = {
    "OUT_OF_MEMORY": Label.OOM, "MemoryAllocation": Label.OOM,
    "NO_DEVICE": Label.CONFIG_ERROR, "NoDevice": Label.CONFIG_ERROR,
    "INVALID_DEVICE": Label.CONFIG_ERROR, "InvalidDevice": Label.CONFIG_ERROR,
    "DEVICES_UNAVAILABLE": Label.CONFIG_ERROR, "DevicesUnavailable": Label.CONFIG_ERROR,
    "InsufficientDriver": Label.CONFIG_ERROR, "SYSTEM_DRIVER_MISMATCH": Label.CONFIG_ERROR,
    "SystemDriverMismatch": Label.CONFIG_ERROR, "COMPAT_NOT_SUPPORTED_ON_DEVICE": Label.CONFIG_ERROR,
    "CompatNotSupportedOnDevice": Label.CONFIG_ERROR, "UNSUPPORTED_PTX_VERSION": Label.CONFIG_ERROR,
    "UnsupportedPtxVersion": Label.CONFIG_ERROR, "SYSTEM_NOT_READY": Label.CONFIG_ERROR,
    "SystemNotReady": Label.CONFIG_ERROR,
    "ECC_UNCORRECTABLE": Label.HARDWARE_ERROR, "ECCUncorrectable": Label.HARDWARE_ERROR,
    "NVLINK_UNCORRECTABLE": Label.HARDWARE_ERROR, "NvlinkUncorrectable": Label.HARDWARE_ERROR,
    "CONTAINED": Label.HARDWARE_ERROR, "Contained": Label.HARDWARE_ERROR,
}
_CUDA_ERROR = re.compile(r"\b(?:CUDA_ERROR_|cudaError)(" + "|".join(_CUDA_ERRORS) + r")\b")
#: the kernel's EDAC drivers decoding a machine check of memory (drivers/edac/sb_edac.c and skx_common.c:
#: "HANDLING MCE MEMORY ERROR" before each decoded record; edac_mc.c edac_mc_handle_error: "<n> UE ..." for
#: an uncorrected error): the host's memory, not the job
_EDAC_MEMORY = re.compile(r"\bEDAC \w+ MC\d+: HANDLING MCE MEMORY ERROR\b|\bEDAC MC\d+: \d+ UE\b")
#: Slurm's srun refusing to create the job step (srun's launch_common_create_job_step: "Unable to create
#: step for job %u: %m"; before it, src/srun/allocate.c create_job_step: "Unable to create job step: %m"; pasted
#: also as "unable to create step: More processors requested than permitted", round issue23-heldout-16, pysr-891):
#: the request (nodes, tasks, GRES, memory) does not fit the allocation or the partition, and asking again asks for
#: the same
_SRUN_NO_STEP = re.compile(r"\bsrun: error: [Uu]nable to create (?:job )?step(?: for job \d+)?: ")


def report_cause(text: str) -> Cause | None:
    """The cause a report of a known structure (the kernel's EDAC, srun, a CUDA error name) states."""
    if _EDAC_MEMORY.search(text):
        return Cause(Label.HARDWARE_ERROR, "the kernel's EDAC report of a memory machine check")
    if _SRUN_NO_STEP.search(text):
        return Cause(Label.CONFIG_ERROR, "srun unable to create the job step")
    cuda = _CUDA_ERROR.search(text)
    if cuda is not None:
        return Cause(_CUDA_ERRORS[cuda.group(1)], f"CUDA's error {cuda.group(0)}")
    return None


# -- a traceback still open at the end ---------------------------------------------------------------

#: a frame of a Python traceback (traceback.format_list: '  File "<path>", line <n>, in <name>'), after
#: whatever prefix a launcher or a logger put before it
_FRAME = re.compile(r'(?:^|\s|:)File "[^"]+", line \d+, in \S+')
#: a frame's line cut inside its file's path: the opening quote, no closing one
_FRAME_CUT = re.compile(r'(?:^|\s|:)File "[^"]+$')
#: the source line Python's traceback prints under a frame, four spaces in (after a rank's or a worker's prefix)
_SOURCE_LINE = re.compile(r"(?:^|[\]:)])\s{4,}\S")


#: a frame, read: its file and its function
_FRAME_PARTS = re.compile(r'(?:^|\s|:)File "([^"]+)", line \d+, in (\S+)')


def frame_of(text: str) -> tuple[str, str] | None:
    """(file, function) of a traceback frame line, or None."""
    if 'File "' not in text:
        return None
    m = _FRAME_PARTS.search(text)
    return (m.group(1), m.group(2)) if m is not None else None


# -- exceptions whose cause depends on where they were raised ----------------------------------------

#: CPython's classes for a value the code cannot use (Objects/exceptions.c) and the subclasses programs
#: meet reading their set-up (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError,
#: UnboundLocalError)
_PROGRAM_MISTAKES = frozenset({"ValueError", "TypeError", "LookupError", "NameError", "AttributeError",
                               "AssertionError"})
_PROGRAM_BASES = {
    "KeyError": "LookupError", "IndexError": "LookupError", "UnboundLocalError": "NameError",
    "JSONDecodeError": "ValueError", "UnicodeDecodeError": "ValueError", "UnicodeError": "ValueError",
}
#: functions that set a program up (constructors, argument and configuration parsing, loading, building,
#: checking), by the names Python code gives them: a program-mistake exception raised under one, before
#: any step, is a setting the program refuses
_SETUP_FUNCTION = re.compile(r"^_{0,2}(?:init(?:iali[sz]e)?|setup|set_up|parse|load|build|create|configure|"
                             r"validate|check|prepare|get_model|get_config|get_args|get_dataset|from_pretrained|"
                             r"from_config|post_init)\w*$")
#: functions that run the work (a step, a forward or backward pass, a data item, an evaluation): a
#: program-mistake exception under one is the program's crash, whatever came before
_WORK_FUNCTION = re.compile(r"^_{0,2}(?:forward|backward|step|train|fit|eval|evaluate|test|predict|generate|"
                            r"sample|getitem|next|next_data|call_impl|run_epoch|save|update|compute|loss|"
                            r"training_step|validation_step)\w*$")
#: the standard library's own frames (os.environ's __getitem__ raising KeyError) belong to the caller
_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/|dist-packages/)")


def program_mistake(text: str) -> str | None:
    """The class, when ``text`` is the line of an exception a program raises on a value it cannot use
    (``ValueError``, ``TypeError``, ``KeyError``, ``NameError``, ``AttributeError``, ``AssertionError``...),
    or None."""
    name = exception_class(text)
    if name is None:
        return None
    short = name.rsplit(".", 1)[-1]
    return short if _PROGRAM_BASES.get(short, short) in _PROGRAM_MISTAKES else None


def raised_in_setup(frames: list[tuple[str, str]]) -> str | None:
    """The set-up function, when a traceback's frames (outermost first) run through one and through no
    function that runs the work (the standard library's frames aside); None otherwise."""
    own = [func for file, func in frames if not _STDLIB.search(file)]
    if any(_WORK_FUNCTION.match(func) for func in own):
        return None
    return next((func for func in reversed(own) if _SETUP_FUNCTION.match(func)), None)



# -- a set-up the program refuses, stated in its message ---------------------------------------------

#: NCCL's result for a CUDA call inside NCCL that failed (nccl.h ncclUnhandledCudaError = 1,
#: ncclGetErrorString "unhandled cuda error"), in the frameworks' words for it: PyTorch's "NCCL error in:
#: <file>:<line>, unhandled cuda error", PaddlePaddle's "Nccl error, unhandled cuda error", c10's "NCCL
#: Error 1: unhandled cuda error". Before any rank made progress, the call that failed is NCCL setting up
#: its communicator on this machine's CUDA (a libnccl built for another CUDA, a driver older than the
#: toolkit): a restart makes the same call on the same set-up. A failure after progress is no such thing
#: (a device fault, an illegal address reported through NCCL), and is not read here.
_NCCL_CUDA_CALL_FAILED = re.compile(r"(?i:\bunhandled cuda error\b)|\bncclUnhandledCudaError\b")
#: an exception's message that tells the user what to change before the program can run: a step to take
#: ("Make sure the device specification refers to a valid device", "Please remove any such calls, or change
#: the selected strategy", "please set --..."), a question about what was done ("Did you manually call
#: torch.cuda.* functions ...?"), or a requirement of the set-up ("Collective ops must be configured at
#: program startup", "It must be either ..."). Programs word a refused setting so; a crash of their own
#: ("an illegal memory access was encountered", "Please report a bug") names nothing the user set.
_SETUP_PRESCRIBED = re.compile(
    r"(?i:\bmake sure\b|\bplease (?:set|specify|remove|install|use|change|upgrade|downgrade|update|reinstall|"
    r"provide|pass|add|ensure|select|configure|export|unset)\b|\bdid you (?:manually |forget |mean\b|set |call )|"
    r"\bmust be (?:configured|set|specified|called|provided|installed|enabled|disabled|one of|either|run|created|"
    r"initiali[sz]ed|launched|started|imported)\b)")


#: the grammar in which a program's check refuses its set-up, whatever the program and its words: what was
#: expected against what was found ("The number of devices must be either 1 or 8, got 2 instead", "environment
#: variable RANK expected, but not set"), a requirement the set-up does not
#: meet ("should be divisible by", "has to be greater than 0", "requires CUDA 11 but"), a support the build or
#: the device lacks ("GPUs with compute capability below 7.0 are not supported", "is only supported with GPUs",
#: "Distributed package doesn't have NCCL built in"), a thing named that is not there or not valid ("is not a
#: local folder and is not a valid model identifier", "not found in the base model", "invalid device
#: ordinal", "Can't load the configuration of", "missing 1 required positional argument", "Missing XLA
#: configuration"), a limit the setting passes with the change it needs ("is larger than the maximum number of tokens
#: ... Try increasing `gpu_memory_utilization`"), or versions that do not agree ("version mismatch"). Read only
#: of an exception's message (after its class), of a failure before any progress (firstfailure), and never
#: with the words of a fault that passes (:data:`_PASSING`).
#: (a clause: up to a sentence's end, a full stop inside a version number or a path going on with it)
_CLAUSE = r"(?:[^.;]|\.(?=\w))"
_REFUSAL_GRAMMAR = re.compile(
    r"(?i:\bexpected\b" + _CLAUSE + r"{0,120}?(?:\bgot\b|\bbut (?:got|found|received|is|was|not)\b|\binstead\b)|"
    r"\b(?:should|has to|have to|needs? to|must) (?:be|have|match|equal|contain)\b|"
    r"\brequires?\b" + _CLAUSE + r"{0,80}?\bbut\b|"
    r"\b(?:is|are) (?:not|no longer|only) supported\b|\bnot supported (?:on|by|with|in|for)\b|"
    r"\b(?:was|were|is|are)(?:n't| not) (?:built|compiled) with\b|\bdoes(?:n't| not) have \w+ built in\b|"
    r"\bis not a (?:valid|local|known|supported|recogni[sz]ed|directory|file)\b|"
    r"\bnot found in\b|\bno such (?:file|directory|device|option|model|module|key|attribute)\b|"
    r"\b(?:cannot|can't|could not|couldn't|unable to) (?:find|load|locate|open) (?:the |a |any )?"
    r"(?:config\w*|model|file|director\w+|checkpoint|tokenizer|module|library|dataset|path|device)|"
    r"\binvalid (?:device|option|choice|config\w*|strategy|parameter|combination|specification|model|path)s?\b|"
    r"cannot be (?:larger|greater|more|smaller|less|fewer|higher|lower) than\b|"
    r"\b(?:versions?|CUDA|driver|API|ABI)\b" + _CLAUSE + r"{0,80}?(?:\bmismatch|\bdoes(?:n't| not) match\b|"
    r"\b(?:is|are) (?:incompatible|not compatible)\b)|"
    r"\b(?:no|found no) (?:GPUs?|CUDA GPUs?|devices?|NeuronCores?|accelerators?|NVIDIA driver) "
    r"(?:found|available|detected)\b|"
    r"\bmissing (?:\d+ )?(?:required )?(?:[\w-]+ ){0,2}(?:configuration|config|environment variable|argument|"
    r"dependency|dependencies|package|library|module|key|field|parameter)s?\b|"
    r"\bis (?:larger|greater|smaller|less|more|fewer|higher|lower) than the (?:maximum|minimum|number|available|"
    r"allowed|supported)\b|"
    r"\btry (?:increasing|decreasing|setting|using|installing|passing|upgrading|downgrading|specifying)\b)")
#: Python's base class raised as is (``raise Exception("Installed CUDA version 11.0 does not match ...")``, DeepSpeed's
#: op builder), which the exception line above leaves to the forms: its message is read for a refusal all the same
_BARE_EXCEPTION = re.compile(r"^[\s>|`*]*(?:\[[^\]]*\]:?\s*)*(Exception): \S")
#: words of a fault that passes (a peer or a link late or gone, a resource busy for now) or of another cause
#: (memory, a value that is not a number): a refusal worded with them may be met differently by the next
#: attempt, or is not the set-up's, so it stops nothing
_PASSING = re.compile(r"(?i:\btime[ds]? ?out\b|\btimeout|\btemporar|\btry again\b|\bretr(?:y|ies|ied)\b|"
                      r"\bunreachable\b|\bconnect|\brefused\b|\breset\b|\bnetwork\b|\bresolv|\bunavailable\b|"
                      r"\bbusy\b|\bdeadline\b|\binterrupt|\bbroken pipe\b|\bsocket\b|\bpeer\b|\bclosed\b|"
                      r"\bout of memory\b|\bOOM\b|\bnan\b|\binf\b|\bfinite\b)")

#: PaddlePaddle's error type FATAL at the head of the message (paddle/phi/core/enforce: "(Fatal) <message>", raised
#: in Python as SystemError by paddle/fluid/pybind/exception.cc): the framework's own fatal failure (a data reader
#: that died, an allocator's exception), whose enforce hint "[Hint: Expected killed_ != true, but received ...]"
#: is the check that caught it, not a set-up the program refuses (PaddleDetection#5879, round
#: issue23-heldout-30 part A: read as configuration and stopped)
_PADDLE_FATAL = re.compile(r"\(Fatal\)\s")

#: lines that start something else than the message above them: a traceback's header or frame, a chain's
#: separator, a record with a level in its head
_NOT_CONTINUED = re.compile(r'^\s*(?:Traceback \(most recent call last\)|File "|The above exception|During handling)|'
                            r"^.{0,80}?(?:^|[\s\[|(:-])(?:ERROR|CRITICAL|FATAL|WARNING|WARN|INFO|DEBUG)(?:[\s\]|:)-]|$)|"
                            r"^\[?[IWEF]\d{4} ")
#: lines of an exception's message read after its first (a message printed over several lines, or wrapped)
MESSAGE_LINES = 6


def exception_message(lines: Sequence[str], index: int) -> str:
    """The exception line ``lines[index]`` and the lines that go on with its message, joined by spaces: up
    to :data:`MESSAGE_LINES` lines after it, until a blank line, another exception line, a traceback's
    header or frame, or a record with a level in its head (a box-drawn traceback wraps a message at the
    terminal's width: "... was explicitly│", " assigned to ... Make sure the device specification ...")."""
    return " ".join([lines[index], *(text.strip() for text in lines[index + 1:message_end(lines, index) + 1])])


def message_end(lines: Sequence[str], index: int) -> int:
    """The index of the last line of the exception message that starts at ``lines[index]`` (see
    :func:`exception_message`): ``index`` itself when no line goes on with it."""
    end = index
    for text in lines[index + 1:index + 1 + MESSAGE_LINES]:
        if not text.strip() or exception_class(text) is not None or _NOT_CONTINUED.search(text):
            break
        end += 1
    return end


def setup_refusal(text: str) -> str | None:
    """What ``text`` (a failure's line) is, when its message states a set-up the program refuses whatever
    its exception's class: NCCL's failed CUDA call, an exception line that tells the user what to change
    in the set-up, or one whose message is worded in the grammar of a refusal (:data:`_REFUSAL_GRAMMAR`)
    without the words of a fault that passes (:data:`_PASSING`). None otherwise. Read of a failure before any progress
    (:func:`~neuron_watch.diagnosis.firstfailure.mistake_before_progress`)."""
    if _NCCL_CUDA_CALL_FAILED.search(text):
        return "NCCL's failed CUDA call (unhandled cuda error)"
    m = _EXCEPTION_LINE.match(text) or _BARE_EXCEPTION.match(text)
    if m is None:
        return _record_refusal(text)
    name = m.group(1).rsplit(".", 1)[-1]
    if _PADDLE_FATAL.match(text, m.end()):
        return None
    if _SETUP_PRESCRIBED.search(text, m.end()):
        return f"{name} whose message says what to change in the set-up"
    refused = _REFUSAL_GRAMMAR.search(text, m.end())
    if refused is not None and not _PASSING.search(text, m.end()):
        return f"{name} whose message states the set-up it refuses ('{refused.group(0)}')"
    return None


def innermost_role(frames: list[tuple[str, str]]) -> tuple[str, str] | None:
    """("setup" or "work", function): the role of the innermost of a traceback's own frames (outermost
    first, the standard library's aside) whose function names one; None when none does. The innermost
    says where the value was refused: a trainer's ``fit`` that builds the model (Lightning's
    ``configure_model`` under ``fit``) fails in the model's ``__init__``, not in its step."""
    for file, func in reversed(frames):
        if _STDLIB.search(file):
            continue
        if _WORK_FUNCTION.match(func):
            return "work", func
        if _SETUP_FUNCTION.match(func):
            return "setup", func
    return None


#: source files Python runs as scripts; a traceback whose outermost frame is another kind of file
#: (``accelerate_config.json``, ``run.sh``) shows a launcher told to run a file that is not a program
_PYTHON_SOURCE = re.compile(r"\.pyw?$|^<[^>]*>$")


def script_not_python(frames: list[tuple[str, str]]) -> str | None:
    """The file, when a traceback's outermost frame runs a ``<module>`` from a file that is not Python
    source: the launch named a configuration or shell file as the script."""
    if not frames:
        return None
    file, func = frames[0]
    if func != "<module>" or _PYTHON_SOURCE.search(file) or "." not in file.rsplit("/", 1)[-1]:
        return None
    return file


def in_traceback(last_lines: list[str]) -> str | None:
    """The frame, when a rank's last lines (its last two non-blank ones, oldest first) are inside a Python
    traceback: a frame, or a frame and the source line Python prints under it. The traceback is what the
    process printed as it died; an excerpt cut before its exception line still shows a failure."""
    for text in reversed(last_lines[-2:]):
        if _FRAME.search(text):
            return text
    # the last line a frame cut inside its file's path (the log ended while the frame was being written, or the
    # paste was cut there), under the source line of the frame before it (verl#302, trl#3128: round
    # issue23-heldout-32 part A)
    if len(last_lines) >= 2 and _FRAME_CUT.search(last_lines[-1]) and _SOURCE_LINE.search(last_lines[-2]):
        return last_lines[-1]
    return None


def read_structure(text: str) -> Cause | None:
    """The cause an error line's structure states: a report of known structure, its exception class's
    words, then an errno."""
    cause = report_cause(text)
    if cause is not None:
        return cause
    name = exception_class(text)
    if name is not None:
        cause = class_cause(name)
        if cause is not None:
            return cause
    return errno_cause(text)


#: levels of a record that reports an error (forms_severity.head_level), and NCCL's WARN, the level at which NCCL
#: prints the failure it returns ("misc/argcheck.cc:39 NCCL WARN Recv : invalid root 0 (root should be in the 0..0
#: range)", NVIDIA/nccl#963)
_ERROR_LEVELS = frozenset({"E", "F", "ERROR", "FATAL", "CRITICAL"})
_NCCL_WARN = re.compile(r"\bNCCL WARN\b")
#: a failed check of the program's own invariant (glog's CHECK, C's assert): "must have the same batch size" there
#: is the program's bug, not a setting ("[TM][FATAL] ... Check failed: logits_shape.first == bitmask_shape.first
#: logits and bitmask must have the same batch size.", lmdeploy#4453)
_INVARIANT = re.compile(r"\bCheck failed\b|\bAssertion\b|\bassert(?:ion)? failed\b")


def _record_refusal(text: str) -> str | None:
    """An error record (a level of error in its head, or NCCL's WARN) whose words are those of a refusal of the
    set-up (:data:`_REFUSAL_GRAMMAR`, without the words of a fault that passes): the runtime or the library states
    what it refuses in its own record rather than in an exception ("E1107 ... model_repository_manager.cc:1265]
    failed to poll model 'pipe': model not found in any model repository.", triton-model-analyzer#786)."""
    warn = _NCCL_WARN.search(text)
    if warn is None and head_level(text) not in _ERROR_LEVELS:
        return None
    refused = _REFUSAL_GRAMMAR.search(text, warn.end() if warn is not None else 0)
    if refused is None or _PASSING.search(text) or _INVARIANT.search(text):
        return None
    return f"an error record whose words state the set-up it refuses ('{refused.group(0)}')"
