# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-39 (data loading and preprocessing pipelines feeding
training), each as a rule of its family, with real lines and the near misses the rule must leave alone: Dask's nanny
restarting a worker over its memory budget, YARN killing a container over its memory, Ray's full object store,
nvJPEG's failed allocation under DALI, DALI's operator it cannot construct, Mosaic streaming's missing remote object,
a Go fatal error's throw frame. Each line is from the corpus (named by its excerpt) or from a public thread or
repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round39a import round39a_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH

DASK_RESTART = "distributed.nanny - WARNING - Worker exceeded 95% memory budget.  Restarting"
YARN_KILL = "18/05/16 00:46:24 WARN YarnAllocator: Container killed by YARN for exceeding memory limits. 8.3 GB of 8 GB physical memory used. Consider boosting spark.yarn.executor.memoryOverhead."
RAY_FULL = "ray.exceptions.ObjectStoreFullError: Failed to put object ffffffffffffffffffffffffffffffffffffffff0f00000003000000 in object store because it is full. Object size is 516884584 bytes."
NVJPEG_5 = 'RuntimeError: Critical error in pipeline: Error in thread 4: [/opt/dali/dali/pipeline/operators/decoder/nvjpeg/decoupled_api/nvjpeg_decoder_decoupled_api.h:351] NVJPEG error "5" : NVJPEG_STATUS_ALLOCATOR_FAILURE n04418357/n04418357_26036.JPEG'
DALI_CONSTRUCT = "Error when constructing operator: readers__Webdataset encountered:"
STREAMING_NOT_FOUND = "[ClientError('Object s3://my_bucket/path/to/data/my_dataset/train/index.json not found! Either check the bucket path or the bucket permission. If the bucket is a requester pays bucket, then provide the bucket name to the environment variable `MOSAICML_STREAMING_AWS_REQUESTER_PAYS`.')]"
GO_THROW = "runtime.throw(0xb5e9bc, 0x9)"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Dask's nanny over the memory budget
    (DASK_RESTART, CRASH, Label.OOM, "corpus (distributed-1829-nanny-worker-exceeded-memory-budget)"),
    ("distributed.nanny - WARNING - Worker exceeded 95% memory budget. Restarti", CRASH, Label.OOM,
     "corpus (db-benchmark-144-dask-groupby-workers-killed-memory: the line wrapped by the terminal)"),
    ("2024-03-02 10:11:12,345 - distributed.nanny.memory - WARNING - Worker tcp://127.0.0.1:49477 (pid=59029) exceeded 95% memory budget. Restarting...",
     CRASH, Label.OOM, "distributed/worker_memory.py's newer words (as quoted in the nested-pandas/LSDB docs)"),
    # YARN's container kill
    (YARN_KILL, CRASH, Label.OOM, "corpus (TensorFlowOnSpark-282-yarn-container-physical-memory)"),
    ("17/11/25 18:23:24 ERROR YarnClusterScheduler: Lost executor 9 on harrisburg.cs.colostate.edu: Container killed by YARN for exceeding memory limits. 7.2 GB of 4.2 GB virtual memory used. Consider boosting spark.yarn.executor.memoryOverhead.",
     CRASH, Label.OOM, "corpus (TensorFlowOnSpark-134-yarn-executor-lost-memory-limit)"),
    ("Executor lost: Container killed by YARN for exceeding physical memory limits. 16.4 GB of 16 GB physical memory used.",
     CRASH, Label.OOM, "Spark 3's YarnAllocator (\"Container killed by YARN for exceeding physical memory limits. \")"),
    ("Container [pid=2836,containerID=container_1525710710928_0087_01_000002] is running beyond physical memory limits. Current usage: 8.3 GB of 8 GB physical memory used; 10.1 GB of 16.8 GB virtual memory used. Killing container.",
     CRASH, Label.OOM, "YARN NodeManager's ContainersMonitorImpl (Hadoop 2)"),
    # Ray's full object store
    (RAY_FULL, ERROR, Label.OOM, "corpus (ray-13443-object-store-full-dataframe-to-actor)"),
    ("ray.exceptions.ObjectStoreFullError: Failed to put object ffffffffffffffffdf5a1a820100000002000000 in object store because it is full. Object size is 25892330588 bytes.",
     ERROR, Label.OOM, "ray#11594 (RLlib's weights put into a full store)"),
    # nvJPEG's allocator failure
    (NVJPEG_5, ERROR, Label.OOM, "corpus (DALI-486-nvjpeg-allocator-failure-gpu-memory-growth)"),
    ('RuntimeError: Critical error in pipeline: Error in thread 0: [/opt/dali/dali/pipeline/operators/decoder/nvjpeg/decoupled_api/nvjpeg_decoder_decoupled_api.h:355] NVJPEG error "5" : NVJPEG_STATUS_ALLOCATOR_FAILURE n02130308/ILSVRC2012_val_00033687.JPEG',
     ERROR, Label.OOM, "DALI#1434 (validation on two 2080 Ti)"),
    # DALI's operator that cannot be constructed
    (DALI_CONSTRUCT, ERROR, Label.CONFIG_ERROR, "corpus (DALI-5228-webdataset-underful-sample-wrong-ext)"),
    ("Error when constructing operator: readers__Webdataset encountered:", ERROR, Label.CONFIG_ERROR,
     "DALI#4093 (num_shards_ > shard_id_ asserted while building the webdataset reader)"),
    # Mosaic streaming's missing object
    (STREAMING_NOT_FOUND, ERROR, Label.CONFIG_ERROR, "corpus (streaming-310-s3-index-json-not-found)"),
    ("FileNotFoundError: Object gs://bucket/c4/train/index.json not found! Either check the bucket path or the bucket permission. If the bucket is a requester pays bucket, then provide the bucket name to the environment variable `MOSAICML_STREAMING_AWS_REQUESTER_PAYS`.",
     ERROR, Label.CONFIG_ERROR, "streaming/base/storage/download.py (the same words for a missing object)"),
    # a Go fatal error's throw frame
    (GO_THROW, CRASH, Label.OTHER_CRASH, "corpus (webdataset-90-s5cmd-go-runtime-cannot-create-thread)"),
    ("runtime.throw({0x1c9b1e5?, 0x2?})", CRASH, Label.OTHER_CRASH, "Go 1.20's frame (runtime/panic.go throw)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "distributed.worker - WARNING - Worker is at 80% memory usage. Pausing worker.  Process memory: 3.1 GB -- Worker memory limit: 3.9 GB",  # the pause threshold: nothing lost
    "distributed.worker - WARNING - Memory use is high but worker has no data to store to disk.  Perhaps some other process is leaking memory?  Process memory: 3.06 GB -- Worker memory limit: 3.38 GB",  # a warning, the worker runs on
    "  --conf spark.yarn.executor.memoryOverhead=2g  # avoid Container killed by YARN errors",  # prose about the rule
    "    raise FileNotFoundError(f'Object {remote} not found.') from e",  # the older message's source line
    "  runtime.throw is how the Go runtime ends a program on a fatal error",  # prose
    "\truntime.throw(0xb5e9bc, 0x9)",  # a frame indented under another program's text (a quoted dump)
]

#: lines other readers read (an exception of no stated cause) that are not this round's forms
NOT_THIS_ROUND = [
    "ray.exceptions.ObjectStoreFullError",  # the class named alone (a docs index, an import)
    'RuntimeError: Critical error in pipeline: Error in thread 0: [/opt/dali/dali/pipeline/operators/decoder/nvjpeg_decoder.h:331] NVJPEG error "3"',  # a bad JPEG: data, not memory
    'RuntimeError: Critical error in pipeline: Error in thread 0: [/opt/dali/dali/pipeline/operators/decoder/nvjpeg/decoupled_api/nvjpeg_decoder_decoupled_api.h:349] NVJPEG error "4" : NVJPEG_STATUS_JPEG_NOT_SUPPORTED',  # an unsupported JPEG
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_other_readers_lines_are_not_this_rounds_forms() -> None:
    for line in NOT_THIS_ROUND:
        assert round39a_form(line) is None, line


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 64


def test_the_round_reads_its_own_forms() -> None:
    """Every table line is this round's form (not another round's that happens to read it alike)."""
    for line, _kind, label, source in FORMS:
        form = round39a_form(line)
        assert form is not None and form.label is label, source


def test_a_dask_compute_whose_workers_were_restarted_over_memory_is_oom(tmp_path: Path) -> None:
    """The nanny's restarts and the kills that follow them: memory, not a crash of no cause."""
    log = tmp_path / "dask.log"
    log.write_text(DASK_RESTART + "\n"
                   "distributed.nanny - WARNING - Worker process 22204 was killed by unknown signal\n"
                   "distributed.nanny - WARNING - Restarting worker\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OOM


def test_a_dali_pipeline_that_cannot_be_built_is_configuration(tmp_path: Path) -> None:
    """DALI's construction failure ends the log: configuration (stop), not a crash to restart."""
    log = tmp_path / "dali.log"
    log.write_text("RuntimeError: Critical error when building pipeline:\n" + DALI_CONSTRUCT + "\n"
                   '[/opt/dali/dali/operators/reader/loader/webdataset_loader.cc:465] Underful sample detected at index file at "/path/to/dataset.index" line 1\n')
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
