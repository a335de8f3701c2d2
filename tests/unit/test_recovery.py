"""The recovery machine (watchdog/recovery/machine.py), driven with a fake clock and fake nodes: every path
from a verdict to the next generation or the end, with no socket, process or real time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from neuron_watch.events import (
    Action,
    EventKind,
    Evidence,
    EvidenceReport,
    JobState,
    Label,
    NodeStatus,
    RankKey,
    StopReport,
    Verdict,
)
from neuron_watch.recovery.machine import (
    Capture,
    ChooseCheckpoint,
    Command,
    Drain,
    Emit,
    Facts,
    Finish,
    Progress,
    RecordIncident,
    Recovery,
    RecoverySettings,
    Relaunch,
    Relaunched,
    RelaunchEnded,
    StopJob,
)
from neuron_watch.recovery.policy import IllegalTransition, RestartPolicy

HEALTHY = Verdict(Label.HEALTHY, Action.WAIT)
HANG = Verdict(Label.COLLECTIVE_HANG, Action.RESTART, culprit=RankKey("n0", 1), culprit_source="progress",
               reason="no rank progressed for 60s", step=7)
CRASH = Verdict(Label.OTHER_CRASH, Action.RESTART, culprit=RankKey("n1", 2), culprit_source="failure",
                reason="rank 2 exited with -11", step=7,
                evidence=(Evidence(RankKey("n1", 2), "Segmentation fault", "host.segfault"),))
CONFIG = Verdict(Label.CONFIG_ERROR, Action.STOP, culprit=RankKey("n0", 0), reason="No module named 'x'")
HW = Verdict(Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART, culprit=RankKey("n1", 3), reason="NEURON_HW_ERR", step=3)
SETTINGS = RecoverySettings(evidence_timeout=60, stop_timeout=15, upload_timeout=0, settle=3, finishing_grace=45,
                            lost_node_wait=600, launcher_gone_grace=5)


@dataclass
class Node:
    status: NodeStatus = NodeStatus.NONE
    status_since: float = 0.0
    status_heard: int = 0
    observed: bool = True
    launcher_code: int | None = None
    evidence: EvidenceReport | None = None
    evidence_heard: int | None = None
    stop_report: StopReport | None = None


class Job:
    """A fake clock, fake nodes and the machine; every command the machine gave, in order."""

    def __init__(self, nodes: int = 2, policy: RestartPolicy | None = None, fresh_agents: bool = False,
                 settings: RecoverySettings = SETTINGS) -> None:
        self.now = 0.0
        self.heard = 0
        self.nodes = {f"n{i}": Node() for i in range(nodes)}
        self.rec = Recovery(settings, policy or RestartPolicy(max_restarts=3), fresh_agents_per_generation=fresh_agents)
        self.log: list[Command] = []
        self.progress = Progress(last_step=7, progressed_for=30.0)
        self.gone: int | None = None

    def say(self, node: str, status: NodeStatus, **fields: Any) -> None:
        """A node's status message arrives."""
        self.heard += 1
        n = self.nodes[node]
        n.status, n.status_since, n.status_heard = status, self.now, self.heard
        # the reports as they come off the wire
        if status is NodeStatus.EVIDENCE_DONE:
            report = fields.get("report", {"bundle": f"/run/incidents/incident-1/{node}"})
            n.evidence, n.evidence_heard = EvidenceReport.from_wire(report), self.heard
        if status is NodeStatus.STOPPED:
            n.stop_report = StopReport.from_wire(fields.get("report", {"rung": "sigterm", "seconds": 0.4}))
        if status in (NodeStatus.FINISHED, NodeStatus.FAILED):
            n.launcher_code = fields.get("code", 0 if status is NodeStatus.FINISHED else 1)

    def everyone(self, status: NodeStatus, **fields: Any) -> None:
        for name in self.nodes:
            self.say(name, status, **fields)

    def tick(self, verdict: Verdict | None = None, at: float | None = None, enough: bool = True) -> list[Command]:
        if at is not None:
            self.now = at
        out = self._answer(self.rec.tick(self.now, Facts(self.nodes, self.heard, verdict, enough, self.progress,
                                                         self.gone)))
        self.log += out
        return out

    def _answer(self, out: list[Command]) -> list[Command]:
        """Carry out what needs an answer the way the coordinator does (checkpoint, relaunch)."""
        done: list[Command] = []
        for cmd in out:
            done.append(cmd)
            if isinstance(cmd, ChooseCheckpoint):
                done += self._answer(self.rec.checkpoint_chosen(self.pick(cmd.avoid), self.now, self.heard))
            elif isinstance(cmd, Relaunch):
                done += self._answer(self.rec.relaunched(self.relaunch_outcome, self.now))
        return done

    relaunch_outcome: Relaunched | RelaunchEnded = Relaunched()

    def pick(self, avoid: frozenset[str]) -> str:
        return next(c for c in ("/ckpt/step_6", "/ckpt/step_3", "") if c not in avoid)

    def events(self, kind: EventKind | None = None) -> list[Emit]:
        return [c for c in self.log if isinstance(c, Emit) and (kind is None or c.kind is kind)]

    def phases(self) -> list[str]:
        return [e.fields["phase"] for e in self.events(EventKind.RECOVERY_PHASE)]

    def to_running(self) -> None:
        self.tick(HEALTHY)
        assert self.rec.state is JobState.RUNNING

    def fail_and_capture(self, verdict: Verdict = HANG) -> None:
        """From RUNNING: the verdict, every node's evidence, every node stopped."""
        self.tick(verdict)
        if verdict.label is not Label.COLLECTIVE_HANG:  # the root cause's moment to arrive
            self.tick(verdict, at=self.now + self.rec.settings.settle)
        assert self.rec.state is JobState.CAPTURING
        self.everyone(NodeStatus.EVIDENCE_DONE)
        self.tick()
        assert self.rec.state is JobState.STOPPING


def kinds(commands: list[Command]) -> list[str]:
    return [c.kind.value if isinstance(c, Emit) else type(c).__name__ for c in commands]


# -- starting and running -------------------------------------------------------------------------


def test_the_job_runs_once_every_expected_node_joined() -> None:
    job = Job()
    assert job.tick(HEALTHY, enough=False) == [] and job.rec.state is JobState.STARTING
    job.tick(HEALTHY)
    assert job.rec.state is JobState.RUNNING and job.phases() == ["running"]


def test_a_first_healthy_verdict_is_not_an_event_a_change_of_label_is() -> None:
    job = Job()
    job.to_running()
    assert job.events(EventKind.VERDICT) == []
    job.tick(Verdict(Label.COMPILING, Action.WAIT, reason="rank 1 compiles"), at=5)
    job.tick(Verdict(Label.COMPILING, Action.WAIT, reason="rank 1 compiles"), at=6)
    job.tick(HEALTHY, at=7)
    assert [e.fields["label"] for e in job.events(EventKind.VERDICT)] == ["compiling", "healthy"]
    assert job.events(EventKind.VERDICT)[0].fields["last_step"] == 7  # progress travels with a verdict


def test_a_long_save_is_said_when_it_begins_and_when_it_ends() -> None:
    job = Job()
    job.to_running()
    saving = Verdict(Label.HEALTHY, Action.WAIT, culprit=RankKey("n0", 0), reason="synced save began")
    job.tick(saving, at=5)
    job.tick(saving, at=6)
    job.tick(HEALTHY, at=7)
    said = [(e.fields["label"], e.fields["culprit"]) for e in job.events(EventKind.VERDICT)]
    assert said == [("healthy", {"node": "n0", "rank": 0}), ("healthy", None)]


def test_every_node_finished_ends_the_job_with_0() -> None:
    job = Job()
    job.to_running()
    job.say("n0", NodeStatus.FINISHED)
    assert job.tick(HEALTHY, at=1) == [] and job.rec.live  # one node of two
    job.say("n1", NodeStatus.FINISHED)
    out = job.tick(HEALTHY, at=2)
    assert kinds(out) == ["recovery_phase", "Finish"]
    assert out[-1] == Finish(0, "every node finished", JobState.FINISHED) and job.rec.exit_code == 0
    assert job.tick(HANG, at=3) == []  # over: nothing more


def test_a_job_that_finishes_before_it_was_seen_running_passes_through_running() -> None:
    job = Job()
    job.everyone(NodeStatus.FINISHED)
    job.tick(None)
    assert job.phases() == ["running", "finished"]


def test_a_failure_seen_as_the_job_ended_by_itself_is_reported_and_the_end_stands() -> None:
    job = Job()
    job.to_running()
    job.everyone(NodeStatus.FINISHED)
    out = job.tick(CRASH, at=1)
    assert kinds(out) == ["verdict", "recovery_phase", "Finish"] and job.rec.exit_code == 0


# -- from a failure to the next generation -----------------------------------------------------------


def test_a_hang_is_captured_at_once_then_stopped_then_relaunched_from_the_chosen_checkpoint() -> None:
    job = Job()
    job.to_running()
    out = job.tick(HANG, at=10)
    assert kinds(out) == ["Capture", "recovery_phase"] and out[0] == Capture(1, HANG)
    job.say("n0", NodeStatus.EVIDENCE_DONE)
    assert job.tick(HANG, at=11) == []  # n1 has not answered
    job.say("n1", NodeStatus.EVIDENCE_DONE, report={"bundle": "/run/incidents/incident-1/n1", "seconds": 2.5,
                                                   "missing": 1})
    out = job.tick(HANG, at=12)
    assert kinds(out) == ["verdict", "RecordIncident", "incident", "StopJob", "recovery_phase"]
    incident = out[2]
    assert isinstance(incident, Emit) and incident.fields["incident"] == 1
    assert incident.fields["artifacts"] == {"n0": "/run/incidents/incident-1/n0", "n1": "/run/incidents/incident-1/n1"}
    assert incident.fields["capture_seconds"] == 2.5 and incident.fields["missing_items"] == 1
    stop = out[3]
    assert isinstance(stop, StopJob) and stop.incident == 1 and stop.timeout == 15 and stop.verdict is not None
    job.say("n0", NodeStatus.STOPPED)
    assert job.tick(at=13) == []
    job.say("n1", NodeStatus.STOPPED, report={"rung": "sigterm", "seconds": 1.5, "uploads": [{"ok": True}]})
    out = job.tick(at=14)
    assert kinds(out) == ["stopped", "stopped", "upload", "recovery_phase", "ChooseCheckpoint", "restart",
                          "Relaunch", "recovery_phase"]
    relaunch = next(c for c in out if isinstance(c, Relaunch))
    assert relaunch.generation == 1 and relaunch.checkpoint == "/ckpt/step_6"
    restart = job.events(EventKind.RESTART)[0]
    assert restart.generation == 1 and restart.fields["checkpoint"] == "/ckpt/step_6"
    assert restart.fields["reason"] == "restart 1 of at most 3 in a row"
    assert job.rec.state is JobState.STARTING and job.rec.generation == 1
    assert job.phases() == ["running", "capturing", "stopping", "restarting", "starting"]
    assert [e.generation for e in job.events(EventKind.STOPPED)] == [0, 0]  # events of the stopped generation


def test_a_single_nodes_incident_artifacts_are_its_incident_directory() -> None:
    job = Job(nodes=1)
    job.to_running()
    job.tick(HANG)
    job.say("n0", NodeStatus.EVIDENCE_DONE)
    job.tick()
    assert job.events(EventKind.INCIDENT)[0].fields["artifacts"] == "/run/incidents/incident-1"


def test_answers_said_before_the_question_do_not_count() -> None:
    job = Job(nodes=1)
    job.to_running()
    job.say("n0", NodeStatus.STOPPED)  # an answer to nothing (or to an earlier stop)
    job.tick(HANG, at=1)
    job.say("n0", NodeStatus.EVIDENCE_DONE)
    job.tick(at=2)
    assert job.rec.state is JobState.STOPPING and job.tick(at=3) == []  # not stopped yet
    job.say("n0", NodeStatus.STOPPED)
    job.tick(at=4)
    assert job.rec.state is JobState.STARTING


def test_the_final_verdict_names_the_culprit_from_the_evidence() -> None:
    job = Job()
    job.to_running()
    job.tick(HANG)
    job.say("n0", NodeStatus.EVIDENCE_DONE, report={"bundle": "/b/n0", "proc_states": {"0": "S", "1": "S"}})
    job.say("n1", NodeStatus.EVIDENCE_DONE, report={"bundle": "/b/n1", "proc_states": {"2": "S", "3": "T"}})
    out = job.tick()
    stop = next(c for c in out if isinstance(c, StopJob))
    assert stop.verdict is not None and stop.verdict.culprit == RankKey("n1", 3)
    assert stop.verdict.culprit_source == "process_state" and "n1/rank3 is stopped (state T)" in stop.verdict.reason
    assert job.events(EventKind.INCIDENT)[0].fields["culprit"] == {"node": "n1", "rank": 3}
    record = next(c for c in out if isinstance(c, RecordIncident))
    assert set(record.reports) == {"n0", "n1"}


def test_a_stopped_culprit_the_judge_named_from_its_own_readings_is_not_said_twice() -> None:
    """The judge names a rank stopped by a signal from the nodes' process readings; the evidence capture's
    reading of /proc says the same: the verdict keeps the culprit and says it once."""
    said = "no rank progressed and none compiled for 12s (> hang timeout 10s); n1/rank3 is stopped (state T) for 11s"
    hang = Verdict(Label.COLLECTIVE_HANG, Action.RESTART, culprit=RankKey("n1", 3), culprit_source="process_state",
                   reason=said)
    job = Job()
    job.to_running()
    job.tick(hang)
    job.say("n0", NodeStatus.EVIDENCE_DONE, report={"bundle": "/b/n0", "proc_states": {"0": "S", "1": "S"}})
    job.say("n1", NodeStatus.EVIDENCE_DONE, report={"bundle": "/b/n1", "proc_states": {"2": "S", "3": "T"}})
    stop = next(c for c in job.tick() if isinstance(c, StopJob))
    assert stop.verdict is not None and stop.verdict.culprit == RankKey("n1", 3)
    assert stop.verdict.culprit_source == "process_state" and stop.verdict.reason == said


@pytest.mark.parametrize(("settle_wait", "captured"), [(2.9, False), (3.0, True)])
def test_a_failure_that_is_not_a_hang_waits_for_its_root_cause(settle_wait: float, captured: bool) -> None:
    job = Job()
    job.to_running()
    assert job.tick(CRASH, at=10) == []
    job.tick(CRASH, at=10 + settle_wait)
    assert (job.rec.state is JobState.CAPTURING) is captured


def test_a_failure_every_launcher_reported_is_captured_at_once() -> None:
    job = Job()
    job.to_running()
    job.say("n0", NodeStatus.FAILED, code=1)
    job.say("n1", NodeStatus.FINISHED)
    job.tick(CRASH, at=10)
    assert job.rec.state is JobState.CAPTURING


def test_a_healthy_verdict_between_forgets_a_failure_in_waiting() -> None:
    job = Job()
    job.to_running()
    job.tick(CRASH, at=10)
    job.tick(HEALTHY, at=11)
    job.tick(CRASH, at=12)
    assert job.rec.state is JobState.RUNNING  # the settle began again at 12


@pytest.mark.parametrize(("at", "captured"), [(44.0, False), (46.0, True)])
def test_a_hang_while_ranks_are_ending_waits_for_the_launcher_up_to_the_grace(at: float, captured: bool) -> None:
    job = Job()
    job.to_running()
    job.say("n0", NodeStatus.FINISHING)
    job.tick(HANG, at=at)
    assert (job.rec.state is JobState.CAPTURING) is captured


def test_a_node_silent_at_the_capture_is_not_awaited_and_is_listed_without_evidence() -> None:
    job = Job()
    job.to_running()
    job.tick(HANG)
    job.say("n0", NodeStatus.EVIDENCE_DONE)
    job.nodes["n1"].observed = False
    job.tick(at=1)
    assert job.events(EventKind.INCIDENT)[0].fields["nodes_without_evidence"] == ["n1"]


@pytest.mark.parametrize(("at", "stopping"), [(64.9, False), (65.0, True)])
def test_the_capture_is_bounded_by_the_evidence_timeout(at: float, stopping: bool) -> None:
    job = Job()
    job.to_running()
    job.tick(HANG, at=0)
    job.say("n0", NodeStatus.EVIDENCE_DONE)
    job.tick(at=at)
    assert (job.rec.state is JobState.STOPPING) is stopping


@pytest.mark.parametrize(("at", "restarting"), [(24.9, False), (25.0, True)])
def test_the_stop_is_bounded_by_its_deadline(at: float, restarting: bool) -> None:
    job = Job()
    job.to_running()
    job.fail_and_capture()
    job.say("n0", NodeStatus.STOPPED)
    job.tick(at=at)
    assert (job.rec.generation == 1) is restarting
    if restarting:
        assert [e.fields["answered"] for e in job.events(EventKind.STOPPED)] == [True, False]


def test_a_node_lost_at_the_restart_is_waited_for_then_the_job_ends_with_3() -> None:
    job = Job()
    job.to_running()
    job.fail_and_capture()
    job.say("n0", NodeStatus.STOPPED)
    job.nodes["n1"].observed = False
    out = job.tick(at=1)
    assert kinds(out) == ["warning"] and out[0].fields["kind"] == "node_lost"  # type: ignore[union-attr]
    assert job.tick(at=30) == []  # said once a minute
    assert kinds(job.tick(at=61)) == ["warning"]
    out = job.tick(at=601)
    assert kinds(out) == ["stopped", "stopped", "gave_up", "recovery_phase", "Finish"]
    assert out[-1] == Finish(3, out[2].fields["reason"], JobState.FAILED)  # type: ignore[union-attr]


def test_a_lost_node_that_answers_again_is_relaunched_onto() -> None:
    job = Job()
    job.to_running()
    job.fail_and_capture()
    job.say("n0", NodeStatus.STOPPED)
    job.nodes["n1"].observed = False
    job.tick(at=1)
    job.nodes["n1"].observed = True
    job.say("n1", NodeStatus.STOPPED)
    job.tick(at=100)
    assert job.rec.generation == 1 and job.rec.state is JobState.STARTING


def test_when_a_relaunch_starts_new_agents_silent_nodes_are_not_waited_for() -> None:
    job = Job(fresh_agents=True)
    job.to_running()
    job.fail_and_capture()
    job.say("n0", NodeStatus.STOPPED)
    job.nodes["n1"].observed = False
    job.tick(at=1)
    assert job.rec.generation == 1 and not job.events(EventKind.WARNING)


# -- what a restart cannot fix, and the budget -----------------------------------------------------


def test_a_configuration_error_is_not_restarted_exit_4() -> None:
    job = Job()
    job.to_running()
    job.say("n0", NodeStatus.FAILED, code=1)
    job.say("n1", NodeStatus.FAILED, code=1)
    job.fail_and_capture(CONFIG)
    job.everyone(NodeStatus.STOPPED)
    out = job.tick(at=1)
    assert kinds(out)[-3:] == ["gave_up", "recovery_phase", "Finish"] and job.rec.exit_code == 4
    assert job.rec.state is JobState.FAILED and not any(isinstance(c, ChooseCheckpoint) for c in job.log)


def test_the_same_failure_at_the_same_step_twice_is_a_crash_loop() -> None:
    job = Job()
    for _ in range(2):
        job.to_running()
        job.fail_and_capture(CRASH)
        job.everyone(NodeStatus.STOPPED)
        job.tick(at=job.now + 1)
        assert job.rec.generation == 1  # the second time: given up, not relaunched
    gave_up = job.events(EventKind.GAVE_UP)
    assert len(gave_up) == 1 and "crash loop" in gave_up[0].fields["reason"] and job.rec.exit_code == 4


def test_the_budget_counts_consecutive_failures() -> None:
    job = Job(policy=RestartPolicy(max_restarts=2))
    for step in range(3):
        job.to_running()
        job.fail_and_capture(Verdict(Label.COLLECTIVE_HANG, Action.RESTART, reason="hang", step=10 + step))
        job.everyone(NodeStatus.STOPPED)
        job.tick(at=job.now + 1)
    assert job.rec.generation == 2 and job.rec.exit_code == 5  # a hang used up the budget
    assert "--max-restarts 2 used up" in job.events(EventKind.GAVE_UP)[0].fields["reason"]


def test_a_failure_after_training_finished_is_not_restarted_and_keeps_the_jobs_code() -> None:
    job = Job()
    job.to_running()
    after = Verdict(Label.OTHER_CRASH, Action.STOP, culprit=RankKey("n0", 1), reason="SIGABRT at exit",
                    after_training=True, step=30)
    job.say("n0", NodeStatus.FAILED, code=134)
    job.say("n1", NodeStatus.FINISHED)
    job.fail_and_capture(after)
    job.everyone(NodeStatus.STOPPED)
    job.tick(at=1)
    assert job.rec.exit_code == 134 and job.rec.state is JobState.FAILED


def test_a_faulty_node_is_drained_before_the_relaunch_where_nodes_can_be_excluded() -> None:
    job = Job(policy=RestartPolicy(max_restarts=3, can_exclude_nodes=True), fresh_agents=True)
    job.to_running()
    job.fail_and_capture(HW)
    job.everyone(NodeStatus.STOPPED)
    out = job.tick(at=1)
    assert kinds(out)[-6:] == ["recovery_phase", "Drain", "ChooseCheckpoint", "restart", "Relaunch", "recovery_phase"]
    drain = next(c for c in out if isinstance(c, Drain))
    assert drain.node == "n1"


def test_a_faulty_node_that_cannot_be_excluded_ends_the_job() -> None:
    job = Job()
    job.to_running()
    job.fail_and_capture(HW)
    job.everyone(NodeStatus.STOPPED)
    job.tick(at=1)
    assert job.rec.exit_code == 4 and not any(isinstance(c, Drain) for c in job.log)


def test_a_generation_that_failed_before_its_first_step_falls_back_to_the_previous_checkpoint_once() -> None:
    job = Job()
    job.rec.started("/ckpt/step_6")
    early = Verdict(Label.OTHER_CRASH, Action.RESTART, reason="unpickling error", step=None,
                    evidence=(Evidence(RankKey("n0", 0), "_pickle.UnpicklingError", "python.unpickling"),))
    job.to_running()
    job.fail_and_capture(early)
    job.everyone(NodeStatus.STOPPED)
    job.tick(at=1)
    choose = next(c for c in job.log if isinstance(c, ChooseCheckpoint))
    assert choose.avoid == frozenset({"/ckpt/step_6"})
    assert next(c for c in job.log if isinstance(c, Relaunch)).checkpoint == "/ckpt/step_3"
    assert "falling back" in job.events(EventKind.RESTART)[0].fields["reason"]
    assert job.events(EventKind.RESTART)[0].fields["avoided"] == ["/ckpt/step_6"]


def test_a_relaunch_that_cannot_start_ends_the_job() -> None:
    job = Job(fresh_agents=True)
    job.relaunch_outcome = RelaunchEnded(1, "requeued without n1")
    job.to_running()
    job.fail_and_capture()
    job.everyone(NodeStatus.STOPPED)
    job.tick(at=1)
    assert job.log[-1] == Finish(1, "requeued without n1", JobState.FAILED)
    assert job.phases()[-2:] == ["restarting", "failed"]


# -- signals and a launcher gone -------------------------------------------------------------------


def test_a_signal_stops_every_node_then_ends_with_128_plus_it() -> None:
    job = Job()
    job.to_running()
    out = job.rec.interrupt(15, 5.0, job.heard)
    assert out == [StopJob("signal 15", 15)]
    assert job.rec.interrupt(2, 5.5, job.heard) == []  # once is enough
    job.say("n0", NodeStatus.STOPPED)
    assert job.tick(HANG, at=6) == []  # no verdict acts while interrupted
    job.say("n1", NodeStatus.STOPPED)
    out = job.tick(at=7)
    assert out[-1] == Finish(143, "stopped by signal 15", JobState.INTERRUPTED)


def test_an_interrupt_is_bounded_by_the_stop_deadline() -> None:
    job = Job()
    job.to_running()
    job.rec.interrupt(2, 0.0, job.heard)
    assert job.tick(at=24.9) == []
    assert job.tick(at=25.0)[-1] == Finish(
        130, "stopped by signal 2; the stop's deadline passed without an answer from node(s) n0, n1",
        JobState.INTERRUPTED)


LEFT = {"rung": "sigterm", "seconds": 0.4, "own_signal": 15}  # a node's stop on its own SIGTERM


def test_a_node_that_left_on_its_own_signal_ends_the_job_without_waiting_for_the_stops_deadline() -> None:
    """``scancel`` signals every node at once: n1's wrapper stops its ranks on its own SIGTERM and
    leaves, saying so; the job stops everywhere and ends once the others answered, not at the
    stop's deadline (n1 never answers a stop)."""
    job = Job()
    job.to_running()
    job.say("n1", NodeStatus.STOPPED, report=LEFT)
    job.say("n1", NodeStatus.EXITED)
    out = job.tick(at=1.0)
    said = job.events(EventKind.WARNING)
    assert [(e.fields["kind"], e.fields["node"], e.fields["signal"]) for e in said] == [
        ("node_left_on_signal", "n1", 15)]
    assert out[-1] == StopJob("signal 15", 15) and job.rec.interrupted
    assert job.tick(at=1.5) == []  # n0 stops as told: its answer is awaited
    job.say("n0", NodeStatus.STOPPED)
    assert job.tick(at=2.0)[-1] == Finish(
        143, "stopped by signal 15; node(s) n1 stopped on their own signal and left", JobState.INTERRUPTED)


def test_a_node_whose_launcher_ended_after_the_stop_is_awaited_for_the_settle_time_not_the_deadline() -> None:
    """Every wrapper signalled: n1 leaves on its own signal; n0, the coordinator's host, forwarded its
    signal to its launcher, which ended (failed, exit 1) after the stop was asked. Its answer to the
    stop normally follows at once; when it does not come, the job ends once the settle time passed
    since the launcher's end, saying why, not at the stop's deadline."""
    job = Job()
    job.to_running()
    job.say("n1", NodeStatus.STOPPED, report=LEFT)
    job.say("n1", NodeStatus.EXITED)
    job.tick(at=1.0)
    assert job.rec.interrupted
    job.now = 1.2
    job.say("n0", NodeStatus.FAILED, code=1)
    settle = job.rec.settings.settle
    assert job.tick(at=1.2 + settle - 0.1) == []  # its own answer is still awaited
    assert job.tick(at=1.2 + settle)[-1] == Finish(
        143, "stopped by signal 15; node(s) n1 stopped on their own signal and left; node(s) n0 had no "
        "launcher left to stop (it ended)", JobState.INTERRUPTED)


def test_a_launchers_end_said_before_the_stop_was_asked_is_no_answer_to_it() -> None:
    job = Job()
    job.to_running()
    job.say("n0", NodeStatus.FAILED, code=1)  # before the signal: the stop's answer is still owed
    job.rec.interrupt(15, 1.0, job.heard)
    job.say("n1", NodeStatus.STOPPED)
    assert job.tick(at=10.0) == []
    job.say("n0", NodeStatus.STOPPED)
    assert job.tick(at=10.5)[-1] == Finish(143, "stopped by signal 15", JobState.INTERRUPTED)


def test_of_several_nodes_that_left_on_their_own_signal_the_first_by_name_is_said() -> None:
    """Only the nodes that left are sorted (a tick no longer sorts every node of the job): the first
    of them by name ("n10" before "n9"), whatever the order their word arrived in, with its own signal."""
    job = Job(nodes=12)
    job.to_running()
    job.say("n9", NodeStatus.STOPPED, report=LEFT)
    job.say("n10", NodeStatus.STOPPED, report={**LEFT, "own_signal": 2})
    job.say("n10", NodeStatus.EXITED)
    job.say("n3", NodeStatus.STOPPED, report={**LEFT, "own_signal": 0})  # stopped as told: not one that left
    out = job.tick(at=1.0)
    said = job.events(EventKind.WARNING)
    assert [(e.fields["node"], e.fields["signal"]) for e in said] == [("n10", 2)]
    assert out[-1] == StopJob("signal 2", 15)


def test_nodes_that_left_on_their_own_signal_before_the_coordinators_own_end_the_job_at_once() -> None:
    """Every wrapper signalled: n1's word arrives before this coordinator's own signal is handled."""
    job = Job()
    job.to_running()
    job.say("n1", NodeStatus.STOPPED, report=LEFT)
    job.rec.interrupt(15, 0.5, job.heard)
    job.say("n0", NodeStatus.STOPPED)
    out = job.tick(at=0.6)
    assert out[-1] == Finish(143, "stopped by signal 15; node(s) n1 stopped on their own signal and left",
                             JobState.INTERRUPTED)
    assert not job.events(EventKind.WARNING)  # the job was ending already


def test_a_node_stopped_as_told_earlier_is_not_taken_for_one_that_left() -> None:
    job = Job()
    job.to_running()
    job.say("n1", NodeStatus.STOPPED)  # an answer to a stop (no signal of its own)
    job.say("n1", NodeStatus.LAUNCHED)
    assert not job.rec.interrupted and not [c for c in job.tick(at=1.0) if isinstance(c, StopJob)]


def test_an_interrupt_ends_at_once_when_the_launcher_is_gone() -> None:
    job = Job(fresh_agents=True)
    job.to_running()
    job.rec.interrupt(15, 0.0, job.heard)
    job.gone = 143
    assert job.tick(at=0.1)[-1] == Finish(143, "stopped by signal 15", JobState.INTERRUPTED)


def test_a_signal_after_the_end_changes_nothing() -> None:
    job = Job()
    job.everyone(NodeStatus.FINISHED)
    job.tick()
    assert job.rec.interrupt(15, 1.0, job.heard) == [] and not job.rec.interrupted


@pytest.mark.parametrize(("code", "exit_code"), [(1, 1), (0, 3)])
def test_a_launcher_that_ended_by_itself_ends_the_job_after_a_grace(code: int, exit_code: int) -> None:
    job = Job(fresh_agents=True)
    job.to_running()
    job.gone = code
    assert job.tick(at=10) == [] and job.tick(at=15) == []
    out = job.tick(at=15.1)
    assert kinds(out) == ["srun_step_ended", "recovery_phase", "Finish"]
    assert out[-1] == Finish(exit_code, f"the srun step ended by itself (exit {code})", JobState.FAILED)


def test_the_table_refuses_an_illegal_move_naming_both_states() -> None:
    job = Job()
    with pytest.raises(IllegalTransition, match="starting -> stopping"):
        job.rec.sm.move(JobState.STOPPING, 0.0)


def test_a_late_answer_to_a_relaunch_or_checkpoint_changes_nothing() -> None:
    job = Job()
    job.to_running()
    assert job.rec.checkpoint_chosen("/x", 1.0, job.heard) == []
    assert job.rec.relaunched(Relaunched(), 1.0) == [] and job.rec.state is JobState.RUNNING


def test_each_nodes_stop_report_is_its_stopped_event() -> None:
    job = Job(nodes=1)
    job.to_running()
    job.fail_and_capture()
    job.say("n0", NodeStatus.STOPPED, report={"rung": "sigterm", "seconds": 0.6, "killed_stopped": [77],
                                              "continued": [12], "survivors": []})
    job.tick(at=1)
    (stopped,) = job.events(EventKind.STOPPED)
    assert {k: stopped.fields[k] for k in ("rung", "seconds", "killed_stopped", "continued", "answered")} == {
        "rung": "sigterm", "seconds": 0.6, "killed_stopped": [77], "continued": [12], "answered": True}
