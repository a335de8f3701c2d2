"""Multi-rank log scenarios written from the real formats (the Neuron runtime's, the compiler's, torchrun's).

Each scenario is a list of ``(rank, seconds, template)``; a template's ``{rt}``, ``{cc}``, ``{iso}``
is replaced by the time in the runtime, compiler or ISO format. The same scenario feeds the live
judge (``live_verdict``) and the offline ``diagnose`` (``write_rank_logs``), so the two paths can be
compared line for line.
"""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

import calendar
import time
from pathlib import Path

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import LogLine, RankKey, Verdict

BASE = float(calendar.timegm((2024, 4, 12, 7, 13, 6, 0, 0, 0)))

Scenario = list[tuple[int, float, str]]


def stamp(template: str, t: float) -> str:
    g = time.gmtime(int(t))
    frac = t - int(t)
    return template.format(
        rt=time.strftime("%Y-%b-%d %H:%M:%S", g) + f".{int(frac * 1e4):04d}",
        cc=time.strftime("%Y-%m-%d %H:%M:%S", g) + f".{int(frac * 1e6):06d}",
        iso=time.strftime("%Y-%m-%dT%H:%M:%S", g) + f".{int(frac * 1e3):03d}Z",
    )


def log_lines(scenario: Scenario, node: str = "") -> list[LogLine]:
    """The scenario as the live tailer hands it over: in time order, ``mono`` = arrival time."""
    counters: dict[int, int] = {}
    out = []
    for rank, dt, template in sorted(scenario, key=lambda x: x[1]):
        counters[rank] = counters.get(rank, 0) + 1
        t = BASE + dt
        out.append(LogLine(RankKey(node, rank), stamp(template, t), t, t, f"rank-{rank}.log", counters[rank]))
    return out


def live_verdict(scenario: Scenario, now: float | None = None, settings: JudgeSettings | None = None) -> Verdict:
    """Feed the live judge in small batches (as the supervisor does) and judge at ``now`` (default: last line)."""
    lines = log_lines(scenario)
    judge = Judge(default_knowledge_base(), settings or JudgeSettings(), BASE + min(dt for _, dt, _ in scenario))
    for i in range(0, len(lines), 3):
        judge.observe_lines(lines[i : i + 3])
    return judge.verdict(BASE + now if now is not None else lines[-1].mono)


def write_rank_logs(scenario: Scenario, directory: Path) -> list[Path]:
    """One ``rank-N.log`` per rank, lines in time order."""
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[int, list[str]] = {}
    for line in log_lines(scenario):
        files.setdefault(line.key.rank, []).append(line.text)
    paths = []
    for rank, texts in sorted(files.items()):
        p = directory / f"rank-{rank}.log"
        p.write_text("\n".join(texts) + "\n")
        paths.append(p)
    return paths


CC_START = "{cc}:  271334  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc compile --target=trn1 --framework=XLA /tmp/ubuntu/neuroncc_compile_workdir/50f29840/model.MODULE_16518787498567201059+d41d8cd9.hlo_module.pb --output /tmp/ubuntu/neuroncc_compile_workdir/50f29840/model.MODULE_16518787498567201059+d41d8cd9.neff --verbose=35"
CC_CACHE = "{cc}:  271334  INFO ||NEURON_CACHE||: Compile cache path: /var/tmp/neuron-compile-cache"
CC_DONE = "{cc}: 837617 [INFO]: Compilation Successfully Completed for model.MODULE_16518787498567201059+d41d8cd9.hlo_module.pb"
CC_CACHED = "{cc}:  27  INFO ||NEURON_CC_WRAPPER||: Using a cached neff at /var/tmp/neuron-compile-cache/neuronxcc-2.14.227.0+2d4f85be/MODULE_b100285780ea94e4e6ea+2c2d707e/model.neff. Exiting with a successfully compiled graph."
RX = "{rt} 332066:332494 [29] include/socket.h:579 CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying"
STEP = "{iso} INFO step {step} step_time 10.0s throughput 850.1 seq/s step loss 2.0417 grad norm 1.07"
HW = "{rt} 41210:41210 ERROR  TDRV:exec_consume_infer_status_notifications (FATAL-RT-UNDEFINED-STATE) [ND 0][NC 0] Uncorrectable memory error is detected, metadata: 0x16. Please terminate or stop/start this instance to recover from the issue."
COLL_HANG = "{rt} 332066:332066 ERROR  TDRV:exec_consume_infer_status_notifications (FATAL-RT-UNDEFINED-STATE) missing collectives status on Neuron Device 0 NC 0, model 0 - suspected hang in collectives operation 0 out of 100"
CLOSED = "{rt} 332066:332494 [29] include/socket.h:412 CCOM WARN RX, connection closed by remote peer"
TRACEBACK = "{iso} [rank1]: Traceback (most recent call last):"


def steps(ranks: range, first: int, count: int, t0: float, every: float) -> Scenario:
    return [(r, t0 + i * every, STEP.replace("{step}", str(first + i))) for i in range(count) for r in ranks]


def compile_then_train() -> Scenario:
    sc: Scenario = []
    for r in range(2):
        sc += [(r, 0.0, CC_CACHE), (r, 0.5, CC_START)]
        sc += [(r, 20.0 * k, ".") for k in range(1, 15)]
        sc += [(r, 300.0, "Compiler status PASS"), (r, 300.1, CC_DONE)]
    return sc + steps(range(2), 1, 20, 310.0, 10.0)


def mid_compile() -> Scenario:
    sc: Scenario = [(0, 0.0, CC_CACHE), (0, 0.5, CC_START)]
    return sc + [(0, 20.0 * k, ".") for k in range(1, 30)]


def rx_while_other_compiles() -> Scenario:
    sc: Scenario = [(1, 0.0, CC_CACHE), (1, 0.5, CC_START)]
    sc += [(0, 0.0, CC_CACHE), (0, 0.6, CC_CACHED)]
    sc += [(0, 120.0 * k, RX) for k in range(1, 9)]
    return sc


def rx_nobody_compiling() -> Scenario:
    sc = steps(range(2), 1, 11, 0.0, 10.0)  # last step at t=100
    return sc + [(0, 100.0 + 120.0 * k, RX) for k in range(1, 4)]  # rank 0 waits on rank 1 (silent)


def hardware_then_hangs() -> Scenario:
    sc = steps(range(4), 1, 3, 0.0, 10.0)
    # the peers' runtime gives up on the collective *before* the faulty rank's line is written
    sc += [(r, 90.0, COLL_HANG) for r in (0, 1, 3)]
    sc += [(2, 95.0, HW)]
    return sc


def crash_then_closed() -> Scenario:
    sc = steps(range(4), 1, 3, 0.0, 10.0)
    sc += [(1, 50.0, TRACEBACK), (1, 50.0, "{iso} [rank1]:   File \"train.py\", line 88, in <module>"),
           (1, 50.1, "{iso} [rank1]: RuntimeError: shape mismatch in batch 12")]
    sc += [(r, 51.0, CLOSED) for r in (0, 2, 3)]
    sc += [(3, 52.0, "{iso} [rank3]: Traceback (most recent call last):")]
    return sc
