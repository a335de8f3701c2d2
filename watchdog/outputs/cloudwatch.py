"""What the coordinator knows, as CloudWatch metric data (``PutMetricData``). Pure: no I/O, no clock.

    dims = dimensions(job_id, env)                       # JobId, and Cluster where Slurm names one
    data = metric_data(families, dims, now)              # the key figures of metrics.py's families
    for batch in batches(data):                          # within one request's limits
        client.put_metric_data(Namespace=namespace, MetricData=batch)

The figures are the Prometheus metrics' (``metrics.py``), renamed by CloudWatch's custom: CamelCase
names without a prefix (the namespace says whose they are), the unit in ``Unit``, labels as
dimensions. CloudWatch bills every distinct name and dimension set as a metric, so the dimensions
stay few: ``JobId`` (on SageMaker the training job's name, which the entry point makes the job id),
``Cluster`` when Slurm names its cluster (ParallelCluster names it after the cluster), and for a
figure by label one more (``Label``, ``State``, ``Cause``, ``Where``). Counts by label are sent
for the labels seen only, plus their total without that dimension (from 0, so that its first rise
shows); the states of ranks and nodes, the causes of badput and where lines were dropped are few
and fixed, and are all sent.

Counters are sent as the job's running totals, not as increments: a request lost on the way loses
one point of a curve, never a restart; read them with the ``Maximum`` statistic. Info and state-set
families (strings: the culprit, the current state) have no CloudWatch form; the job's state shows
as ``JobStateEntries`` by ``State``, the culprit in the events and the incident's bundle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from neuron_watch.outputs.metrics import PREFIX, Family

#: PutMetricData's limits (boto3's CloudWatch reference): metrics per request, bytes per request
#: (an HTTP POST), dimensions per metric, and the range of a value (NaN and infinities refused)
MAX_METRICS = 1000
MAX_REQUEST_BYTES = 1_000_000
MAX_DIMENSIONS = 30
MAX_VALUE = 2.0**360
#: a dimension's value (1..1024 characters)
MAX_DIMENSION_VALUE = 1024

Each = Literal["one", "seen", "every"]


@dataclass(frozen=True)
class Figure:
    """How one family of ``metrics.py`` is sent: its CloudWatch name and unit, and for a family
    with a label the dimension's name and which samples go (``seen``: non-zero ones plus a total
    without the dimension; ``every``: each sample)."""

    name: str
    unit: str
    dimension: str | None = None
    each: Each = "one"


#: metrics.py's family (without its prefix) -> how CloudWatch gets it; the others are not sent
FIGURES: dict[str, Figure] = {
    "generation": Figure("Generation", "None"),
    "job_state_entries_total": Figure("JobStateEntries", "Count", "State", "seen"),
    "verdicts_total": Figure("Verdicts", "Count", "Label", "seen"),
    "incidents_total": Figure("Incidents", "Count", "Label", "seen"),
    "restarts_total": Figure("Restarts", "Count", "Label", "seen"),
    "give_ups_total": Figure("GiveUps", "Count", "Label", "seen"),
    "last_step": Figure("LastStep", "None"),
    "steps_per_second": Figure("StepsPerSecond", "Count/Second"),
    "last_progress_age_seconds": Figure("LastProgressAge", "Seconds"),
    "hang_timeout_seconds": Figure("HangTimeout", "Seconds"),
    "ranks": Figure("Ranks", "Count", "State", "every"),
    "nodes": Figure("Nodes", "Count", "State", "every"),
    "compile_seconds": Figure("CompileTime", "Seconds"),
    "save_seconds": Figure("SaveTime", "Seconds"),
    "save_seconds_total": Figure("SaveTimeTotal", "Seconds"),
    "goodput_effective_ratio": Figure("GoodputEffectiveRatio", "None"),
    "goodput_useful_ratio": Figure("GoodputUsefulRatio", "None"),
    "badput_seconds": Figure("Badput", "Seconds", "Cause", "every"),
    "lines_dropped_total": Figure("LinesDropped", "Count", "Where", "every"),
    "lines_truncated_total": Figure("LinesTruncated", "Count"),
    "watchdog_io_faults_total": Figure("WatchdogIOFaults", "Count"),
    "watchdog_degraded_paths": Figure("WatchdogDegradedPaths", "Count"),
    "status_age_seconds": Figure("StatusAge", "Seconds"),
    "job_exit_code": Figure("ExitCode", "None"),
}


def dimensions(job_id: str, env: Mapping[str, str]) -> tuple[dict[str, str], ...]:
    """The dimensions every metric of this job carries: ``JobId``, and ``Cluster`` from
    ``SLURM_CLUSTER_NAME`` when Slurm runs the job."""
    out = [{"Name": "JobId", "Value": job_id[:MAX_DIMENSION_VALUE]}]
    cluster = env.get("SLURM_CLUSTER_NAME", "").strip()
    if cluster:
        out.append({"Name": "Cluster", "Value": cluster[:MAX_DIMENSION_VALUE]})
    return tuple(out)


def _value(x: float) -> float | None:
    """A value CloudWatch takes, or None (NaN, an infinity, beyond 2^360)."""
    return x if math.isfinite(x) and abs(x) <= MAX_VALUE else None


def metric_data(families: Sequence[Family], dims: Sequence[Mapping[str, str]], now: float) -> list[dict[str, Any]]:
    """The ``MetricData`` entries of :data:`FIGURES` among ``families`` at wall time ``now``
    (seconds since the epoch: boto3 takes it as a timestamp). A family without a sample (a figure
    not known yet) sends nothing; a value CloudWatch refuses is left out."""
    out: list[dict[str, Any]] = []

    def datum(fig: Figure, value: float, extra: tuple[dict[str, str], ...] = ()) -> None:
        v = _value(value)
        if v is not None:
            out.append({"MetricName": fig.name, "Dimensions": [dict(d) for d in (*dims, *extra)],
                        "Timestamp": now, "Value": v, "Unit": fig.unit})

    for fam in families:
        fig = FIGURES.get(fam.name.removeprefix(PREFIX))
        if fig is None or not fam.samples:
            continue
        if fig.dimension is None:
            datum(fig, fam.samples[0].value)
            continue
        if fig.each == "seen":
            datum(fig, sum(s.value for s in fam.samples))
        for s in fam.samples:
            if fig.each == "every" or s.value:
                datum(fig, s.value, ({"Name": fig.dimension, "Value": s.values[0][:MAX_DIMENSION_VALUE]},))
    return out


def datum_bytes(datum: Mapping[str, Any]) -> int:
    """A generous bound on a datum's share of a request (its JSON; the wire forms are smaller)."""
    return len(json.dumps(datum, default=str)) + 64


def batches(data: Sequence[dict[str, Any]], max_metrics: int = MAX_METRICS,
            max_bytes: int = MAX_REQUEST_BYTES) -> Iterator[list[dict[str, Any]]]:
    """``data`` in order, cut into requests of at most ``max_metrics`` entries and ``max_bytes``."""
    batch: list[dict[str, Any]] = []
    size = 0
    for d in data:
        n = datum_bytes(d)
        if batch and (len(batch) >= max_metrics or size + n > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(d)
        size += n
    if batch:
        yield batch
