# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-32 (checkpoints, storage and data pipelines), each as
a rule of its family, with real lines and the near misses the rule must leave alone: a file system that cannot take a
lock (ENOLCK, exctaxonomy's errno table), Hugging Face Trainer's ranks racing to rename the temporary checkpoint
directory (heldout.round32b), FSDP's state-dict hook that caught the caching allocator's out-of-memory error as a
warning (signatures.toml: benign.python_warning leaves it to gpu.cuda_oom), and pyxis's older announcement of the
enroot log it relays (judge._LOG_RELAYED). Each line is from the corpus (named by its
excerpt) or from a public thread (named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.exctaxonomy import errno_cause
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    # Trainer's ranks racing to rename tmp-checkpoint-* onto checkpoint-<step>
    ("[rank2]: OSError: [Errno 39] Directory not empty: '/root/results/tmp-checkpoint-s0yubqtr' -> '/root/results/checkpoint-50'",
     Label.CONFIG_ERROR),  # corpus (mm-eureka-8-trainer-renames-tmp-checkpoint-errno39)
    ("[rank3]: OSError: [Errno 39] Directory not empty: '/root/paddlejob/workspace/ms-swift/output/v5-20250208-084624/tmp-checkpoint-djiermq4' -> '/root/paddlejob/workspace/zhangfan52/ms-swift/output/v5-20250208-084624/checkpoint-100'",
     Label.CONFIG_ERROR),  # corpus (ms-swift-3031-transformers-dev-checkpoint-rename-errno39)
    ("[rank5]: OSError: [Errno 39] Directory not empty: 'output_dir/tmp-checkpoint-l6bxw431' -> 'output_dir/checkpoint-100'",
     Label.CONFIG_ERROR),  # trl#2928 (transformers 4.49.0.dev0)
]
#: error lines whose form states no cause: Errno 39 of other removals and renames says nothing by itself
NO_CAUSE = [
    # tempfile's clean-up at interpreter exit (corpus ms-swift-3618, a healthy run) and multiprocessing's finaliser
    "OSError: [Errno 39] Directory not empty: '/mnt/workspace/.cache/modelscope/tmp/hf_datasets-7bhpwpa5'",
    "OSError: [Errno 39] Directory not empty: '/tmp/pymp-7a7ja_j_'",  # corpus (matcha-tts-148)
    # a rename onto a directory a previous run left (ilab-on-ocp#115)
    "OSError: [Errno 39] Directory not empty: '/data/model/output/phase_2/hf_format/samples_160' -> '/data/model/output/phase_2/hf_format/candidate_model'",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize(("line", "name"), [
    ("OSError: [Errno 37] No locks available", "ENOLCK"),
    ("OSError: Unable to create file (unable to lock file, errno = 37, error message = 'No locks available')", "ENOLCK"),
    # an errno the table does not hold (HDF5's errno 11, EAGAIN: another process holds the lock, ompi#6535) says nothing
    ("OSError: Unable to open file (unable to lock file, errno = 11, error message = 'Resource temporarily unavailable')", None),
])
def test_errno_of_a_lock(line: str, name: str | None) -> None:
    """ENOLCK (flock/fcntl on a file system without lock support: datasets' FileLock in the corpus's datasets-1672
    and datasets-2618, HDF5's lock on an NFS home in h5py#1082) is read from the errno, as the judge reads an error
    line no signature explains: configuration, stopped."""
    cause = errno_cause(line)
    reading = read_error(line)
    if name is None:
        assert cause is None
    else:
        assert cause is not None and cause.label is Label.CONFIG_ERROR and name in cause.form
        assert reading is not None and (reading.label, reading.action) == (Label.CONFIG_ERROR, Action.STOP)


#: FSDP's warning of a state-dict entry it could not clone, carrying the allocator's OOM (stanford_alpaca#65, corpus)
_FSDP_CLONE_OOM = "/local_disk0/.ephemeral_nfs/cluster_libraries/python/lib/python3.9/site-packages/torch/distributed/fsdp/fully_sharded_data_parallel.py:2224: UserWarning: Failed to clone() tensor with name lm_head.weight. This may mean that this state_dict entry could point to invalid memory regions after returning from state_dict() call if this parameter is managed by FSDP. Please check clone implementation of lm_head.weight. Error: CUDA out of memory. Tried to allocate 502.00 MiB (GPU 1; 39.59 GiB total capacity; 35.54 GiB already allocated; 276.19 MiB free; 37.22 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"


@pytest.mark.parametrize(("line", "signature"), [
    (_FSDP_CLONE_OOM, "gpu.cuda_oom"),
    # the same hook's warning wrapped by a terminal, the allocator's words on a line of their own (a fine-tune's log
    # quoted in a public notebook's notes): read by the allocator's words alone
    ("    Error: CUDA out of memory. Tried to allocate 172.", "gpu.cuda_oom"),
    # warnings that name no failure stay warnings
    ("/usr/local/lib/python3.6/dist-packages/torch/optim/lr_scheduler.py:123: UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first value of the learning rate schedule.",
     "benign.python_warning"),
    # FSDP's own deprecation warning at a save (FastVideo#108): not a failure
    ("/public/home/huangbb1/anaconda3/envs/fastvideo/lib/python3.10/site-packages/torch/distributed/fsdp/fully_sharded_data_parallel.py:689: FutureWarning: FSDP.state_dict_type() and FSDP.set_state_dict_type() are being deprecated. Please use APIs, get_state_dict() and set_state_dict(), which can support different parallelisms, FSDP1, FSDP2, DDP.",
     "benign.python_warning"),
])
def test_a_warning_that_carries_the_allocators_failure(line: str, signature: str) -> None:
    match = default_knowledge_base().classify(line)
    assert match is not None and match.signature.id == signature


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/datasets-1672-filelock-no-locks-available.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/datasets-2618-xsum-filelock-no-locks-available.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/mm-eureka-8-trainer-renames-tmp-checkpoint-errno39.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/ms-swift-3031-transformers-dev-checkpoint-rename-errno39.log", Label.CONFIG_ERROR, Action.STOP),
    ("oom/stanford-alpaca-65-fsdp-state-dict-clone-cuda-oom-after-last-epoch.log", Label.OOM, Action.STOP),
    # pyxis relaying enroot's log after "printing contents of log file ..." (its older announcement): the relayed
    # log's error is the cause of "child N failed with error code: 1" (mksquashfs's ENOSPC under markdown's bold);
    # other threads' logs of the same announcement keep their causes
    ("config_error/pyxis-53-squashfs-no-space-under-run-pyxis.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/pyxis-12-run-enroot-permission-denied.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/pyxis-61-enroot-switchroot-no-bash.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/pyxis-110-nvidia-container-cli-not-found.log", Label.CONFIG_ERROR, Action.STOP),
    # healthy runs with Errno 39 at exit stay what they were read as before (the multiprocessing finaliser's report
    # before more progress is healthy)
    ("healthy/matcha-tts-148-pymp-finalizer-errno39-epochs-go-on.log", Label.HEALTHY, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
