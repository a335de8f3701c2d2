"""Failure forms read for the misses of round issue23-heldout-27 (third A): a file system that is full or over
its quota whatever status carries it, a failed call's errno in the records of NCCL before 2.3 and of Open MPI's
byte-transfer layers, and TensorFlow's record of a cuDNN older than the one it was built with.

Pure: no I/O. :func:`round27a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 26, :func:`round27a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of
a line that is already an error, and :func:`storage_full_cause` first of all, by ``cause_of`` and by
:func:`neuron_watch.diagnosis.errorclass.read_error`, because the status or exception class around it names memory.

Each form is read where its program prints it:

* A write that found the file system full or the user's quota spent fails with ENOSPC (28, glibc's "No space left on
  device") or EDQUOT (122, "Disk quota exceeded"). TensorFlow and absl carry an errno in a status whose code is
  mapped from it (tsl/platform/errors.cc ``ErrnoToCode``: ENOSPC, EDQUOT, EMFILE, ENFILE, ENOBUFS and ENOMEM are all
  ``RESOURCE_EXHAUSTED``) and whose message is ``IOError``'s ``<context>; <strerror>``: a checkpoint that cannot be
  written raises ``ResourceExhaustedError: <path>.tempstate...; No space left on device`` (round
  issue23-heldout-27: keras-tuner-390, read as memory and restarted). The errno is the cause, not the status code:
  the disk or the quota, which a restart fills again (configuration, as the corpus labels ENOSPC). EDQUOT in its
  words is read the same way (``OSError: [Errno 122] Disk quota exceeded``, a Lustre scratch's quota: hostg-7,
  read as a crash). ENOMEM under the same status stays memory.
* NCCL 2.0-2.2 (closed-source releases) printed its warnings as ``<host>:<pid>:<tid> [<dev>] <file>:<line> WARN
  <message>``, without the ``NCCL`` word later releases put before ``WARN`` (src/include/debug.h since 2.3.5:
  ``"\\n%s:%d:%d [%d] %s:%d NCCL WARN "``); its socket and shared-memory layers report a call that failed with the
  C library's words of errno (``WARN("Net : Socket creation failed : %s", strerror(errno))``, ``Call to recv failed
  : %s``). Pastes keep that record with or without its host head: ``include/socket.h:344 WARN Socket creation
  failed : Address family not supported by protocol`` (nccl-210), ``e66aa18dc444:3171:3171 [0]
  include/socket.h:311 WARN Socket creation failed : ...`` (nccl-tests-14), both read as healthy; ``include/
  socket.h:194 WARN Call to recv failed : Connection reset by peer`` (horovod#210, horovod#147). Only a call that
  failed with an errno the C library names is read, and the errno says the cause (EAFNOSUPPORT: the host has no
  interface of the family NCCL asked for, configuration; ECONNRESET: the peer). The same releases' ``misc/
  ibvwrap.cu:60 WARN Failed to open libibverbs.so[.1]`` names no errno: NCCL falls back to sockets and goes on,
  and it is not read.
* Open MPI's byte-transfer layers print their records as ``[<node>]<proc>[<file>:<line>:<function>] <message>``
  (opal/mca/btl/base/btl_base_error.h: BTL_ERROR, BTL_PEER_ERROR, BTL_OUTPUT and, in debug builds, BTL_VERBOSE
  share the head; ``<proc>`` is ``OPAL_NAME_PRINT``'s ``[[<jobid>,<vpid>],<rank>]``), and the TCP BTL reports a
  socket call that failed as ``<call>() failed: %s (%d)`` with strerror and errno (btl_tcp_component.c,
  btl_tcp_endpoint.c, btl_tcp_frag.c: ``connect() to 172.17.0.1 failed: Connection refused (111)``, horovod-310,
  read as healthy; ``mca_btl_tcp_frag_recv: readv failed: Connection reset by peer (104)``). The head alone is no
  error (BTL_OUTPUT and BTL_VERBOSE share it; ompi-4131's ``remote peer unexpectedly closed connection while I was
  waiting for blocking message`` on a run that completes), so only a call that failed with its errno is read.
* TensorFlow's cuDNN support logs ``Loaded runtime CuDNN library: <loaded>`` only when the library loaded at run
  time is not compatible with the one it was built with (stream_executor/cuda/cuda_dnn.cc ``CudnnSupport::Init``,
  every release: ``... but source was compiled with[:] <built>``, then ``LOG(ERROR)`` and an INTERNAL status); its
  INFO record of a good library is ``Loaded cuDNN version <n>``. A paste wrapped inside the record keeps only the
  head on its line (``E tensorflow/stream_executor/cuda/cuda_dnn.cc:378] Loaded runtime CuDNN library: 5006 ``,
  faster-rcnn-tf-12, read as the crash of the F record after it): the head alone says the versions do not match,
  which a restart meets again (configuration, as the corpus labels the whole sentence).
* slurmstepd adds each task to the job's container before it runs the user's program (src/slurmd/slurmstepd/mgr.c
  ``_pre_task_child_privileged``: ``error("container_g_join failed: %u", job_id); exit(1)``), a private /tmp and
  /dev/shm the job_container plugin built on the node at the job's start (job_container/tmpfs: under its BasePath,
  ``container_p_join: open failed <base>/<job>/.active: <strerror>``, ``container_p_join: setns failed for
  <base>/<job>/.ns: <strerror>``). When that fails the node's own set-up for the job is broken, whatever program
  the job runs: the node is to be drained, as the corpus labels slurmstepd's failure to exec the batch script
  slurmd wrote to its spool (signature slurm.stepd_spool_exec; ArjunaUsers #46). Round issue23-heldout-27:
  arjunausers-123 (``open failed /scratch/119383/.active: No such file or directory``, fixed by the admins), read
  as a missing file of the user's; a NERSC node's ``setns failed for /cray/tmp/job_container/286704/.ns``. The
  errno after it would say configuration (a file not there): the file is the plugin's, not the job's, so this reading
  comes first (:func:`node_state_cause`).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.exctaxonomy import errno_cause
from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: The literals (digit-free) the lines this module reads hold, besides the needles failureforms already searches
#: (each literal more is a cost of the classifier's batch search on every line)
NEEDLES: tuple[str, ...] = ("isk quota exceeded", "EDQUOT", " failed : ", "][btl_", "Loaded runtime CuDNN library: ",
                            "container_g_join failed", "container_p_join: ")

#: a full file system or a spent quota, by glibc's words (lower-cased as Go's syscall table and some file systems'
#: clients print them), errno's name or Python's "[Errno n]"
_STORAGE_FULL = re.compile(r"\b[Nn]o space left on device\b|\b[Dd]isk quota exceeded\b|\bE(?:NOSPC|DQUOT)\b|"
                           r"\[Errno (?:28|122)\]")

#: NCCL 2.0-2.2's WARN record (no "NCCL" before the level) of a call that failed, and the errno words after it
_OLD_NCCL_WARN_CALL = re.compile(r"(?:^|\s)(?:[\w.-]+/)*[\w.-]+\.(?:h|cc|cu|cpp|c):\d+ WARN .{0,160}?"
                                 r"\bfailed : (\S.{0,80})$")

#: Open MPI's BTL record head ("[node][[jobid,vpid],rank][btl_<component>...c:line:function] ": every BTL's sources
#: are opal/mca/btl/<component>/btl_<component>*.c) and a call that failed with strerror's words and errno after them
_OMPI_BTL_CALL_FAILED = re.compile(r"\[[^\]\s]+\]\[\[\d+,\d+\],\d+\]\[btl_[\w.-]*\.c:\d+:\w+\] .{0,160}?"
                                   r"\bfailed: (\S.{0,80}?) \((\d+)\)\s*$")

#: TensorFlow's cuDNN support reporting a run-time library the build is not compatible with
_CUDNN_MISMATCH = re.compile(r"\bLoaded runtime CuDNN library: \d")


#: slurmstepd failing to put a task into the job container the plugin built on the node
_JOB_CONTAINER_JOIN_FAILED = re.compile(r"\bcontainer_g_join failed: \d+|\bcontainer_p_join: \w+ failed\b")


def node_state_cause(text: str) -> tuple[Label, str] | None:
    """A node fault when slurmstepd could not join the job container built on the node, whatever errno follows."""
    if "_join" in text and _JOB_CONTAINER_JOIN_FAILED.search(text):
        return Label.HARDWARE_ERROR, "slurmstepd could not join the job container on the node (container_g_join)"
    return None


def storage_full_cause(text: str) -> tuple[Label, str] | None:
    """Configuration when ``text`` states ENOSPC or EDQUOT, whatever status or exception class carries it."""
    if ("o space left" in text or "isk quota" in text or "ENOSPC" in text or "EDQUOT" in text
            or "[Errno " in text) and _STORAGE_FULL.search(text):
        return Label.CONFIG_ERROR, "a file system full or over its quota (ENOSPC, EDQUOT)"
    return None


def _failed_call_errno(words: str) -> Label | None:
    cause = errno_cause(words)
    return None if cause is None else cause.label


def round27a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    node = node_state_cause(text)
    if node is not None:
        return Form(FormKind.ERROR, node[1], node[0])
    if " failed : " in text and " WARN " in text and "NCCL WARN" not in text:
        warn = _OLD_NCCL_WARN_CALL.search(text)
        if warn is not None and (label := _failed_call_errno(warn.group(1))) is not None:
            return Form(FormKind.ERROR, "an NCCL WARN record of a call that failed", label)
    if "failed: " in text and "][btl_" in text:
        btl = _OMPI_BTL_CALL_FAILED.search(text)
        if btl is not None and (label := _failed_call_errno(btl.group(1))) is not None:
            return Form(FormKind.ERROR, "an Open MPI BTL record of a call that failed", label)
    if "Loaded runtime CuDNN library: " in text and _CUDNN_MISMATCH.search(text):
        return Form(FormKind.ERROR, "a cuDNN library older than the one TensorFlow was built with",
                    Label.CONFIG_ERROR)
    return None


def round27a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    form = round27a_form(text)
    return None if form is None or form.label is None else (form.label, form.name)
