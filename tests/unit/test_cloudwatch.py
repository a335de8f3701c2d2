"""The CloudWatch mapping (``neuron_watch.outputs.cloudwatch``): metrics.py's families in, ``PutMetricData``
entries out, checked against botocore's own model of the CloudWatch API (no server, no socket)."""

from __future__ import annotations

import json
import math
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from neuron_watch.config import check_namespace, load_config
from neuron_watch.errors import ConfigError
from neuron_watch.outputs.cloudwatch import (
    FIGURES,
    MAX_DIMENSIONS,
    MAX_METRICS,
    MAX_REQUEST_BYTES,
    batches,
    datum_bytes,
    dimensions,
    metric_data,
)
from neuron_watch.outputs.metrics import PREFIX, Family, JobMetrics, Sample
from neuron_watch.outputs.status import RANK_STATES
from tests.unit.test_layering import FORBIDDEN, PURE, WATCHDOG, _imports
from tests.unit.test_metrics import T0, doc, ev, hang_restart_finish

DIMS = dimensions("job-7", {})


def values(data: list[dict[str, Any]], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """``name``'s values by their dimensions beyond the job's."""
    return {tuple((d["Name"], d["Value"]) for d in x["Dimensions"][len(DIMS):]): x["Value"]
            for x in data if x["MetricName"] == name}


def put_metric_data_shape() -> Any:
    model = botocore.session.get_session().get_service_model("cloudwatch")
    return model.operation_model("PutMetricData").input_shape


def test_restarts_rise_in_their_total_and_under_the_hangs_label_only() -> None:
    fresh = JobMetrics("job-7", RANK_STATES)
    fresh.event(ev(0, "job_started", 0))
    before = values(metric_data(fresh.families(T0), DIMS, T0), "Restarts")
    assert before == {(): 0.0}  # the total from 0 (its first rise shows); no series per label yet
    m, _ = hang_restart_finish()
    data = metric_data(m.families(T0 + 40), DIMS, T0 + 40)
    assert values(data, "Restarts") == {(): 1.0, (("Label", "collective_hang"),): 1.0}
    assert values(data, "Incidents") == {(): 1.0, (("Label", "collective_hang"),): 1.0}
    entries = values(data, "JobStateEntries")
    assert entries[(("State", "restarting"),)] == 1 and (("State", "finished"),) not in entries
    assert values(data, "Generation") == {(): 1.0}
    assert all(x["Timestamp"] == T0 + 40 for x in data)


def test_every_rank_state_is_sent_and_a_figure_not_known_yet_sends_nothing() -> None:
    m = JobMetrics("j", RANK_STATES)
    data = metric_data(m.families(T0), DIMS, T0)
    assert "LastStep" not in {x["MetricName"] for x in data}  # no step yet: no point at 0
    m.status(doc(1, 0, [3, 3, 2], ["progressing", "progressing", "silent"], last_progress=0.5))
    data = metric_data(m.families(T0 + 2), DIMS, T0 + 2)
    ranks = values(data, "Ranks")
    assert {k[0][1] for k in ranks} == set(RANK_STATES)
    assert ranks[(("State", "progressing"),)] == 2 and ranks[(("State", "silent"),)] == 1
    assert values(data, "LastStep") == {(): 3.0}
    assert values(data, "LastProgressAge") == {(): 1.5}


def test_every_figure_names_a_family_of_metrics_py_with_a_unit_cloudwatch_knows() -> None:
    m, _ = hang_restart_finish()
    m.status(doc(40, 1, [9], ["progressing"], last_progress=39))
    m.set_goodput({"effective_ratio": 0.5, "useful_ratio": 0.4, "generations": []})
    m.event(ev(60, "job_finished", 1, state="finished", exit_code=0))
    names = {f.name.removeprefix(PREFIX) for f in m.families(T0 + 60)}
    assert set(FIGURES) <= names, set(FIGURES) - names
    units = set(put_metric_data_shape().members["MetricData"].member.members["Unit"].enum)
    assert {f.unit for f in FIGURES.values()} <= units
    sent = {x["MetricName"] for x in metric_data(m.families(T0 + 60), DIMS, T0 + 60)}
    # each one is sent (none gated off by a missing sample) except what the job has no figure for
    assert {f.name for f in FIGURES.values()} - sent <= {"CompileTime", "StepsPerSecond"}, sent


def test_the_data_is_what_botocores_model_of_put_metric_data_accepts() -> None:
    m, _ = hang_restart_finish()
    m.status(doc(40, 1, [9, 9], ["progressing", "compiling"], last_progress=39))
    data = metric_data(m.families(T0 + 41), dimensions("job-7", {"SLURM_CLUSTER_NAME": "pcluster-a"}), T0 + 41)
    shape = put_metric_data_shape()
    report = ParamValidator().validate({"Namespace": "NeuronWatch", "MetricData": data}, shape)
    assert not report.has_errors(), report.generate_report()
    assert shape.members["MetricData"].member.members["Dimensions"].metadata["max"] == MAX_DIMENSIONS
    assert max(len(x["Dimensions"]) for x in data) == 3  # JobId, Cluster and one label: low cardinality


def test_dimensions_are_the_job_and_slurms_cluster_cut_to_cloudwatchs_length() -> None:
    assert dimensions("j-1", {}) == ({"Name": "JobId", "Value": "j-1"},)
    assert dimensions("j-1", {"SLURM_CLUSTER_NAME": "trn-east"}) == (
        {"Name": "JobId", "Value": "j-1"}, {"Name": "Cluster", "Value": "trn-east"})
    assert dimensions("j" * 2000, {})[0]["Value"] == "j" * 1024


def test_values_cloudwatch_refuses_are_left_out() -> None:
    fams = [Family(PREFIX + "last_step", "gauge", "h", (), (Sample((), math.nan),)),
            Family(PREFIX + "steps_per_second", "gauge", "h", (), (Sample((), math.inf),)),
            Family(PREFIX + "generation", "gauge", "h", (), (Sample((), 2.0**400),)),
            Family(PREFIX + "hang_timeout_seconds", "gauge", "h", (), (Sample((), 8.0),))]
    assert [x["MetricName"] for x in metric_data(fams, DIMS, T0)] == ["HangTimeout"]


def test_batches_keep_the_order_within_a_requests_count_and_bytes() -> None:
    data = [{"MetricName": f"M{i}", "Dimensions": list(DIMS), "Timestamp": T0, "Value": float(i), "Unit": "None"}
            for i in range(2500)]
    cut = list(batches(data))
    assert [len(b) for b in cut] == [MAX_METRICS, MAX_METRICS, 500]
    assert [x for b in cut for x in b] == data
    big = [{**d, "Dimensions": [{"Name": f"D{k}", "Value": "v" * 1024} for k in range(MAX_DIMENSIONS)]}
           for d in data[:200]]
    cut = list(batches(big))
    assert len(cut) > 1 and [x for b in cut for x in b] == big
    assert all(sum(datum_bytes(x) for x in b) <= MAX_REQUEST_BYTES for b in cut)
    assert all(len(json.dumps(b)) <= MAX_REQUEST_BYTES for b in cut)


def test_a_namespace_is_checked_with_the_next_step() -> None:
    assert check_namespace(" NeuronWatch/trn ") == "NeuronWatch/trn"
    for bad, said in [("", "1 to 255"), ("x" * 256, "1 to 255"), ("Neurön", "ASCII"), ("AWS/EC2", "Amazon's")]:
        with pytest.raises(ValueError, match=said):
            check_namespace(bad)


def test_the_mapping_is_pure() -> None:
    assert {"outputs.cloudwatch", "outputs.metrics"} <= set(PURE)  # test_layering.py parses their imports
    imports = _imports(WATCHDOG / "outputs" / "cloudwatch.py")
    assert not sorted(n for n in imports if n.split(".")[0] in FORBIDDEN)
    assert "boto3" not in {n.split(".")[0] for n in imports} and "botocore" not in {n.split(".")[0] for n in imports}


def test_the_options_are_checked_where_they_are_read() -> None:
    cfg = load_config({"cloudwatch": "NeuronWatch"}, {"NEURON_WATCH_CLOUDWATCH_INTERVAL": "15s"})
    assert (cfg.cloudwatch, cfg.cloudwatch_interval) == ("NeuronWatch", 15.0)
    assert load_config({}, {}).cloudwatch_interval == 60.0
    with pytest.raises(ConfigError, match=r"--cloudwatch.*Amazon's own"):
        load_config({"cloudwatch": "AWS/Neuron"}, {})
    with pytest.raises(ConfigError, match=r"NEURON_WATCH_CLOUDWATCH_INTERVAL.*under a second"):
        load_config({}, {"NEURON_WATCH_CLOUDWATCH_INTERVAL": "0.5"})


def test_docs_name_every_cloudwatch_metric_with_its_unit() -> None:
    readme = (WATCHDOG.parent / "README.md").read_text()
    section = readme[readme.index("## Metrics for CloudWatch"):]
    missing = [f.name for f in FIGURES.values() if f"| `{f.name}` | {f.unit} |" not in section]
    assert not missing, f"README's CloudWatch table lacks {missing}"
