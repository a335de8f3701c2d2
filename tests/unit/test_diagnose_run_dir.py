"""``diagnose`` of neuron-watch's own run directory and of excerpts whose clocks disagree:
rank logs read once and dated by their time index, the generation judged at its end with
the exits events.jsonl recorded, glog stamps without a year, lines before the first stamp, and the
judge's options after the subcommand word."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest

from neuron_watch.cli import main
from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.judge import JudgeSettings
from neuron_watch.diagnosis.logtext import TimeParser
from neuron_watch.node.tail import RankStreams

T0 = 1_795_000_000.0  # 2026-11-18


def event(name: str, t: float, generation: int = 0, **fields: object) -> str:
    iso = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return json.dumps({"time": iso.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z", "event": name,
                       "generation": generation, **fields})


def run_dir(tmp: Path, lines: dict[int, list[tuple[float, str]]], evs: list[str]) -> Path:
    """A run dir written the way the agent writes it: RankStreams' rank logs and time index."""
    gen = tmp / "run" / "gen-0"
    gen.mkdir(parents=True)
    for r, timed in lines.items():
        with open(gen / f"rank-{r}.log", "w") as log, open(gen / f"rank-{r}.times", "w") as idx:
            for n, (t, text) in enumerate(timed, 1):
                log.write(text + "\n")
                idx.write(f"{n} {t:.3f}\n")
        # torchrun's copy of the same output, and the launcher's log with glog stamps (no year)
        copy = gen / "torchrun" / "vm" / "x_1" / "attempt_0" / str(r)
        copy.mkdir(parents=True)
        (copy / "stdout.log").write_text("".join(text + "\n" for _t, text in timed))
    (gen / "launcher-vm.log").write_text("W1123 15:00:49.123000 140 torch/distributed/run.py:793] Setting OMP_NUM_THREADS\n")
    (tmp / "run" / "events.jsonl").write_text("\n".join(evs) + "\n")
    return tmp / "run"


def steps(n: int, t0: float, every: float = 1.0) -> list[tuple[float, str]]:
    return [(t0 + i * every, f"step {i + 1} loss 1.5 step_time 1.0s") for i in range(n)]


def test_a_clean_run_dir_is_healthy_and_read_once(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: steps(6, T0 + 5), 1: steps(6, T0 + 5)},
                  [event("job_started", T0), event("rank_exit", T0 + 12, node="vm", rank=-1, exit_code=0),
                   event("job_finished", T0 + 12, exit_code=0)])
    d = diagnose_paths([str(run)])
    assert d.verdict.label.value == "healthy", d.verdict.reason
    assert [Path(s).name for s in d.sources] == ["rank-0.log", "rank-1.log"]
    assert d.lines == 12


def test_a_hung_generation_is_judged_at_its_end_not_at_its_last_line(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: steps(4, T0 + 5), 1: steps(3, T0 + 5)},
                  [event("job_started", T0), event("verdict", T0 + 40, label="collective_hang"),
                   event("stopped", T0 + 45, node="vm")])
    d = diagnose_paths([str(run / "gen-0")], settings=JudgeSettings(hang_timeout=30.0))
    v = d.verdict
    assert v.label.value == "collective_hang", v.reason
    assert "for 37s" in v.reason  # last step at T0+8, end at T0+45: a real duration


def test_a_crashed_rank_is_known_from_the_events(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: steps(3, T0 + 5), 1: steps(3, T0 + 5)},
                  [event("job_started", T0), event("rank_exit", T0 + 9, node="vm", rank=-1, exit_code=1)])
    assert diagnose_paths([str(run)]).verdict.label.value == "other_crash"


def test_rank_streams_write_a_time_index_the_reader_uses(tmp_path: Path) -> None:
    streams = RankStreams("vm", str(tmp_path))
    streams.rank_offset = 0
    streams.set_log_root(str(tmp_path / "x"))
    (tmp_path / "x" / "vm" / "attempt_0" / "0").mkdir(parents=True)
    out = tmp_path / "x" / "vm" / "attempt_0" / "0" / "stdout.log"
    for i, wall in enumerate((T0, T0 + 0.5, T0 + 10.0)):
        with open(out, "a") as f:
            f.write(f"step {i + 1} loss 1.5\n")
        streams.poll(float(i), wall)
    streams.close()
    index = (tmp_path / "rank-0.times").read_text().split("\n")
    assert index[0] == f"1 {T0:.3f}" and index[-2] == f"3 {T0 + 10:.3f}"  # 0.5 s later: not its own entry
    assert (tmp_path / "rank-0.log").read_text().count("\n") == 3


def test_glog_stamps_take_the_year_of_the_files_first_full_stamp(tmp_path: Path) -> None:
    log = tmp_path / "excerpt.log"
    log.write_text(
        "I0612 05:54:50.123000 140 torch/distributed/run.py:793] starting\n"
        "2024-06-12 05:54:51,000 - step 1 loss 1.5\n"
        "2024-06-12 05:54:52,000 - step 2 loss 1.4\n"
        "E0612 05:54:53.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] something went wrong\n"
    )
    os.utime(log, (T0, T0))  # a checkout of today, not 2024
    v = diagnose_paths([str(log)]).verdict
    assert "s (>" not in v.reason or int(v.reason.split("for ")[1].split("s")[0]) < 60, v.reason
    assert v.label.value != "collective_hang"


def test_lines_before_the_first_stamp_are_not_dated_at_the_epoch(tmp_path: Path) -> None:
    log = tmp_path / "excerpt.log"
    log.write_text("step 1 loss 1.5\nstep 2 loss 1.4\n[2024-06-20 06:08:19] step 3 loss 1.3\n")
    v = diagnose_paths([str(log)]).verdict
    assert v.label.value == "healthy", v.reason  # was: collective_hang ... for 1718863699s


def test_a_log_without_stamps_next_to_one_with_stamps(tmp_path: Path) -> None:
    (tmp_path / "rank-0.log").write_text("step 1 loss 1.5\nstep 2 loss 1.4\n")
    (tmp_path / "rank-1.log").write_text("[2024-06-20 06:08:19] step 1 loss 1.5\n[2024-06-20 06:08:20] step 2 loss 1.4\n")
    os.utime(tmp_path / "rank-0.log", (1718863700.0, 1718863700.0))  # written at the other's time
    v = diagnose_paths([str(tmp_path)]).verdict
    assert v.label.value == "healthy", v.reason


def test_time_parser_year_and_start() -> None:
    p = TimeParser(year=2024, start=1718863699.0)
    assert p.last == 1718863699.0
    t = p.parse("W0620 06:08:20.000000 1 x.cpp:1] hi")
    assert t is not None and abs(t - 1718863700.0) < 1e-6
    assert p.year_seen is None and p.parse("2023-Aug-01 16:14:43.0241 x") is not None and p.year_seen == 2023


def test_options_after_the_subcommand_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "rank-0.log"
    log.write_text("[2024-06-20 06:08:19] step 1 loss 1.5\n[2024-06-20 06:08:59] RX wait\n")
    assert main(["diagnose", "--json", "--hang-timeout", "30", str(log)]) == 0
    assert "hang timeout 30s" in json.loads(capsys.readouterr().out)["reason"]
    assert main(["--hang-timeout", "300", "diagnose", "--json", str(log)]) == 0
    assert json.loads(capsys.readouterr().out)["label"] == "healthy"
    assert main(["diagnose", "--hang-timeout", "soon", str(log)]) == 2
