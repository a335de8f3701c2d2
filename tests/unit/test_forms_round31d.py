# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part D of the misses of round issue23-heldout-31 (healthy runs that look frightening, failures that
read calm), each as a rule of its family, with real lines and the near misses the rule must leave alone: CPython's
report of an exception it ignored (skipped by the offline readers of a log's last words), ESPnet's notices of an update
skipped for a gradient that was not finite (no form) and of a run it stopped because no update was valid, and a
trainer's count of zero examples. Each line is from the corpus (named by its excerpt) or from a public thread
(named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, read_line
from neuron_watch.diagnosis.heldout import IgnoredReports
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # ESPnet's trainer stopping a run in which no update of an epoch was valid
    ("(trainer:404) WARNING: The gradients at all steps are invalid in this epoch. Something seems wrong. This training was stopped at 2epoch",
     ERROR, Label.NUMERICAL_ERROR, "corpus (espnet-3104-gradients-invalid-all-steps-stopped-at-2epoch: the LM stage of a LibriSpeech recipe)"),
    ("(trainer:404) WARNING: The gradients at all steps are invalid in this epoch. Something seems wrong. This training was stopped at 2epoch",
     ERROR, Label.NUMERICAL_ERROR, "corpus (espnet-3630: a fine-tune on a custom set, the same record from another run)"),
    # a trainer's count of the examples it trains on, at zero
    ("mode : train the number of examples : 0", ERROR, Label.CONFIG_ERROR,
     "corpus (keynet-5-number-of-examples-0-start-training)"),
    ("  Num examples = 0", ERROR, Label.CONFIG_ERROR,
     "transformers#23893 (Trainer's '***** Running training *****' block before IndexError: Invalid key ... for size 0)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # ESPnet's notices of one update skipped: the trainer handled the value (espnet#186: "You can ignore the warning")
    "[user] 2021-04-23 19:22:52,420 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.",  # corpus (espnet-3170)
    "2018-05-23 13:05:13,682 (asr_chainer:132) WARNING: grad norm is nan. Do not update model.",  # corpus (espnet-186)
    "2020-12-10 17:03:04,056 (asr:236) WARNING: grad norm is nan. Do not update model.",  # espnet#2771 (AMI recipe on MALACH data)
    # counts of examples that are not zero
    "[INFO|trainer.py:2049] 2024-04-29 18:45:03,230 >>   Num examples = 1,238",  # corpus (a LLaMA-Factory run)
    "06/12/2020 10:05:38 - INFO - transformers.trainer_tf -     Num examples = 3668",  # corpus (TFTrainer on GLUE)
    # ESPnet's progress record with a finite gradient norm
    "[speec258f0000F1] 2022-09-29 03:50:11,980 (trainer:706) INFO: 1epoch:train:10739-11505batch: iter_time=2.428e-04, forward_time=0.142, loss_ctc=122.599, loss_att=104.745, acc=0.496, loss=110.101, backward_time=0.138, optim0_lr0=6.946e-04, train_time=0.497, grad_norm=63.297, grad_scale=2.048e+03, optim_step_time=0.102",  # espnet#4674
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("(trainer:404) WARNING: The gradients at all steps are invalid in this epoch. Something seems wrong. This training was stopped at 2epoch",
     Label.NUMERICAL_ERROR),
    ("  Num examples = 0", Label.CONFIG_ERROR),
]
#: error lines whose form states no cause of these kinds
NO_CAUSE = [
    "RuntimeError: cannot join current thread",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_a_nan_in_a_metric_line_is_still_a_failure() -> None:
    """Only the trainer's notice of a skipped update is quiet: a loss of NaN in a progress line is read as before."""
    form = read_line("512/512 [==============================] - 127s 247ms/step - loss: nan - acc: nan - val_loss: nan - val_acc: nan")  # corpus (image-segmentation-keras-50)
    assert form is not None and form.kind is FormKind.METRIC


def _skipped(lines: list[str], key: str = "rank-0") -> list[bool]:
    reports = IgnoredReports()
    return [reports.observe(key, line) for line in lines]


@pytest.mark.parametrize(("lines", "skipped"), [
    # Ray's actor handle deleted after the worker was torn down (ray#16947): the announcement, the traceback, the
    # exception line; the record before it is the process's own
    (["2021-07-07 23:45:47,330 INFO services.py:1319 -- View the Ray dashboard at http://127.0.0.1:8266",
      "Exception ignored in: <function ActorHandle.__del__ at 0x7fed2764ab80>",
      "Traceback (most recent call last):",
      '  File "/home/ubuntu/miniconda3/envs/raydev/lib/python3.8/site-packages/ray/actor.py", line 834, in __del__',
      "AttributeError: 'NoneType' object has no attribute 'global_worker'"],
     [False, True, True, True, True]),
    # quoted by markdown (ray#4467), with a source line under a frame (IsoNet#25)
    (["> Exception ignored in: <object repr() failed>",
      "> Traceback (most recent call last):",
      '>   File "/home/ubuntu/ray/python/ray/actor.py", line 538, in __del__',
      "> AttributeError: 'NoneType' object has no attribute 'get_global_worker'"],
     [True, True, True, True]),
    (["Exception ignored in: <function Pool.__del__ at 0x7f6bc4fbae50>",
      "Traceback (most recent call last):",
      '  File "/usr/local/lib/python3.8/multiprocessing/pool.py", line 268, in __del__',
      "    self._change_notifier.put(None)",
      "OSError: [Errno 9] Bad file descriptor"],
     [True, True, True, True, True]),
    # announced at the end of the bar tqdm's own __del__ was closing (Lightning#4404)
    (["Epoch 1: 100%|#####| 1017/1017 [00:09<00:00, 100.37it/s, loss=0.336, v_num=24, train_loss=2.33, train_acc=0.143Exception ignored in: <function tqdm.__del__ at 0x7fd9c4374f80>"],
     [True]),
    # an interrupt the report holds is the user's (Detectron.pytorch#140): its exception line is not skipped
    (["Exception ignored in: <bound method _DataLoaderIter.__del__ of <torch.utils.data.dataloader._DataLoaderIter object at 0x7f33d805aa20>>",
      "Traceback (most recent call last):",
      '  File "/home/bcheng/anaconda3/lib/python3.6/multiprocessing/synchronize.py", line 96, in __enter__',
      "    return self._semlock.__enter__()",
      "KeyboardInterrupt:"],
     [True, True, True, True, False]),
    # another process's line inside the report is not the report's and leaves it open (its exception line is still
    # the report's); a new traceback's header ends it: that traceback is the process's own
    (["Exception ignored in: <bound method _DataLoaderIter.__del__ of <torch.utils.data.dataloader._DataLoaderIter object at 0x7feb4a51aba8>>",
      "Traceback (most recent call last):",
      '  File "/home/ubuntu/XXX/lib/python3.6/site-packages/torch/utils/data/dataloader.py", line 349, in __del__',
      "Epoch 1 step 10 loss 2.31",
      "    self._shutdown_workers()",
      "ConnectionResetError: [Errno 104] Connection reset by peer"],
     [True, True, True, False, True, True]),
    (["Exception ignored in: <bound method _DataLoaderIter.__del__ of <torch.utils.data.dataloader._DataLoaderIter object at 0x7f33d805aa20>>",
      "Traceback (most recent call last):",
      "Process Process-19:",
      "Traceback (most recent call last):",
      '  File "train.py", line 10, in <module>',
      "RuntimeError: CUDA error: an illegal memory access was encountered"],
     [True, True, False, False, False, False]),
])
def test_the_lines_of_an_ignored_exceptions_report(lines: list[str], skipped: list[bool]) -> None:
    assert _skipped(lines) == skipped


def test_a_report_is_read_per_stream() -> None:
    reports = IgnoredReports()
    assert reports.observe("rank-0", "Exception ignored in: <function tqdm.__del__ at 0x7fd9c4374f80>")
    assert not reports.observe("rank-1", "RuntimeError: CUDA error: an illegal memory access was encountered")
    assert reports.observe("rank-0", "Traceback (most recent call last):")


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    # runs that ended well, whose last words are an exception Python ignored at exit
    ("healthy/ray-16947-actor-exit-del-global-worker-harmless.log", Label.HEALTHY, Action.WAIT),
    ("healthy/ray-4467-tune-trial-terminated-then-actor-del-exception-ignored.log", Label.HEALTHY, Action.WAIT),
    ("healthy/ray-6239-pbt-analysis-returned-then-actor-del-exception-ignored.log", Label.HEALTHY, Action.WAIT),
    ("healthy/isonet-25-pool-del-bad-file-descriptor-after-last-iteration.log", Label.HEALTHY, Action.WAIT),
    ("healthy/fairseq-369-tqdm-del-cannot-join-thread-at-max-update.log", Label.HEALTHY, Action.WAIT),
    ("healthy/rfbnet-71-dataloaderiter-del-connection-reset-training-continued.log", Label.HEALTHY, Action.WAIT),
    ("healthy/cyclegan-778-dataloaderiter-del-exception-training-continues.log", Label.HEALTHY, Action.WAIT),
    ("healthy/lightning-4404-mnist-last-epoch-tqdm-del-exception-ignored.log", Label.HEALTHY, Action.WAIT),
    # failures whose ignored reports are beside the point: read as before
    ("collective_hang/detectron-pytorch-140-dataloader-deadlock-keyboardinterrupt-shutdown-workers.log",
     Label.COLLECTIVE_HANG, Action.RESTART),
    ("numerical_error/deeptype-41-loss-is-nan-generator-join.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("config_error/deepspeed-1077-cpu-adam-cuda-version-mismatch.log", Label.CONFIG_ERROR, Action.STOP),
    # ESPnet: an ignorable skipped update; a run stopped because no update was valid
    ("healthy/espnet-186-ctc-loss-not-correct-grad-norm-nan-ignorable.log", Label.HEALTHY, Action.WAIT),
    ("numerical_error/espnet-3104-gradients-invalid-all-steps-stopped-at-2epoch.log", Label.NUMERICAL_ERROR,
     Action.STOP),
    ("numerical_error/espnet-3630.log", Label.NUMERICAL_ERROR, Action.STOP),
    # a trainer that read no examples
    ("config_error/keynet-5-number-of-examples-0-start-training.log", Label.CONFIG_ERROR, Action.STOP),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
