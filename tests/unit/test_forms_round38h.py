# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part H of the misses of round issue23-heldout-38 (reward-model and preference-optimization training,
RL fine-tuning with rollouts), as a rule of its family, with real lines and the near misses the rule must leave alone:
an exception's last line that two processes printed at once, its class doubled. Each line is from the corpus (named by
its excerpt) or from a public thread (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round38h import round38h_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

R1V_IMPORT = "ImportErrorImportError    : : import flash_attn_2_cuda as flash_attn_gpu/root/miniconda3/envs/r1v/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZNK3c1011StorageImpl27throw_data_ptr_access_errorEv/root/miniconda3/envs/r1v/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZNK3c1011StorageImpl27throw_data_ptr_access_errorEv"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # CPython's failed import, two ranks at once: the environment does not fit the program
    (R1V_IMPORT, ERROR, Label.CONFIG_ERROR, "corpus (r1-v-127-flash-attn-undefined-symbol-interleaved)"),
    ("ModuleNotFoundErrorModuleNotFoundError: : No module named 'vllm'No module named 'vllm'", ERROR,
     Label.CONFIG_ERROR, "the same interleaving of two Ray workers' last lines (OpenRLHF#400's ModuleNotFoundError, as two ranks print it)"),
    ("[rank1]: ImportErrorImportError: : cannot import name 'selective_log_softmax' from 'trl.trainer.utils'",
     ERROR, Label.CONFIG_ERROR, "X-R1#22's ImportError of a TRL too old, as two ranks under torchrun's tags print it"),
    # any other class: an error, its cause left to the reader of causes
    ("KeyErrorKeyError: : 'input_ids_j'", ERROR, None, "corpus (rlhf-reward-modeling-6-keyerror-input-ids-j-eval-data)"),
    ("OSErrorOSError: OSError: : Can't load the configuration of '/fsx/ubuntu/8B_config_llama3'.", ERROR, None,
     "corpus (awsome-distributed-ai-363-config-path-interleaved)"),
    ("RuntimeErrorRuntimeError: CUDA error: invalid device ordinal", ERROR, Label.CONFIG_ERROR,
     "corpus (vim-61-invalid-ordinal-garbled): CUDA's own words state the cause"),
    ("> torch.OutOfMemoryErrortorch.OutOfMemoryError: : CUDA out of memory. Tried to allocate 2.00 GiB.", ERROR, Label.OOM,
     "two ranks' torch.OutOfMemoryError in a quoted paste (the message's own words state the cause)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "/usr/lib/python3/dist-packages/torchvision/io/image.py:13: UserWarning: Failed to load image Python extension: '/usr/lib/python3/dist-packages/torchvision/image.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev'",  # torchvision's warning: the run goes on
    "   raise ImportError(msg)",  # the traceback's source line
    "  File \"/usr/lib/python3.10/importlib/__init__.py\", line 126, in import_module",  # a frame of the import, no exception yet
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_a_class_doubled_inside_a_message_is_not_this_form() -> None:
    """A doubled class in the middle of a line (a logger's record quoting an error) is not a traceback's last line."""
    assert round38h_form("2025-02-24 10:00:00 WARNING retrying after ImportErrorImportError: : import foo") is None


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 63


def test_a_log_ending_on_a_doubled_import_error_is_a_configuration_error(tmp_path: Path) -> None:
    """Two ranks' failed import of a wheel built against another torch ends the log: a configuration error (stop),
    not a healthy run."""
    log = tmp_path / "r1v.log"
    log.write_text(R1V_IMPORT + "\n")
    verdict = diagnose_paths([str(log)], now=0.0).verdict
    assert verdict.label is Label.CONFIG_ERROR
