"""The node's stop: every process of the generation stopped in a thread (one deadline, reaped), the
incident's bundles completed and uploaded, while the agent's loop keeps turning."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from neuron_watch.events import StopReport
from neuron_watch.node.generation import Generations, NodeContext, NodeGeneration
from neuron_watch.node.incident import Incidents
from neuron_watch.node.observer import Observer
from neuron_watch.outputs.console import say

log = logging.getLogger("neuron_watch")


class Stopper:
    """Stops this node's generation: in the background for the coordinator, at once for a signal."""

    def __init__(self, ctx: NodeContext, generations: Generations, observer: Observer, incidents: Incidents) -> None:
        self.ctx = ctx
        self.generations = generations
        self.observer = observer
        self.incidents = incidents
        self.thread: threading.Thread | None = None  # a stop running in the background (begin)

    def stopping(self, why: str) -> None:
        """From now on the launcher's output is its teardown after our stop (or our forwarded signal)."""
        gen = self.generations.gen
        if gen is not None and not gen.stopped_by_us:
            gen.stopped_by_us = why

    def say_stopped(self, gen: NodeGeneration, how: str) -> None:
        say(f"{self.ctx.launcher.name} on {self.ctx.node} stopped by neuron-watch ({gen.stopped_by_us}; {how}): "
            f"its own output of the stop is in {gen.launcher_log.name}, not here")

    def stop(self, deadline: float, verdict: Mapping[str, Any]) -> StopReport:
        """:meth:`begin`, waited for (blocks)."""
        poll = self.begin(deadline, verdict)
        while (report := poll()) is None:
            time.sleep(0.02)
        return report

    def begin(self, deadline: float, verdict: Mapping[str, Any]) -> Callable[[], StopReport | None]:
        """Start the stop in a thread and return its poll (the stop's report once done, else None).

        The blocking parts -- the SIGTERM deadline (a SIGSTOPped rank holds it to the end), completing
        the bundle on a slow disk, uploads to a slow or absent S3 (``--upload-timeout``) -- run in the
        thread; the loop keeps reading output, writing status and keeping the link alive meanwhile.
        What touches the link (the final drain, the detail) happens in the poll, on the loop's thread.
        """
        launcher = self.ctx.launcher
        gen = self.generations.gen
        # A launcher that reported its failure holds nothing but its own teardown (and, under a
        # static rendezvous, the store's port the next generation needs): SIGKILL it at once.
        first = signal.SIGKILL if gen is not None and gen.gave_up else signal.SIGTERM
        running = gen is not None and gen.exit_code is None
        self.stopping("told to by the coordinator")
        out: dict[str, Any] = {}

        def work() -> None:
            try:
                # the spare (prewarmed launcher) may start the next generation: kept
                result = launcher.stop(deadline, first_signal=first, keep_spare=True)
                out["result"] = result
                out["uploads"] = self.incidents.finish(verdict)
            except Exception as exc:  # reported in the detail; the loop must learn that the stop ended
                log.exception("stopping this node's job failed")
                out["error"] = str(exc)

        thread = threading.Thread(target=work, name="neuron-watch-stop", daemon=True)
        self.thread = thread
        thread.start()

        def poll() -> StopReport | None:
            if thread.is_alive():
                return None
            self.thread = None
            gen = self.generations.gen
            if gen is not None and gen.exit_code is None:
                # We stopped it: its exit code is ours, not a failure (or an end) to report.
                code = launcher.poll()
                gen.exit_code = code if code is not None else -15
            self.observer.drain(final=True)
            result = out.get("result")
            if result is not None and running and gen is not None:
                self.say_stopped(gen, f"{result.rung}, {result.seconds:.1f}s")
            uploads = out.get("uploads")
            return StopReport(
                rung=None if result is None else result.rung,
                seconds=None if result is None else round(result.seconds, 3),
                survivors=() if result is None else tuple(result.survivors),
                continued=() if result is None else tuple(result.continued),
                killed_stopped=() if result is None else tuple(result.killed_stopped),
                uploads=None if uploads is None else tuple(uploads), error=str(out.get("error") or ""))

        return poll

    def stop_early(self, sig: int, timeout: float) -> StopReport:
        """A signal of our own (before the link exists, or the node's wrapper signalled with every
        other node's): stop this node's ranks now (its exit is ours, not the job's failure). Returns
        the stop's report, ``own_signal`` set."""
        launcher = self.ctx.launcher
        gen = self.generations.gen
        self.stopping(f"{signal.Signals(sig).name} forwarded")
        result = launcher.stop(timeout, first_signal=sig, keep_spare=False)
        if gen is not None and gen.exit_code is None:
            code = launcher.poll()
            gen.exit_code = code if code is not None else -sig
            self.observer.drain(final=True)
            self.say_stopped(gen, f"{result.rung}, {result.seconds:.1f}s")
        return StopReport(rung=result.rung, seconds=round(result.seconds, 3), survivors=tuple(result.survivors),
                          continued=tuple(result.continued), killed_stopped=tuple(result.killed_stopped),
                          own_signal=sig)

    def close(self, timeout: float) -> None:
        """Let a stop of ours end (it is bounded) before the last one."""
        if self.thread is not None:
            self.thread.join(timeout + self.ctx.cfg.upload_timeout + 5)
