"""An error nobody recognised is never ``healthy`` at the end of a log, and
never a restart while the ranks go on; exit codes and signals mean what their sources say;
exceptions a restart cannot fix stop the job."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

import pytest

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankExit, RankKey
from neuron_watch.recovery.policy import NEVER_RESTART

KB = default_knowledge_base()
N = "node-a"


def ln(rank: int, text: str, t: float) -> LogLine:
    return LogLine(RankKey(N, rank), text, t, t, f"rank-{rank}.log", int(t))


def judge() -> Judge:
    return Judge(KB, JudgeSettings(), start=0.0)


def feed(j: Judge, rank: int, t0: float, *texts: str) -> float:
    t = t0
    for text in texts:
        j.observe_lines([ln(rank, text, t)])
        t += 1.0
    return t


STEP = "step {} loss 1.52 step_time 1.0s"
#: what healthy real runs print (none of these may fail a job)
NOISE = [
    "[W1123 15:00:49.123456 socket.cpp:752] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign requested address).",
    "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:617: UserWarning: This DataLoader will create 8 worker processes in total. Our suggested max number of worker in current system is 2, which is smaller than what this DataLoader is going to create. Please be aware that excessive worker creation might get DataLoader running slow or even freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
    "Some weights of BertForSequenceClassification were not initialized from the model checkpoint at bert-base-uncased and are newly initialized: ['classifier.bias', 'classifier.weight']",
    "eval: errors=0 accuracy=0.91",
    "2024-04-12 07:13:06,123 - INFO - loading /fsx/data/error_analysis.jsonl",
    "ip-10-0-1-12:2251:2390 [3] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
]


@pytest.mark.parametrize("line", NOISE)
def test_known_noise_is_not_an_error(line: str) -> None:
    m = KB.classify(line)
    assert m is None or m.signature.category is Label.HEALTHY, m


def test_a_healthy_run_full_of_noise_is_healthy_live_and_offline() -> None:
    j = judge()
    t = 0.0
    for n in range(1, 6):
        t = feed(j, 0, t, *NOISE, STEP.format(n))
    assert j.verdict(t).label is Label.HEALTHY
    assert j.verdict(t, final=True).label is Label.HEALTHY


def test_live_an_unexplained_error_while_ranks_progress_is_a_warning_not_a_restart() -> None:
    j = judge()
    t = feed(j, 0, 0.0, STEP.format(1), "RuntimeError: a metrics exporter failed (nobody wrote a rule)")
    v = j.verdict(t)
    assert v.label is Label.HEALTHY and v.action is Action.WAIT
    assert [e.text for e in j.unexplained] == ["RuntimeError: a metrics exporter failed (nobody wrote a rule)"]
    assert j.unexplained[0].signature == "host.unrecognised_error"


def test_offline_an_error_as_the_last_word_is_a_crash_of_unknown_cause() -> None:
    j = judge()
    t = feed(j, 1, 0.0, STEP.format(1), STEP.format(2), "ERROR: shard 7 of /fsx/data is truncated")
    v = j.verdict(t, final=True)
    assert v.label is Label.OTHER_CRASH and v.culprit == RankKey(N, 1)
    assert v.evidence[0].text == "ERROR: shard 7 of /fsx/data is truncated"
    assert "not recognised" in v.reason


def test_offline_an_error_the_job_went_on_from_is_healthy() -> None:
    j = judge()
    t = feed(j, 0, 0.0, STEP.format(1), "ERROR: could not write metrics.json", STEP.format(2))
    assert j.verdict(t, final=True).label is Label.HEALTHY


def test_an_unknown_exception_under_a_traceback_is_named_as_the_cause() -> None:
    j = judge()
    t = feed(j, 2, 0.0, STEP.format(1), "Traceback (most recent call last):",
             '  File "/job/train.py", line 88, in <module>', "KeyError: 'labels'")
    v = j.verdict(t)
    assert v.label is Label.OTHER_CRASH and v.culprit == RankKey(N, 2)
    assert v.evidence[0].text == "KeyError: 'labels'" and "not recognised" in v.reason


@pytest.mark.parametrize("line", [
    "ModuleNotFoundError: No module named 'nonexistent_pkg'",
    "[rank0]: ImportError: cannot import name 'AutoModelForCausalLM' from 'transformers' (unknown location)",
    "SyntaxError: invalid syntax",
    "train.py: error: unrecognized arguments: --bf16",
    "run_clm.py: error: the following arguments are required: --output_dir",
    "/opt/venv/bin/python3: can't open file '/home/ubuntu/train.py': [Errno 2] No such file or directory",
    "FileNotFoundError: [Errno 2] No such file or directory: '/fsx/data/train.jsonl'",
])
def test_exceptions_a_restart_cannot_fix_stop_the_job(line: str) -> None:
    j = judge()
    text = line.split("]: ", 1)[-1] if line.startswith("[rank") else line
    t = feed(j, 0, 0.0, "Traceback (most recent call last):", text)
    j.observe_exit(RankExit(RankKey(N, 0), 1, t))
    v = j.verdict(t)
    assert v.label is Label.CONFIG_ERROR and v.action is Action.STOP and v.label in NEVER_RESTART


@pytest.mark.parametrize(("code", "words"), [
    (-11, "SIGSEGV: segmentation fault"), (139, "SIGSEGV: segmentation fault"),
    (-6, "SIGABRT: aborted"), (134, "SIGABRT: aborted"), (-7, "SIGBUS"), (3, "own status 3"),
])
def test_exit_codes_and_signals_are_named(code: int, words: str) -> None:
    j = judge()
    t = feed(j, 1, 0.0, STEP.format(1))
    j.observe_exit(RankExit(RankKey(N, 1), code, t))
    v = j.verdict(t)
    assert v.label is Label.OTHER_CRASH and words in v.reason, v.reason


def test_sigkill_with_an_oom_kill_line_is_host_oom_and_without_it_is_not() -> None:
    j = judge()
    t = feed(j, 0, 0.0, STEP.format(1))
    j.observe_exit(RankExit(RankKey(N, 0), -9, t))
    assert j.verdict(t).label is Label.OTHER_CRASH
    feed(j, -1, t, "[ 9123.456789] Out of memory: Killed process 12345 (python3) total-vm:123456789kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:191234kB oom_score_adj:0")
    assert j.verdict(t + 1).label is Label.OOM


@pytest.mark.parametrize("line", [
    "RuntimeError: neuronx-cc compilation failed with -9. Check compiler logs.",
    "subprocess.CalledProcessError: Command '['neuronx-cc', 'compile', '--framework=XLA', 'model.hlo_module.pb', '--output', 'model.neff']' returned non-zero exit status -9.",
])
def test_a_compiler_killed_by_sigkill_is_host_oom(line: str) -> None:
    j = judge()
    t = feed(j, 0, 0.0, line)
    v = j.verdict(t)
    assert v.label is Label.OOM  # the action is the signature's (neuron.compile.killed_oom: stop)


def test_a_compiler_exit_70_stays_a_compile_error() -> None:
    j = judge()
    t = feed(j, 0, 0.0, "RuntimeError: neuronx-cc compilation failed with 70. Check compiler logs.")
    v = j.verdict(t)
    assert v.label is Label.COMPILE_ERROR and v.action is Action.STOP


def test_the_exception_under_the_traceback_is_the_evidence_not_an_older_error_line() -> None:
    j = judge()
    t = feed(j, 0, 0.0, "ip-10-0-1-12:2251:2390 [0] NCCL WARN NET/Plugin: something harmless at start",
             "Traceback (most recent call last):", '  File "/job/train.py", line 9, in <module>',
             "KeyError: 'labels'")
    v = j.verdict(t)
    assert v.label is Label.OTHER_CRASH and v.evidence[0].text == "KeyError: 'labels'"


#: NVIDIA/nccl#1618 (corpus comm_timeout_transient/nccl-1618-poll-connect-retrying): a WARN no rule
#: explains, then the same rank's INFO that it retries that connect
POLL_FAILED = "[03/16][2025-02-25 15:46:48,389] [misc/socket.cc:602] [s11gn1268:pid=3987720] NCCL WARN socketPollConnect poll() failed, ret 1, error Connection timed out, revents 8, connect to 172.16.30.229:39953"
RETRYING = "[03/16][2025-02-25 15:46:48,390] [misc/socket.cc:551] [s11gn1268:pid=3987720] NCCL INFO socketPollConnect: connect returned Connection timed out, retrying (1/34) after sleep for 100 msec"


def test_an_error_the_rank_retries_is_a_transient_problem_while_the_retry_goes_on() -> None:
    assert KB.classify(POLL_FAILED).signature.id == "host.unrecognised_error"  # the premise
    j = judge()
    t = feed(j, 0, 0.0, POLL_FAILED, RETRYING)
    v = j.verdict(t, final=True)
    assert v.label is Label.COMM_TIMEOUT_TRANSIENT and v.action is Action.WAIT
    assert [e.text for e in j.unexplained] == [POLL_FAILED]  # kept as a warning


def test_an_error_after_the_retries_is_still_the_ranks_last_word() -> None:
    j = judge()
    gave_up = "h1:1:2 [0] NCCL WARN socketPollConnect: peer 172.16.30.229:39953 gave up after 34 retries"
    t = feed(j, 0, 0.0, POLL_FAILED, RETRYING, gave_up)
    v = j.verdict(t, final=True)
    # the cause comes from the rank's own earlier error (a connect that timed out): a transport failure
    assert v.label is Label.COMM_ERROR and v.evidence[0].text == gave_up


def test_another_rank_retrying_does_not_clear_this_ranks_error() -> None:
    j = judge()
    t = feed(j, 0, 0.0, POLL_FAILED)
    t = feed(j, 1, t, RETRYING)
    v = j.verdict(t, final=True)
    assert v.label is Label.COMM_ERROR and v.culprit == RankKey(N, 0)
