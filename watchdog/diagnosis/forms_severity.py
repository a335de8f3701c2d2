"""Failure forms, by severity: a logging convention's record whose level is an error or fatal.

Pure: no I/O. glog/absl and c10's logger, TensorFlow's, Ray's, Python logging and the serving stacks'
level words, logfmt and JSON records, libfabric, TensorRT, the Neuron runtime and the kernel's fault
reports: each read in the record's head, where the convention puts its level, not in a message that
quotes the word (:func:`severity_form`). :func:`head_level` gives the level of a record's head to the
other readers, which keep a warning from reading as a failure.

Each convention's record head is spelled here once, for two readers: the forms look for it in a line's
first characters (after a launcher's or a server's prefix), the error block
(:mod:`neuron_watch.diagnosis.errorblock`) where an unquoted line starts (:data:`LINE_START_GLOG`,
:data:`ERROR_RECORD`, :data:`QUIET_RECORD`), built from the same pieces.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: glog / absl's time and thread id after the severity letter and the month and day: "HH:MM:SS.uuuuuu <tid> "
_GLOG_TIME = r"\d\d:\d\d:\d\d(?:\.\d+)?\s+(?:\d+\s+)?"
#: where a level field starts in a record's head: the line's start, a space, a bracket, a bar, a colon...
_FIELD = r"(?:^|[\s\[|(:,-])"

#: glog / absl LogMessage prefix: "<L>MMDD HH:MM:SS.uuuuuu <tid> <file>:<line>] " (glog
#: src/logging.cc LogMessage::Init; absl/log/internal/log_format.cc FormatLogPrefix), after an
#: optional launcher prefix; c10's logger prints it without the thread id and with the month
#: unpadded ("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] ..."), or with no time at
#: all ("[W socket.cpp:426] ..."). Python programs that copy the layout print the letter, a space and
#: the month and day with a dash (SkyPilot's sky_logging: "%(levelname).1s %(asctime)s %(filename)s:%(lineno)d]"
#: with the date "%m-%d %H:%M:%S": "E 11-26 17:47:34 backend_utils.py:992] "). glog 0.6 and later put the year
#: before the month when asked (``--log_year_in_prefix``: "F20220801 07:29:34.701110  2256 fs_coordinator.cc:42] ",
#: graph-learn#213's check failure, read as nothing). Group 1: the severity letter.
_GLOG = re.compile(r"(?:^|[\[\s:])([IWEF])(?:\d{3,4}(?:\d{4})? " + _GLOG_TIME + r"| \d\d-\d\d " + _GLOG_TIME +
                   r"|(?<=\[[IWEF]) )[\w./\\+-]+:\d+\]")
#: TensorFlow's default logger: "<date> <time>.<us>: <L> <file>:<line>] <msg>"
#: (tensorflow/core/platform/default/logging.cc, tsl/platform/default/logging.cc:
#: fprintf(stderr, "%s.%06d: %c %s:%d] %s\n", ..., "IWEF"[severity], fname, line, msg))
_TF = re.compile(r"(?:^|: )([EF]) /?[\w.+-]+(?:/[\w.+-]+)*\.(?:cc|cpp|h|c|py):\d+\] ")
#: ... at any of its levels
_TF_ANY = re.compile(r"(?:^|: )[IWEF] /?[\w.+-]+(?:/[\w.+-]+)*\.(?:cc|cpp|h|c|py):\d+\] ")
#: Ray's C++ logger (the raylet, the GCS, core workers): "[<date> <time>,<ms> <L> <pid> <tid>] <msg>"
#: (src/ray/util/logging.cc kLogFormatTextPattern "[%Y-%m-%d %H:%M:%S,%e %L %P %t] ", spdlog's %L the
#: level's letter: T D I W E C), under the "(raylet) " a driver's log gives it. The letter stands between
#: digits, so no needle holds it but " E " (a literal search over every batch, ~6% of the scan's speed):
#: a record is read when its message holds a needle ("Failed", "Error", "Timeout", ...).
_RAY = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ([EC]) \d+ \d+\] ")
#: Python logging, loguru, structlog and most serving stacks: a severity word as a field of the
#: record's head ("2024-01-01 12:00:00,123 - ERROR - ...", "[ERROR]", "| ERROR |", "ERROR 11-26 12:00:00
#: [engine.py:12]" (vLLM), "E0000 ..." aside); looked for in the head only, not in a message
#: that quotes the word. A C++ qualified name ("c10::Error::Error(", a backtrace's frame) is no field.
_LEVEL_WORD = re.compile(_FIELD + r"(?:(ERROR|CRITICAL|FATAL|WARNING|WARN|INFO|DEBUG|NOTICE|TRACE)"
                         r"(?=[\s\]|:)-]|$)|(?<!::)(Error|Critical|Fatal|Warning|Info|Debug)(?=\]|:(?!:)))")
_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
_HEAD = 90

# -- the same heads where a line starts, as an error block opens and continues --------------------

#: glog/absl: "E1126 12:00:00.123456  1234 file.cc:12] ", with the year when glog is asked to print it
#: ("F20250821 13:22:09.976752 ..."); c10's own logger in brackets without a thread ("[E307 05:30:20.036611330
#: ProcessGroupNCCL.cpp:744] "); TensorFlow/tsl's ("2024-07-17 11:40:54.103908: E external/xla/...cc:56] ", and
#: TF 1.x's "E tensorflow/core/...cc:1372] " without a time), at any level: group 1 or 2 is its letter.
LINE_START_GLOG = re.compile(r"^\[?([IWEF])\d{3,4}(?:\d{4})? " + _GLOG_TIME + r"[^\s\]]+:\d+\] "
                             r"|^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?: )?([IWEF]) (?:\d\d-\d\d " + _GLOG_TIME +
                             r")?[^\s\]]+\.\w+:\d+\] ")
#: a logging record whose level is an error (Python logging, log4j/slf4j, most servers), in its head
ERROR_RECORD = re.compile(r"^.{0,80}?" + _FIELD + r"(?:ERROR|FATAL|CRITICAL|SEVERE)(?:[\s\]|:),-]|$)")
#: ... or a level that is no failure
QUIET_RECORD = re.compile(r"^.{0,80}?" + _FIELD + r"(?:WARN(?:ING)?|INFO|DEBUG|TRACE|NOTICE)(?:[\s\]|:),-]|$)")

# -- other conventions ------------------------------------------------------------------------------

#: logfmt (logrus, zap, Go's slog) and JSON records: level=error, "level": "error"
_KV_LEVEL = re.compile(
    r"""(?:\blevel=|\blvl=|\bseverity=|["'](?:level|levelname|severity|lvl)["']\s*:\s*["'])"""
    r"""(error|err|fatal|critical|crit|panic|ERROR|FATAL|CRITICAL|PANIC|Error|Fatal|Critical)\b""")
#: libfabric's log record: "libfabric:<pid>:<time>:<prov>:<subsys>:<func>():<line><level> <msg>"
#: (libfabric src/log.c fi_log: "%s:%d:%ld:%s:%s:%s():%d<%s> "); FI_WARN is its highest level, so a
#: warn is an error only when it carries one (an "err:" code, a failed call).
_LIBFABRIC = re.compile(r"\blibfabric:\d+:\d+:(?:[\w;.-]*:){1,4}\w+\(\):\d+<(error|warn)> (.*)")
_LIBFABRIC_ERR = re.compile(r"\berr(?:no)?\s*[:=]\s*-?\d+|\berror\b|\bfailed\b|\bunable\b|\bcannot\b", re.I)
#: TensorRT's logger: a severity letter in brackets before the message (samples/common/logging.h
#: severityPrefix: "[F] " kINTERNAL_ERROR, "[E] " kERROR, "[W] ", "[I] ", "[V] "; the Python bindings'
#: default logger prints the same letter after its "[TRT] " tag: "[11/07/2023-08:45:41] [TRT] [E] ...").
#: Only at the record's head, after its time or tag, where no message puts it.
_TRT = re.compile(r"^(?:\[[^\]]{1,40}\] ){0,3}\[([EF])\] \S")
#: the Neuron runtime: "<YYYY-Mon-DD HH:MM:SS.ffff> <pid>:<tid> <LEVEL>  <MODULE>:<function> <msg>"
#: (the runtime's log format; its modules are TDRV, NRT, NMGR, ENC, NCCL and the like). The fields are
#: padded to a width, so the tid and the level are as often two spaces apart as one
#: ("2025-Jun-28 22:19:15.506590  8652:8728  ERROR   NRT:nrt_infodump ...")
_NEURON = re.compile(r"\d+:\d+\s+(ERROR|FATAL)\s+([A-Z][A-Z_]{1,9}):\w")
#: "Fatal error" as a record's head, whatever follows it: MPICH's fatal error handler (src/mpi/errhan/errutil.c
#: MPIR_Handle_fatal_error: snprintf(error_msg, ..., "Fatal error in %s: ", fcname), then MPID_Abort prints
#: "Abort(<code>) on node <n> (rank <r> in comm <c>): " before it), the same C idiom of many programs'
#: fatal() (fprintf(stderr, "Fatal error in %s: ", func)), and "<Component> Fatal Error ..." (NVHPC's
#: "Accelerator Fatal Error: ...", XLA's "LLVM Fatal Error while compiling ..."). A count ("Fatal errors: 0")
#: is no record of one.
_FATAL_ERROR = re.compile(r"(?:^|[\s\[|(:,-])Fatal [Ee]rror\b(?!s?\s*[:=]\s*0\b)")
#: the kernel's own fault reports (lib/bug.c "BUG: ", arch/x86
#: "general protection fault", mm "segfault at <addr> ip", kernel/panic.c "Kernel panic - ")
_KERNEL_FAULT = re.compile(
    r"\bBUG: (?:unable to handle|kernel NULL pointer|soft lockup|scheduling while atomic)|\bOops: \d|"
    r"\bgeneral protection fault\b|\bKernel panic - |"
    r"\btask \S+ blocked for more than \d+ seconds")
#: the kernel's prefix for a hardware fault it reports (include/linux/printk.h HW_ERR "[Hardware
#: Error]: ", used by the x86 machine-check handler, APEI/GHES and EDAC), unless it is a corrected one
HW_ERR = re.compile(r"\[Hardware Error\]: (?!.*\bcorrected\b)")

#: retries that ran out: the operation will not be tried again. InfiniBand's work-completion
#: statuses IBV_WC_RETRY_EXC_ERR / IBV_WC_RNR_RETRY_EXC_ERR (libibverbs verbs.c ibv_wc_status_str:
#: "transport retry counter exceeded", "RNR retry counter exceeded"), and the usual words of a retry
#: loop that gave up ("retries exhausted", "max retries exceeded", "out of retries")
_RETRIES_EXHAUSTED = re.compile(r"(?i:\bretry (?:count(?:er)? )?exceeded\b|\bretries (?:exhausted|exceeded)\b|"
                                r"\bmax(?:imum)? (?:number of )?retries (?:exceeded|reached)\b|\bout of retries\b)")


def retried(text: str) -> bool:
    """A line that says the operation will be tried again reports a transient condition (the
    signature table's rule for unrecognised errors makes the same exception); one that says the
    retries ran out does not."""
    low = text.lower()
    return ("retry" in low or "retrying" in low) and not _RETRIES_EXHAUSTED.search(text)


#: the levels a record's head gives a line that is no failure, glog's letters included
QUIET_LEVELS = frozenset({"I", "W", "WARNING", "WARN", "INFO", "DEBUG", "NOTICE", "TRACE"})


def head_level(text: str) -> str | None:
    """The severity a record's head gives it (its first level field, or a glog letter), or None."""
    m = _GLOG.search(text, 0, _HEAD + 40)
    if m is not None:
        return m.group(1)
    w = _LEVEL_WORD.search(text, 0, _HEAD)
    return None if w is None else (w.group(1) or w.group(2)).upper()


def trt_level(text: str) -> str | None:
    """TensorRT's bracketed error letter at a record's head ("E" or "F": ``[08/02/2024-14:23:01] [E] Building engine
    failed``, ``[TRT] [E] ...``), which carries no level word :func:`head_level` reads; None for any other line."""
    t = _TRT.search(text, 0, _HEAD)
    return None if t is None else t.group(1)


def record_message(text: str) -> str | None:
    """The message of a glog/absl or TensorFlow record (what follows its head's "file:line] "), at any
    level; None when ``text`` is no such record."""
    m = _GLOG.search(text, 0, _HEAD + 40) or _TF_ANY.search(text, 0, _HEAD + 40)
    return None if m is None else text[m.end():]


def severity_form(text: str) -> Form | None:
    """The form of a record whose head gives it an error or fatal level, in the conventions above."""
    m = _GLOG.search(text, 0, _HEAD + 40)
    if m is not None and m.group(1) in "EF":
        return Form(FormKind.CRASH, "a glog/absl FATAL record") if m.group(1) == "F" else \
            Form(FormKind.ERROR, "a glog/absl ERROR record")
    m = _TF.search(text, 0, _HEAD + 40)
    if m is not None:
        return Form(FormKind.CRASH, "a TensorFlow FATAL record") if m.group(1) == "F" else \
            Form(FormKind.ERROR, "a TensorFlow ERROR record")
    m = _RAY.search(text, 0, _HEAD)
    if m is not None:
        return Form(FormKind.ERROR, "a Ray ERROR record") if m.group(1) == "E" else \
            Form(FormKind.CRASH, "a Ray CRITICAL record")
    m = _NEURON.search(text, 0, _HEAD)
    if m is not None:
        return Form(FormKind.ERROR, f"a Neuron runtime {m.group(1)} of {m.group(2)}")
    if _FATAL_ERROR.search(text, 0, _HEAD) and head_level(text) not in QUIET_LEVELS:
        return Form(FormKind.CRASH, "a fatal error record")
    m = _TRT.search(text, 0, _HEAD)
    if m is not None:
        return Form(FormKind.CRASH, "a TensorRT INTERNAL_ERROR record") if m.group(1) == "F" else \
            Form(FormKind.ERROR, "a TensorRT ERROR record")
    m = _LIBFABRIC.search(text)
    if m is not None and (m.group(1) == "error" or _LIBFABRIC_ERR.search(m.group(2))):
        # libfabric is the network transport (its providers: efa, verbs, tcp, shm): an error it logs is
        # the transport failing, as an NCCL WARN of transport/ is (errorclass.py)
        return Form(FormKind.ERROR, f"a libfabric <{m.group(1)}> record", Label.COMM_ERROR)
    m = _KV_LEVEL.search(text)
    if m is not None:
        level = m.group(1).lower()
        kind = FormKind.CRASH if level in ("fatal", "panic") else FormKind.ERROR
        return Form(kind, f"a structured record of level {level}")
    if _KERNEL_FAULT.search(text) or HW_ERR.search(text):
        return Form(FormKind.ERROR, "a kernel error report")
    # the record's severity is its first level field: "WARNING ... error" is a warning
    m = _LEVEL_WORD.search(text, 0, _HEAD)
    if m is not None and (level := (m.group(1) or m.group(2)).upper()) in _ERROR_LEVELS and not retried(text):
        return Form(FormKind.ERROR, f"a log record of severity {level}")
    return None
