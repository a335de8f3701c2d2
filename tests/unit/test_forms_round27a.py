# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for third A of the misses of round issue23-heldout-27, each as a rule of its family, with real lines and
the near misses the rule must leave alone: a file system full or over its quota whatever status or exception class
carries the errno, the errno of a failed call in NCCL 2.0-2.2's WARN records and in Open MPI's BTL records, and
TensorFlow's record of a cuDNN older than its build. Each line is from the corpus (named by its excerpt), from a
public thread (named), or is the format the program's source prints (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # ENOSPC and EDQUOT, under TensorFlow's RESOURCE_EXHAUSTED (IOError's "<context>; <strerror>") or bare
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: models/singleton_classifiers/context.model/variables/variables_temp_d0c7555bd2aa4ae682695465c0d0e2f4/part-00000-of-00002.data-00000-of-00001.tempstate8490917510693379885; No space left on device",
     ERROR, Label.CONFIG_ERROR, "corpus (keras-tuner-390)"),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: disk quota exceeded [Op:SaveV2]", ERROR,
     Label.CONFIG_ERROR, "keras-team/keras-tuner#390's description (an AutoKeras checkpoint of 1.4 GB)"),
    ("OSError: [Errno 122] Disk quota exceeded: 'out/intermediate.ntw'", ERROR, Label.CONFIG_ERROR,
     "corpus (hostg-7, a Lustre scratch)"),
    ("OSError: [Errno 122] Disk quota exceeded: '/home/586/tn9356/.local/share/jupyter/runtime/kernel-b6f86981-8cd2-493e-958b-8b4847dcde9a.json'",
     ERROR, Label.CONFIG_ERROR, "GeoscienceAustralia/dea-notebooks#755 (a notebook on NCI)"),
    # NCCL 2.0-2.2's WARN record (no "NCCL" before the level) of a call that failed, with its errno's words
    ("include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol", ERROR,
     Label.CONFIG_ERROR, "corpus (nccl-210)"),
    ("e66aa18dc444:3171:3171 [0] include/socket.h:311 WARN Socket creation failed : Address family not supported by protocol",
     ERROR, Label.CONFIG_ERROR, "corpus (nccl-tests-14-socket-creation-failed-docker-net)"),
    ("ml-gpu-ser015:2123:2230 [3] include/socket.h:194 WARN Call to recv failed : Connection reset by peer", ERROR,
     Label.COMM_ERROR, "horovod/horovod#210 (mpirun over two hosts, the model hangs)"),
    # Open MPI's BTL record of a socket call that failed, strerror and errno after it
    ("[u10-154-66-206][[38971,1],2][btl_tcp_endpoint.c:796:mca_btl_tcp_endpoint_complete_connect] connect() to 172.17.0.1 failed: Connection refused (111)",
     ERROR, Label.COMM_ERROR, "corpus (horovod-310)"),
    ("[node10][[27278,1],18][btl_tcp_endpoint.c:618:mca_btl_tcp_endpoint_recv_blocking] recv(107, 0/8) failed: Connection reset by peer (104)",
     ERROR, Label.COMM_ERROR, "open-mpi/ompi#1620 (OSU all-to-allv over 96 processes)"),
    ("[c-16-1-worker0006][[11356,1],45][btl_tcp.c:559:mca_btl_tcp_recv_blocking] recv(36) failed: Connection reset by peer (104)",
     ERROR, Label.COMM_ERROR, "open-mpi/ompi#9218 (Open MPI 4.0.3 over TCP under srun)"),
    # TensorFlow's cuDNN support reporting a run-time library its build is not compatible with
    ("E tensorflow/stream_executor/cuda/cuda_dnn.cc:378] Loaded runtime CuDNN library: 5006 ", ERROR,
     Label.CONFIG_ERROR, "corpus (faster-rcnn-tf-12, the record wrapped after the loaded version)"),
    ("2018-03-27 15:29:16.782566: E tensorflow/stream_executor/cuda/cuda_dnn.cc:352] Loaded runtime CuDNN library: 5005 (compatibility version 5000) but source was compiled with 5110 (compatibility version 5100).  If using a binary install, upgrade your CuDNN library to match.  If building from sources, make sure the library loaded at runtime matches a compatible version specified during compile configuration.",
     ERROR, Label.CONFIG_ERROR, "tensorlayer/SRGAN#77"),
    ("2021-10-13 17:19:29.385716: E tensorflow/stream_executor/cuda/cuda_dnn.cc:362] Loaded runtime CuDNN library: 8.0.4 but source was compiled with: 8.1.0.  CuDNN library needs to have matching major version and equal or higher minor version. If using a binary install, upgrade your CuDNN library.  If building from sources, make sure the library loaded at runtime is compatible with the version specified during compile configuration.",
     ERROR, Label.CONFIG_ERROR, "google-research/deeplab2#66"),
    # slurmstepd failing to join the job container the plugin built on the node: the node, whatever errno follows
    ("slurmstepd: error: container_p_join: open failed /scratch/119383/.active: No such file or directory", ERROR,
     Label.HARDWARE_ERROR, "corpus (arjunausers-123, fixed by the admins)"),
    ("slurmstepd: error: container_p_join: setns failed for /cray/tmp/job_container/286704/.ns: Invalid argument",
     ERROR, Label.HARDWARE_ERROR, "a NERSC user's job output on muller (job_container/tmpfs under /cray/tmp)"),
    ("slurmstepd: error: container_g_join failed: 286704", ERROR, Label.HARDWARE_ERROR,
     "the same job's next line; src/slurmd/slurmstepd/mgr.c 'container_g_join failed: %u'"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    # the INFO record of a cuDNN that loaded well (tensorflow/tensorflow#122752's training log)
    "I0000 00:00:1783436837.477652 1003771 cuda_dnn.cc:440] Loaded cuDNN version 92101",
    # NCCL 2.x's WARN of a library it falls back from, no errno (horovod/horovod#98's run)
    "admin-pc:14733:14828 [1] misc/ibvwrap.cu:60 WARN Failed to open libibverbs.so[.1]",
    # an Open MPI BTL record without a failed call's errno, on a run that completes (corpus: ompi-4131)
    "[rhc002][[16379,1],2][btl_tcp.c:556:mca_btl_tcp_recv_blocking] remote peer unexpectedly closed connection while I was waiting for blocking message",
    # quota and space in prose and in a tool's table
    "Check your quota before a long run: the disk quota is shown by `quota -s`",
    "Filesystem      Size  Used Avail Use% Mounted on",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize(("line", "label"), [
    # ENOMEM under the same status is memory, and an OOM in TensorFlow's words stays memory
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[8192,1000]",
     Label.OOM),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 21760049152 bytes.",
     Label.OOM),
])
def test_a_status_of_memory_without_a_storage_errno_stays_memory(line: str, label: Label) -> None:
    stated = cause_of(line)
    assert stated is not None and stated[0] is label
    reading = read_error(line)
    assert reading is not None and reading.label is label


def test_the_users_missing_program_stays_configuration() -> None:
    """slurmstepd's exec of a program of the user's that is not there is the job's mistake, not the node's."""
    stated = cause_of("slurmstepd: error: execve(): python3: No such file or directory")
    assert stated is not None and stated[0] is Label.CONFIG_ERROR


def test_an_exception_class_named_for_memory_yields_to_the_storage_errno() -> None:
    """errorclass reads the class first (ResourceExhaustedError is memory); the errno in its message says storage."""
    reading = read_error("tensorflow.python.framework.errors_impl.ResourceExhaustedError: ckpt/model.ckpt-100.data-00000-of-00001.tempstate123; No space left on device")
    assert reading is not None and reading.label is Label.CONFIG_ERROR


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/keras-tuner-390.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/hostg-7.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/nccl-210.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/nccl-tests-14-socket-creation-failed-docker-net.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/faster-rcnn-tf-12.log", Label.CONFIG_ERROR, Action.STOP),
    ("hardware_error/arjunausers-123.log", Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART),
    # the c10d W records of an IPv6 fallback on a run that goes on (errno 97 in a warning) stay healthy
    ("healthy/heat-1003-c10d-ipv6-socket-warnings.log", Label.HEALTHY, Action.WAIT),
    ("healthy/ompi-4131-btl-tcp-handshake-warning-ring-completes.log", Label.HEALTHY, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_horovod_310_is_no_longer_read_as_healthy() -> None:
    """Open MPI's refused connect() is a failure; that the docker0 address was the cause only the thread says."""
    verdict = diagnose_paths([str(CORPUS / "config_error/horovod-310.log")]).verdict
    assert verdict.label is not Label.HEALTHY and verdict.action is not Action.WAIT
