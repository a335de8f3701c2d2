# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for the misses of round issue23-heldout-14, half A (Slurm's pyxis/enroot, Ascend CANN and MindSpore,
MPICH's Hydra, KubeRay on Kubernetes, PaddlePaddle, the Neuron runtime 1.x daemon), each as a rule of its family
(a SPANK plugin's refusal, a CANN coded record, an allocator's own error record, Hydra's error record, an
OOM-killed container, a rethrown operator exception, the runtime daemon's failed call, a failed exec), with real
lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's
source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, read_line
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

KB = default_knowledge_base()
E, CRASH = FormKind.ERROR, FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a required Slurm SPANK plugin that could not set the task up
    ("slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1", CRASH, Label.CONFIG_ERROR, "corpus (pyxis-127)"),
    ("slurmstepd: error: spank: required plugin spank_pyxis.so: task_init_privileged() failed with rc=-1", CRASH, Label.CONFIG_ERROR, "corpus (pyxis-12)"),
    ("[2019-09-24T10:10:06.901] [321.0] error: spank: required plugin spank_pyxis.so: init_post_opt() failed with rc=-1", CRASH, Label.CONFIG_ERROR, "corpus (pyxis-4)"),
    ("slurmstepd: error: Failed to invoke spank plugin stack", CRASH, Label.CONFIG_ERROR, "corpus (pyxis-127), slurmstepd mgr.c"),
    ("[2019-09-24T10:10:06.901] [321.0] error: Plugin stack initialization failed.", CRASH, Label.CONFIG_ERROR, "corpus (pyxis-4)"),
    # a container the OOM killer ended
    ("reason: OOMKilled", CRASH, Label.OOM, "corpus (kuberay-4287): kubectl get pod -o yaml"),
    ("      Reason:       OOMKilled", CRASH, Label.OOM, "kubectl describe pod's Last State"),
    ('            "reason": "OOMKilled",', CRASH, Label.OOM, "kubectl get pod -o json"),
    ("raycluster-kuberay-head-jz6w6   0/1     OOMKilled   2          3m", CRASH, Label.OOM, "kubectl get pods' STATUS column"),
    # an operator's exception PaddlePaddle rethrows (logged at a warning's level)
    ("W0810 10:52:50.697477 31331 operator.cc:242] mul raises an exception paddle::memory::allocation::BadAlloc, ResourceExhaustedError: ", E, Label.OOM, "corpus (paddle-deepspeech-60)"),
    ("W0301 08:00:00.000000  1234 operator.cc:279] conv2d raises an exception paddle::platform::EnforceNotMet, InvalidArgumentError: the input is empty", E, None, "operator.cc's format, another type"),
    ("W0301 08:00:00.000000  1234 operator.cc:290] elementwise_add raises an unknown exception", E, None, "operator.cc's catch (...)"),
    # MPICH Hydra's error record, its launch stage a set-up
    ("[proxy:0:0@server1] HYDU_sock_connect (lib/utils/sock.c:110): unable to get host address for server1", E, Label.CONFIG_ERROR, "corpus (horovod-3933)"),
    ("[mpiexec@server2] ui_cmd_cb (mpiexec/pmiserv_pmci.c:51): Launch proxy failed.", E, Label.CONFIG_ERROR, "corpus (horovod-3933)"),
    ("[mpiexec@hb120v3-3] check_exit_codes (../../../../../src/pm/i_hydra/libhydra/demux/hydra_demux_poll.c:117): unable to run bstrap_proxy on hb120v3-3.internal.cloudapp.net (pid 12608, exit code 256)", E, Label.CONFIG_ERROR, "Intel MPI's Hydra (Azure/az-hop#906)"),
    ("[proxy:0:1@IIPLab-WS2] HYD_pmcd_pmip_control_cmd_cb (pm/pmiserv/pmip_cb.c:878): assert (!closed) failed", E, None, "MPICH's proxy after a rank died"),
    # the Neuron runtime 1.x daemon's record of a failed call, NeuronCores held a set-up
    ("May 04 02:18:56 ip-192-168-41-8.ec2.internal nrtd[20664]: [NMGR:kmgr_create_eg] Not enough free NCs to allocate 2 members group", E, Label.CONFIG_ERROR, "corpus (aws-neuron-sdk-108)"),
    ("May 04 02:18:56 ip-192-168-41-8.ec2.internal nrtd[20664]: [NRTD:create_eg] create_eg() failed.", E, None, "corpus (aws-neuron-sdk-108)"),
    # a program that could not be executed
    ("enroot-switchroot: failed to execute: /bin/sh: No such file or directory", E, Label.CONFIG_ERROR, "corpus (enroot-177)"),
    ("slurmstepd: error: pyxis:     enroot-switchroot: failed to execute: /bin/bash: No such file or directory", E, Label.CONFIG_ERROR, "pyxis relaying enroot's log (NVIDIA/pyxis#61)"),
    # an Ascend CANN coded record whose code or title states the cause
    ("EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process. Reason: Maybe the last training process is running.", CRASH, Label.CONFIG_ERROR, "corpus (llamafactory-3839)"),
    ("ERROR 04-09 21:56:46 [diffusion_engine.py:82] [PID: 210907] 2026-04-09-21:56:40.384.694 Memory_Allocation_Failure(EL0004): Failed to allocate memory requested by GE module.", CRASH, Label.OOM, "corpus (helios-62)"),
    ("[PID: 1613532] 2026-03-24-12:14:45.885.234 Memory_Allocation_Failure(EL0004): Failed to allocate memory.", CRASH, Label.OOM, "hw-native-sys/PTOAS#341"),
    ("Communication_Error_Get_Socket(EI0006): Getting socket times out. Reason: Remote Rank did not send the data in time. Failed to connect", CRASH, Label.COMM_ERROR, "hcomm err_msg's EI0006 in the titled form"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "srun: debug:  spank: opening plugin stack /etc/slurm/plugstack.conf",  # the stack loading, at debug
    "The guide explains when slurmstepd reports that it Failed to invoke spank plugin stack",  # the words in prose
    "Reason: OOMKilled containers are restarted by the kubelet when restartPolicy allows",  # the word in prose
    "  reason: Completed",  # a container that ended normally
    "the conv2d op raises an exception when its input is empty",  # Paddle's words in prose
    "[mpiexec@mpi-test-launcher-0] Launch arguments: /usr/bin/ssh -q -x mpi-test-worker-0 /opt/intel/oneapi/mpi/2021.6.0//bin//hydra_bstrap_proxy",  # Hydra's verbose launch line
    "[proxy:0@debian-project-be-2.buildd.org] got pmi command from downstream 1-2:",  # Hydra's PMI trace
    "nrtd[1]: [NRTD:nrtd_main] nrtd build using:1.1.1402.0",  # the daemon starting
    "setup: failed to execute the optional hook, continuing",  # no exec error
    "EZ9999: Inner Error!",  # a CANN code no registry entry gives a cause
    "EI0002 is the code HCCL reports for a notify wait that timed out",  # a code in prose
]

#: (line, the cause its form states): causes read from an error line another form or rule reads
CAUSES = [
    ("EI0002: [PID: 2969] 2025-10-11-15:09:34.713.335 The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank: [24].", Label.COLLECTIVE_HANG),  # corpus (vllm-ascend-3413)
    ("[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote Rank did not send the data in time.", Label.COMM_ERROR),  # vllm-project/vllm-ascend#486
    ("RuntimeError: EI0004: The ranktable or rank is invalid,Reason:[rank_id is not consistent]. Please check the configured ranktable.", Label.CONFIG_ERROR),  # hcomm err_msg's EI0004
    ("[ERROR] PRE_ACT(54175,fffdbcff91e0,python):2024-10-22-11:24:55.301.443 [mindspore/ccsrc/backend/common/mem_reuse/mem_dynamic_allocator.cc:392] AddMemBlockAndMemBufByEagerFree] TotalUsedMemStatistics : 29356337664 plus TotalUsedByEventMemStatistics : 0 and plus alloc size : 301990400 is more than total mem size : 29464985600.", Label.OOM),  # corpus (mindnlp-1761)
    ("ERROR 04-09 21:56:46 [diffusion_engine.py:82]         Call rtMalloc fail, purpose: page caching, type = 2, size:3221291008, device_id:0[FUNC:Alloc][FILE:device_allocator.cc][LINE:72]", Label.OOM),  # corpus (helios-62)
    ("E0301 08:00:00.000000  1234 caching_allocator.cc:120] could not reserve 2147483648 bytes", Label.OOM),  # glog's head from an allocator's file
]

#: error lines whose form says nothing of a cause
NO_CAUSE = [
    "EH9999: Inner Error!",  # a code no registry entry gives a cause
    # an allocator's INFO record at start-up (the records of the dump TensorFlow prints after a failed allocation,
    # "Sum Total of in-use chunks: ...", are that failure's: round 39 part G)
    "2016-10-03 00:00:00.000000: I tensorflow/core/common_runtime/bfc_allocator.cc:1010] Creating new BFCAllocator named: GPU_0_bfc",
    "[ERROR] PRE_ACT(1,2,python):2024-10-22-11:24:55.301.443 [mindspore/ccsrc/backend/graph_compiler.cc:392] Compile] graph build failed",  # not an allocator's file
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_were_bumped() -> None:
    """What a line reads as changed: the reader's version, part of the classifier's cache key, moved on."""
    assert FORM_RULES >= 14


# -- whole logs, as the judge reads them ------------------------------------------------------------

PYXIS = [
    "pyxis: importing docker image: hello-world.sqsh",
    "slurmstepd: error: pyxis: child 10028 failed with error code: 1",
    "slurmstepd: error: pyxis: failed to import docker image",
    "slurmstepd: error: pyxis: couldn't start container",
    "slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1",
    "slurmstepd: error: Failed to invoke spank plugin stack",
    "srun: error: compute-0: task 0: Exited with exit code 1",
]

ENDINGS = [
    # the plugin stack refused the task: the step never ran, whatever pyxis said before it
    (PYXIS, Label.CONFIG_ERROR, Action.STOP),
    # pyxis' own failure lines alone say no cause
    (PYXIS[:4], Label.OTHER_CRASH, Action.RESTART),
    # the container's last state, the job's only word
    (["containerID: containerd://0f30d47b321c", "exitCode: 137", "reason: OOMKilled"], Label.OOM, Action.RESTART),
    # Hydra could not start its proxies
    (["[proxy:0:0@server1] HYDU_sock_connect (lib/utils/sock.c:110): unable to get host address for server1",
      "[mpiexec@server2] ui_cmd_cb (mpiexec/pmiserv_pmci.c:51): Launch proxy failed."], Label.CONFIG_ERROR, Action.STOP),
    # a CANN record under torch_npu's wrapper, the wrapper first
    (["RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64",
      "[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:3) ERR02200 DIST call hccl api failed.",
      "EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process. Reason: Maybe the last training process is running.",
      "        Solution: Wait for 10s after killing the last training process and try again."], Label.CONFIG_ERROR, Action.STOP),
    # Paddle's warning record of a rethrown BadAlloc, with the allocator's words after it
    (["W0810 10:52:50.697477 31331 operator.cc:242] mul raises an exception paddle::memory::allocation::BadAlloc, ResourceExhaustedError: ",
      "",
      "Out of memory error on GPU 0. Cannot allocate 165.586182MB memory on GPU 0, 5.866455GB memory has been allocated and available memory is only 67.937500MB."], Label.OOM, Action.RESTART),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


@pytest.mark.parametrize("line", [
    "reason: OOMKilled",
    "W0810 10:52:50.697477 31331 operator.cc:242] mul raises an exception paddle::memory::allocation::BadAlloc, ResourceExhaustedError: ",
])
def test_progress_after_the_form_is_healthy(line: str) -> None:
    """A rank that goes on after the line (a restarted container, an exception the program caught) is healthy."""
    assert _verdict([line, *PROGRESS])[0] is Label.HEALTHY


def test_nrtd_record_without_failure_is_nothing() -> None:
    assert read_line("nrtd[1]: [NMGR:kmgr_init_mlas] devices specified: 0,1") is None
