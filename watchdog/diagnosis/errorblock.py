"""The error block: the unit a failure's cause is read from.

Pure: no I/O. A program that fails prints a *block*, not a line: a logger's record header, the
exception it carries, its stack frames, the exceptions chained under or over it. The first line of
the block is often the least specific (a logger's ``ERROR Executor:91 - Exception in task 0.0``, a
``Traceback (most recent call last):``, ``terminate called after throwing ...``, a wrapper's
``RuntimeError``), and the cause is further down: the ``java.lang.OutOfMemoryError`` under the
header, the ``what():`` of the C++ exception, the root of a chain. :func:`blocks` groups a stream's
lines into blocks by the layouts the printers use; :func:`decide` says which line of a block
decides the cause, given a function that says what one line explains.

The layouts, each as its printer writes it:

* **Python** (CPython ``Lib/traceback.py``): ``Traceback (most recent call last):``, frames
  ``  File "<path>", line <n>, in <name>`` with the source line and ``~~~^^^`` markers indented under
  them, ``[Previous line repeated <n> more times]``, then the exception line at column 0. A chain is
  printed root first, each link after ``_cause_message`` ("The above exception was the direct cause
  of the following exception:") or ``_context_message`` ("During handling of the above exception,
  another exception occurred:") between blank lines: the first exception printed is the root.
  ``logging.exception`` puts its record's header line before the traceback.
* **Java** (``java.lang.Throwable.printStackTrace``; ``ThreadGroup.uncaughtException``'s
  ``Exception in thread "<name>" ``): the throwable's ``toString`` (``java.lang.X: message``),
  frames ``\\tat pkg.Class.method(File.java:12)``, ``\\t... <n> more``, then ``Caused by: `` for
  each cause, the root *last*; ``Suppressed: `` exceptions are side notes, not the cause. log4j's
  and slf4j/logback's layouts print ``logger.error(message, throwable)`` as the record's line
  (``ERROR Executor:91 - Exception in task ...``) with the throwable on the lines after it.
* **C++** (libstdc++ ``libsupc++/vterminate.cc``, ``__verbose_terminate_handler``):
  ``terminate called after throwing an instance of '<type>'`` then ``  what():  <message>``;
  c10's ``Exception raised from <f> at <file>:<n> (most recent call first):`` and ``frame #<n>: ``.
* **glog/absl** (glog ``src/logging.cc`` ``LogMessage::Init``: ``<L><mmdd> <hh:mm:ss.uuuuuu>
  <tid> <file>:<line>] ``; absl's ``log_format.cc`` the same): an ``E``/``F`` record and the ``E``/``F``
  records right after it, ``*** Check failure stack trace: ***``, the failure signal handler's
  ``*** SIGSEGV received at ... ***``, ``PC: @ 0x...`` and frames ``    @     0x7f... <symbol>``.
* **Go** (``runtime/panic.go`` ``printpanics``: the oldest panic first, each later one after a tab,
  ``[recovered]`` on those recovered; ``runtime.throw``'s ``fatal error: ``; ``runtime/traceback.go``:
  ``goroutine <n> [<state>]:``, ``<func>(<args>)`` then ``\\t<file>.go:<n> +0x..``, ``created by ``;
  ``[signal SIGSEGV: ...]``): the first panic printed is the root.
* **Rust** (``library/std/src/panicking.rs`` ``default_hook``: ``thread '<name>' panicked at
  <file>:<l>:<c>:`` and the message on the next line since 1.73, ``panicked at '<msg>', <file>``
  before; ``note: run with `RUST_BACKTRACE=1` ...``; ``std::backtrace``: ``stack backtrace:``,
  ``   <n>: <symbol>``, ``             at <file>:<l>:<c>``).
* **MindSpore** (its exception report, mindspore/core/utils/log_adapter.cc and the Python layer that raises it):
  the exception line (or an ``[ERROR] <MODULE>(<pid>,...)`` record of its C++ log), then sections, each a rule of
  dashes, ``- <Title>:`` (``Framework Error Message:``, ``Ascend Error Message:``, ``Device load error message:``,
  ``Framework Unexpected Exception Raised:``, ``C++ Call Stack: (For framework developers)``, ``The Traceback of
  Net Construct Code:``), a rule, and the section's lines, a blank line between sections. What a message section
  says is the exception's detail, deeper than its line (a ``RuntimeError: Unsupported device target Ascend...``
  over the loader's ``libge_runner.so: cannot open shared object file``); the call stack and the net's traceback
  are frames.
* **Py4J** (py4j ``protocol.py`` ``Py4JJavaError``, the layer PySpark, SynapseML and xgboost.spark raise a JVM's
  failure through): the Python exception's message ``An error occurred while calling <target>.<method>.`` and, on
  the next line after ``: ``, the Java throwable's ``toString`` (``: org.apache.spark.SparkException: Job aborted due
  to stage failure: ... most recent failure: ...: java.net.ConnectException: Connection refused``), then its Java
  frames and ``Caused by:`` lines: the wrapper's cause, deeper than it (round issue23-heldout-34, SynapseML#2287:
  the Py4J line decided, a cause not recognised).
* **gRPC** (grpc ``src/python/grpcio/grpc/_channel.py`` ``_InactiveRpcError``/``_RPCState``: the
  repr ``<_InactiveRpcError of RPC that terminated with:`` then ``\\tstatus = StatusCode.<CODE>``,
  ``\\tdetails = "..."``, ``\\tdebug_error_string = "..."``, ``>``; the codes are
  ``include/grpc/status.h``'s): the status lines are the exception's detail, deeper than it.

Which line decides (:func:`decide`): a line that states a cause beats one that only says "error"
(a header, ``RuntimeError: ...`` with nothing a reader explains); among lines that state a cause,
the root of the chain beats its wrapper; a specific wrapper over a generic cause keeps the wrapper
(the cause states nothing). Frames and separators never decide.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from neuron_watch.diagnosis.forms_severity import ERROR_RECORD as _ERROR_RECORD
from neuron_watch.diagnosis.forms_severity import LINE_START_GLOG as _GLOG
from neuron_watch.diagnosis.forms_severity import QUIET_RECORD as _QUIET_RECORD
from neuron_watch.events import Label


class Role(str, enum.Enum):
    """What a line is inside its block."""

    HEADER = "header"  # the line that opens the block (a record's header, a traceback's first line)
    MESSAGE = "message"  # an exception line, a what(), a status, a panic's message: what failed
    FRAME = "frame"  # a stack frame, a frame's source line: where, never why
    SEPARATOR = "separator"  # a chain's separator, a blank line inside the block
    ASIDE = "aside"  # a suppressed exception, a note: not the failure


@dataclass(frozen=True)
class BlockLine:
    """One line of a block: its index in the stream, its role and how deep in the chain it sits
    (a larger ``depth`` is nearer the root cause)."""

    index: int
    role: Role
    depth: int


@dataclass(frozen=True)
class Block:
    """Consecutive lines of one stream that report one failure (``lines`` in stream order)."""

    lines: tuple[BlockLine, ...]

    @property
    def start(self) -> int:
        return self.lines[0].index

    @property
    def end(self) -> int:
        """The index of the block's last line."""
        return self.lines[-1].index


@dataclass(frozen=True)
class Decision:
    """The line of a block that decides the failure's cause, the cause it states, and the text that was read
    (the line, or its message without the layout's lead-in: :func:`message_of`)."""

    index: int
    label: Label
    read: str


#: What is put before a process's own lines, read under: a paste's markdown quoting (``> ``), a launcher's tag
#: of the process (torchrun's ``[rank3]:``, Open MPI's ``[1,0]<stderr>:``, Ray's ``(pid=123)`` and
#: ``(RayWorker pid=123, ip=...)``). A tag ends in its colon (or the parenthesis) and one space.
_PREFIX = re.compile(r"^(?:>[ \t]?)*(?:\[[\w ,.:/-]{1,40}\](?:<\w+>)?:[ ]?|\((?:\w+ )?pid=\d+[^)]{0,80}\)[ ]?)*")

# -- openers: the first line of a block -------------------------------------------------------------------

_PY_HEADER = re.compile(r"Traceback \(most recent call last\):\s*$")
_JAVA_THREAD = re.compile(r"^Exception in thread \"[^\"]*\" ")
_CXX_TERMINATE = re.compile(r"^terminate called (?:after throwing an instance of |recursively|without an active)")
_GO_PANIC = re.compile(r"^(?:panic|fatal error): ")
_RUST_PANIC = re.compile(r"^thread '[^']*' panicked at ")
_RUST_LOCATION = re.compile(r"panicked at [^\s']+:\d+:\d+:\s*$")
# glog/absl's, c10's and TensorFlow's record heads (_GLOG) and a record's level (_ERROR_RECORD,
# _QUIET_RECORD) are spelled once, in forms_severity, for the forms and here: E and F open and continue a block.
#: an exception line at column 0: Python's format_exception_only, Java's Throwable.toString
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z][\w$]*(?:Error|Exception|Throwable|Failure|Exit|Interrupt)"
                        r"(?:\(\w+\))?(?::\s|\s*$)|^(?:[a-z_]\w*\.)+[A-Z][\w$]*(?::\s|\s*$)")

# -- continuations --------------------------------------------------------------------------------------

_PY_FRAME = re.compile(r'^\s+File "[^"]*", line \d+')
#: Python's ``assert`` without a message: a bare ``AssertionError`` (after a launcher's tag), and the statement that
#: failed, which CPython's traceback prints as the last frame's source line right above it
_BARE_ASSERTION = re.compile(r"^(?:\w+\.)*AssertionError:?\s*$")
_ASSERT_STATEMENT = re.compile(r"^\s+(assert\s\S.*?)\s*$")
_PY_REPEATED = re.compile(r"^\s*\[Previous line repeated \d+ more times?\]")
_PY_CAUSE = re.compile(r"^\s*(?:The above exception was the direct cause of the following exception:|"
                       r"During handling of the above exception, another exception occurred:)\s*$")
_JAVA_FRAME = re.compile(r"^\s+(?:at [\w$.<>/\[\]-]+\(.*\)|\.\.\. \d+ (?:more|common frames omitted))\s*$")
_JAVA_CAUSED = re.compile(r"^\s*Caused by: ")
_JAVA_SUPPRESSED = re.compile(r"^\s*Suppressed: ")
_CXX_WHAT = re.compile(r"^\s*what\(\):\s")
#: Py4J's wrapper of a JVM's failure (its message ends with the call that failed) and, on its next line after ": ",
#: the Java throwable it carries
_PY4J_CALL = re.compile(r"\bAn error occurred while calling \S+\.\s*$")
_PY4J_CAUSE = re.compile(r"^: (?:[a-z_]\w*\.)+[A-Z][\w$]*(?::\s|\s*$)")
_C10_FRAME = re.compile(r"^\s*(?:frame #\d+: |Exception raised from \S+ at \S+:\d+)")
_NATIVE = re.compile(r"^\s*(?:@\s+0x[0-9a-fA-F]+|PC: @ |\*\*\* .*\*\*\*\s*$|\[0x[0-9a-f]+\]|#\d+\s+0x[0-9a-f]+ )")
_GO_GOROUTINE = re.compile(r"^goroutine \d+ \[[^\]]+\]:\s*$")
#: a goroutine frame's file line (a tab, or the spaces a paste made of it) and its call line
_GO_FILE = re.compile(r"^\s+\S+\.(?:go|s):\d+(?: \+0x[0-9a-f]+)?\s*$")
_GO_CALL = re.compile(r"^(?:created by [\w./*()\[\]{}~-]+|[\w./*()\[\]{}~-]+\([^()]*\))(?: in goroutine \d+)?\s*$")
_GO_NESTED = re.compile(r"^\tpanic: ")
_GO_SIGNAL = re.compile(r"^\[signal [A-Z]+")
_RUST_FRAME = re.compile(r"^\s*(?:\d+: \S|at \S+:\d+(?::\d+)?\s*$|stack backtrace:\s*$)")
_RUST_NOTE = re.compile(r"^note: (?:run with `RUST_BACKTRACE|Some details are omitted)")
_GRPC_DETAIL = re.compile(r"^\s+(?:status = StatusCode\.\w+|details = |debug_error_string = )|^>\s*$")
#: CANN's error message (the error manager's, as aclGetRecentErrMsg returns it and torch_npu quotes it after
#: "detail:" or under its own "[ERROR] ... ERR<n>" record): "<code>: Inner Error!", then lines that start with
#: the same code ("EZ9999: [PID: n] <time> <message>"), then an indented "TraceBack (most recent call last):" and
#: the inner errors indented under it (round issue23-heldout-20: "Op Cast does not has any binary." four lines
#: under the head that states nothing). A line that starts with a code (E, a letter or digit, four digits, then ": "
#: or, in older releases, two spaces: "EZ9999  Cannot parse json for config file [...]") continues the block.
_CANN_CODE = re.compile(r"\bE[A-Z0-9]\d{4}: ")
_CANN_LINE = re.compile(r"^E[A-Z0-9]\d{4}(?::\s|\s\s)")
#: MindSpore's report sections under an exception line: a rule of dashes (MindSpore prints 52, some sections 66),
#: the section's title, a rule again; the titles of the sections that hold frames, not words. A report pasted into
#: a Markdown forum outside a code block keeps the backslash the editor put before a line's leading "-" (Discourse
#: escapes it so that it stays text, not a list item: "\\- Ascend Error Message:"; round issue23-heldout-27,
#: mindspore-forum-1156): the same rule and title.
_MS_RULE = re.compile(r"^\\?-{20,}\s*$")
_MS_TITLE = re.compile(r"^\\?- [A-Z][\w+ '/-]*:(?: \(For framework developers\))?\s*$")
_MS_FRAMES = re.compile(r"Call Stack|Traceback")

#: what a layout puts before the message it carries: Java's "Caused by: " and "Suppressed: ", the JVM's
#: "Exception in thread "<name>" ", libstdc++'s "what():  ", Go's "panic: " (and a nested panic's tab),
#: runtime.throw's "fatal error: ", a glog/absl/c10/TensorFlow record's head
_LEAD_IN = re.compile(r"^\s*(?:Caused by: |Suppressed: |Exception in thread \"[^\"]*\" |what\(\):\s+|panic: |"
                      r"fatal error: )")

#: lines a block may hold at most: a deep recursion prints thousands of frames, and a cause is in its
#: head or its tail, which a block keeps (frames in the middle are not asked)
MAX_BLOCK = 400


def _unquote(text: str) -> str:
    if not text or text[0] not in ">[(":
        return text
    cut = _PREFIX.match(text)
    return text[cut.end():] if cut is not None else text


def message_of(text: str) -> str:
    """The message a block's line carries, without a launcher's tag or the layout's lead-in
    (``Caused by: java.lang.OutOfMemoryError: ...`` -> ``java.lang.OutOfMemoryError: ...``): a reader of
    exception lines reads it as the exception line it is."""
    text = _unquote(text)
    glog = _GLOG.match(text)
    if glog is not None:
        text = text[glog.end():]
    return _LEAD_IN.sub("", text, count=1)


def _opens(text: str) -> bool:
    """Whether ``text`` (unquoted) opens a block."""
    if not text or text[0].isspace():
        return False
    if (_PY_HEADER.search(text) or _JAVA_THREAD.match(text) or _CXX_TERMINATE.match(text)
            or _GO_PANIC.match(text) or _RUST_PANIC.match(text) or _EXCEPTION.match(text)):
        return True
    glog = _GLOG.match(text)
    if glog is not None:
        return (glog.group(1) or glog.group(2)) in "EF"
    return _ERROR_RECORD.match(text) is not None and _QUIET_RECORD.match(text) is None


class _Reader:
    """Groups one stream's lines into blocks (a small state machine over the layouts above)."""

    def __init__(self) -> None:
        self.out: list[Block] = []
        self.cur: list[BlockLine] = []
        self.pending: list[int] = []  # blank lines seen inside the block, kept if it goes on
        self.depth = 0  # the chain level of the lines now read (see BlockLine.depth)
        self.last = Role.HEADER
        self.kind = ""  # the layout that opened the block
        self.after_header = False  # the line right after the opening header
        self.glog = False
        self.cann = False  # the block carries CANN's error message, whose lines start with its code
        self.ms = ""  # in MindSpore's report sections: "rule" (a rule read), "title", "words" or "frames"
        self.title_frames = False  # the section's title names frames (a call stack, the net's traceback)
        self.py4j = False  # the last line is Py4J's wrapper, whose Java throwable the next line carries

    def close(self) -> None:
        if self.cur:
            self.out.append(Block(tuple(self.cur[:MAX_BLOCK // 2] + self.cur[-MAX_BLOCK // 2:]
                                        if len(self.cur) > MAX_BLOCK else self.cur)))
        self.cur, self.pending = [], []

    def add(self, index: int, role: Role, depth: int | None = None) -> None:
        for blank in self.pending:
            self.cur.append(BlockLine(blank, Role.SEPARATOR, self.depth * 10))
        self.pending = []
        if depth is None:
            depth = self.depth * 10 + (0 if role is Role.HEADER else 1)
        self.cur.append(BlockLine(index, role, depth))
        self.last = role

    def open(self, index: int, text: str) -> None:
        self.close()
        self.depth = 0
        glog = _GLOG.match(text)
        self.glog = glog is not None
        self.cann = _CANN_CODE.search(text) is not None
        self.ms = ""
        if _PY_HEADER.search(text):
            self.kind = "python"
        elif _RUST_PANIC.match(text):
            # since Rust 1.73 the message is on the line after the location
            self.kind = "rust-location" if _RUST_LOCATION.search(text) else "rust"
        elif _GO_PANIC.match(text):
            self.kind = "go"
        elif _CXX_TERMINATE.match(text):
            self.kind = "c++"
        elif _EXCEPTION.match(text) or _JAVA_THREAD.match(text):
            self.kind = "exception"
        else:
            self.kind = "record"
        # a record's header (a logger's line, a traceback's first line, terminate's) states less than
        # what it carries; an exception line or a panic is itself the message
        # (a Rust panic's location line, since 1.73, is a header: its message is on the next line)
        role = Role.MESSAGE if self.kind in ("exception", "go", "rust") or self.glog else Role.HEADER
        self.cur = [BlockLine(index, role, 1 if role is Role.MESSAGE else 0)]
        self.last = role
        self.after_header = True
        self.py4j = _PY4J_CALL.search(text) is not None

    def feed(self, index: int, raw: str) -> None:
        text = _unquote(raw).rstrip("\r\n")
        if not self.cur:
            if _opens(text):
                self.open(index, text)
            return
        after_header, self.after_header = self.after_header, False
        if not text.strip():
            self.pending.append(index)
            if len(self.pending) > 2:
                self.close()
            return
        role = self._continues(text, after_header)
        if role is None:
            self.close()
            if _opens(text):
                self.open(index, text)
            return
        self.py4j = role is Role.MESSAGE and _PY4J_CALL.search(text) is not None
        # what a wrapper carries (a C++ exception's what(), an RPC's status, a MindSpore report's section) sits
        # under it in the chain
        deeper = role is Role.MESSAGE and (_CXX_WHAT.match(text) or _GRPC_DETAIL.match(text) or self.ms == "words")
        self.add(index, role, self.depth * 10 + 2 if deeper else None)

    def _continues(self, text: str, after_header: bool) -> Role | None:
        """The role of ``text`` as the next line of the open block, or None when it is not one."""
        if self.ms or (self.kind in ("exception", "python", "record") and self.last in (Role.MESSAGE, Role.HEADER)
                       and _MS_RULE.match(text)):
            return self._ms_section(text)
        if self.py4j and _PY4J_CAUSE.match(text):
            self.depth += 1  # the Java throwable Py4J's wrapper carries: its cause
            return Role.MESSAGE
        if _PY_CAUSE.match(text):
            # Python prints the root first: what follows a separator is further from the root
            self.depth -= 1
            return Role.SEPARATOR
        if _JAVA_CAUSED.match(text):
            self.depth += 1  # Java prints the root last
            return Role.MESSAGE
        if _JAVA_SUPPRESSED.match(text):
            return Role.ASIDE
        if _GO_NESTED.match(text):
            self.depth -= 1  # a panic raised while the first one unwound: the first is the root
            return Role.MESSAGE
        if (_PY_FRAME.match(text) or _PY_REPEATED.match(text) or _JAVA_FRAME.match(text) or _C10_FRAME.match(text)
                or _NATIVE.match(text) or _GO_GOROUTINE.match(text) or _GO_FILE.match(text)):
            return Role.FRAME
        if _CXX_WHAT.match(text) or _GRPC_DETAIL.match(text):
            return Role.MESSAGE
        if self.last is Role.FRAME and _GO_CALL.match(text):
            return Role.FRAME
        if self.kind.startswith("rust") and (_RUST_FRAME.match(text) or _RUST_NOTE.match(text)):
            return Role.FRAME if not _RUST_NOTE.match(text) else Role.ASIDE
        if text[0].isspace():
            # an indented line: a frame's source line under a frame, else the record's next line
            return Role.FRAME if self.last is Role.FRAME and self.kind == "python" else Role.MESSAGE
        if self.cann and _CANN_LINE.match(text):
            return Role.MESSAGE
        if self.glog:
            glog = _GLOG.match(text)
            return Role.MESSAGE if glog is not None and (glog.group(1) or glog.group(2)) in "EF" else None
        if _GO_SIGNAL.match(text):
            return Role.MESSAGE
        if after_header and self.kind == "rust-location":
            return Role.MESSAGE
        if self.last is Role.FRAME and self.kind == "python" and not _GLOG.match(text):
            # Python's exception line ends its traceback at column 0, whatever its words
            return Role.MESSAGE
        if after_header and self.kind in ("record", "c++") and (_EXCEPTION.match(text) or _PY_HEADER.search(text)):
            # a logger's record carries its throwable (log4j, logback) or traceback (logging.exception)
            # on the lines after its own
            if _PY_HEADER.search(text):
                self.kind = "python"
                return Role.HEADER
            return Role.MESSAGE
        if self.last is Role.SEPARATOR and (_PY_HEADER.search(text) or _EXCEPTION.match(text)):
            return Role.HEADER if _PY_HEADER.search(text) else Role.MESSAGE
        return None


    def _ms_section(self, text: str) -> Role | None:
        """The role of ``text`` in MindSpore's report sections (a rule, a title, a rule, the section's lines up to a
        blank line), or None when the lines are no such section."""
        if _MS_RULE.match(text):
            if self.ms == "title":
                self.ms = "frames" if self.title_frames else "words"
            else:
                self.ms = "rule"
            return Role.SEPARATOR
        if self.ms == "rule" and _MS_TITLE.match(text):
            self.ms, self.title_frames = "title", _MS_FRAMES.search(text) is not None
            return Role.SEPARATOR
        if self.ms in ("words", "frames") and not self.pending:
            # a section's lines run to a blank line; after it only the next section's rule goes on
            return Role.FRAME if self.ms == "frames" else Role.MESSAGE
        self.ms = ""
        return None


def blocks(lines: Sequence[str]) -> list[Block]:
    """The error blocks of one stream's ``lines`` (one process's, in order), in order."""
    reader = _Reader()
    for i, text in enumerate(lines):
        reader.feed(i, text)
    reader.close()
    return reader.out


class BlockFeed:
    """:func:`blocks` one line at a time, for a stream read once and not kept: :meth:`feed` says which
    open block the line joined (by the index of the block's first line). A blank line joins nothing yet
    (it is kept only if the block goes on)."""

    def __init__(self) -> None:
        self._reader = _Reader()

    @property
    def open_at(self) -> int | None:
        """The first line's index of the block open now (the last line fed may still continue it)."""
        cur = self._reader.cur
        return cur[0].index if cur else None

    def feed(self, index: int, text: str) -> int | None:
        """Feed line ``index`` (after every line before it): the first line's index of the block it is a
        line of, or None."""
        reader = self._reader
        reader.feed(index, text)
        reader.out.clear()  # closed blocks are not kept: the feed's memory is one block's
        cur = reader.cur
        return cur[0].index if cur and cur[-1].index == index else None


def _held(found: Sequence[Block], lines: Sequence[str], index: int) -> int | None:
    """The position in ``found`` of the block :func:`block_at` answers for line ``index``."""
    before: int | None = None
    for i, block in enumerate(found):
        if block.start > index:
            break
        if any(bl.index == index for bl in block.lines):
            return i
        before = i
    if before is None or found[before].end >= index:
        return None
    return before if all(not lines[i].strip() for i in range(found[before].end + 1, index)) else None


#: glog's header of the stack trace it prints for a fatal check (glog src/logging.cc: "*** Check failure stack trace:
#: ***"), on its own line
_GLOG_TRACE_HEADER = re.compile(r"^\s*\*\*\* Check failure stack trace: \*\*\*\s*$")


def _right_under(found: Sequence[Block], lines: Sequence[str], index: int) -> int | None:
    """The position in ``found`` of the first block that starts after line ``index`` with only blank lines
    between them; None when another line comes first."""
    for i, block in enumerate(found):
        if block.start > index:
            return i if all(not lines[j].strip() for j in range(index + 1, block.start)) else None
    return None


def block_at(lines: Sequence[str], index: int) -> Block | None:
    """The block that holds line ``index`` of ``lines``; or, for a line in no block that comes right after
    one (blank lines aside), that block: a line a process's end prints after its report (the shell's
    ``Aborted (core dumped)`` under a C++ exception's ``what():``, a launcher's exit line) reports the
    end of the process whose block it follows. None otherwise."""
    found = blocks(lines)
    at = _held(found, lines, index)
    return None if at is None else found[at]


def cause_from(lines: Sequence[str], index: int, explain: Callable[[str], Label | None]) -> Decision | None:
    """The cause of the failure whose line ``index`` of ``lines`` is: the decision (:func:`decide`) of its block
    (:func:`block_at`) when it states a cause other than ``other_crash``; else that of the next block when it
    follows at once (blank lines aside), and so on. A block that states nothing (a header with nothing under
    it, a wrapper's traceback whose exception no reader explains) and the block printed right under it are one
    report (a logger's record, then the C++ runtime's terminate report of the same failure); a line of other
    output between them means the process went on, and what it printed after is not this failure's. None when
    the line is in no block, or no block of its report states a cause."""
    found = blocks(lines)
    at = _held(found, lines, index)
    if at is None:
        # glog's stack-trace header, which a paste of interleaved threads puts above the check's own "F... Check
        # failed: ..." record, is one report with the block printed right under it (Paddle#1468, round
        # issue23-heldout-30 part A); any other line no block holds has no block's cause
        at = _right_under(found, lines, index) if _GLOG_TRACE_HEADER.match(lines[index]) else None
        if at is None:
            return None
    end = found[at].start - 1
    for block in found[at:]:
        if any(lines[i].strip() for i in range(end + 1, block.start)):
            return None
        decision = decide(block, lines, explain)
        if decision is not None and decision.label is not Label.OTHER_CRASH:
            return decision
        end = max(block.end, index)  # (the line right after a block is part of its report)
    return None


#: a cause stated beats a crash without one (a fatal signal, an abort), which beats nothing
_OTHER = 1
_CAUSE = 2


def _asserted(block: Block, bl: BlockLine, lines: Sequence[str]) -> str | None:
    """A bare ``AssertionError`` read with the statement that failed as its message (``AssertionError: assert
    math.isfinite(loss_value)``): the source line the traceback printed right above it, when it is an ``assert``;
    None for any other line. An assertion without a message says what failed only in its statement."""
    if bl.role is not Role.MESSAGE or not _BARE_ASSERTION.match(message_of(lines[bl.index]).strip()):
        return None
    at = block.lines.index(bl)
    if at == 0 or (above := block.lines[at - 1]).role is not Role.FRAME or above.index != bl.index - 1:
        return None
    statement = _ASSERT_STATEMENT.match(_unquote(lines[above.index]))
    return None if statement is None else f"AssertionError: {statement.group(1)}"


def decide(block: Block, lines: Sequence[str], explain: Callable[[str], Label | None]) -> Decision | None:
    """The line of ``block`` that decides the failure's cause, or None when no line explains one.

    ``explain(text)``: the cause one line states (a signature's, a structure reader's), or None; asked of
    the line, then of its message (:func:`message_of`) when the line states none.
    Frames, separators and asides are not asked. A line stating a cause other than
    ``other_crash`` beats one that states only a crash; among equals, the one nearest the root of
    the chain (:attr:`BlockLine.depth`), then the first.
    """
    best: tuple[int, int, int] | None = None
    chosen: Decision | None = None
    for bl in block.lines:
        if bl.role not in (Role.HEADER, Role.MESSAGE):
            continue
        read = lines[bl.index]
        label = explain(read)
        if label is None and (message := message_of(read)) != read and message.strip():
            read, label = message, explain(message)
        if label is None and (asserted := _asserted(block, bl, lines)) is not None:
            read, label = asserted, explain(asserted)
        if label is None or label is Label.HEALTHY:
            continue
        rank = (_OTHER if label is Label.OTHER_CRASH else _CAUSE, bl.depth, -bl.index)
        if best is None or rank > best:
            best, chosen = rank, Decision(bl.index, label, read)
    return chosen
