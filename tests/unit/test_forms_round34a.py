# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-34 (recommendation, graph and tabular training), each
as a rule of its family, with real lines and the near misses the rule must leave alone: CatBoost's iteration row with
a NaN loss, a frame of Open MPI's fault handler, Dask's nanny on a worker process that
died, LightGBM's socket error; and, outside the module, glog's head with the year and Py4J's wrapper of a JVM's
throwable. Each line is from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorblock import Role, blocks
from neuron_watch.diagnosis.failureforms import FormKind, read_line
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

CRASH = FormKind.CRASH
ERROR = FormKind.ERROR
METRIC = FormKind.METRIC

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # CatBoost's iteration row with a loss that is not finite (the 2018 layout, the value glued to "passed:")
    ("65:     learn nanpassed: 17.5 sec       total: 22m 8s   remaining: 11m 24s",
     METRIC, Label.NUMERICAL_ERROR, "corpus (catboost-274-learn-nan-after-65-iterations)"),
    ("learn nanpassed: 12.8 sec       total: 22m 20s  remaining: 11m",
     METRIC, Label.NUMERICAL_ERROR, "catboost#274, the next row, its counter taken off as srun's rank tag"),
    # a frame of Open MPI's fault handler
    ("[1,2]<stderr>:[n193-019-222:14623] [ 1] /opt/tiger/jdk/jdk1.8/jre/lib/amd64/server/libjvm.so(JVM_handle_linux_signal+0xb6)[0x7fb6a01cf826]",
     CRASH, None, "corpus (deeprec-838-sok-multi-machine-core-dump)"),
    ("[c35931af520b:00652] [ 0] /usr/lib/x86_64-linux-gnu/libc.so.6(+0x46210)[0x7f581ac2e210]",
     CRASH, None, "NVTabular#1334 (HugeCTR's illegal memory access, then SIGABRT)"),
    # Dask's nanny on a worker process that died
    ("distributed.nanny - INFO - Worker process 9018 was killed by signal 9",
     CRASH, None, "corpus (xgboost-6388-dask-cuda-worker-killed-signal-9)"),
    ("distributed.nanny - WARNING - Worker process 28364 was killed by signal 15",
     CRASH, None, "dask/distributed#1863 (more workers than cores at start-up)"),
    ("distributed.nanny - WARNING - Worker process 12826 was killed by unknown signal",
     CRASH, None, "dask/dask-jobqueue#20 (SLURM workers lost)"),
    # LightGBM's socket error
    ("2021-03-26T14:07:23.8185090Z [LightGBM] [Fatal] Socket recv error, code: 54",
     ERROR, Label.COMM_ERROR, "corpus (lightgbm-4116-dask-socket-recv-error-54-macos)"),
    ("Error in LGBM_BoosterUpdateOneIter: Socket recv error, Connection reset by peer (code: 104)",
     ERROR, Label.COMM_ERROR, "LightGBM#6363 (16 machines through the C API)"),
    # TorchRec's planner finding no sharding plan
    ("RuntimeError: No available sharding type and compute kernel combination after applying user provided constraints for product_table",
     ERROR, Label.CONFIG_ERROR, "corpus (torchrec-1614-no-sharding-type-for-constraints)"),
    ("torchrec.distributed.planner.types.PlannerError: Unable to find a plan for this model because of insufficient storage. ",
     ERROR, Label.CONFIG_ERROR, "torchrec/distributed/planner/planners.py's PlannerError(INSUFFICIENT_STORAGE), as Python prints it"),
    ("torchrec.distributed.planner.types.PartitionError: Unable to find a plan for this model. Possible solutions:",
     ERROR, Label.CONFIG_ERROR, "torchrec/distributed/planner/partitioners.py's PartitionError, as Python prints it"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # CatBoost's rows with finite values, and "learn: nan" outside its row
    "0:      learn 0.6355974416passed: 17.4 sec      total: 3m 13s   remaining: 3h 42m 6s",  # catboost#274
    "39:     learn: 0.9479396        test: 0.9194317 best: 0.9212250 (24)    total: 24.3s    remaining: 2h 56s",  # catboost#1028
    "    learn: nan 0/7988, 0.0, negative 19/7988, 0.0023785678517776665",  # a public repository's survey data report
    # c10's frames alone: c10d prints them under a warning for an error it caught and went on from
    "frame #1: <unknown function> + 0x5ced701 (0x1468ae81e701 in /home/pkourdis/pytorch/torch/lib/libtorch_cpu.so)",  # corpus (torchcomms-2358)
    "dlrm_main/0 [1]:frame #58: <unknown function> + 0x17cd15 (0x55ad313f2d15 in /home/jingqi/anaconda3/envs/rec/bin/python)",  # corpus (torchrec-197): a miss its frames cannot say
    # Open MPI's report of bindings: a host and pid, no fault
    "[node01:12345] MCW rank 0 bound to socket 0[core 0[hwt 0-1]]: [BB/../../..][../../../..]",  # Open MPI's mpirun(1) --report-bindings
    # Dask's nanny on a worker that ended well, or closing
    "distributed.nanny - INFO - Worker process 12826 exited with status 0",  # distributed/nanny.py's message at exit 0
    "distributed.nanny - INFO - Closing Nanny at 'tcp://127.0.0.1:36185'. Reason: nanny-close",  # a dask cluster's shutdown
    # LightGBM's network set-up going well
    "2021-03-26T14:07:23.7505630Z [LightGBM] [Info] Connected to rank 1",  # corpus (lightgbm-4116)
    "[LightGBM] [Info] Finished linking network in 0.000000 seconds",  # LightGBM#4074
    # TorchRec's planner that found a plan, and the enumerator's words for one sharder outside an exception
    "INFO:torchrec.distributed.planner.stats:#                       --- Evaluated 1 proposal(s), found 1 possible plan(s), ran for 0.06s ---                       #",  # torchrec#3745
    "No available compute kernels after applying user provided constraints for product_table",  # corpus (torchrec-1614), above its exception
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_glog_head_with_the_year_is_a_severity() -> None:
    """glog 0.6+ prints the year before the month when asked (--log_year_in_prefix): its E and F records are an error
    and a fatal record as without the year; its I records are no failure."""
    error = read_line("E20220801 07:29:34.700927  2256 env.cc:112] File system not implemented: root://graphlearn")
    fatal = read_line("F20220801 07:29:34.701110  2256 fs_coordinator.cc:42] Invalid tracker path: root://graphlearn/")
    assert error is not None and error.kind is ERROR  # corpus (graph-learn-213-invalid-tracker-path-check-failure)
    assert fatal is not None and fatal.kind is CRASH
    # corpus (libai-407-mt5-oneflow-graph-compile-passes): OneFlow's glog at INFO
    info = read_line("I20221019 15:14:04.223161 1057827 job_build_and_infer_ctx.cpp:943] GraphBase_0 start compiling "
                     "with pass pass_cnt_0-InsertPinnedIdentityOpPass")
    assert info is None or info.kind not in (ERROR, CRASH)  # it reads as OneFlow's compile at work


#: corpus (synapseml-2287-lightgbm-fit-loop-connection-refused): Py4J's wrapper, the Java throwable, its frames
PY4J = [
    "Py4JJavaError: An error occurred while calling o57649.fit.",
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 17 in stage 53057.0 failed 4 times, most recent failure: Lost task 17.3 in stage 53057.0 (TID 2649814) (10.99.12.16 executor 39): java.net.ConnectException: Connection refused (Connection refused)",
    "\tat java.net.PlainSocketImpl.socketConnect(Native Method)",
    "\tat java.net.AbstractPlainSocketImpl.doConnect(AbstractPlainSocketImpl.java:350)",
]


def test_py4j_carries_the_java_throwable_on_its_next_line() -> None:
    """Py4J prints the JVM's throwable after ": " on the line under its own message: one block, the throwable deeper
    than the wrapper (the wrapper's cause), its Java frames frames."""
    (block,) = blocks(PY4J)
    roles = [(bl.role, bl.depth) for bl in block.lines]
    assert [r for r, _ in roles] == [Role.MESSAGE, Role.MESSAGE, Role.FRAME, Role.FRAME]
    assert roles[1][1] > roles[0][1]
    # PyFlink raises through the same wrapper (a public repository's recorded run of a Flink query)
    (flink,) = blocks(["py4j.protocol.Py4JJavaError: An error occurred while calling o100629419.explain.",
                       ": java.lang.RuntimeException: Error while applying rule FlinkExpandConversionRule, args [rel#202844286:AbstractConverter.BATCH_PHYSICAL.hash[0, 1]true.[23]]"])
    assert [bl.role for bl in flink.lines] == [Role.MESSAGE, Role.MESSAGE]


def test_a_colon_line_after_another_exception_is_not_joined() -> None:
    """Only Py4J's message is followed by the throwable it carries: after another exception line, a line that starts
    with ": " is no part of its block."""
    (block,) = blocks(["RuntimeError: CUDA error: an illegal memory access was encountered", PY4J[1]])
    assert len(block.lines) == 1


def test_py4j_wrapped_connection_refused_is_a_comm_error(tmp_path: Path) -> None:
    """The throwable under Py4J's wrapper decides: Spark's task failure with java.net's refused connection."""
    log = tmp_path / "py4j.log"
    log.write_text("\n".join(PY4J) + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.COMM_ERROR


def test_catboost_rows_turning_nan_are_numerical(tmp_path: Path) -> None:
    """corpus (catboost-274): rows whose learn value turns nan, their counters read as srun's rank tags, are a
    numerical failure; the rows before them stay healthy."""
    rows = ["63:     learn 0.1198204937passed: 17.6 sec      total: 21m 32s  remaining: 12m 6s",
            "64:     learn 0.1191390175passed: 18.2 sec      total: 21m 50s  remaining: 11m 45s"]
    healthy = tmp_path / "healthy.log"
    healthy.write_text("\n".join(rows) + "\n")
    assert diagnose_paths([str(healthy)], now=0.0).verdict.label is Label.HEALTHY
    failed = tmp_path / "nan.log"
    failed.write_text("\n".join([*rows, FORMS[0][0]]) + "\n")
    assert diagnose_paths([str(failed)], now=0.0).verdict.label is Label.NUMERICAL_ERROR
