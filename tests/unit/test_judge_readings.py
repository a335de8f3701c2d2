"""The judge's general readings of a failure: a SIGKILL with the node's
memory evidence anywhere, a SIGKILL in the middle of a graph compile, an error the rank's setup went
on from, an application-class Xid as a rank's last word, and an error no rule knows read by its
form. Real lines, and the near misses that must keep the old answer."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankKey, Verdict

KB = default_knowledge_base()


def verdict(*texts: str, rank: int = -1) -> Verdict:
    """The final verdict of one stream of lines, one second apart (``diagnose`` of an excerpt)."""
    j = Judge(KB, JudgeSettings(), start=0.0)
    for i, text in enumerate(texts):
        j.observe_lines([LogLine(RankKey("", rank), text, float(i), float(i), "excerpt.log", i + 1)])
    return j.verdict(float(len(texts)), final=True)


KILLED = '''/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  python3 main.py --prop hform --epochs 400'''
SLURM_OOM = "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler."


def test_a_sigkill_then_the_schedulers_oom_kill_is_oom() -> None:
    # ArjunaCluster/ArjunaUsers#52: slurmstepd reports the cgroup's oom_kill after the shell's "Killed"
    v = verdict(KILLED, SLURM_OOM)
    assert v.label is Label.OOM
    assert any("oom-kill" in e.text for e in v.evidence)


def test_a_sigkill_without_memory_evidence_stays_unknown() -> None:
    v = verdict("Epoch: [0][511/1736]\t Loss 0.5117 MAE 0.6075 RMSE 0.7153", KILLED)
    assert v.label is Label.OTHER_CRASH
    assert "by whom is unknown" in v.reason


HLO = "INFO:Neuron:generating HLO: context_encoding_model, input example shape = torch.Size([2, 32])"


def test_a_sigkill_while_generating_the_hlo_is_host_oom() -> None:
    # aws-neuron/nki-samples#87, aws-neuron-sdk#1222: an 8B model traced on a 32 GB trn1.2xlarge
    v = verdict(HLO,
                "/opt/aws_neuronx_venv_pytorch_2_7_nxd_inference/lib/python3.10/site-packages/neuronx_distributed/parallel_layers/layers.py:485: FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.",
                "Killed")
    assert v.label is Label.OOM
    assert v.action is Action.RESTART
    assert "while it generated or compiled a graph" in v.reason


def test_a_sigkill_after_the_hlo_was_generated_is_not_blamed_on_the_compile() -> None:
    v = verdict(HLO,
                "INFO:Neuron:Finished generating HLO for context_encoding_model in 12.5 seconds, input example shape = torch.Size([2, 32])",
                "Killed")
    assert v.label is Label.OTHER_CRASH


def test_a_log_that_ends_inside_a_compile_is_compiling() -> None:
    # aws-neuron/aws-neuron-sdk#803 (neuronx-cc's pipeline jobs) and vllm-project/vllm-neuron#7
    assert verdict("2023-12-12T17:28:24Z Running birverifier", "2023-12-12T17:28:24Z birverifier finished after 0.000 seconds",
                   "2023-12-12T17:28:24Z Running unroll").label is Label.COMPILING
    assert verdict("(EngineCore_DP0 pid=566) INFO:Neuron:Neuron compiler flags: --auto-cast=none --model-type=transformer -O1 --verbose=35").label is Label.COMPILING


NIC_PROBE = [
    "ip-192-168-16-255:35480:35545 [0] NCCL INFO NET/OFI No NIC info for dev 0",
    "ip-192-168-16-255:35480:35545 [0] NCCL INFO include/net.h:24 -> 2",
]


def test_an_nccl_error_trace_the_rank_went_on_from_is_withdrawn() -> None:
    # NVIDIA/nccl#229: a failed NIC probe, then the rings built
    v = verdict(*NIC_PROBE, "ip-192-168-16-255:35480:35545 [0] NCCL INFO Connected all rings")
    assert v.label is Label.HEALTHY


def test_setup_lines_before_the_error_withdraw_nothing() -> None:
    v = verdict("ip-192-168-16-255:35480:35545 [0] NCCL INFO Connected all rings", *NIC_PROBE)
    assert v.label is Label.COMM_ERROR


def test_a_specific_failure_is_not_withdrawn_by_setup_lines() -> None:
    v = verdict("gpu5:35917:35994 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129",
                "gpu5:35917:35994 [0] NCCL INFO transport/net.cu:537 -> 2",
                "[1] node2:22555:22555 [0] NCCL INFO Connected all rings")
    assert v.label is not Label.HEALTHY


def test_a_plugin_failure_the_rank_went_on_from_is_withdrawn() -> None:
    # awslabs/awsome-distributed-ai#386: no EFA, NCCL falls back to sockets
    v = verdict("ini-worker-ray-worker-p5:954:3133 [6] nccl_net_ofi_create_plugin:1067 NCCL WARN NET/OFI aws-ofi-nccl initialization failed",
                "ini-worker-ray-worker-p5:954:3133 [6] NCCL INFO net.cc:56 -> 2",
                "ini-worker-ray-worker-p5:954:3133 [6] NCCL INFO Using network Socket")
    assert v.label is Label.HEALTHY


XID31 = "[3138783.897230] NVRM: Xid (PCI:0000:18:00): 31, pid=33750, Ch 00000039, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f75_7bd4f000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE"


def test_an_application_xid_as_the_last_word_is_a_crash() -> None:
    # tensorflow/models#10326
    v = verdict(XID31)
    assert v.label is Label.OTHER_CRASH
    assert v.evidence[0].signature == "gpu.xid_other"


def test_an_application_xid_the_job_went_on_from_is_not_a_failure() -> None:
    v = verdict(XID31, "{'loss': 1.1416, 'learning_rate': 1.9969780438256295e-05, 'epoch': 0.02}")
    assert v.label is Label.HEALTHY


def test_an_unknown_error_is_read_by_its_form() -> None:
    # NVIDIA/nccl#573 (WSL): NCCL cannot read the host's topology
    v = verdict("SHJS-PF4ZKYLL:92777:92889 [0] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:01/../../0000:01:00.0",
                "SHJS-PF4ZKYLL:92777:92889 [0] NCCL INFO graph/xml.cc:469 -> 2")
    assert v.label is Label.CONFIG_ERROR
    assert v.action is Action.STOP
    assert "graph/xml.cc" in v.reason
    # kijai/ComfyUI-WanVideoWrapper#252: triton's CompilationError under dynamo's "backend=... raised"
    assert verdict("backend='inductor' raised:", "CompilationError: at 8:11:").label is Label.COMPILE_ERROR


def test_an_unknown_error_whose_form_says_nothing_stays_unrecognised() -> None:
    v = verdict("RuntimeError: connect() timed out. Original timeout was 60000 ms.")
    assert v.label is Label.OTHER_CRASH
    assert "cause not recognised" in v.reason


def test_another_processs_setup_does_not_withdraw_an_error() -> None:
    # NVIDIA/nccl#229's first probe fails in pid 35481; pid 26465 on another host goes on
    v = verdict("ip-192-168-16-255:35481:35549 [1] NCCL INFO include/net.h:24 -> 2",
                "ip-192-168-29-243:26465:26533 [0] NCCL INFO Connected all rings")
    assert v.label is Label.COMM_ERROR
