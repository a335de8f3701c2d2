"""The console never blocks the watchdog (nbconsole.py): on a real pipe that nobody reads, writes
return at once, what does not fit is dropped and counted, and the reader is told when it reads again."""

from __future__ import annotations

import os
import re
import threading

from neuron_watch.outputs.nbconsole import QueuedStream


def test_a_pipe_nobody_reads_drops_lines_counted_and_never_blocks_the_writer() -> None:
    r, w = os.pipe()
    stream = QueuedStream(w, "<test>", max_queued=64 * 1024)
    try:
        line = "rank 0 | step 1 loss 0.5 " + "x" * 100 + "\n"
        for _ in range(20_000):  # 2.5 MB into a 64 KiB pipe + 64 KiB queue: would block a plain write
            stream.write(line)
        assert stream.dropped_lines > 10_000
        got = bytearray()

        def read_all() -> None:
            while chunk := os.read(r, 1 << 16):
                got.extend(chunk)

        reader = threading.Thread(target=read_all)
        reader.start()
        assert stream.drain(30.0)
        stream.write("after\n")  # the reader is back: it is told how much it missed
        assert stream.drain(30.0)
        stream.stop(5.0)
        os.close(w)
        reader.join(30.0)
        text = got.decode()
        # each time the reader catches up it is told how many lines it missed since the last note
        notes = re.findall(r"console: (\d+) line\(s\) dropped while this console was not read", text)
        assert notes and sum(int(n) for n in notes) == stream.dropped_lines
        assert text.endswith("after\n")
        assert text.count("step 1 loss") + stream.dropped_lines == 20_000  # nothing lost uncounted
    finally:
        os.close(r)


def test_a_closed_reader_is_counted_not_raised() -> None:
    r, w = os.pipe()
    os.close(r)
    stream = QueuedStream(w, "<test>")
    try:
        stream.write("one\ntwo\n")
        stream.drain(10.0)
        stream.write("three\n")
        assert stream.broken and stream.dropped_lines == 3
    finally:
        stream.stop(1.0)
        os.close(w)
