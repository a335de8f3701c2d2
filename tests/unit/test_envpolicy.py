from __future__ import annotations

from neuron_watch.recovery.envpolicy import HostFacts, kernel_version, plan_environment


def test_core_dumps_under_run_dir_with_datetime_and_cluster_id() -> None:
    plan = plan_environment({}, HostFacts("6.1.0"), "/runs/j1/core-dumps")
    assert plan.to_set()["NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY"] == "/runs/j1/core-dumps/%d-%c"
    assert "NEURON_RT_S3_CORE_DUMP_PREFIX" not in plan.to_set()


def test_s3_prefix_when_artifacts_go_to_s3() -> None:
    plan = plan_environment({}, HostFacts("6.1.0"), "/d", s3_core_dump_prefix="s3://b/p/j1/core-dumps/")
    assert plan.to_set()["NEURON_RT_S3_CORE_DUMP_PREFIX"] == "s3://b/p/j1/core-dumps/%d-%c"


def test_fork_safe_only_on_old_kernels() -> None:
    old = plan_environment({}, HostFacts("5.10.210-201.852.amzn2.x86_64"), "/d").to_set()
    new = plan_environment({}, HostFacts("5.15.0-1031-aws"), "/d").to_set()
    assert old["FI_EFA_FORK_SAFE"] == "1" and "FI_EFA_FORK_SAFE" not in new
    assert kernel_version("garbage") == (0, 0)


def test_ndet_only_where_neuron_det_exists() -> None:
    without = plan_environment({}, HostFacts("6.1", has_neuron_det=False), "/d", ndet_dir="/n").to_set()
    with_det = plan_environment({}, HostFacts("6.1", has_neuron_det=True), "/d", ndet_dir="/n").to_set()
    assert not any(k.startswith("NEURON_RT_DBG_NDET") for k in without)
    assert with_det["NEURON_RT_DBG_NDET_LOG_LOCATION"] == "/n"


def test_user_values_are_never_overwritten_and_are_reported() -> None:
    user = {"NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY": "/mine", "FI_EFA_FORK_SAFE": "0"}
    plan = plan_environment(user, HostFacts("5.10.0"), "/d")
    assert "NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY" not in plan.to_set() and "FI_EFA_FORK_SAFE" not in plan.to_set()
    text = "\n".join(plan.describe())
    assert "kept (yours) NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY=/mine" in text and "FI_EFA_FORK_SAFE=0" in text
