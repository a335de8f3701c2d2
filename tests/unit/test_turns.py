"""When the node's loop next turns (recovery/turns.py), and what each part says it is due for.

The loop once turned every 20 ms; now it sleeps until something arrives or a part is due. These
tests pin the pure decision (``now`` passed in) and each part's due time, so that a part that stops
saying when it is due (and would then be served only at the ceiling) is seen here.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import threading

import pytest
import zmq

from neuron_watch.events import LogLine, RankKey
from neuron_watch.job.pacing import VerdictPacing
from neuron_watch.node.line_batches import LineBatches
from neuron_watch.node.link_settings import LinkCounters
from neuron_watch.node.proc_readings import ProcReadings
from neuron_watch.node.progress_pace import ProgressPace
from neuron_watch.recovery.turns import (
    EARLY_SHARE,
    JOIN,
    MAX_WAIT,
    Every,
    chore_due,
    earliest,
    wait_for,
)
from neuron_watch.wire.waker import Waker


@pytest.mark.parametrize(
    ("dues", "expected"),
    [
        ([], MAX_WAIT),  # nothing due by time: the ceiling (what arrives wakes the loop sooner)
        ([None, None], MAX_WAIT),
        ([100.3], 0.3),
        ([100.3, None, 100.2], 0.2),  # the earliest
        ([99.0], 0.0),  # overdue: at once, never a negative wait
        ([150.0], MAX_WAIT),  # far away: the ceiling still bounds it
        ([100.1, 100.1 + JOIN / 2], 0.1 + JOIN / 2),  # due together: one turn, at the later time
        ([100.1, 100.1 + 2 * JOIN], 0.1),  # apart: the earlier first
        ([99.0, 100.0 + JOIN / 2], JOIN / 2),  # overdue joins what is due within JOIN of now
    ],
)
def test_wait_for_the_earliest_due_joined_with_its_neighbours(dues: list[float | None], expected: float) -> None:
    assert wait_for(100.0, dues) == pytest.approx(expected)


def test_wait_for_a_ceiling_of_its_own() -> None:
    assert wait_for(0.0, [5.0], ceiling=2.0) == 2.0
    assert wait_for(0.0, [], ceiling=0.02) == 0.02


def test_earliest() -> None:
    assert earliest([None, 3.0, 2.0]) == 2.0
    assert earliest([None]) is None


def test_a_chore_is_done_at_a_turn_once_a_share_of_its_interval_passed() -> None:
    every = 0.05
    assert not chore_due(10.0 + every * EARLY_SHARE * 0.9, 10.0, every)
    assert chore_due(10.0 + every * EARLY_SHARE * 1.01, 10.0, every)
    assert chore_due(10.0 + every, 10.0, every)


def test_every_phases_join_one_turn_per_read_interval() -> None:
    """Reads of the rank files every 50 ms and verdicts every 100 ms, at any phase between them,
    share turns: a simulated loop turns 20 times a second, not 30 (the figure before JOIN and
    EARLY_SHARE)."""
    read_every, verdict_every = 0.05, 0.1
    for phase in [i / 1000 for i in range(0, 100, 3)]:
        now, last_read, last_verdict, turns = 0.0, -1.0, phase - verdict_every, 0
        while now < 10.0:
            now += wait_for(now, [last_read + read_every, last_verdict + verdict_every])
            turns += 1
            if chore_due(now, last_read, read_every):
                last_read = now
            if now - last_verdict >= verdict_every - 1e-12:
                last_verdict = now
        assert turns <= 10.0 / read_every + 3, f"phase {phase}: {turns} turns in 10 s"


def test_every_is_due_at_its_interval_or_when_asked() -> None:
    sweep = Every(2.0)
    assert sweep.due(0.0)  # never done: due
    sweep.done(0.0)
    assert not sweep.due(1.0)
    assert sweep.due(1.0, asked=True)  # SIGCHLD came
    assert sweep.due(2.0)
    assert sweep.next_due() == 2.0


# -- what each part says it is due for ----------------------------------------------------------


def _line(mono: float, text: str = "hello") -> LogLine:
    return LogLine(RankKey("n0", 0), text, mono, 1e9 + mono, "rank-0.log", 1)


def test_a_pending_batch_is_due_at_its_age() -> None:
    batches = LineBatches(100, LinkCounters())
    assert batches.next_due(0.05) is None  # nothing pending
    batches.add(_line(10.0))
    batches.add(_line(10.02))
    assert batches.next_due(0.05) == pytest.approx(10.05)  # the oldest line's age
    assert not batches.due(10.049, 0.05) and batches.due(10.05, 0.05)  # the same instant as due()


def test_a_held_progress_row_is_due_at_its_pace() -> None:
    pace = ProgressPace()
    assert pace.next_due(3.0) is None
    pace._oldest = 7.0  # a row held since 7.0 (the internals take() keeps)
    assert pace.next_due(3.0) == 10.0
    assert pace.due(10.0, 3.0) and not pace.due(9.99, 3.0)
    pace._oldest = -math.inf  # a new coordinator session: everything held goes at once
    assert pace.next_due(3.0) == -math.inf


def test_a_held_process_reading_is_due_when_procs_every_passed() -> None:
    readings = ProcReadings()
    assert readings.next_due(1) is None  # nothing held
    first = readings.add([], 5.0, 1, always=True)
    assert first is not None  # the first periodic reading goes at once
    assert readings.add([(0, 123, 1.0, 5.5)], 5.5, 1, always=True) is None  # held: procs_every is 1 s
    assert readings.next_due(1) == pytest.approx(6.0)
    assert readings.flush(5.99, 1, due=True) is None and readings.flush(6.0, 1, due=True) is not None
    assert readings.next_due(1) is None


def test_the_next_verdict_is_due_at_its_interval_and_after_a_pause_s_grace() -> None:
    pacing = VerdictPacing(0.1, 5.0, 2.0)
    pacing.turn(0.0)
    pacing.judged(0.0, 0.001)
    assert pacing.next_due() == pytest.approx(0.1)
    assert not pacing.due(0.099) and pacing.due(0.1)
    pacing.turn(10.0)  # a pause of our own: verdicts wait the grace
    assert pacing.next_due() == pytest.approx(12.0)
    assert not pacing.due(11.99) and pacing.due(12.0)


# -- the waker: what ends the loop's sleep (real pipes, signals, a real child) ---------------------


def test_the_waker_wakes_on_a_pipe_a_socket_a_signal_and_sigchld() -> None:
    assert threading.current_thread() is threading.main_thread()
    read_fd, write_fd = os.pipe()
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    got: list[int] = []
    old = signal.signal(signal.SIGUSR2, lambda signum, _frame: got.append(signum))
    before_fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before_fd)
    try:
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        push.connect(f"tcp://127.0.0.1:{port}")
        with Waker() as waker:
            assert waker.signals_wake
            assert not waker.wait(0.0, [read_fd, pull])  # nothing yet: the timeout ends it
            os.write(write_fd, b"x")
            assert waker.wait(5.0, [read_fd, pull])  # the pipe
            os.read(read_fd, 1)
            push.send(b"m")
            assert waker.wait(5.0, [read_fd, pull])  # the socket
            pull.recv()
            os.kill(os.getpid(), signal.SIGUSR2)
            assert waker.wait(5.0, [read_fd, pull])  # a signal with a handler of its own (the latch's)
            assert got == [signal.SIGUSR2]
            assert not waker.take_child()
            subprocess.run(["true"], check=True)  # a child exits: SIGCHLD
            assert waker.wait(5.0, [read_fd, pull])
            assert waker.take_child() and not waker.take_child()
        # the process's signal set-up is as it was
        assert signal.getsignal(signal.SIGCHLD) is signal.SIG_DFL
        assert signal.set_wakeup_fd(-1) == before_fd
        signal.set_wakeup_fd(before_fd)
    finally:
        signal.signal(signal.SIGUSR2, old)
        os.close(read_fd)
        os.close(write_fd)
        pull.close(linger=0)
        push.close(linger=0)
        ctx.term()


def test_a_waker_off_the_main_thread_still_waits_on_its_sockets() -> None:
    """Signals can be set up only on the main thread; a loop elsewhere still wakes on its pipes."""
    results: list[tuple[bool, bool]] = []
    read_fd, write_fd = os.pipe()

    def run() -> None:
        with Waker() as waker:
            os.write(write_fd, b"x")
            results.append((waker.signals_wake, waker.wait(5.0, [read_fd])))

    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join(10.0)
        assert results == [(False, True)]
    finally:
        os.close(read_fd)
        os.close(write_fd)
