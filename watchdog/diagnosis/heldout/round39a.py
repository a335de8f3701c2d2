"""Failure forms read for the misses of round issue23-heldout-39 (part A: data loading and preprocessing pipelines
feeding training): the memory reports of the systems that prepare or stream the data (a Dask nanny's restart of a
worker over its memory budget, YARN killing a Spark executor's container, Ray's full object store, nvJPEG's failed
allocation under DALI), the setup mistakes two data loaders state in their own words (DALI's operator that cannot
be constructed, Mosaic streaming's object not found), and the frame a Go program's fatal error starts its stack with.

Pure: no I/O. :func:`round39a_form` is asked after the forms of round 38, :func:`round39a_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* Dask's nanny watches its worker's resident memory and, past ``distributed.worker.memory.terminate`` (95% by
  default), kills and restarts it: distributed/nanny.py (before 2022) ``logger.warning("Worker exceeded %d%% memory
  budget. Restarting", ...)``, distributed/worker_memory.py (since) ``"Worker %s (pid=%s) exceeded %d%% memory
  budget. Restarting..."``. The worker's tasks are lost with it: memory, whatever the warning level (round
  issue23-heldout-39: distributed#1829, a dask dataframe compute whose workers were restarted one after another, read
  as a crash of no cause; db-benchmark#144, the same lines wrapped by a terminal at "Restarti"). The nanny's "Worker is
  at 80% memory usage. Pausing worker" (the pause threshold, nothing lost) is not this form.
* Spark on YARN reports the container YARN killed over its memory allowance: YarnAllocator's
  memLimitExceededLogMessage, ``"Container killed by YARN for exceeding memory limits. 8.3 GB of 8 GB physical memory
  used. Consider boosting spark.yarn.executor.memoryOverhead."`` (Spark 3: "... for exceeding physical memory
  limits." / "virtual memory limits."), logged at WARN by the allocator and at ERROR by the scheduler that loses the
  executor; YARN's NodeManager itself writes "Container [pid=...] is running beyond physical memory limits" (Hadoop 3:
  "is running 123B beyond the 'PHYSICAL' memory limit"). Memory: the executor outgrew its container (round
  issue23-heldout-39: TensorFlowOnSpark#134 read as a crash of no cause, TensorFlowOnSpark#282 read as healthy, its
  lines being WARN).
* Ray raises ``ray.exceptions.ObjectStoreFullError: Failed to put object <id> in object store because it is full.
  Object size is N bytes.`` (python/ray/exceptions.py, raised from the core worker's put when the plasma store cannot
  evict objects still in scope): the object store's memory is exhausted (round issue23-heldout-39: ray#13443, a
  5-million-row dataframe put for an actor, read as a crash of no cause).
* nvJPEG's status 5 is ``NVJPEG_STATUS_ALLOCATOR_FAILURE`` (nvjpeg.h: 1 NOT_INITIALIZED, 2 INVALID_PARAMETER, 3
  BAD_JPEG, 4 JPEG_NOT_SUPPORTED, 5 ALLOCATOR_FAILURE, 6 EXECUTION_FAILED ...; nvJPEG2000 the same name with
  NVJPEG2K_): the decoder could not allocate its buffers. DALI reports it as ``NVJPEG error "5" :
  NVJPEG_STATUS_ALLOCATOR_FAILURE <file>`` (its older releases print the number alone: ``NVJPEG error "5"``):
  device memory (round issue23-heldout-39: DALI#486, GPU memory growing step by step under DALI's decoder until the
  allocation failed, read as a crash of no cause). A bad or unsupported JPEG (3, 4) is a data fault and not this form.
* DALI builds a pipeline's operators before the first batch; an operator whose arguments or data index do not fit
  cannot be constructed, and DALI says so: ``RuntimeError: Critical error when building pipeline:`` /
  ``Error when constructing operator: <schema> encountered:`` then the operator's own assertion (readers.webdataset's
  "Underful sample detected at index file", "Assert on \"num_shards_ > shard_id_\""). The pipeline as written cannot
  be built: configuration, which a restart meets again (round issue23-heldout-39: DALI#5228, the reader asked for
  extension "jpg" of samples whose component was "image.jpg", read as a crash to restart).
* Mosaic's streaming library (streaming/base/storage/download.py) turns a missing S3/GCS object into ``Object
  <remote> not found! Either check the bucket path or the bucket permission. If the bucket is a requester pays
  bucket, then provide the bucket name to the environment variable `MOSAICML_STREAMING_AWS_REQUESTER_PAYS`.``: the
  dataset's remote path or its permission is wrong (round issue23-heldout-39: streaming#310, index.json of a
  llm-foundry pretraining set, read as a crash to restart).
* The Go runtime's fatal error (runtime/panic.go ``throw``: "fatal error: <msg>", then "runtime stack:" and the
  goroutines) starts the system stack it prints with the throw's own frame, ``runtime.throw(0xb5e9bc, 0x9)`` (Go
  1.17 and later ``runtime.throw({0x..., 0x...})``, 1.20 marking uncertain arguments ``{0x1c9b1e5?, 0x2?}``), at
  the start of a line: the Go program (here s5cmd, the S3 client webdataset pipes shards through) died. Round
  issue23-heldout-39: webdataset#90, s5cmd unable to create an OS thread after webdataset had launched one s5cmd per
  shard read, its "fatal error:" line cut from the paste, read as healthy. A frame named in prose or a goroutine
  dump of a live program (no throw) is not this form.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round39a_form` reads hold, besides the needles failureforms already
#: searches: Dask's memory budget, YARN's container kill, Ray's full object store, nvJPEG's failed allocation,
#: DALI's operator construction, Mosaic streaming's missing object, the Go runtime's throw frame
NEEDLES: tuple[str, ...] = (
    "memory budget.",
    "Container killed by YARN", "Container [pid=",
    "ObjectStoreFullError",
    "ALLOCATOR_FAILURE", "NVJPEG error",
    "Error when constructing operator",
    "Either check the bucket path",
    "runtime.throw(",
)

#: Dask's nanny restarting a worker past its terminate fraction ("Worker exceeded 95% memory budget. Restarting",
#: "Worker tcp://... (pid=...) exceeded 95% memory budget. Restarting..."), wrapped or not after "Restart"
_DASK_MEMORY_RESTART = re.compile(r"\b[Ww]orker\b[^\n]{0,120}? exceeded \d{1,3}% memory budget\.\s+Restart")

#: Spark's YarnAllocator's report of a container YARN killed over its memory, and the NodeManager's own words
_YARN_MEMORY_KILL = re.compile(
    r"\bContainer killed by YARN for exceeding (?:(?:physical|virtual) )?memory limits\b"
    r"|\bContainer \[pid=\d+,\s?containerID=\w+\] is running (?:beyond (?:physical|virtual) memory limits"
    r"|\d+B beyond the '(?:PHYSICAL|VIRTUAL)' memory limit)")

#: Ray's exception for a put the full object store could not take (its class, then its message)
_RAY_STORE_FULL = re.compile(r"\bObjectStoreFullError: Failed to put object \w+ in object store because it is full")

#: nvJPEG's allocator failure, by name or by DALI's number for it (status 5)
_NVJPEG_ALLOC = re.compile(r"\bNVJPEG(?:2K)?_STATUS_ALLOCATOR_FAILURE\b|\bNVJPEG error \"5\"")

#: DALI's report of an operator it could not construct while building the pipeline
_DALI_CONSTRUCT = re.compile(r"\bError when constructing operator: \w+ encountered:")

#: Mosaic streaming's missing remote object
_STREAMING_NOT_FOUND = re.compile(
    r"\bObject \S+ not found! Either check the bucket path or the bucket permission\b")

#: the frame a Go fatal error's runtime stack starts with, at the start of its line
_GO_THROW_FRAME = re.compile(r"^runtime\.throw\((?:\{0x[0-9a-f]+\??, 0x[0-9a-f]+\??\}|0x[0-9a-f]+, 0x[0-9a-f]+)\)\s*$")

#: The forms read by their pattern alone, in order: (needle, pattern, kind, what it is, the cause it states).
_FORMS: tuple[tuple[str, re.Pattern[str], FormKind, str, Label], ...] = (
    ("memory budget", _DASK_MEMORY_RESTART, FormKind.CRASH,
     "Dask's nanny restarted a worker over its memory budget", Label.OOM),
    ("Container ", _YARN_MEMORY_KILL, FormKind.CRASH, "YARN killed a container over its memory limit", Label.OOM),
    ("ObjectStoreFullError", _RAY_STORE_FULL, FormKind.ERROR, "Ray's object store is full", Label.OOM),
    ("NVJPEG", _NVJPEG_ALLOC, FormKind.ERROR, "nvJPEG could not allocate its buffers", Label.OOM),
    ("constructing operator", _DALI_CONSTRUCT, FormKind.ERROR,
     "DALI could not construct a pipeline operator from its arguments", Label.CONFIG_ERROR),
    ("Either check the bucket path", _STREAMING_NOT_FOUND, FormKind.ERROR,
     "the streaming dataset's remote object is not found", Label.CONFIG_ERROR),
    ("runtime.throw(", _GO_THROW_FRAME, FormKind.CRASH, "a Go program's fatal error", Label.OTHER_CRASH),
)


def round39a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    for needle, rx, kind, name, label in _FORMS:
        if needle in text and rx.search(text):
            return Form(kind, name, label)
    return None


def round39a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round39a_form(text))
