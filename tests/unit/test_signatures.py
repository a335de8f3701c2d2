# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""The packaged knowledge base, table-driven: every example line gets its signature and category;
the near misses (benign ERROR lines, single-node EFA/OFI warnings, nrt_infodump blocks, ``loss: 0.0``)
do not match their look-alike and never a fatal rule."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.classify import Effect, Signature
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label

KB = default_knowledge_base()
EXAMPLES = [(s.id, ex) for s in KB.signatures for ex in s.examples]
NEAR_MISSES = [(s.id, nm) for s in KB.signatures for nm in s.near_misses]

#: Healthy-run lines that must never be read as a failure (nor as anything but benign/info).
BENIGN = [
    "[298850.919248] efa 0000:a0:1a.0 rdmap160s26: Failed to process command DEREG_MR (opcode 8) comp_status 7 err -22",
    "2023-Aug-01 16:10:02.0101 332066:332066 [0] nccl_net_ofi_init:1234 CCOM WARN OFI plugin initNet() failed is EFA enabled?",
    "------------->8------------[ cut here ]------------>8-------------",
    "2025-Oct-01 23:48:34.002234 516278:516288 ERROR   NRT:nrt_infodump                            LNC: 0",
    "NRT version: 2.22.14.0 (6e27b8d5b8e0d6b2c4e0f0d9bb7f0a5c9b7e1e0a)",
    "Instance ID: i-0592464924bd45322",
    "Cluster ID: 0c7ee7b0",
    "-------------8<-----------[ cut to here ]-----------8<------------",
    "Linux kernel 5.10 requires setting FI_EFA_FORK_SAFE=1 environment variable.  Multi-node support will be disabled.",
    "2024-04-12 07:13:06,123 - ERROR - wandb - Network error (ConnectionError), entering retry loop.",
    "[2024-04-12 07:13:07] [ERROR] [logger.py:88] Failed to write metrics to tensorboard, will retry",
    "2024-04-12 07:13:06.000296:  271334  INFO ||NEURON_CACHE||: Compile cache path: /var/tmp/neuron-compile-cache",
    "number of nan iterations:   0 |",
    "loss: 0.0",
]


def test_every_signature_has_a_real_example_and_advice() -> None:
    assert len(KB.signatures) >= 60
    for sig in KB.signatures:
        assert sig.examples, f"{sig.id} has no example line"
        assert len(sig.advice) > 20, f"{sig.id} has no advice"
        assert sig.keys, f"{sig.id} has no needle"


@pytest.mark.parametrize(("sig_id", "line"), EXAMPLES, ids=[f"{i}:{n}" for n, (i, _) in enumerate(EXAMPLES)])
def test_example_gets_its_signature(sig_id: str, line: str) -> None:
    m = KB.classify(line)
    assert m is not None, f"{sig_id}: no rule matched {line!r}"
    assert m.signature.id == sig_id
    assert m.signature.category is KB.by_id[sig_id].category
    assert KB.scan([line]) == [(0, m)]


@pytest.mark.parametrize(("sig_id", "line"), NEAR_MISSES, ids=[f"{i}:{n}" for n, (i, _) in enumerate(NEAR_MISSES)])
def test_near_miss_does_not_match(sig_id: str, line: str) -> None:
    m = KB.classify(line)
    assert m is None or (m.signature.id != sig_id and m.signature.effect is not Effect.FATAL)


@pytest.mark.parametrize("line", BENIGN)
def test_healthy_lines_are_never_failures(line: str) -> None:
    m = KB.classify(line)
    assert m is None or m.signature.effect in (Effect.BENIGN, Effect.INFO, Effect.PROGRESS)


def test_issue_coverage_by_category() -> None:
    """The families of Neuron failures are all present, each with its label."""
    want = {
        "neuron.rt.driver_missing": Label.CONFIG_ERROR,
        "neuron.rt.nc_in_use": Label.CONFIG_ERROR,
        "neuron.nrt.unsupported_neff_version": Label.CONFIG_ERROR,
        "neuron.rt.collectives_hang": Label.COLLECTIVE_HANG,
        "neuron.rt.exec_timeout": Label.COLLECTIVE_HANG,
        "neuron.hw.neuron_hw_err": Label.HARDWARE_ERROR,
        "neuron.hw.dma_abort": Label.HARDWARE_ERROR,
        "neuron.ccom.rx_timeout": Label.COMM_TIMEOUT_TRANSIENT,
        "comm.closed_by_remote_peer": Label.COMM_ERROR,
        "neuron.ccom.invalid_comm_id": Label.CONFIG_ERROR,
        "neuron.compile.failed_status": Label.COMPILE_ERROR,
        "gpu.nccl.watchdog_timeout": Label.COLLECTIVE_HANG,
        "gpu.cuda_oom": Label.OOM,
        "gpu.xid_hardware": Label.HARDWARE_ERROR,
        "host.oom_killed": Label.OOM,
        "host.killed_sigkill": Label.OTHER_CRASH,
        "numerical.loss_not_finite": Label.NUMERICAL_ERROR,
    }
    for sig_id, label in want.items():
        assert KB.by_id[sig_id].category is label, sig_id
    codes = {"1002", "1003", "1004", "1005", "1006", "1200", "1201", "1202", "1203", "1204", "1205", "1206"}
    for code in codes:
        m = KB.classify(f"2024-Mar-03 11:02:17.0554 41210:41210 ERROR  NMGR:dlr_infer   Inference completed with err: {code}")
        assert m is not None and m.signature.effect is Effect.FATAL, code
    assert KB.classify("Inference completed with err: 5").signature.id == "neuron.nrt.timeout"  # type: ignore[union-attr]
    assert KB.classify("Inference completed with err: 50") is None


def test_hardware_signatures_drain_and_config_errors_stop() -> None:
    for sig in KB.signatures:
        if sig.effect is not Effect.FATAL:
            continue
        if sig.category is Label.HARDWARE_ERROR:
            assert sig.action is Action.DRAIN_AND_RESTART, sig.id
        if sig.category in (Label.CONFIG_ERROR, Label.COMPILE_ERROR, Label.NUMERICAL_ERROR):
            assert sig.action is Action.STOP, sig.id


def test_progress_lines_give_step_and_loss() -> None:
    cases = {
        "step 1 step_time 244.7649691104889s throughput 3.935193537274158 seq/s loss 13.41": (1, 13.41),
        "LOG Thu Aug  3 18:36:22 2023 - (0, 12) step_loss : 10.8750 learning_rate : 1.50e-04": (12, 10.875),
        " iteration      100/  500000 | consumed samples: 102400 | elapsed time per iteration (ms): 1234.5 | lm loss: 2.345678E+00 |": (100, 2.345678),
        "Epoch 0:  22%|██▏       | 4499/20101 [22:26:14<77:48:37, 17.95s/it, loss=2.43, v_num=5563, global_step=4512.0]": (4512, 2.43),
        "  3%|▎         | 30/1000 [00:10<05:00,  3.22it/s]": (30, None),
        "{'loss': 1.2345, 'grad_norm': 0.873, 'learning_rate': 4.9e-05, 'epoch': 0.02}": (None, 1.2345),
        "train loss=1.873 lr=3e-4": (None, 1.873),
    }
    for line, (step, loss) in cases.items():
        m = KB.classify(line)
        assert m is not None and m.signature.effect is Effect.PROGRESS, line
        assert (m.step, m.loss) == (step, loss), line


def test_signature_is_frozen_data() -> None:
    sig = KB.by_id["neuron.compile.dots"]
    assert isinstance(sig, Signature) and sig.anchor_start
    assert KB.classify(".....").signature is sig  # type: ignore[union-attr]
    assert KB.classify("x .....") is None
