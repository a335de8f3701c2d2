"""The coordinator's commands carried out on a node: capture evidence, stop, launch, shut down,
and a refusal (another job on our port and secret, or another agent holding this node's place).

A node whose stop and capture run in the background (:class:`StopsInBackground`) keeps its loop
turning meanwhile; the commands received during them wait and are carried out after, in order.
Each step is reported through the link as the node's status.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from neuron_watch.errors import ConfigError
from neuron_watch.events import EvidenceReport, LauncherExit, NodeStatus, StopReport
from neuron_watch.wire.protocol import NO_VERDICT, CaptureEvidence, Launch, Msg, Refused, Shutdown, Stop


class JobRefused(ConfigError):
    """The coordinator refused us: it belongs to another job with the same secret, or another live
    agent of this job already holds this node's name or place (``reason`` says which, naming both)."""

    def __init__(self, coordinator_job: str, agent_job: str, address: str = "", reason: str = "") -> None:
        at = f" at {address}" if address else ""
        self.same_job = coordinator_job == agent_job
        if self.same_job:
            super().__init__(f"the coordinator{at} refused this node: {reason}",
                             "give every node of the job its own --node_rank (a static rendezvous) and its own "
                             "NEURON_WATCH_NODE, if set")
        else:
            super().__init__(
                f"the coordinator{at} runs job {coordinator_job!r}, this node belongs to job {agent_job!r}: refused "
                "(two jobs share a coordinator port and a secret)",
                "give each job its own --job-id and coordinator port (--coordinator HOST:PORT), or its own secret",
            )
        self.coordinator_job = coordinator_job
        self.agent_job = agent_job
        self.reason = reason


class NodeControl(Protocol):
    """What :meth:`CommandRunner.dispatch` needs of a node's wrapper (the supervisor)."""

    def capture(self, incident: str, reason: str, verdict: Mapping[str, Any] = NO_VERDICT) -> EvidenceReport:
        """Capture this node's evidence for ``incident`` before anything is stopped; returns its report.
        ``verdict``: the pending verdict (empty when the coordinator sent none)."""

    def stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> StopReport:
        """Stop every process of the job on this node (SIGTERM, ``deadline``, SIGKILL, reap); its report.
        ``verdict``: the incident's final verdict, to complete this node's bundle with."""

    def checkpoint(self) -> str:
        """The newest complete checkpoint this node sees ('' if none)."""

    def launch(self, generation: int, checkpoint: str) -> None:
        """Start this node's processes as ``generation`` from ``checkpoint`` ('' = from scratch)."""


class StopsInBackground(Protocol):
    """A :class:`NodeControl` whose stop runs without blocking the loop (see :meth:`CommandRunner.dispatch`)."""

    def begin_stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> Callable[[], StopReport | None]:
        """Start stopping; returns a poll that gives the stop's report once it is done (None until then)."""

    def begin_capture(self, incident: str, reason: str,
                      verdict: Mapping[str, Any] = NO_VERDICT) -> Callable[[], EvidenceReport | None]:
        """Start capturing; returns a poll that gives the evidence report once it is done (None until then)."""


def _stop_words(report: StopReport) -> str:
    """A stop's report in a few words (the ``stopped`` status's detail, for people)."""
    if report.error:
        return f"stop failed: {report.error}"
    return f"{report.rung or 'stopped'}, {report.seconds or 0.0:.1f}s" + (
        f", {len(report.survivors)} survivor(s)" if report.survivors else "")


class LinkReports(Protocol):
    """What :class:`CommandRunner` needs of the link: who it is (to name a refusal), its status
    reports, and the generation its messages belong to."""

    @property
    def job(self) -> str: ...

    @property
    def address(self) -> str: ...

    def status(self, state: NodeStatus, now: float, wall: float, detail: str = "", checkpoint: str = "",
               report: EvidenceReport | StopReport | LauncherExit | None = None) -> None: ...

    def set_generation(self, generation: int) -> None: ...


class CommandRunner:
    """The commands of one link, with the stop or capture running in the background and the commands
    that wait for it."""

    def __init__(self) -> None:
        #: a stop running in the background: its poll; commands received meanwhile wait in _deferred
        self._stopping: Callable[[], StopReport | None] | None = None
        #: a capture running in the background: its poll (commands received meanwhile wait in _deferred)
        self._capturing: Callable[[], EvidenceReport | None] | None = None
        self._deferred: list[Msg] = []

    def dispatch(self, link: LinkReports, commands: Iterable[Msg], node: NodeControl, now: float,
                 wall: float) -> int | None:
        """Carry out commands on this node through ``node`` and report each step's status on ``link``.

        capture_evidence -> ``node.capture(incident, reason)``, then status ``evidence_done``;
        stop -> ``node.stop(deadline)`` (SIGTERM, deadline, SIGKILL, reap), then ``stopped`` with
        the newest complete checkpoint this node sees; launch -> ``node.launch(generation,
        checkpoint)``, then ``launched``; shutdown -> returns its exit code (the caller stops and
        exits with it). Returns None while the job goes on.

        A ``node`` with ``begin_stop`` (:class:`StopsInBackground`) stops without blocking: the
        stop (its SIGTERM deadline, its uploads) runs while the caller's loop keeps turning
        (heartbeats, status, console), ``stopped`` is reported once it is done, and the commands
        received meanwhile are carried out after it, in order. Call this every loop turn (with no
        commands too) while :attr:`stop_running`. A ``node`` with ``begin_capture`` captures the same
        way (reading rank logs, waiting on py-spy: seconds the loop must not lose), ``evidence_done``
        once it is done; call this every turn while :attr:`capture_running` too.
        """
        if self._capturing is not None:
            self._deferred.extend(commands)
            evidence = self._capturing()
            if evidence is None:
                return None
            self._capturing = None
            link.status(NodeStatus.EVIDENCE_DONE, now, wall, detail=evidence.bundle or evidence.error, report=evidence)
        if self._stopping is not None:
            self._deferred.extend(commands)
            stopped = self._stopping()
            if stopped is None:
                return None
            self._stopping = None
            link.status(NodeStatus.STOPPED, now, wall, detail=_stop_words(stopped), checkpoint=node.checkpoint(),
                        report=stopped)
        if self._deferred:
            commands, self._deferred = [*self._deferred, *commands], []
        commands = list(commands)
        for i, msg in enumerate(commands):
            body = msg.body
            if isinstance(body, CaptureEvidence):
                begin_capture = getattr(node, "begin_capture", None)
                if callable(begin_capture):
                    self._capturing = begin_capture(body.incident, body.reason, body.verdict)
                    self._deferred = commands[i + 1:]
                    return None
                evidence = node.capture(body.incident, body.reason, body.verdict)
                link.status(NodeStatus.EVIDENCE_DONE, now, wall, detail=evidence.bundle or evidence.error,
                            report=evidence)
            elif isinstance(body, Stop):
                begin = getattr(node, "begin_stop", None)
                if callable(begin):
                    self._stopping = begin(body.deadline, body.verdict)
                    self._deferred = commands[i + 1:]
                    return None
                stopped = node.stop(body.deadline, body.verdict)
                link.status(NodeStatus.STOPPED, now, wall, detail=_stop_words(stopped), checkpoint=node.checkpoint(),
                            report=stopped)
            elif isinstance(body, Launch):
                link.set_generation(body.generation)
                node.launch(body.generation, body.checkpoint)
                link.status(NodeStatus.LAUNCHED, now, wall, checkpoint=body.checkpoint)
            elif isinstance(body, Shutdown):
                link.status(NodeStatus.EXITED, now, wall, detail=body.reason)
                return body.exit_code
            elif isinstance(body, Refused):
                raise JobRefused(body.job, link.job, link.address, body.reason)
        return None

    @property
    def stop_running(self) -> bool:
        """A stop runs in the background (see :meth:`dispatch`)."""
        return self._stopping is not None

    @property
    def capture_running(self) -> bool:
        """A capture runs in the background (see :meth:`dispatch`)."""
        return self._capturing is not None
