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
import sys
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
from neuron_watch.wire.waker import Waker, poll_ms


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


@pytest.mark.parametrize(("seconds", "ms"), [(0.0, 0), (-0.5, 0), (0.0001, 1), (0.0149, 15), (0.015, 15), (0.5, 500)])
def test_a_wait_is_rounded_up_to_whole_milliseconds(seconds: float, ms: int) -> None:
    """Rounded down, a wait of 14.9 ms woke 0.9 ms before what it waited for was due, and the turns
    until it was (each then a 0 ms wait) spun."""
    assert poll_ms(seconds) == ms


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


def test_lines_read_from_a_file_read_every_batch_age_are_due_one_age_after_the_read_before() -> None:
    """The rank files are read every batch age: a line written just after a read waited there a
    whole age before the next read found it; counted from that read, it went a second age later."""
    age = 0.05
    batches = LineBatches(100, LinkCounters())
    batches.written_since(9.0)  # nothing pending: nothing changes
    assert batches.next_due(age) is None
    batches.add(_line(10.05))  # read at 10.05; the read before was at 10.0
    batches.written_since(10.0)
    assert batches.next_due(age) == pytest.approx(10.05)  # due at its read: within one age of its writing
    list(batches.take(10.05, 1e9))
    batches.add(_line(10.06))  # a launcher line (its pipe wakes the loop), then a read of the files at 10.08
    batches.written_since(10.03)
    # never sooner than one age after the last batch: the rate of batches the job's size allows
    assert batches.next_due(age) == pytest.approx(10.1)
    list(batches.take(10.1, 1e9))
    batches.add(_line(10.2))
    batches.written_since(10.25)  # a read before the line's: the line's own time stands
    assert batches.next_due(age) == pytest.approx(10.25)


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
            # a signal latched before the waker listened wrote to no pipe: its first wait does not sleep
            assert waker.wait(5.0, [read_fd, pull])
            assert not waker.wait(0.0, [read_fd, pull])  # nothing since: the timeout ends it
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


def test_the_wakeup_pipe_is_not_inherited_by_a_child() -> None:
    """torchrun, its ranks and the hosted coordinator must not hold the loop's wakeup pipe (a
    child's signals would wake the loop; an exited loop's pipe would stay open): even a child
    started with every inheritable descriptor kept has neither end."""
    with Waker() as waker:
        fds = [waker._read, waker._write]
        assert not any(os.get_inheritable(fd) for fd in fds)
        probe = ("import os, sys\nopen_fds = []\nfor fd in map(int, sys.argv[1:]):\n    try:\n        os.fstat(fd)\n"
                 "        open_fds.append(fd)\n    except OSError:\n        pass\nprint(open_fds)\n")
        out = subprocess.run([sys.executable, "-c", probe, *map(str, fds)], close_fds=False, check=True,
                             capture_output=True, text=True).stdout
        assert out.strip() == "[]"


def test_a_waker_leaves_another_owners_wakeup_fd_and_turns_as_often_as_the_loop_did() -> None:
    """An event loop of the main thread owns the wakeup fd: the waker does not take it (its owner
    would miss signals), and sleeps at most 20 ms at a time (a wait of an hour returns)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    before_fd = signal.set_wakeup_fd(write_fd)
    try:
        with Waker() as waker:
            assert not waker.signals_wake
            assert signal.set_wakeup_fd(write_fd) == write_fd  # still the owner's
            assert not waker.wait(3600.0)
        assert signal.set_wakeup_fd(before_fd) == write_fd
        assert signal.getsignal(signal.SIGCHLD) is signal.SIG_DFL
    finally:
        signal.set_wakeup_fd(before_fd)
        os.close(read_fd)
        os.close(write_fd)


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
