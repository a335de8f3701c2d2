"""The coordinator's settings, from the one configuration for every entry point."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuron_watch.config import WatchConfig

#: A loop turn this much later than the previous one means this process was paused (SIGSTOP, a
#: suspended VM): the gap is our own absence, not silence of the job or of its nodes.
PAUSE_JUMP = 5.0


@dataclass(frozen=True)
class CoordinatorSettings:
    silence: float = 10.0  # seconds without a message -> node unobserved
    ack_interval: float = 0.05  # seconds between acks to a node with news
    verdict_interval: float = 0.1  # seconds between verdicts
    evidence_timeout: float = 60.0  # wait this long for every node's `evidence_done`
    stop_timeout: float = 15.0  # SIGTERM -> SIGKILL deadline sent with `stop`
    expected_nodes: int | None = None  # wait for this many nodes before judging
    settle: float = 3.0  # after a non-hang failure, wait this long for the root cause to arrive
    finishing_grace: float = 45.0  # ranks are ending: the launcher's own exit decides, up to this long
    tail_lines: int = 200  # per-rank tail kept in memory for evidence
    #: a tick this much later than the previous one means the coordinator itself was paused (SIGSTOP,
    #: a stuck console): the gap is not the nodes' silence, and verdicts wait ``pause_grace`` seconds
    #: for what the nodes buffered meanwhile (an agent resends within its ``resend_after``, 3 s).
    #: None: off (a caller that drives ``tick`` with a fast-forwarded clock); the wrappers set it.
    pause_jump: float | None = None
    pause_grace: float = 6.0
    upload_timeout: float = 0.0  # the nodes upload their bundles within their stop: wait that much longer
    #: a node silent at a restart (its wrapper killed, its host down) is not relaunched onto: wait
    #: this long for it to answer the stop, then end the job (exit 3) instead
    lost_node_wait: float = 600.0
    #: every node that joined has a failed launcher while others never joined: wait this long for them
    absent_grace: float = 60.0


def coordinator_settings(config: WatchConfig, expected_nodes: int | None, **overrides: Any) -> CoordinatorSettings:
    """The coordinator's settings from the one configuration: the same for every entry point (the
    wrapper of ``torchrun``, the ``srun`` launcher, the standalone coordinator), so that a setting
    added here reaches all of them. ``overrides``: what only one entry point decides (the standalone
    coordinator's ``--silence``)."""
    return CoordinatorSettings(stop_timeout=config.stop_timeout, evidence_timeout=config.evidence_timeout,
                               expected_nodes=expected_nodes, lost_node_wait=config.coordinator_loss_timeout,
                               absent_grace=config.absent_node_wait, pause_jump=PAUSE_JUMP,
                               upload_timeout=config.upload_timeout if config.artifacts else 0.0, **overrides)
