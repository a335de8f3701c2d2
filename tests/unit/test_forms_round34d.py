# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part D of the misses of round issue23-heldout-34 (whole-run logs of LLM pre-training and
fine-tuning), each as a rule of its family, with real lines and the near misses the rule must leave alone: torch
elastic's agent stopping the workers still running, a py-spy dump whose main thread is blocked in a checkpoint
save, and Megatron's iteration record without its loss. Each line is from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.dumps import Activity, DumpScanner, dump_verdict
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Label, LogLine, RankKey
from tests.unit.form_table import table_tests

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real-logs"
CRASH = FormKind.CRASH
METRIC = FormKind.METRIC

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # torch elastic's agent signalling a worker still running as it stops the group (api.py SubprocessContext._close)
    ("WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 29931 closing signal SIGTERM",
     CRASH, None, "corpus (llamafactory-620-pretrain-save-unexpected-pos-after-4h)"),
    ("W0125 00:51:52.270000 129926476711744 torch/distributed/elastic/multiprocessing/api.py:851] Sending process 28772 closing signal SIGTERM",
     CRASH, None, "SWivid/F5-TTS#728 (accelerate launch, a rank failed with exitcode -6)"),
    ("[2023-09-08 10:21:20,648] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 203614 closing signal SIGTERM",
     CRASH, None, "meta-llama/llama-cookbook#182 (FSDP and PEFT, a rank failed with exitcode -9)"),
    # Megatron's iteration record whose iterations all advanced and that holds no loss (training_log's avg > 0.0)
    (" iteration        9/      10 | consumed samples:          108 | consumed tokens:       442368 | elapsed time per iteration (ms): 1979.2 | learning rate: 4.219E-07 | global batch size:    12 | loss scale: 1.0 | actual seqlen:  4096 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 6.063 | tokens per gpu per second (tgs): 2069.506 | TFLOPs: 127.00 |",
     METRIC, Label.NUMERICAL_ERROR, "corpus (megatron-deepspeed-434-iteration-without-lm-loss)"),
    (" iteration     5427/  250000 | consumed samples:        43416 | consumed tokens:     88915968 | elapsed time per iteration (ms): 4225.8 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 1.893 | TFLOPs: 78.77 |",
     METRIC, Label.NUMERICAL_ERROR, "corpus (megatron-deepspeed-396-grad-norm-nan): 'I do not find loss in the logs'"),
]

#: lines of the same words that are not the form
NEAR_MISSES = [
    # the notice's format string in torch's source, not a notice printed
    '                    "Sending process %s closing signal %s",',  # torch/distributed/elastic/multiprocessing/api.py
    # the agent relaying a signal it received itself (round 24 part B's near miss: its death-signal record says why)
    "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2919043 closing signal SIGHUP",  # ms-swift#64 (corpus)
    # Megatron records that hold their losses, and one of iterations an fp16 loss scaler skipped (no loss summed)
    " iteration      600/  500000 | consumed samples:         4800 | elapsed time per iteration (ms): 1549.5 | learning rate: 2.737E-05 | global batch size:     8 | lm loss: 6.348289E+00 | loss scale: 131072.0 | grad norm: 2.961 | number of skipped iterations:   0 | number of nan iterations:   0 |",  # corpus (megatron-314-save-checkpoint-after-iteration-600-traceback)
    " [2024-04-06 02:59:36] iteration       43/     100 | consumed samples:         5504 | elapsed time per iteration (ms): 5444.9 | throughput per GPU (TFLOP/s/GPU): 239.8 | learning rate: 8.600000E-06 | global batch size:   128 | lm loss: 1.825991E+00 | load_balancing_loss: 1.019746E+00 | loss scale: 1.0 | grad norm: 1.426 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |",  # NVIDIA/Megatron-LM#756 (Mixtral on 16 H100)
    " iteration       10/ 1000000 | consumed samples:           40 | elapsed time per iteration (ms): 356.2 | learning rate: 0.000E+00 | global batch size:     4 | loss scale: 8388608.0 | number of skipped iterations:  10 | number of nan iterations:   0 |",  # corpus (nccl-743-megatron-iterations-skipped)
    # prose about the notice
    "Training fails with an error `WARNING:torch.distributed.elastic.multiprocessing.api:Sending process` at the end",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_an_error_a_bar_redraw_withdrew_stands_when_the_agent_stops_the_workers(tmp_path: Path) -> None:
    """LlamaFactory#620: the archive writer's error at a checkpoint save, the progress bar's closing redraw (which
    withdraws the error as progress would), then torch elastic's notices: the run did not go on, and the error is its
    cause (the storage: configuration). Without the notices the same lines read as a run that went on."""
    excerpt = (CORPUS / "config_error/llamafactory-620-pretrain-save-unexpected-pos-after-4h.log").read_text(encoding="utf-8")
    assert diagnose_paths([str(CORPUS / "config_error/llamafactory-620-pretrain-save-unexpected-pos-after-4h.log")],
                          now=0.0).verdict.label is Label.CONFIG_ERROR
    without = tmp_path / "without-notice.log"
    without.write_text("".join(line + "\n" for line in excerpt.splitlines() if "closing signal" not in line),
                       encoding="utf-8")
    assert diagnose_paths([str(without)], now=0.0).verdict.label is Label.HEALTHY


def test_workers_the_agent_restarted_and_that_trained_on_stay_healthy(tmp_path: Path) -> None:
    """An agent that restarts its group (--max-restarts) signals the workers still running, and the new workers'
    progress after the notice withdraws it, as it withdraws any crash."""
    log = tmp_path / "restarted.log"
    log.write_text(FORMS[1][0] + "\n"
                   + "".join(f"{{'loss': {1.5 - i / 10:.4f}, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': {i / 10:.1f}}}\n"
                             for i in range(1, 6)),
                   encoding="utf-8")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY


def _scan(text: str) -> DumpScanner:
    scanner = DumpScanner()
    key = RankKey("", 0)
    for i, line in enumerate(text.splitlines()):
        scanner.observe(LogLine(key, line, 100.0 + i, 100.0 + i, "paste.log", i + 1))
    return scanner


#: Megatron-LM#2422: py-spy of a run stuck in an asynchronous distributed checkpoint save, the main thread idle
#: joining the writer process (the files were written empty); the corpus excerpt's first lines
MEGATRON_ASYNC_SAVE = (CORPUS / "collective_hang/megatron-2422-async-save-blocked-py-spy-join.log").read_text(encoding="utf-8")

#: the same blocked save in torch.save, not a pasted dump but built from sources: py-spy's layout (src/dump.rs:
#: ``Thread {id} ({status}): "{name}"``, then a frame ``{function} ({file}:{line})`` a line) around the functions a
#: Trainer's save passes through (torch/serialization.py ``save`` and ``_save``, transformers/trainer.py
#: ``_save_checkpoint``); the line numbers are illustrative
TORCH_SAVE_IDLE = ('Thread 1204 (idle): "MainThread"\n'
                   "    _save (torch/serialization.py:864)\n"
                   "    save (torch/serialization.py:619)\n"
                   "    _save_optimizer_and_scheduler (transformers/trainer.py:2901)\n"
                   "    _save_checkpoint (transformers/trainer.py:2797)\n")


def test_a_main_thread_blocked_in_a_save_is_a_hang() -> None:
    for text, where in ((MEGATRON_ASYNC_SAVE, "core/dist_checkpointing/strategies/async_utils.py"),
                        (TORCH_SAVE_IDLE, "torch/serialization.py")):
        dumps = _scan(text).finish()
        assert [d.doing for d in dumps] == [Activity.SAVE]
        verdict = dump_verdict(dumps, latest_progress=None)
        assert verdict is not None and (verdict.label, verdict.action.value) == (Label.COLLECTIVE_HANG, "restart")
        assert where in verdict.evidence[0].text


def test_a_main_thread_writing_its_save_is_no_hang() -> None:
    """py-spy's ``active``: the thread is writing the checkpoint, the save at work (a slow one the live judge
    times with --save-timeout), not blocked."""
    active = TORCH_SAVE_IDLE.replace("(idle)", "(active)")
    dumps = _scan(active).finish()
    assert [d.doing for d in dumps] == [Activity.SAVE]
    assert dump_verdict(dumps, latest_progress=None) is None


def test_offline_diagnose_reads_the_blocked_save_as_a_hang() -> None:
    verdict = diagnose_paths([str(CORPUS / "collective_hang/megatron-2422-async-save-blocked-py-spy-join.log")],
                             now=0.0).verdict
    assert (verdict.label, verdict.action.value) == (Label.COLLECTIVE_HANG, "restart")
    assert verdict.evidence[0].signature == "form.stack_dump"


def test_a_healthy_servers_py_spy_dump_stays_healthy() -> None:
    """SGLang's soft watchdog dumps its scheduler with py-spy while it serves (no save among the frames)."""
    verdict = diagnose_paths([str(CORPUS / "healthy/sglang-20766-dp-controller-soft-watchdog-pyspy-dump.log")],
                             now=0.0).verdict
    assert verdict.label is Label.HEALTHY


def test_a_py_spy_dump_is_read_through_a_prefix_that_took_a_space(tmp_path: Path) -> None:
    """A launcher's prefix followed by a space (``[rank0]: ``, ``[default0]: ``) is removed with its space, which
    leaves py-spy's frames indented three: the dump is still read, whatever its main thread does (Megatron-LM#2422's
    blocked save; DeepSpeed#6524's ZeRO-3 backward waiting on its peers)."""
    for excerpt in ("collective_hang/megatron-2422-async-save-blocked-py-spy-join.log",
                    "collective_hang/deepspeed-6524-zero3-stuck-in-partition-grads-py-spy.log"):
        prefixed = tmp_path / excerpt.replace("/", "-")
        prefixed.write_text("".join(f"[rank0]: {line}\n" for line in (CORPUS / excerpt).read_text(encoding="utf-8").splitlines()),
                            encoding="utf-8")
        verdict = diagnose_paths([str(prefixed)], now=0.0).verdict
        assert (verdict.label, verdict.evidence[0].signature) == (Label.COLLECTIVE_HANG, "form.stack_dump"), excerpt


def test_a_megatron_record_without_its_loss_is_numerical_not_progress() -> None:
    """The record is a progress line too (progress.megatron): its missing loss makes it a non-finite metric instead,
    and the log stops on it (Megatron-DeepSpeed#434). Records of iterations a loss scaler skipped stay progress
    (nccl-743, healthy)."""
    verdict = diagnose_paths([str(CORPUS / "numerical_error/megatron-deepspeed-434-iteration-without-lm-loss.log")],
                             now=0.0).verdict
    assert (verdict.label, verdict.action.value) == (Label.NUMERICAL_ERROR, "stop")
    assert diagnose_paths([str(CORPUS / "healthy/nccl-743-megatron-iterations-skipped.log")],
                          now=0.0).verdict.label is Label.HEALTHY
