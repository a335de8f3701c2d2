"""Failure forms of common libraries' own record heads and abort reports, spelled as each library prints them.

Pure: no I/O. :mod:`~neuron_watch.diagnosis.forms_severity` reads the level fields most programs share (glog,
Python logging, logfmt and JSON ``level`` keys); the programs around a training job (the container runtime,
its notebook server, a web front, a Go or Java sidecar) print theirs in conventions of their own, and the C
library ends a process whose heap is corrupt with a sentence and no level at all. Read from each library's
source, not from one log that used it (:func:`convention_form`):

* logrus's terminal format (github.com/sirupsen/logrus text_formatter.go: the level upper-cased and cut to four
  letters, then the seconds since start or the time in brackets: ``ERRO[0000] error waiting for container``,
  ``FATA[0000] ...``; with PadLevelText the whole word), as Docker, containerd, k3s and Argo CD print it;
  log15's ``CRIT[01-02|15:04:05]`` (its ``EROR[`` is :mod:`~neuron_watch.diagnosis.heldout.round30a`'s);
* Tornado's and Jupyter's head (tornado/log.py LogFormatter ``[%(levelname)1.1s %(asctime)s %(module)s:%(lineno)d]``;
  traitlets/jupyter_server ``[%(levelname)1.1s %(asctime)s.%(msecs).03d %(name)s]``): ``[E 2023-05-11
  00:59:57.452 ServerApp] Uncaught exception ...``, ``[C ...]`` critical;
* a level in small letters in brackets, padded or not: nginx's (src/core/ngx_log.c err_levels: ``emerg``,
  ``alert``, ``crit``, ``error``), structlog's ConsoleRenderer (``[error    ]``, the level padded to the longest
  name), spdlog's and Elixir's;
* the Elastic Common Schema's dotted key (``"log.level":"ERROR"``, ecs-logging's JSON for Java, Go, Python);
* ``SEVERE``, java.util.logging's highest level (SimpleFormatter's second line ``SEVERE: ...``; Tomcat's
  OneLineFormatter ``01-May-2024 12:00:00.123 SEVERE [main] ...``);
* the Docker client's report of the daemon's refusal (docker/cli cmd/docker/docker.go prints a command's error as
  ``docker: <err>``; the API client's error for a refused request is ``Error response from daemon: <message>``):
  a container that did not start or an image that is not there, which a restart asks for again, unless the
  message says the daemon or the registry did not answer in time;
* glibc's abort of a corrupt heap or a smashed stack (malloc/malloc.c malloc_printerr: ``free(): invalid
  pointer``, ``double free or corruption (!prev)``, ``corrupted size vs. prev_size``, ``malloc(): unaligned tcache
  chunk detected``; before glibc 2.26 ``*** Error in `python': double free or corruption (!prev): 0x... ***``;
  debug/fortify_fail.c ``*** stack smashing detected ***: terminated``): the process aborts right after it,
  whether or not the paste kept the shell's ``Aborted (core dumped)``.

An error record whose words say it will be tried again is no failure (as :func:`forms_severity.severity_form`
reads one).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.diagnosis.forms_severity import retried
from neuron_watch.events import Label

#: Digit-free literals of which every line holding one of these forms holds one (failureforms.NEEDLES).
NEEDLES: tuple[str, ...] = (
    # (the classifier searches a line without its digits: "FATA[0000]" is searched as "FATA[]", a time as "::")
    "ERRO[", "FATA[]", "FATA[--", "PANI[", "CRIT[-|", "[C ::", "[C  ::", "[C --",
    "[error", "[err]", "[crit", "[alert", "[emerg", "[fatal", "[panic",
    "log.level", "log_level", "@level", "SEVERE", "free(): ", "alloc(): ", "munmap_chunk(): ",
    "malloc_consolidate(): ", "double free or corruption", "prev_size", "corrupted double-linked list",
    "smashing detected", "overflow detected", "Error response from daemon",
)

#: where a record's head ends: the level fields below are looked for in the line's first characters only
_HEAD = 90
#: logrus's terminal head: the level (cut to four letters unless padded), then in brackets the seconds since the
#: logger started ("%04d") or the full time; log15's terminal head "CRIT[01-02|15:04:05]"
_LOGRUS = re.compile(r"(?:^|\s)(PANI|FATA|ERRO|PANIC|FATAL|ERROR)\s*\[(?:\d{4,}|\d[\d\-/T:.,Z+ ]{7,38})\]|"
                     r"(?:^|\s)(CRIT)\[\d\d-\d\d\|\d\d:\d\d:\d\d(?:\.\d+)?\]")
#: Tornado's and Jupyter's head: the level's letter, the time, the logger, in brackets
_TORNADO = re.compile(r"^\s*\[([EC]) (?:\d{6} |\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:\.\d+)? [\w.:-]+\] ")
#: a level in small letters in brackets (padded by structlog), where a head puts it: the line's start, or after a
#: time, a tag or a program's "name: "
_SMALL_LEVEL = re.compile(r"(?:^|[\s\]:])\[(error|err|crit|critical|alert|emerg|fatal|panic) *\]")
#: the Elastic Common Schema's level key (and its underscore and @ spellings) at an error level
_ECS_LEVEL = re.compile(r"""["'](?:log\.level|log_level|@level)["']\s*:\s*["']"""
                        r"(?i:(error|err|fatal|critical|crit|panic|emerg|alert))[\"']")
#: java.util.logging's highest level as a record's field
_SEVERE = re.compile(r"(?:^|[\s\[|])(SEVERE)(?=[\]|:]|\s)")
#: glibc's reports of a corrupt heap (malloc_printerr's messages, by the function that found it or by the
#: corruption), with the old "*** Error in `<program>': " head, and of a smashed stack or buffer (__fortify_fail)
_GLIBC_ABORT = re.compile(
    r"(?:^|[\s\]:>]|\*\*\* Error in `[^`]*': )"
    r"(?:(?:free|malloc|realloc|calloc|munmap_chunk|malloc_consolidate|_int_free|_int_malloc|_int_realloc|"
    r"tcache_thread_shutdown|memalign|aligned_alloc|posix_memalign)\(\): (?:invalid|double free|corrupted|"
    r"memory corruption|unaligned|unsorted double linked list|mismatching)|"
    r"double free or corruption \((?:top|out|!prev|fasttop|normal)\)|"
    r"corrupted size vs\. prev_size|corrupted double-linked list)|"
    r"\*\*\* (?:stack smashing|buffer overflow) detected \*\*\*")

#: the Docker client's error for a request the daemon refused, and the words of one that only timed out
_DAEMON_REFUSED = re.compile(r"(?:^|[\s:])Error response from daemon: ")
_TIMED_OUT = re.compile(r"(?i:\btime(?:d)? ?out\b|\bdeadline exceeded\b|\bconnection reset\b|\btoomanyrequests\b|"
                        r"\btemporarily unavailable\b|\b50[234] )")

_FATAL_LEVELS = frozenset({"FATA", "FATAL", "PANI", "PANIC", "fatal", "panic"})


def convention_form(text: str) -> Form | None:
    """The form of a record whose head, in one of the conventions above, gives it an error or fatal level, or of
    glibc's abort report; None for any other line."""
    if _GLIBC_ABORT.search(text):
        return Form(FormKind.CRASH, "glibc's abort of a corrupt heap or stack")
    for pattern, convention in ((_LOGRUS, "logrus"), (_TORNADO, "Tornado/Jupyter"),
                                (_SMALL_LEVEL, "bracketed"), (_SEVERE, "java.util.logging")):
        m = pattern.search(text, 0, _HEAD)
        if m is not None:
            return _record(text, next(level for level in m.groups() if level), convention)
    refused = _DAEMON_REFUSED.search(text)
    if refused is not None:
        transient = _TIMED_OUT.search(text, refused.end())
        return Form(FormKind.ERROR, "the Docker daemon's refusal", None if transient else Label.CONFIG_ERROR)
    m = _ECS_LEVEL.search(text)
    if m is not None:
        return _record(text, m.group(1).lower(), "ECS")
    return None


def _record(text: str, level: str, convention: str) -> Form | None:
    if level in _FATAL_LEVELS:
        return Form(FormKind.CRASH, f"a {convention} record of level {level}")
    if retried(text):
        return None
    return Form(FormKind.ERROR, f"a {convention} record of level {level}")
