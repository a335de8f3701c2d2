"""What every entry point's parts get from the one configuration, built in one place.

``neuron-watch torchrun`` (supervisor), ``neuron-watch srun`` (its batch side and its per-node
``agent``) and the standalone ``neuron-watch coordinator`` each build a coordinator or an agent;
the event sinks and the artifact storage they attach come from here, so that an option added
once reaches every entry point (``--mqtt`` and ``--artifacts`` once reached only the first).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from neuron_watch.config import WatchConfig
from neuron_watch.console import StatusLine, attach_console
from neuron_watch.eventlog import EventLog
from neuron_watch.mqtt import MqttSink, parse_mqtt_url
from neuron_watch.storage import Storage, open_storage


def attach_sinks(events: EventLog, config: WatchConfig, job_id: str, status_line: StatusLine | None = None) -> None:
    """The coordinator's event sinks: the console, and the broker of ``--mqtt``."""
    attach_console(events, config, status_line=status_line)
    if config.mqtt:
        events.attach(MqttSink(parse_mqtt_url(config.mqtt), job_id))  # every event, also those before it


def artifact_storage(config: WatchConfig, run_dir: str, env: Mapping[str, str] = os.environ) -> Storage | None:
    """Where a node uploads its bundles; None when they stay where they are captured (the default)."""
    if not config.artifacts:
        return None
    if not config.artifacts.startswith("s3://") and os.path.abspath(config.artifacts) == os.path.join(
        run_dir, "incidents"
    ):
        return None
    return open_storage(config.artifacts, env)


def s3_core_dump_prefix(config: WatchConfig, job_id: str) -> str | None:
    """Where the Neuron runtime uploads core dumps itself (``--artifacts s3://...``), else None."""
    if config.artifacts and config.artifacts.startswith("s3://"):
        return config.artifacts.rstrip("/") + f"/{job_id}/core-dumps"
    return None
