# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-29 (Neuron and AWS), each as a rule of its family, with
real lines and the near misses the rule must leave alone: a set-up that failed (dpkg's, DKMS's and Docker's records),
a SageMaker training job whose status is Failed, a Go program's error naming a file that does not exist, and a gdb
dump whose ranks poll libfabric's or MPI's completion (read by the stack-dump reader). Each line is from the corpus
(named by its excerpt), from a public thread or document (named), or is the format the program's source prints (the
source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.stacks import COLLECTIVE_FRAMES
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # dpkg's record of a package it could not configure
    ("dpkg: error processing package aws-neuron-dkms (--configure):", ERROR, Label.CONFIG_ERROR,
     "corpus (aws-neuron-sdk-661-neuron-dkms-pre-install-failed-docker-build)"),
    ("dpkg: error processing archive /var/cache/apt/archives/aws-neuronx-dkms_2.15.9.0_amd64.deb (--unpack):",
     ERROR, Label.CONFIG_ERROR, "dpkg src/main/errors.c print_error_perpackage, for an archive it could not unpack"),
    # DKMS's die(): a driver module that did not build or install
    ("Error! pre_install failed, aborting install.", ERROR, Label.CONFIG_ERROR,
     "corpus (aws-neuron-sdk-661-neuron-dkms-pre-install-failed-docker-build)"),
    ("Error! Bad return status for module build on kernel: 6.5.0-1015-azure (x86_64)", ERROR, Label.CONFIG_ERROR,
     "aws-neuron-sdk#843 (aws-neuronx-dkms on a GitHub runner's Azure kernel)"),
    # Docker's build step that failed: the classic builder and BuildKit
    ("The command '/bin/sh -c apt-get install aws-neuron-dkms=2.2.14.0 -y' returned a non-zero code: 100", ERROR,
     Label.CONFIG_ERROR, "corpus (aws-neuron-sdk-661-neuron-dkms-pre-install-failed-docker-build)"),
    ('#15 ERROR: process "/bin/bash -ol pipefail -c npm install" did not complete successfully: exit code: 1', ERROR,
     Label.CONFIG_ERROR, "a Railway deployment's BuildKit log, quoted in its repository's notes"),
    ('ERROR: failed to solve: process "/bin/sh -c playwright install chromium" did not complete successfully: exit code: 137',
     ERROR, Label.CONFIG_ERROR, "a project's troubleshooting notes (a build step killed for memory)"),
    # the SageMaker SDK's status line of a failed training job: a failure that states no cause
    ("2019-07-07 06:57:31 Failed - Training job failed", ERROR, None,
     "corpus (sagemaker-python-sdk-911-tf-script-mode-requirements-not-installed)"),
    ("> 2020-07-17 08:45:54 Failed - Training job failed", ERROR, None,
     "corpus (sagemaker-python-sdk-1722-executeuserscripterror-instance-too-small), quoted"),
    ("2019-02-25 14:11:16 Failed - Training job failed", ERROR, None, "sagemaker-python-sdk#658"),
    # Go's os.PathError for a file that does not exist, in a line that reports an error
    ("neuron-device-plugin: 2020/10/12 20:43:28 Error to get IB device: open /run/infa-map.json: no such file or directory",
     ERROR, Label.CONFIG_ERROR, "corpus (aws-neuron-sdk-180-device-plugin-infa-map-missing)"),
    ("   configuration error: open /etc/docker/registry/config.yml: no such file or directory", ERROR,
     Label.CONFIG_ERROR, "a Docker registry pod in CrashLoopBackOff, its log quoted in a Kubernetes guide"),
    ("Error: open /etc/vulkan/icd.d/nvidia_icd.json: no such file or directory", ERROR, Label.CONFIG_ERROR,
     "a GPU container's troubleshooting notes (the Vulkan ICD file at another path)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # the SageMaker SDK's other statuses: a job starting, training, uploading, completed
    "2019-07-07 06:57:31 Uploading - Uploading generated training model",
    "2020-05-24 21:14:22 Completed - Training job completed",
    "2019-07-07 06:54:53 Starting - Starting the training job...",
    # DKMS and dpkg at work
    "Building initial module for 5.19.0-1022-aws",
    "Setting up aws-neuronx-dkms (2.15.9.0) ...",
    # Docker's steps that succeeded
    "Step 5/12 : RUN apt-get install -y aws-neuronx-dkms=2.*",
    # Go's missing file in a line that does not call it an error (a lookup of an optional file)
    "2024/01/02 10:00:00 stat /etc/containerd/certs.d: no such file or directory, using defaults",
    # Python's and C's errno text, capitalised: other forms read those
    "prose: the file /run/infa-map.json is created by aws-neuron-runtime-base",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("dpkg: error processing package aws-neuron-dkms (--configure):", Label.CONFIG_ERROR),
    ("The command '/bin/sh -c apt-get install aws-neuron-dkms=2.2.14.0 -y' returned a non-zero code: 100",
     Label.CONFIG_ERROR),
]
#: error lines whose form states no cause (SageMaker's status names none)
NO_CAUSE = [
    "2019-07-07 06:57:31 Failed - Training job failed",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize("frame", [
    # libfabric's completion-queue read, under Open MPI over EFA (a hang dumped by gdb)
    "#5  0x00007f07428aa798 in fi_cq_readfrom (cq=0xea9d30, buf=0x7ffc35b9e4f0, count=1, src_addr=0x7ffc35b9e4d0) at ./include/rdma/fi_eq.h:400",
    # Open MPI's progress engine (corpus: horovod-1182-gdb-pmpi-gather-missing-ranks)
    "#1  0x00007fe93edd3dac in opal_progress ()",
    # MPI's waits and MPICH's progress wait: gdb's frame format (stack.c print_frame) around the functions of the
    # MPICH error stack a Frontier job printed (corpus: the PMPI_Waitall and MPID_Progress_wait lines of its abort)
    "#4  0x00002aaaab2c1d5e in PMPI_Waitall (count=26, array_of_requests=0x1006e9b0) at waitall.c:339",
    "#2  0x00007f2a1c0d2e10 in MPID_Progress_wait (state=0x7ffd9c3e2a40) at src/mpid/ch4/src/ch4_progress.c:193",
])
def test_completion_polling_frames_are_waits_on_peers(frame: str) -> None:
    assert COLLECTIVE_FRAMES.search(frame) is not None


@pytest.mark.parametrize("frame", [
    # libfabric's set-up and the provider's own progress are not the application waiting for its messages
    "#3  0x00007f0742a01e2a in fi_getinfo (version=65548, node=0x0) at src/fabric.c:1208",
    "#2  0x00007f074290b3d5 in smr_ep_progress (util_ep=0xea9770) at prov/shm/src/smr_progress.c:1015",
    "#0  0x00007f0b in ofi_cq_readfrom_internal ()",
])
def test_other_libfabric_frames_are_not_waits(frame: str) -> None:
    assert COLLECTIVE_FRAMES.search(frame) is None


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/aws-neuron-sdk-661-neuron-dkms-pre-install-failed-docker-build.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/aws-neuron-sdk-945-inf1-dkms-module-build-fails-new-kernel.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/aws-neuron-sdk-180-device-plugin-infa-map-missing.log", Label.CONFIG_ERROR, Action.STOP),
    # SageMaker's failed status states no cause: a failure, not a healthy run
    ("config_error/sagemaker-python-sdk-911-tf-script-mode-requirements-not-installed.log", Label.OTHER_CRASH,
     Action.RESTART),
    # the ranks of a stuck Open MPI job over EFA, dumped by gdb, poll libfabric's completion queue
    ("collective_hang/libfabric-6565-efa-shm-hang-openmpi-gdb-stacks.log", Label.COLLECTIVE_HANG, Action.RESTART),
    # SageMaker's other statuses and a completed algorithm's metrics stay healthy
    ("healthy/sagemaker-python-sdk-366-object-detection-training-progressing.log", Label.HEALTHY, Action.WAIT),
    ("healthy/mxnet-16230-sagemaker-ntm-training-epochs.log", Label.HEALTHY, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
