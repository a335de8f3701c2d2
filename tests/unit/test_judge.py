"""The judge on a fake clock (``now`` is an argument): calibration, compile evidence from logs,
processes and cache locks, root cause, culprit, and "could not observe"."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

import pytest

from neuron_watch.diagnosis.judge import HangCalibration, Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, CompilerSample, Label, LogLine, RankExit, RankKey

KB = default_knowledge_base()
N = "node-a"
LOCK_WAIT = "2026-08-06 01:04:10.000123: 1234 [INFO]: Another process must be compiling MODULE_16518787498567201059+d41d8cd9, been waiting for: 2.0 minutes"
CC_START = "2024-04-12 07:13:06.000297:  271334  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc compile --target=trn1 --framework=XLA /tmp/u/w/model.MODULE_1+d41d8cd9.hlo_module.pb --output /tmp/u/w/model.neff --verbose=35"
RX = "2023-Aug-01 16:14:43.0241 332066:332494 [29] include/socket.h:579 CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying"


def ln(rank: int, text: str, t: float) -> LogLine:
    return LogLine(RankKey(N, rank), text, t, t, f"rank-{rank}.log", int(t))


def judge(**kw: object) -> Judge:
    return Judge(KB, JudgeSettings(**kw), start=0.0)  # type: ignore[arg-type]


def step(j: Judge, t: float, n: int, ranks: range = range(2)) -> None:
    for r in ranks:
        j.observe_line(ln(r, f"step {n} loss 1.5 step_time 1s", t))


# -- calibration -------------------------------------------------------------------------------------


def test_calibration_defaults_floor_ceiling_and_warmup() -> None:
    c = HangCalibration()
    assert c.timeout([]) == c.default == 900.0
    assert c.timeout([600.0] * 5 + [1.0, 1.0]) == 900.0  # warm-up ignored, too few samples yet
    assert not c.calibrated([1.0] * 7) and c.calibrated([1.0] * 8)
    assert c.timeout([600.0] * 5 + [1.0] * 3) == c.floor == 180.0  # 5 x 1 s, raised to the floor
    assert c.timeout([1.0] * 5 + [100.0] * 3) == 500.0  # 5 x the longest interval after warm-up
    assert c.timeout([1.0] * 5 + [1000.0] * 3) == c.ceiling == 1800.0


def test_hang_is_declared_after_the_calibrated_timeout_and_not_before() -> None:
    j = judge()
    for i in range(12):  # a step every 60 s: 11 intervals, 6 after warm-up -> 5 x 60 = 300 s
        step(j, 60.0 * i, i + 1)
    last = 60.0 * 11
    assert j.hang_timeout() == 300.0
    assert j.verdict(last + 300.0).label is Label.HEALTHY
    v = j.verdict(last + 300.1)
    assert v.label is Label.COLLECTIVE_HANG and v.action is Action.RESTART and v.step == 12


def test_first_steps_get_the_long_grace() -> None:
    j = judge()
    step(j, 1000.0, 1)  # first step after a long compile
    step(j, 1001.0, 2)
    assert j.hang_timeout() == 900.0
    assert j.verdict(1001.0 + 899.0).label is Label.HEALTHY
    assert j.verdict(1001.0 + 901.0).label is Label.COLLECTIVE_HANG


def test_startup_timeout_before_any_progress() -> None:
    j = judge(startup_timeout=100.0)
    j.expect([RankKey(N, 0)], 0.0)
    assert j.verdict(100.0).label is Label.HEALTHY
    assert j.verdict(100.5).label is Label.COLLECTIVE_HANG


def test_fixed_hang_timeout_overrides_calibration() -> None:
    j = judge(hang_timeout=42.0)
    step(j, 0.0, 1)
    assert j.hang_timeout() == 42.0
    assert j.verdict(42.5).label is Label.COLLECTIVE_HANG


# -- checkpoint saves ---------------------------------------------------------------------------------

SAVE_BEGAN = ("[2026-11-21 10:12:33,481.481: I neuronx_distributed/trainer/checkpoint.py:612] "
              "synced saving of checkpoint step_1200 began")
SAVE_DONE = ("[2026-11-21 10:19:02,117.117: I neuronx_distributed/trainer/checkpoint.py:426] "
             "synced saving of checkpoint step_1200 completed")


def test_an_open_synced_save_is_not_a_hang_until_its_budget() -> None:
    j = judge(hang_timeout=60.0, save_timeout=1800.0)
    step(j, 0.0, 1)
    j.observe_line(ln(0, SAVE_BEGAN, 10.0))
    v = j.verdict(600.0)  # ten minutes of silence while rank 0 writes
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT) and "saving a checkpoint" in v.reason
    assert v.culprit == RankKey(N, 0) and v.evidence[0].text == SAVE_BEGAN
    assert [r["state"] for r in j.rank_summaries(600.0)] == ["saving", "silent"]
    assert j.verdict(1811.0).label is Label.COLLECTIVE_HANG  # a save that never completes


def test_silence_after_a_completed_save_is_timed_from_its_end() -> None:
    j = judge(hang_timeout=60.0)
    step(j, 0.0, 1)
    j.observe_line(ln(0, SAVE_BEGAN, 10.0))
    j.observe_line(ln(0, SAVE_DONE, 500.0))
    assert j.verdict(550.0).label is Label.HEALTHY
    assert j.verdict(561.0).label is Label.COLLECTIVE_HANG


def test_an_async_save_does_not_hold_off_a_hang() -> None:
    j = judge(hang_timeout=60.0)
    step(j, 0.0, 1)
    j.observe_line(ln(0, SAVE_BEGAN.replace("synced", "async"), 10.0))  # training goes on meanwhile
    assert j.verdict(61.0).label is Label.COLLECTIVE_HANG


# -- compile evidence ---------------------------------------------------------------------------------


def test_compiler_process_whose_cpu_grows_is_compiling_and_stalls_out() -> None:
    j = judge(hang_timeout=60.0, compiler_cpu_stall=300.0)
    step(j, 0.0, 1)
    k = RankKey(N, 1)
    for t in range(0, 1000, 100):  # CPU time grows every sample
        j.observe_compilers([CompilerSample(k, 4242, float(t), float(t))], float(t))
    assert j.verdict(950.0).label is Label.COMPILING
    assert j.rank_summaries(950.0)[1]["state"] == "compiling"
    for t in range(1000, 1400, 100):  # alive, but its CPU time is frozen
        j.observe_compilers([CompilerSample(k, 4242, 900.0, float(t))], float(t))
    assert j.verdict(1199.0).label is Label.COMPILING  # within the stall window of the last growth
    assert j.verdict(1300.0).label is Label.COLLECTIVE_HANG


def test_a_step_after_the_compilers_last_growth_ends_the_compile_before_the_next_reading() -> None:
    """Readings come once a second; a short job may end before the one that shows the pid gone."""
    j = judge(hang_timeout=5.0)
    step(j, 0.0, 1)
    k = RankKey(N, 0)
    for t in (1.0, 2.0, 3.0):
        j.observe_compilers([CompilerSample(k, 4242, t, t)], t)
    assert j.verdict(3.5).label is Label.COMPILING
    step(j, 3.6, 2)  # the rank stepped after the compiler's last growth: that compile is over
    assert j.verdict(3.7).label is Label.HEALTHY
    j.observe_compilers([CompilerSample(k, 4242, 4.0, 4.0)], 4.0)  # growing again after the step
    v = j.verdict(4.1)
    assert v.label is Label.COMPILING and v.culprit == k


def test_compile_log_line_without_end_is_compiling_until_the_budget() -> None:
    j = judge(hang_timeout=60.0, compile_timeout=3600.0)
    j.observe_line(ln(0, CC_START, 0.0))
    j.observe_line(ln(1, RX, 120.0))
    assert j.verdict(3599.0).label is Label.COMPILING
    assert j.verdict(3601.0).label is Label.COLLECTIVE_HANG


def test_fresh_cache_lock_is_compile_evidence() -> None:
    j = judge(hang_timeout=60.0)
    step(j, 0.0, 1)
    j.observe_line(ln(0, RX, 120.0))
    j.observe_cache_locks(["MODULE_1+d41d8cd9/model.hlo_module.pb.lock"], 100.0)
    assert j.verdict(110.0).label is Label.COMPILING
    j.observe_cache_locks([], 130.0)
    assert j.verdict(131.0).label is Label.COLLECTIVE_HANG


def test_lock_wait_with_no_compiler_anywhere_is_a_stale_lock() -> None:
    j = judge(hang_timeout=60.0, compiler_cpu_stall=300.0)
    j.observe_compilers([], 0.0)  # processes are observed: no compiler at all
    for t in (60.0, 120.0, 180.0, 240.0, 300.0, 360.0):
        j.observe_line(ln(0, LOCK_WAIT, t))
        j.observe_compilers([], t)
    v = j.verdict(361.0)
    assert v.label is Label.COMPILE_ERROR and v.action is Action.STOP and "stale" in v.reason
    assert v.culprit == RankKey(N, 0) and v.evidence[0].signature == "neuron.compile.lock_wait"


def test_lock_wait_while_a_compiler_burns_cpu_is_compiling() -> None:
    j = judge(hang_timeout=60.0)
    for t in (60.0, 120.0, 180.0):
        j.observe_line(ln(0, LOCK_WAIT, t))
        j.observe_compilers([CompilerSample(RankKey(N, 1), 77, t, t)], t)
    assert j.verdict(181.0).label is Label.COMPILING


def test_lock_wait_offline_trusts_the_log() -> None:
    j = judge(hang_timeout=60.0)
    for t in (60.0, 120.0):
        j.observe_line(ln(0, LOCK_WAIT, t))
    assert j.verdict(121.0).label is Label.COMPILING


# -- root cause and culprit ----------------------------------------------------------------------------


def test_generic_traceback_is_replaced_by_the_specific_error_of_the_same_rank() -> None:
    j = judge()
    j.observe_line(ln(2, "[rank2]: Traceback (most recent call last):", 10.0))
    j.observe_line(ln(2, "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB", 10.1))
    j.observe_line(ln(0, "[rank0]: Traceback (most recent call last):", 10.05))
    v = j.verdict(11.0)
    assert v.label is Label.OOM and v.action is Action.STOP and v.culprit == RankKey(N, 2)


def test_a_traceback_the_rank_survived_is_not_a_failure() -> None:
    j = judge()
    step(j, 0.0, 1)
    j.observe_line(ln(0, "Traceback (most recent call last):", 5.0))
    step(j, 10.0, 2)
    assert j.verdict(11.0).label is Label.HEALTHY


def test_earliest_primary_failure_wins_over_louder_peer_errors() -> None:
    j = judge()
    for r in (0, 1, 3):
        j.observe_line(ln(r, "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.", 600.0))
    j.observe_line(ln(2, "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=28127, GPU has fallen off the bus.", 700.0))
    v = j.verdict(701.0)
    assert v.label is Label.HARDWARE_ERROR and v.culprit == RankKey(N, 2)
    assert len(v.ranks) == 4


def test_exit_codes_without_lines() -> None:
    j = judge()
    j.observe_exit(RankExit(RankKey(N, 1), -9, 5.0))
    j.observe_exit(RankExit(RankKey(N, 0), -15, 4.0))  # terminated by the agent: not a cause
    v = j.verdict(6.0)
    # SIGKILL alone says nothing of who sent it: not oom without the kernel's word
    assert v.label is Label.OTHER_CRASH and v.culprit == RankKey(N, 1)
    assert "signal 9" in v.reason and "unknown" in v.reason


def test_sigkill_with_the_kernels_oom_kill_on_the_node_is_oom() -> None:
    j = judge()
    j.observe_exit(RankExit(RankKey(N, 1), -9, 5.0))
    j.observe_line(ln(-1, "neuron-watch: the kernel's OOM killer killed a process of this node's job "
                      "(/sys/fs/cgroup/job.scope/memory.events: oom_kill 0 -> 1)", 5.5))
    v = j.verdict(6.0)
    assert v.label is Label.OOM and v.culprit == RankKey(N, 1)
    assert v.evidence[0].signature == "host.oom_killed"


def test_torchruns_sigkill_report_is_not_oom_by_itself() -> None:
    j = judge()
    j.observe_line(ln(1, "  traceback : Signal 9 (SIGKILL) received by PID 12345", 5.0))
    v = j.verdict(6.0)
    assert v.label is Label.OTHER_CRASH and v.culprit == RankKey(N, 1)
    j.observe_line(ln(0, "[ 9123.456789] Out of memory: Killed process 12345 (python3) total-vm:1kB, anon-rss:1kB", 5.2))
    assert j.verdict(6.0).label is Label.OOM


def test_hang_culprit_is_the_rank_not_waiting() -> None:
    j = judge(hang_timeout=100.0)
    step(j, 0.0, 1, range(4))
    for r in (0, 1, 3):
        j.observe_line(ln(r, RX, 120.0))
    v = j.verdict(101.0 + 20.0)
    assert v.label is Label.COLLECTIVE_HANG and v.culprit == RankKey(N, 2)
    assert v.evidence[0].key == RankKey(N, 2)


def test_config_hint_is_attached_to_a_later_hang() -> None:
    j = judge(hang_timeout=50.0)
    j.observe_line(ln(0, "2023-Aug-01 16:10:02.0101 332066:332066 [0] nccl_net_ofi_init:1234 CCOM WARN OFI plugin initNet() failed is EFA enabled?", 0.0))
    step(j, 1.0, 1)
    assert j.verdict(10.0).label is Label.HEALTHY  # a hint alone fails nothing
    v = j.verdict(60.0)
    assert v.label is Label.COLLECTIVE_HANG and "EFA" in v.advice
    assert v.evidence[-1].signature == "neuron.ccom.efa_initnet"


# -- could not observe ------------------------------------------------------------------------------------


def test_unobserved_is_its_own_state_never_healthy() -> None:
    j = judge()
    step(j, 0.0, 1)
    j.mark_unobserved("node-b", 5.0)
    v = j.verdict(6.0)
    assert v.label is Label.UNOBSERVED and v.action is Action.WAIT and "node-b" in v.reason
    j.expect([RankKey("node-b", 7)], 6.0)
    assert [s["state"] for s in j.rank_summaries(6.0) if s["node"] == "node-b"] == ["unobserved"]
    j.mark_observed("node-b")
    assert j.verdict(7.0).label is Label.HEALTHY


@pytest.mark.parametrize("first_failure", ["other_crash", "hardware"])
def test_a_failure_outranks_unobserved(first_failure: str) -> None:
    j = judge()
    j.mark_unobserved("node-b", 0.0)
    text = "Segmentation fault (core dumped)" if first_failure == "other_crash" else "NEURON_HW_ERR=DMA_ERROR instance-id=i-1 hostname=h nd-id=0 nc-id=0 serial-num=1 action=TERMINATE_INSTANCE"
    j.observe_line(ln(0, text, 1.0))
    assert j.verdict(2.0).label in (Label.OTHER_CRASH, Label.HARDWARE_ERROR)


def test_when_every_report_is_a_peer_timeout_the_silent_rank_is_the_culprit() -> None:
    j = judge()
    step(j, 0.0, 1, range(4))
    for r in (0, 2, 3):  # rank 1 never reached the all-reduce and printed nothing
        j.observe_line(ln(r, f"[rank{r}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.", 600.0 + r))
    v = j.verdict(610.0)
    assert v.label is Label.COLLECTIVE_HANG and v.culprit == RankKey(N, 1)
    assert "alone reported nothing" in v.reason


def test_a_new_checkpoint_is_a_sign_of_life_and_its_stream_is_never_the_culprit() -> None:
    """The agent reports a new complete checkpoint as a line of the node's own stream (rank -1)."""
    j = judge(hang_timeout=10.0)
    step(j, 1.0, 1)
    j.observe_line(ln(-1, "neuron-watch: a new complete checkpoint appeared: /ck/checkpoint-40 (step 40)", 9.0))
    assert j.verdict(15.0).label is Label.HEALTHY  # 14 s after the last step line, 6 s after the checkpoint
    assert j.max_step == 40
    v = j.verdict(30.0)
    assert v.label is Label.COLLECTIVE_HANG
    assert v.culprit is None or v.culprit.rank >= 0


def test_a_traceback_header_without_its_error_yields_to_a_peers_recognised_failure() -> None:
    # NVIDIA/nccl#1928, as pasted: rank 3's ncclRemoteError in full, then rank 2's traceback cut
    # before its error line. The header alone names no cause: the network error is the verdict.
    j = judge()
    step(j, 1.0, 1, range(4))
    j.observe_line(ln(3, "[rank3]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3763, remote process exited or there was a network error, NCCL version 2.28.8", 5.0))
    j.observe_line(ln(3, "[rank3]: NET/OFI Request 0x7f14cc5b60c0 completed with error. RC: 113. Error: 2 (UNDELIVERABLE). Completed length: 0", 5.0))
    j.observe_line(ln(2, "[rank2]: Traceback (most recent call last):", 5.1))
    j.observe_line(ln(2, '[rank2]:   File "/lus/scratch/builder/pytorch_dist_resnet_benchmark.py", line 301, in <module>', 5.1))
    v = j.verdict(6.0)
    assert v.label is Label.COMM_ERROR, v.reason
    # once rank 2 prints an error of its own that nobody knows, it is a crash of unknown cause again
    j.observe_line(ln(2, "[rank2]: ZeroDivisionError: division by zero", 5.2))
    j.observe_exit(RankExit(RankKey(N, 2), 1, 5.3))
    assert j.verdict(7.0).label is Label.OTHER_CRASH


@pytest.mark.parametrize(("error", "label"), [
    # hiyouga/LlamaFactory#6191, as pasted: rank 3's traceback cut above its frames, its last line
    # intact; rank 6's header alone. The missing data path is the cause, and a restart repeats it.
    ("ValueError: File data/mllm_dome.json not found.", Label.CONFIG_ERROR),
    # near miss: an error line whose form states no cause leaves the crash of unknown cause
    ("ValueError: too many values to unpack (expected 2)", Label.OTHER_CRASH),
])
def test_a_ranks_error_line_that_states_its_cause_wins_over_a_peers_cut_traceback(error: str, label: Label) -> None:
    j = judge()
    step(j, 1.0, 1, range(8))
    j.observe_line(ln(3, '  File "/data/LLaMA-Factory/src/llamafactory/data/loader.py", line 75, in _load_single_dataset', 5.0))
    j.observe_line(ln(3, error, 5.0))
    j.observe_line(ln(6, "Traceback (most recent call last):", 5.1))
    j.observe_line(ln(6, '  File "/data/LLaMA-Factory/src/llamafactory/launcher.py", line 23, in <module>', 5.1))
    v = j.verdict(6.0, final=True)
    assert v.label is label, v.reason
    assert v.action is (Action.STOP if label is Label.CONFIG_ERROR else Action.RESTART)


STATUS_1004 = "2021-Nov-01 06:02:18.0992 13660:14125 ERROR  NMGR:dlr_infer                               Inference completed with err: 1004"


@pytest.mark.parametrize(("after", "label", "action"), [
    # the runtime's "completed with other errors" alone names no cause (aws-neuron-sdk#351): restart
    (None, Label.OTHER_CRASH, Action.RESTART),
    # the device's own uncorrectable-memory line beside it convicts the node
    ("(FATAL-RT-UNDEFINED-STATE) [ND 0][NC 0] Uncorrectable memory error is detected, metadata: 0x16. Please terminate or stop/start this instance to recover from the issue.",
     Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART),
])
def test_status_1004_drains_only_with_the_devices_hardware_line(after: str | None, label: Label, action: Action) -> None:
    j = judge()
    step(j, 1.0, 1)
    j.observe_line(ln(1, STATUS_1004, 5.0))
    if after is not None:
        j.observe_line(ln(1, after, 5.1))
    v = j.verdict(6.0, final=True)
    assert (v.label, v.action) == (label, action), v.reason
