"""A signal while the nodes capture an incident (watchdog/recovery/machine.py): the stop goes out at once,
and the incident it interrupts is still recorded -- its verdict, its manifest and its ``incident``
event -- with the evidence the nodes give before they stop."""

from __future__ import annotations

import pytest

from neuron_watch.errors import ExitCode
from neuron_watch.events import EventKind, JobState, NodeStatus
from neuron_watch.recovery.machine import Capture, Finish, Progress, RecordIncident, StopJob
from tests.unit.test_recovery import CONFIG, HANG, Job, Node


def capturing() -> Job:
    job = Job()
    job.to_running()
    job.tick(HANG, at=1)
    assert job.rec.state is JobState.CAPTURING
    return job


def test_a_signal_during_a_capture_records_the_incident_with_the_evidence_that_follows() -> None:
    job = capturing()
    job.say("n0", NodeStatus.EVIDENCE_DONE)  # n0 answered before the signal, n1 after it
    assert job.rec.interrupt(2, 2.0, job.heard) == [StopJob("signal 2", 15)]
    assert job.tick(at=2.1) == []  # n1's evidence is still coming: nothing recorded, nothing ended
    job.say("n1", NodeStatus.EVIDENCE_DONE)
    out = job.tick(at=2.5)
    verdicts = [c for c in out if getattr(c, "kind", None) is EventKind.VERDICT]
    incidents = [c for c in out if getattr(c, "kind", None) is EventKind.INCIDENT]
    assert len(verdicts) == 1 and verdicts[0].fields["label"] == "collective_hang"
    assert len(incidents) == 1
    fields = incidents[0].fields
    assert fields["incident"] == 1 and fields["label"] == "collective_hang" and fields["interrupted_by"] == 2
    assert fields["nodes_without_evidence"] == [] and fields["culprit"] == {"node": "n0", "rank": 1}
    assert next(c for c in out if isinstance(c, RecordIncident)).reports.keys() == {"n0", "n1"}
    assert not any(isinstance(c, Finish) for c in out)  # the stop is not over yet
    job.everyone(NodeStatus.STOPPED)
    out = job.tick(at=3)
    assert out[-1] == Finish(130, "stopped by signal 2", JobState.INTERRUPTED)
    assert len(job.events(EventKind.INCIDENT)) == 1  # recorded once


def test_a_node_that_stops_without_evidence_is_named_and_the_incident_still_recorded() -> None:
    job = capturing()
    job.rec.interrupt(15, 2.0, job.heard)
    job.say("n0", NodeStatus.EVIDENCE_DONE)
    job.say("n1", NodeStatus.STOPPED)  # its capture failed or never ran: it has nothing more to give
    out = job.tick(at=2.5)
    incident = [c for c in out if getattr(c, "kind", None) is EventKind.INCIDENT]
    assert incident and incident[0].fields["nodes_without_evidence"] == ["n1"]
    job.say("n0", NodeStatus.STOPPED)
    assert job.tick(at=3)[-1] == Finish(143, "stopped by signal 15", JobState.INTERRUPTED)


def test_an_interrupted_capture_is_recorded_at_the_stops_bound_when_a_node_never_answers() -> None:
    job = capturing()
    job.rec.interrupt(2, 2.0, job.heard)
    assert job.tick(at=26.9) == []
    out = job.tick(at=27.0)
    kinds = [getattr(c, "kind", type(c).__name__) for c in out]
    assert EventKind.VERDICT in kinds and EventKind.INCIDENT in kinds
    assert kinds.index(EventKind.INCIDENT) < len(kinds) - 1 and isinstance(out[-1], Finish)
    incident = job.events(EventKind.INCIDENT)[0].fields
    assert incident["nodes_without_evidence"] == ["n0", "n1"]


def test_a_node_whose_launcher_ended_on_the_signal_still_gives_its_evidence_before_the_job_ends() -> None:
    """Ctrl-C reaches the launcher too (its group): it ends at once, while the node's capture (a slow
    dmesg) goes on. The ended launcher does not end the job before the evidence the node owes arrives:
    the incident is recorded with it, and the nodes' answers to the stop follow."""
    job = capturing()
    job.rec.interrupt(2, 2.0, job.heard)
    job.now = 2.1
    job.everyone(NodeStatus.FAILED, code=1)
    assert job.tick(at=2.1 + job.rec.settings.settle + 5) == []  # evidence still owed by both
    job.say("n0", NodeStatus.EVIDENCE_DONE)
    job.say("n1", NodeStatus.EVIDENCE_DONE)
    out = job.tick(at=12.0)
    (incident,) = [c for c in out if getattr(c, "kind", None) is EventKind.INCIDENT]
    assert incident.fields["nodes_without_evidence"] == []
    assert not any(isinstance(c, Finish) for c in out)  # their answers to the stop follow the evidence
    job.everyone(NodeStatus.STOPPED)
    assert job.tick(at=12.5)[-1] == Finish(130, "stopped by signal 2", JobState.INTERRUPTED)


def test_a_signal_outside_a_capture_records_no_incident() -> None:
    job = Job()
    job.to_running()
    job.rec.interrupt(2, 1.0, job.heard)
    job.everyone(NodeStatus.STOPPED)
    job.tick(at=2)
    assert job.events(EventKind.INCIDENT) == [] and job.events(EventKind.VERDICT) == []


# -- a job whose nodes never all joined ---------------------------------------------------------------


def test_a_launcher_that_failed_before_every_node_joined_ends_the_job_with_its_code() -> None:
    """torchrun's rendezvous timed out waiting for the other node (RendezvousTimeoutError, exit 1):
    the judge never runs with a node missing, so without this the wrapper waited on, silent."""
    job = Job(nodes=1)
    job.progress = Progress()  # no rank trained: the rendezvous never completed
    job.tick(enough=False)
    job.say("n0", NodeStatus.FAILED, code=1)
    assert len(job.tick(at=1.0, enough=False)) == 1  # said at once, then a wait for the others to join
    warning = job.events(EventKind.WARNING)[0].fields
    assert warning["kind"] == "nodes_missing" and warning["nodes"] == ["n0"]
    assert "exit 1" in warning["message"] and "waiting 60s" in warning["message"]
    assert job.tick(at=60.9, enough=False) == []
    out = job.tick(at=61.0, enough=False)
    assert isinstance(out[-1], Finish) and (out[-1].code, out[-1].state) == (1, JobState.FAILED)
    assert "before every node of the job joined" in out[-1].reason


def test_a_launcher_that_failed_after_its_ranks_trained_with_a_node_never_heard_is_unobserved() -> None:
    """The ranks trained (step 7), so torchrun's rendezvous had every node, but one node's wrapper never
    reached the coordinator (lost before its hello): its ranks ran unobserved, the failure cannot be
    judged -- exit 3 (unobserved) saying so, not the launcher's code with a rendezvous timeout blamed."""
    job = Job(nodes=1)
    job.say("n0", NodeStatus.FAILED, code=1)
    job.tick(at=1.0, enough=False)
    warning = job.events(EventKind.WARNING)[0].fields
    assert "after its ranks trained (step 7)" in warning["message"] and "exit 3" in warning["message"]
    out = job.tick(at=61.0, enough=False)
    assert isinstance(out[-1], Finish) and (out[-1].code, out[-1].state) == (ExitCode.UNOBSERVED, JobState.FAILED)
    assert "never reached the coordinator" in out[-1].reason and "before every node" not in out[-1].reason


def test_a_node_that_joins_within_the_grace_lets_the_judge_decide() -> None:
    job = Job(nodes=1)
    job.say("n0", NodeStatus.FAILED, code=1)
    job.tick(at=1.0, enough=False)
    job.nodes["n1"] = Node(status=NodeStatus.FAILED, status_heard=job.heard + 1, launcher_code=1)
    job.heard += 1
    # the other node joined: the judge names the failure (a configuration error), and recovery acts on it
    out = job.tick(CONFIG, at=30.0, enough=True)
    assert any(isinstance(c, Capture) for c in out) and job.rec.live


@pytest.mark.parametrize("status", [NodeStatus.LAUNCHED, NodeStatus.FINISHED])
def test_a_node_still_running_or_done_waits_for_the_others(status: NodeStatus) -> None:
    job = Job(nodes=1)
    job.say("n0", status)
    assert job.tick(at=100.0, enough=False) == [] and job.rec.live


def test_srun_steps_end_by_their_own_report_not_by_this_rule() -> None:
    job = Job(nodes=1, fresh_agents=True)
    job.say("n0", NodeStatus.FAILED, code=1)
    assert job.tick(at=100.0, enough=False) == []
