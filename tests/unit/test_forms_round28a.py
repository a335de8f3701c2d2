# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half A of the misses of round issue23-heldout-28, each as a rule of its family, with real lines and
the near misses the rule must leave alone: a socket bind that failed, NCCL's bootstrap that found no interface to use,
pip building a package from source (running, and ended); and a process its user interrupted while it waited
(diagnosis/interrupted.py). Each line is from the corpus (named by its excerpt), from a
public thread (named), or is the format the program's source prints (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, cause_of, read_line
from neuron_watch.diagnosis.interrupted import interrupted_while_waiting
from neuron_watch.diagnosis.startup import RaisedAt
from neuron_watch.events import Action, Evidence, Label, RankKey, Verdict
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import table_tests

ERROR, RUNNING, DONE = FormKind.ERROR, FormKind.COMPILE_RUNNING, FormKind.COMPILE_DONE

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a socket bind that failed, whatever the errno: the address is held or is not this host's
    ("/opt/dgl/src/rpc/network/tcp_socket.cc: 69: Failed bind on xxx.xx.xx.xxx:xxxx(ip+port), errno=99", ERROR,
     Label.CONFIG_ERROR, "corpus (colake-6)"),
    ("[14:49:15] /opt/dgl/src/rpc/network/tcp_socket.cc:76: Failed bind on <my_ip_addr>:34567 , error: Success",
     ERROR, Label.CONFIG_ERROR, "corpus (dgl-3388)"),
    ("[10:02:41] /opt/dgl/src/rpc/network/tcp_socket.cc:76: Failed bind on 10.0.0.2:30050 , error: Address already in use",
     ERROR, Label.CONFIG_ERROR, "DGL src/rpc/network/tcp_socket.cc TCPSocket::Bind's LOG(ERROR), filled in with EADDRINUSE"),
    # NCCL's bootstrap without an interface NCCL_SOCKET_IFNAME allows
    ("zztao-Precision-5820-Tower:35819:35819 [0] bootstrap.cc:32 NCCL WARN Bootstrap : no socket interface found",
     ERROR, Label.CONFIG_ERROR, "corpus (openpsg-53, NCCL_SOCKET_IFNAME=eth0)"),
    ("SGES-DT279:22220:22220 [0] bootstrap.cc:48 NCCL WARN Bootstrap : no socket interface found", ERROR,
     Label.CONFIG_ERROR, "ultralytics/ultralytics#7038 (multi-node YOLOv8)"),
    ("NET/ND : no socket interface found for out-of-band connections", ERROR, Label.CONFIG_ERROR,
     "NCCL's NetworkDirect plugin (net_nd.cc WARN), its words"),
    # pip building a package from source: the spinner's line left without its end is a build still running
    ("  Building wheel for flash-attn (setup.py) ... -", RUNNING, None, "corpus (videollamb-9)"),
    ("  Building wheel for flash-attn (setup.py) ... |", RUNNING, None,
     "Dao-AILab/flash-attention#1038 (a comment: 'Its not stuck, but wow.  Long time here too.')"),
    ("  Building wheel for mmcv-full (setup.py): started", RUNNING, None,
     "pip's non-interactive spinner (cli/spinners.py NonInteractiveSpinner: '%s: started'), filled in"),
    ("  Running setup.py install for apex ... \\", RUNNING, None,
     "pip's legacy install (req_install.py 'Running setup.py install for %s'), filled in"),
    # ... and its end
    ("  Building wheel for flash-attn (setup.py) ... done", DONE, None, "pip's spinner finished (' ... done')"),
    ("  Building wheel for mmcv-full (setup.py): finished with status 'done'", DONE, None,
     "pip's non-interactive spinner ('%s: finished with status %r'), filled in"),
    ("  Created wheel for flash-attn: filename=flash_attn-2.5.6-cp310-cp310-linux_x86_64.whl size=120823031 sha256=4a9c0e1f",
     DONE, None, "pip wheel_builder.py ('Created wheel for %s: filename=%s size=%d sha256=%s'), filled in"),
    ("Successfully built flash-attn", DONE, None, "pip commands/install.py ('Successfully built %s')"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    # a bind that is not of a network address, a bound port that worked, c10d's warning before the next address
    "glBindTexture: failed to bind texture 3",
    "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
    "2024-05-01 10:00:01,123 INFO Dashboard bound to port 8265",
    # NCCL choosing its interface
    "host-1:22220:22220 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    # pip before a build (collecting, the list it will build) and a build that failed (read by the error forms)
    "Building wheels for collected packages: flash-attn",
    "Collecting flash-attn==2.5.6",
    "  Building wheel for flash-attn (setup.py) ... error",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_a_device_bind_is_not_an_address_bind() -> None:
    """CUDA's NVLS multicast bind is the NVSwitch fabric's (round 26's reading), not an address held by another
    process (corpus: pytorch-177472-nvls-multicast-bind-fabric-manager-failure)."""
    line = "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be performed in the present state'. "
    form = read_line(line)
    assert form is not None and form.label is Label.HARDWARE_ERROR, form
    stated = cause_of(line)
    assert stated is not None and stated[0] is Label.HARDWARE_ERROR, stated


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/colake-6.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/dgl-3388.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/openpsg-53.log", Label.CONFIG_ERROR, Action.STOP),
    ("compiling/videollamb-9.log", Label.COMPILING, Action.WAIT),
    # bind failures the corpus read before stay configuration
    ("config_error/accelerate-2246-slurm-master-port-in-use-then-barrier-nccl-error.log", Label.CONFIG_ERROR,
     Action.STOP),
    ("config_error/vllm-ascend-405-ej0003-failed-to-bind-ip-port-second-program.log", Label.CONFIG_ERROR,
     Action.STOP),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


# -- a process its user interrupted while it waited (diagnosis/interrupted.py) ----------------------------------

#: the innermost frames of real interrupted tracebacks, outermost first
_LAUNCHER_WAITING = (  # corpus (mmdetection-5060): torch.distributed.launch waiting on its children
    ("/home/zpf/miniconda3/envs/solotr/lib/python3.7/site-packages/torch/distributed/launch.py", "main"),
    ("/home/zpf/miniconda3/envs/solotr/lib/python3.7/subprocess.py", "wait"),
    ("/home/zpf/miniconda3/envs/solotr/lib/python3.7/subprocess.py", "_wait"),
    ("/home/zpf/miniconda3/envs/solotr/lib/python3.7/subprocess.py", "_try_wait"),
)
_LOADER_JOINING = (  # aqlaboratory/openfold#34: training frozen at 0% GPU, Ctrl-C while the loader's workers join
    ("/opt/conda/lib/python3.8/site-packages/torch/utils/data/dataloader.py", "__del__"),
    ("/opt/conda/lib/python3.8/site-packages/torch/utils/data/dataloader.py", "_shutdown_workers"),
    ("/opt/conda/lib/python3.8/multiprocessing/process.py", "join"),
    ("/opt/conda/lib/python3.8/multiprocessing/popen_fork.py", "wait"),
    ("/opt/conda/lib/python3.8/multiprocessing/connection.py", "wait"),
)
_COMPUTING = (  # a step interrupted while it computes (torch's module frames, filled in)
    ("train.py", "train_one_epoch"),
    ("/usr/lib/python3/site-packages/torch/nn/modules/conv.py", "forward"),
    ("/usr/lib/python3/site-packages/torch/nn/modules/conv.py", "_conv_forward"),
)


def _crash() -> Verdict:
    ev = Evidence(RankKey("job.log", -1), "^CTraceback (most recent call last):", "python.traceback", "job.log", 1, 0.0)
    return Verdict(Label.OTHER_CRASH, Action.RESTART, evidence=(ev,))


@pytest.mark.parametrize("frames", [_LAUNCHER_WAITING, _LOADER_JOINING])
def test_an_interrupt_in_a_wait_is_the_hang_the_user_saw(frames: tuple[tuple[str, str], ...]) -> None:
    verdict = interrupted_while_waiting(_crash(), [(RaisedAt(frames), None)], ["KeyboardInterrupt"])
    assert verdict is not None and (verdict.label, verdict.action) == (Label.COLLECTIVE_HANG, Action.RESTART)


@pytest.mark.parametrize(("frames", "after"), [
    (_COMPUTING, ["KeyboardInterrupt"]),  # interrupted while computing: says nothing of a failure
    (_LAUNCHER_WAITING, ["RuntimeError: [enforce fail at inline_container.cc:325] . unexpected pos 64 vs 0"]),
    (_LAUNCHER_WAITING, []),  # a traceback cut in a wait, no interrupt after it
])
def test_other_tracebacks_are_left_to_the_other_readings(frames: tuple[tuple[str, str], ...],
                                                         after: list[str]) -> None:
    assert interrupted_while_waiting(_crash(), [(RaisedAt(frames), None)], after) is None


def test_the_interrupted_launcher_excerpt() -> None:
    verdict = diagnose_paths([str(CORPUS / "collective_hang/mmdetection-5060.log")]).verdict
    assert (verdict.label, verdict.action) == (Label.COLLECTIVE_HANG, Action.RESTART), verdict.reason
