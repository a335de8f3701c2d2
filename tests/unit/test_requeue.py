"""Requeueing the Slurm job without its bad nodes (neuron_watch.slurm.requeue): ``scontrol requeue``
then ``ExcNodeList``, never held, so no call of ours has to come after Slurm's SIGKILL of the batch
step; each failure (an exit code, a call that did not answer) is told, never raised, and the
exclusion is tried whatever the requeue's answer. The real scontrol against a real slurmctld:
tests/integration/test_srun.py::test_hardware_error_without_spare_requeues_the_job_without_the_node."""

from __future__ import annotations

import signal
import subprocess

from neuron_watch.errors import PlatformError
from neuron_watch.slurm.requeue import requeue_without


class FakeScontrol:
    """Records each call; answers with ``codes[verb]`` (default 0) or raises for ``timeouts``."""

    def __init__(self, codes: dict[str, int] | None = None, timeouts: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.sigterm_during: list[object] = []
        self.codes, self.timeouts = codes or {}, timeouts

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        self.sigterm_during.append(signal.getsignal(signal.SIGTERM))
        if args[0] in self.timeouts:
            raise PlatformError(f"`scontrol {' '.join(args)}` failed: timed out after 20 seconds", "check slurmctld")
        code = self.codes.get(args[0], 0)
        return subprocess.CompletedProcess(["scontrol", *args], code, "", "slurm_error: refused" if code else "")


def test_the_job_is_requeued_then_its_bad_nodes_excluded_and_never_held() -> None:
    sc = FakeScontrol()
    before = signal.getsignal(signal.SIGTERM)
    out = requeue_without(sc, "42", ["n2", "n3"])
    assert sc.calls == [("requeue", "42"), ("update", "jobid=42", "ExcNodeList=n2,n3")]
    assert not any(c[0] in ("requeuehold", "hold", "release") for c in sc.calls)
    assert out.requeued and out.excluded and out.errors == ()
    # Slurm SIGTERMs the batch step at the requeue: the calls run with SIGTERM ignored, restored after
    assert sc.sigterm_during == [signal.SIG_IGN, signal.SIG_IGN]
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_refused_requeue_is_reported_and_the_exclusion_still_tried() -> None:
    sc = FakeScontrol(codes={"requeue": 1})
    out = requeue_without(sc, "42", ["n2"])
    assert [c[0] for c in sc.calls] == ["requeue", "update"]
    assert not out.requeued and "`scontrol requeue 42` exited 1: slurm_error: refused" in out.errors[0]


def test_a_call_that_does_not_answer_is_an_error_not_an_exception() -> None:
    sc = FakeScontrol(timeouts=("update",))
    out = requeue_without(sc, "42", ["n2"])
    assert out.requeued and not out.excluded
    assert len(out.errors) == 1 and "timed out" in out.errors[0] and "ExcNodeList=n2" in out.errors[0]
    sc = FakeScontrol(timeouts=("requeue",))
    out = requeue_without(sc, "7", ["n1"])
    assert not out.requeued and out.excluded and [c[0] for c in sc.calls] == ["requeue", "update"]
