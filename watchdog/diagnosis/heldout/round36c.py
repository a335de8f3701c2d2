"""Failure forms read for the misses of round issue23-heldout-36 (part C: launchers and job wrappers): OpenSSH's report
of a host name it could not resolve, GNU tar's stop on an error it cannot recover from, the C library's report of
an assertion that failed in a program's set-up code, and Lightning's records of the ranks joining a process group
that ends before every rank joined.

Pure: no I/O. :func:`round36c_form` is asked after the forms of round 35, :func:`round36c_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error;
:class:`RankRegistrations` is fed every line of an offline log (offline_reading) and read when the log otherwise
reads healthy.

Each form is read where its program prints it:

* OpenSSH's client resolves the host it is asked for before it connects, and when getaddrinfo fails it logs
  ``"%s: Could not resolve hostname %.100s: %s"`` with its program name and gai_strerror's text (ssh.c
  ``resolve_host``): ``ssh: Could not resolve hostname worker-1: Name or service not known``. The launchers that
  start ranks over ssh (mpirun's rsh agent, horovodrun's ssh check, pdsh, the deepspeed runner) print it as they
  start: a hostfile naming a host the cluster's DNS does not know (pods not resolvable by those names, a typo, a
  ``host:slots`` pair taken as a name). The job never starts where it was sent: configuration, a restart asks the
  same names again (round issue23-heldout-36: horovodrun in a Kubeflow mpi-operator launcher, whose workers are
  reached by kubectl exec and have no DNS names, read as healthy; torchpack#24's ``localhost:3`` and volcano#2745's
  worker pods print the same under ORTE's failed daemon start). Its ``connect to host ... port N: ...`` report is
  another form, read elsewhere.
* GNU tar ends with ``FATAL_ERROR ((0, 0, _("Error is not recoverable: exiting now")))`` after an error that stops
  the whole archive (an archive it cannot open or read, a decompressor it cannot exec, an unexpected end of file):
  ``tar: Error is not recoverable: exiting now``, or ``tar (child): ...`` from the child that runs the
  decompressor. A job's wrapper that unpacks its code package or data with tar has failed before the program ran
  (round issue23-heldout-36: a Metaflow @batch task whose code package was never downloaded, ``tar: job.tar: Cannot
  open: No such file or directory`` then this line, read as healthy; gcc's download_prerequisites and countless
  forum posts print the same). A crash whose cause tar's words do not state (a missing file, a network that failed
  to fetch it, a full disk): the preceding line tells, not this one.
* The C library's ``assert`` aborts with ``"%s%s%s:%u: %s%sAssertion `%s' failed."`` (glibc assert/assert.c
  ``__assert_fail``): ``<prog>: <file>:<line>: <function>: Assertion `<expr>' failed.``, the function as the
  compiler names it (C++'s pretty name, with its return type and parameters). The catch-all rule of the signature
  table reads it as an error of unknown cause. When the function is a set-up function by its name (``init``,
  ``setup``, ``load``, ``parse``, ``config``, ``create``, ``open``, ``probe`` as one of its words: llm.c's
  ``dataloader_init``, the Neuron runtime's ``tpb_eng_init``), the program refused the state it was given as it set
  itself up (a data shard smaller than its processes need, a runtime image on another instance type): a restart meets
  the same assertion, as a Python program-mistake exception before any progress is configuration
  (:mod:`~neuron_watch.diagnosis.firstfailure`) (round issue23-heldout-36: llm.c under mpirun on 8 GPUs, every rank
  aborting in ``dataloader_init``, read as a crash to restart). An assertion in any other function keeps the
  catch-all's reading; CUDA's device-side assertions (``<file>.cu:<line>: <kernel>: block: [...] ... Assertion
  `<expr>` failed.``, closed by a backquote) are data reaching a kernel, not set-up, and are not read here.
* Lightning logs each process's entry into the process group as it connects it (lightning/fabric/utilities/
  distributed.py ``_init_dist_connection``: ``"Initializing distributed: GLOBAL_RANK: {global_rank}, MEMBER:
  {global_rank + 1}/{world_size}"``; before 1.6, pytorch_lightning's ddp plugins ``"initializing ddp: GLOBAL_RANK:
  {}, MEMBER: {}/{}"``), and rank 0 says when the group is whole (``"All distributed processes registered. Starting
  with {world_size} processes"``, before 1.6 ``"All DDP processes registered. Starting ddp with {} processes"``). The
  connection waits until every rank of the world has joined (torch.distributed's store rendezvous, 30 minutes by
  default). A log that ends on these records, with several members seen but fewer than the world size, and no
  progress after them, is a group waiting for ranks that were never started: the launch started fewer processes
  than the world it declared (on SLURM, an sbatch script without srun, ``--ntasks-per-node`` unlike the Trainer's
  devices, a node list reordered against the ranks) (round issue23-heldout-36: Lightning#8707, four members of 8 and
  nothing after them, fixed with srun; Lightning#17228, Fabric with a reordered node list; Lightning#4389 prints the
  same with duplicated ranks). Configuration: a restart starts the same processes. A single member seen is read as
  nothing (one rank's own log says nothing of the others), nor a group rank 0 called whole.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Action, Evidence, Label, LogLine, Verdict

#: The literals (digit-free) the lines :func:`round36c_form` reads hold, besides the needles failureforms already
#: searches: OpenSSH's failed name resolution, GNU tar's fatal stop, glibc's assertion report
NEEDLES: tuple[str, ...] = ("Could not resolve hostname", "Error is not recoverable", "Assertion `")

#: OpenSSH's client (or a program run as ssh, "ssh:" after a launcher's prefix) that could not resolve a host name,
#: with gai_strerror's text after it
_SSH_UNRESOLVED = re.compile(r"(?:^|[\s:>|])ssh: Could not resolve hostname \S+: \S")

#: GNU tar's fatal stop, from tar or from the child that runs its decompressor
_TAR_FATAL = re.compile(r"(?:^|[\s:>|])tar(?: \(child\))?: Error is not recoverable: exiting now\b")

#: glibc's assertion report: "<prog>: <file>:<line>: <function>: Assertion `<expr>' failed." (the expression closed by
#: a straight quote; CUDA's device-side report closes it with a backquote)
_GLIBC_ASSERT = re.compile(r"\S+:\d+: (?P<function>.+?): Assertion `.*' failed\.?\s*$")

#: the words of a set-up function's name (one of the words of a C or C++ name, split at underscores and at a
#: lower-case letter followed by a capital)
_SETUP_WORDS = frozenset({"init", "initialize", "initialise", "setup", "load", "loader", "parse", "config",
                          "configure", "create", "open", "probe"})


def _function_words(function: str) -> list[str]:
    """The words of the name of ``function`` as glibc prints it (C's bare name, or C++'s pretty name with its return
    type and parameters: ``void dataloader_init(DataLoader*, ...)``, ``int ns::Loader::open(...)``)."""
    head = function.split("(", 1)[0].split()
    name = head[-1].rsplit("::", 1)[-1] if head else ""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [word.lower() for word in spaced.split("_") if word]


def round36c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "Could not resolve hostname" in text and _SSH_UNRESOLVED.search(text):
        return Form(FormKind.ERROR, "OpenSSH could not resolve a host's name (a hostfile naming a host the cluster's "
                    "DNS does not know)", Label.CONFIG_ERROR)
    if "Error is not recoverable" in text and _TAR_FATAL.search(text):
        return Form(FormKind.CRASH, "GNU tar stopping on an error it cannot recover from (an archive not opened or "
                    "not read)")
    if "Assertion `" in text and (report := _GLIBC_ASSERT.search(text)) is not None:
        words = _function_words(report.group("function"))
        if _SETUP_WORDS.intersection(words):
            return Form(FormKind.CRASH, "a C assertion that failed in set-up code (the program refused the state it "
                        "was set up with)", Label.CONFIG_ERROR)
    return None


def round36c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round36c_form(text))


#: Lightning's record of one rank joining the process group: the member's number and the world size
_REGISTERED = re.compile(r"\b(?:initializing ddp|Initializing distributed): GLOBAL_RANK: \d+, MEMBER: (\d+)/(\d+)\b")
#: rank 0's record that every rank joined (the 2.x and the 1.x words)
_ALL_REGISTERED = re.compile(r"\bAll (?:distributed|DDP) processes registered\b")
#: lines after the last record of a rank joining that still leave the log ending on the group's set-up (the
#: rank's own device line, a backend's name printed with it)
_TRAILING_LINES = 3
#: the evidence's signature: the records are a form, not a rule of the table
REGISTRATION_SIGNATURE = "form.ranks_never_joined"


class RankRegistrations:
    """Lightning's records of the ranks joining a process group, over a whole log (its lines in order)."""

    def __init__(self) -> None:
        self.members: set[int] = set()
        self.world = 0
        self.last: LogLine | None = None
        self.whole = False  # rank 0 said every rank joined
        self.after = 0  # non-blank lines after the last record of a rank joining

    def observe(self, line: LogLine) -> None:
        """Read one line of the log."""
        text = line.text
        if "GLOBAL_RANK" in text and (joined := _REGISTERED.search(text)) is not None:
            self.members.add(int(joined.group(1)))
            self.world = max(self.world, int(joined.group(2)))
            self.last, self.after = line, 0
        elif self.last is not None and text.strip():
            self.after += 1
            if "processes registered" in text and _ALL_REGISTERED.search(text):
                self.whole = True

    def verdict(self, latest_progress: float | None, advice: str) -> Verdict | None:
        """Configuration (with ``advice``: errorclass's, which imports this package), when the log ends on the group's
        records with several members but fewer than the world size and no progress after the last of them; None
        otherwise."""
        last = self.last
        if (last is None or self.whole or len(self.members) < 2 or len(self.members) >= self.world
                or self.after > _TRAILING_LINES or (latest_progress is not None and latest_progress >= last.mono)):
            return None
        return Verdict(
            Label.CONFIG_ERROR, Action.STOP, ranks=(last.key,), culprit=last.key,
            evidence=(Evidence(last.key, last.text, REGISTRATION_SIGNATURE, last.source, last.lineno, last.mono),),
            reason=f"the log ends while its process group waits for its ranks: {len(self.members)} of {self.world} "
                   "members joined and none made progress: the launch started fewer processes than the world it "
                   "declared",
            advice=advice, culprit_source="failure")
