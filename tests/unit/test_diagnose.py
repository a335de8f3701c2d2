"""``neuron-watch diagnose`` on saved logs: inputs, output contract, exit codes, messy real-world text."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from neuron_watch.cli import main
from neuron_watch.commands.diagnose import diagnose_paths, render_text, resolve_sources
from neuron_watch.errors import UsageError

from .scenario_lines import (
    CC_CACHE,
    CC_START,
    RX,
    compile_then_train,
    hardware_then_hangs,
    stamp,
    write_rank_logs,
)

T0 = 1712905986.0  # 2024-04-12 07:13:06 UTC


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["diagnose", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_is_exactly_one_object_with_the_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_rank_logs(hardware_then_hangs(), tmp_path)
    code, out, _ = run_cli(["--json", str(tmp_path)], capsys)
    assert code == 0
    doc = json.loads(out)  # one object, nothing else on stdout
    assert out.count("\n") == 1
    assert doc["label"] == "hardware_error"
    assert doc["culprit"]["rank"] == 2 and doc["culprit"]["file"].endswith("rank-2.log")
    ev = doc["evidence"][0]
    assert set(ev) >= {"file", "line", "text", "signature"}
    assert ev["signature"] == "neuron.hw.mem_ue" and ev["line"] == 4
    assert "Drain" in doc["advice"] or "drain" in doc["advice"]


def test_text_report_names_label_culprit_file_line_and_advice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_rank_logs(hardware_then_hangs(), tmp_path)
    code, out, _ = run_cli([str(tmp_path)], capsys)
    assert code == 0
    assert "label:    hardware_error" in out
    assert "culprit:  rank 2" in out and "rank-2.log:4" in out
    assert "advice:" in out


def test_run_dir_judges_the_latest_generation(tmp_path: Path) -> None:
    write_rank_logs(hardware_then_hangs(), tmp_path / "gen-0")
    write_rank_logs(compile_then_train(), tmp_path / "gen-1")
    d = diagnose_paths([str(tmp_path)])
    assert d.verdict.label.value == "healthy"
    assert all("gen-1" in s for s in d.sources) and "generation 1" in d.notes[0]


def test_torchrun_log_dir_gives_ranks_from_paths(tmp_path: Path) -> None:
    for r in range(4):
        p = tmp_path / "run" / "attempt_0" / str(r) / "stdout.log"
        p.parent.mkdir(parents=True)
        lines = [stamp("{iso} INFO step 1 loss 2.0", T0 + 1)]
        if r == 3:
            lines.append("Segmentation fault (core dumped)")
        p.write_text("\n".join(lines) + "\n")
    d = diagnose_paths([str(tmp_path / "run")])
    assert d.verdict.label.value == "other_crash" and d.verdict.culprit is not None and d.verdict.culprit.rank == 3


def test_stdin_with_rank_prefixes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    text = "\n".join([
        "[rank0]: step 1 loss 2.0",
        "[rank1]: step 1 loss 2.0",
        "[default1]: [ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=28127, GPU has fallen off the bus.",
        "0: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.",
    ]).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    code, out, _ = run_cli(["--json", "-"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["label"] == "hardware_error" and doc["culprit"]["rank"] == 1
    assert doc["evidence"][0]["file"] == "<stdin>" and doc["evidence"][0]["line"] == 3


def test_missing_input_is_a_usage_error_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli([str(tmp_path / "nope.log")], capsys)
    assert code == 2 and out == "" and "no such file" in err
    (tmp_path / "empty-dir").mkdir()
    code, _, err = run_cli([str(tmp_path / "empty-dir")], capsys)
    assert code == 2 and "no log files" in err


def test_unreadable_file_is_a_usage_error(tmp_path: Path) -> None:
    fifo_dir = tmp_path / "d"
    fifo_dir.mkdir()
    with pytest.raises(UsageError, match="not a regular file"):
        import os

        os.mkfifo(fifo_dir / "pipe")
        resolve_sources([str(fifo_dir / "pipe")])


def test_empty_log_is_unobserved_not_healthy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rank-0.log").write_bytes(b"")
    code, out, _ = run_cli(["--json", str(tmp_path / "rank-0.log")], capsys)
    assert code == 0 and json.loads(out)["label"] == "unobserved"


def test_log_ending_mid_compile_is_compiling_with_glued_dots(tmp_path: Path) -> None:
    p = tmp_path / "rank-0.log"
    body = stamp(CC_CACHE, T0) + "\n" + stamp(CC_START, T0 + 1) + "\n" + "." * 40  # no final newline
    p.write_text(body)
    d = diagnose_paths([str(p)])
    assert d.verdict.label.value == "compiling" and d.verdict.culprit is not None


def test_finished_run_is_healthy(tmp_path: Path) -> None:
    p = tmp_path / "train.log"
    lines = [stamp(CC_START, T0), "." * 10 + "Compiler status PASS"]
    lines += [stamp("{iso} INFO step " + str(i) + " loss 1.5", T0 + 300 + i) for i in range(1, 30)]
    p.write_text("\r\n".join(lines) + "\r\n")  # CRLF too
    assert diagnose_paths([str(p)]).verdict.label.value == "healthy"


def test_messy_paste_ansi_bars_interleaving_bad_bytes_and_a_huge_line(tmp_path: Path) -> None:
    p = tmp_path / "paste.txt"
    chunks = [
        b"\x1b[32m2024-04-12 07:13:06,000 INFO\x1b[0m starting\n",
        b"Epoch 0:   1%|      | 1/91 [00:10<15:00, 10.0s/it, loss=6.7]\rEpoch 0:   2%|      | 2/91 [00:20<15:00, 10.0s/it, loss=6.5]\n",
        b"\xff\xfe garbage \xc3\x28 bytes\n",
        b"x" * (5 * 1024 * 1024) + b" loss nan\n",  # a 5 MiB line: cut, the tail (and its 'nan') dropped
        b"[rank0]: step 3 loss 2.0 [rank1]: step 3 loss 2.1\n",
        b"[rank1]: " + stamp(RX, T0 + 500).encode() + b"\n",
        b"[rank1]: [ 9123.456789] Out of memory: Killed process 12345 (python3) total-vm:1kB, anon-rss:1kB\n",
    ]
    p.write_bytes(b"".join(chunks))
    d = diagnose_paths([str(p)])
    assert d.truncated == 1 and any("64 KiB" in n for n in d.notes)
    assert d.verdict.label.value == "oom" and d.verdict.culprit is not None and d.verdict.culprit.rank == 1
    assert d.verdict.evidence[0].lineno == 7


def test_nan_in_a_progress_line_is_a_numerical_error(tmp_path: Path) -> None:
    p = tmp_path / "rank-0.log"
    p.write_text("{'loss': 1.2, 'grad_norm': 0.5, 'learning_rate': 5e-05, 'epoch': 0.1}\n{'loss': nan, 'grad_norm': nan, 'learning_rate': 5e-05, 'epoch': 0.2}\n")
    d = diagnose_paths([str(p)])
    assert d.verdict.label.value == "numerical_error" and d.verdict.action.value == "stop"


def _log_file(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_torchrun_summary_in_a_combined_log_names_the_rank(tmp_path: Path) -> None:
    p = _log_file(tmp_path / "slurm-123.out", [
        "step 1 loss 2.0",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-04-02_10:11:12",
        "  host      : ip-10-0-1-12",
        "  rank      : 3 (local_rank: 3)",
        "  exitcode  : -9 (pid: 12345)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 12345",
    ])
    d = diagnose_paths([str(p)])
    # SIGKILL with no kernel oom-kill line: killed, by whom unknown (not guessed as oom)
    assert d.verdict.label.value == "other_crash" and d.verdict.culprit is not None and d.verdict.culprit.rank == 3
    assert d.verdict.evidence[0].lineno == 9 and "signal 9" in d.verdict.reason.lower()


def test_sources_without_timestamps_are_noted(tmp_path: Path) -> None:
    (tmp_path / "rank-0.log").write_text(stamp("{iso} INFO step 1 loss 2.0", T0) + "\n")
    (tmp_path / "rank-1.log").write_text("step 1 loss 2.0\n")
    d = diagnose_paths([str(tmp_path)])
    assert any("no timestamps" in n and "rank-1.log" in n for n in d.notes)


@pytest.mark.parametrize(
    ("lines", "label", "culprit", "line"),
    [
        # One node's ranks in one file (NCCL issue 1235): the peer-side "connection closed" of one
        # process comes first; the process that closed it ran out of GPU memory. Read as one
        # stream, the first specific failure wins and the OOM is never looked at.
        ([
            "ng30903:3063025:3066048 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer ng30903-ib.narval.calcul.quebec<51159>",
            "ng30903:3063025:3066048 [0] NCCL INFO misc/socket.cc:749 -> 6",
            "ng30903:3063025:3066048 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x55a51966cc80",
            "ng30903:3063025:3066048 [0] NCCL INFO transport/p2p.cc:438 -> 3",
            "ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
            "ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes",
            "ng30903:3063028:3066152 [3] NCCL INFO transport/p2p.cc:204 -> 1",
        ], "oom", "ng30903 pid 3063028", 5),
        # vLLM's workers share the server's output, each line under "(Name pid=N)": the worker whose
        # traceback begins is the culprit, not the server's stream.
        ([
            "(VllmWorker rank=0 pid=3716) INFO 06-26 23:10:12 [gpu_model_runner.py:1595] Model loading took 7.1 GiB",
            "(VllmWorker rank=1 pid=3717) INFO 06-26 23:10:12 [gpu_model_runner.py:1595] Model loading took 7.1 GiB",
            "(VllmWorker rank=1 pid=3717) Traceback (most recent call last):",
            '(VllmWorker rank=1 pid=3717)   File "/usr/lib/python3.12/threading.py", line 1075, in _bootstrap_inner',
            "(VllmWorker rank=0 pid=3716) INFO 06-26 23:10:13 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s",
        ], "other_crash", "VllmWorker rank=1 pid 3717", 3),
    ],
)
def test_the_processes_of_one_file_are_judged_apart(
    tmp_path: Path, lines: list[str], label: str, culprit: str, line: int
) -> None:
    d = diagnose_paths([str(_log_file(tmp_path / "job.out", lines))])
    assert d.verdict.label.value == label
    assert d.verdict.culprit is not None and d.verdict.culprit.node == culprit
    assert d.to_dict()["culprit"]["line"] == line
    assert f"culprit:  {culprit}  (" in render_text(d)
    assert any(n.startswith(f"{tmp_path / 'job.out'}: 2 processes told apart") for n in d.notes)


def test_a_calm_verdict_says_a_hang_after_the_last_line_is_not_in_the_log(tmp_path: Path) -> None:
    # a real excerpt's whole text (lightning#16614: eight ranks froze right after this line)
    log = tmp_path / "train.log"
    log.write_text("c6e071419451:770438:771643 [0] NCCL INFO comm 0x43820a60 rank 0 nranks 8 cudaDev 0 busId 4f000 - Init COMPLETE\n")
    written = T0 + 100.0
    os.utime(log, (written, written))
    d = diagnose_paths([str(log)], now=written + 45 * 60)
    assert d.verdict.label.value == "healthy"
    said = [n for n in d.notes if n.startswith("judged at the last line read")]
    assert said and "a hang after it is silence" in said[0] and "last written 45 min ago" in said[0], d.notes
    assert f"note:     {said[0]}" in render_text(d)


def test_a_failure_needs_no_such_note(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                   "RuntimeError: CUDA error: out of memory\n")
    d = diagnose_paths([str(log)], now=T0)
    assert d.verdict.action.value != "wait" and not any("judged at the last line" in n for n in d.notes), d
