"""``diagnose`` on the real-log corpus wrapped in the envelopes log shippers add (prints figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_envelopes.py [--envelope NAME ...] [--every K] [--label L] [--show N]

Users paste logs the way they got them: from ``docker logs``' files, ``kubectl logs``, CloudWatch, a
CI page, journald. The same failure then arrives *inside an envelope* that a log shipper, a
scheduler or a terminal added to every line. This wraps every line of every excerpt of
``tests/data/real-logs/`` in each envelope, faithfully (JSON-escaped where the format is JSON, long
lines split with the format's partial-line flags, a time on every line that advances with the
line's own stamp), diagnoses the wrapped excerpt exactly as ``bench_diagnose_corpus.py`` does (its
:func:`select` and :func:`verdict_of`), and prints, per envelope, how many excerpts keep the label
and the action they get unwrapped, and how many that are not ``healthy`` unwrapped become ``healthy``
wrapped (a failure a pasted envelope hides). ``--every K`` takes every K-th excerpt (a quicker,
still spread sample); ``--show N`` lists the first N changed excerpts of each envelope.

Each envelope is the line its program writes (the source is cited beside it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from neuron_watch.diagnosis.logtext import ERROR_LIKE, TimeParser
from neuron_watch.events import Label
from tests.benchmarks.bench_diagnose_corpus import select, verdict_of
from tests.fixtures.corpus_score import action_confusion

#: The time of lines before an excerpt's first stamp (an excerpt with none counts from here).
EPOCH0 = 1714564800.0  # 2024-05-01T12:00:00Z
#: Docker's copier and containerd's CRI logger cut a line longer than this into partial records
#: (moby ``daemon/logger/copier.go`` ``bufSize``; containerd ``max_container_log_line_size``).
PARTIAL = 16 * 1024


def _rfc3339(t: float, digits: int = 9, zone: str = "Z") -> str:
    whole = int(t)
    frac = f"{t - whole:.{digits}f}"[2:] if digits else ""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{stamp}.{frac}{zone}" if digits else stamp + zone


def _syslog_time(t: float) -> str:
    return time.strftime("%b %d %H:%M:%S", time.gmtime(t))


def _stream(line: str) -> str:
    """Which stream a line most likely went to (Python's logging and tracebacks go to stderr)."""
    return "stderr" if ERROR_LIKE.search(line.encode("utf-8", "replace")) else "stdout"


def _go_json(obj: object) -> str:
    """JSON as Go's encoding/json writes it (Docker, containerd, zap): compact, and HTML-safe
    (``<``, ``>``, ``&`` and U+2028/9 escaped)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                   ("\u2029", "\\u2029")):
        text = text.replace(c, esc)
    return text


def _chunks(line: str) -> list[str]:
    return [line[i:i + PARTIAL] for i in range(0, len(line), PARTIAL)] or [""]


def docker_json(line: str, t: float) -> list[str]:
    # moby daemon/logger/jsonfilelog/jsonlog: {"log":...,"stream":...,"time":RFC3339Nano}; a line
    # longer than the copier's buffer is written in pieces, all but the last without their "\n"
    parts = _chunks(line)
    return [_go_json({"log": p + ("\n" if i == len(parts) - 1 else ""), "stream": _stream(line),
                      "time": _rfc3339(t)}) for i, p in enumerate(parts)]


def cri(line: str, t: float) -> list[str]:
    # kubelet pkg/kubelet/kuberuntime/logs/logs.go (parseCRILog): "<RFC3339Nano> <stream> <P|F> <content>"
    parts = _chunks(line)
    return [f"{_rfc3339(t)} {_stream(line)} {'F' if i == len(parts) - 1 else 'P'} {p}" for i, p in enumerate(parts)]


def kubectl_prefix(line: str, t: float) -> list[str]:
    # kubectl logs --prefix (staging/src/k8s.io/kubectl/pkg/cmd/logs/logs.go, addPrefixIfNeeded)
    return [f"[pod/train-worker-0/pytorch] {line}"]


def kubectl_timestamps(line: str, t: float) -> list[str]:
    # kubectl logs --timestamps: the kubelet's RFC3339Nano time, a space, the line
    return [f"{_rfc3339(t)} {line}"]


def compose(line: str, t: float) -> list[str]:
    # docker compose logs: the service's container name padded to the widest, " | "
    # (SageMaker local mode: "algo-1-8gd7b_1  | ..." in aws/sagemaker-training-toolkit#37)
    return [f"trainer-1  | {line}"]


def sagemaker_mpi(line: str, t: float) -> list[str]:
    # SageMaker's mpirun --tag-output with the host: "[1,mpirank:3,algo-1]<stderr>:INFO:root:..."
    # (aws-samples/sagemaker-distributed-training-workshop#6)
    return [f"[1,mpirank:0,algo-1]<{_stream(line)}>:{line}"]


def cloudwatch_tsv(line: str, t: float) -> list[str]:
    # a CloudWatch Logs export / copy of the console's table: "<timestamp>\t<message>"
    return [f"{_rfc3339(t, 3)}\t{line}"]


def fluent_bit(line: str, t: float) -> list[str]:
    # fluent-bit's stdout/file output, json_lines, of a tail input with the docker parser:
    # {"date":<epoch float>,"log":...,"stream":...,"time":...}
    return [_go_json({"date": round(t, 6), "log": line + "\n", "stream": _stream(line), "time": _rfc3339(t)})]


def json_logger(line: str, t: float) -> list[str]:
    # python-json-logger's JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    asctime = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f",{int((t % 1) * 1000):03d}"
    return [json.dumps({"asctime": asctime, "levelname": "INFO", "name": "train", "message": line})]


def zap(line: str, t: float) -> list[str]:
    # Go zap's production encoder: {"level":"info","ts":<epoch float>,"caller":...,"msg":...}
    return [_go_json({"level": "info", "ts": round(t, 6), "caller": "launcher/main.go:88", "msg": line})]


def journald(line: str, t: float) -> list[str]:
    # journalctl's default "short" output (syslog's layout): "May 01 12:00:00 host ident[pid]: msg"
    return [f"{_syslog_time(t)} ip-10-0-1-12 python[4121]: {line}"]


def github_actions(line: str, t: float) -> list[str]:
    # a GitHub Actions job's raw log: a 7-digit fraction, "Z", a space, the line
    return [f"{_rfc3339(t, 7)} {line}"]


def ts_prefix(line: str, t: float) -> list[str]:
    # moreutils ts with its default format "%b %d %H:%M:%S"
    return [f"{_syslog_time(t)} {line}"]


def stern(line: str, t: float) -> list[str]:
    # stern's default output on a terminal (stern/stern cmd/cmd.go, output "default"):
    # "{{color .PodColor .PodName}} {{color .ContainerColor .ContainerName}} {{.Message}}", the
    # colours fatih/color's SGR codes (a pod's pair: hi-cyan, cyan)
    return [f"\x1b[96mllama-train-worker-0\x1b[0m \x1b[36mpytorch\x1b[0m {line}"]


def stern_plain(line: str, t: float) -> list[str]:
    # the same, not on a terminal (stern ... > file, or --color never): no colours
    return [f"llama-train-worker-0 pytorch {line}"]


def _aws_time(t: float) -> str:
    # datetime.isoformat(timespec='microseconds') of a UTC time: "2024-05-01T12:00:00.123000+00:00"
    return _rfc3339(t, 6, "+00:00")


def aws_logs_tail(line: str, t: float) -> list[str]:
    # aws logs tail's default --format detailed (aws/aws-cli awscli/customizations/logs/tail.py,
    # DetailedLogEventsFormatter): "<timestamp> <log stream name> <message>"; a SageMaker training
    # job's stream is "<job>/algo-<n>-<epoch>"
    return [f"{_aws_time(t)} llama-train/algo-1-1714564800 {line}"]


def aws_logs_tail_colour(line: str, t: float) -> list[str]:
    # the same on a terminal: the time green and the stream cyan (colorama), reset after each
    return [f"\x1b[32m{_aws_time(t)}\x1b[0m \x1b[36mllama-train/algo-1-1714564800\x1b[0m {line}"]


def kubectl_prefix_timestamps(line: str, t: float) -> list[str]:
    # kubectl logs --prefix --timestamps: the prefix around the kubelet's stamped stream
    return [f"[pod/train-worker-0/pytorch] {_rfc3339(t)} {line}"]


def compose_colour(line: str, t: float) -> list[str]:
    # docker compose logs on a terminal (docker/compose cmd/formatter/logs.go, setPrefix: the name
    # padded and " |" in the service's colour, then " " and the line)
    return [f"\x1b[36mtrainer-1  |\x1b[0m {line}"]


#: the width of the terminal a screen or tmux capture was taken from
SCREEN_WIDTH = 80


def screen_capture(line: str, t: float) -> list[str]:
    # a terminal's screen saved as text (screen's hardcopy; tmux capture-pane -N keeps the padding):
    # each row padded with spaces to the width, a longer line wrapped onto the next rows
    return [line[i:i + SCREEN_WIDTH].ljust(SCREEN_WIDTH) for i in range(0, max(len(line), 1), SCREEN_WIDTH)]


def crlf(line: str, t: float) -> list[str]:
    # a log saved on Windows: every line ends "\r\n" (the "\n" is added when the file is written)
    return [line + "\r"]


Wrap = Callable[[str, float], list[str]]
ENVELOPES: dict[str, Wrap] = {
    "docker-json": docker_json,
    "cri": cri,
    "kubectl-prefix": kubectl_prefix,
    "kubectl-timestamps": kubectl_timestamps,
    "compose": compose,
    "sagemaker-mpi": sagemaker_mpi,
    "cloudwatch-tsv": cloudwatch_tsv,
    "fluent-bit": fluent_bit,
    "json-logger": json_logger,
    "zap": zap,
    "journald": journald,
    "github-actions": github_actions,
    "ts": ts_prefix,
    "crlf": crlf,
    "stern": stern,
    "stern-plain": stern_plain,
    "aws-logs-tail": aws_logs_tail,
    "aws-logs-tail-colour": aws_logs_tail_colour,
    "kubectl-prefix-timestamps": kubectl_prefix_timestamps,
    "compose-colour": compose_colour,
    "screen-80": screen_capture,
}


def _first_stamp(lines: list[str]) -> tuple[int, float]:
    """The year of the excerpt's first full stamp (else 2024) and its first stamp's time, of any
    kind (as ``diagnose`` dates a file's head: the lines above the first stamp were written just
    before it); an excerpt without stamps starts at :data:`EPOCH0`."""
    probe = TimeParser()
    year = next((probe.year_seen for line in lines if probe.parse(line) is not None and probe.year_seen), 2024)
    clock = TimeParser(year=year)
    return year, next((t for line in lines if (t := clock.parse(line)) is not None), EPOCH0)


def wrap(text: str, envelope: Wrap) -> str:
    """``text`` with every line in ``envelope``; each line's time is its own stamp where it has one
    (a shipper stamps a line when it is written), else the last time plus a millisecond, never
    running backwards (a shipper's clock does not). Lines above the first stamp are stamped just
    before it."""
    lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    year, first = _first_stamp(lines)
    clock = TimeParser(year=year, start=first)
    last = first - 0.5
    out: list[str] = []
    for line in lines:
        own = clock.parse(line)
        last = max(last + 0.001, own if own is not None else 0.0)
        out.extend(envelope(line, last))
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envelope", action="append", choices=sorted(ENVELOPES), help="only these (repeatable)")
    parser.add_argument("--every", type=int, default=1, help="every K-th excerpt only")
    parser.add_argument("--label", help="only excerpts with this label")
    parser.add_argument("--show", type=int, default=0, help="list the first N changed excerpts per envelope")
    args = parser.parse_args()

    excerpts = select(args.label)[:: args.every]
    names = args.envelope or list(ENVELOPES)
    started = time.process_time()
    plain = {ex.name: verdict_of(ex.log) for ex in excerpts}
    texts = {ex.name: ex.log.read_bytes().decode("utf-8", errors="replace") for ex in excerpts}
    failures = sum(1 for v in plain.values() if v.label is not Label.HEALTHY)
    right = sum(1 for ex in excerpts if plain[ex.name].label is ex.label)
    acted = sum(1 for ex in excerpts if action_confusion(ex.label, plain[ex.name].label, plain[ex.name].action) is None)
    print(f"excerpts: {len(excerpts)}  unwrapped: labels right {right}, actions right {acted}, "
          f"not healthy {failures}")
    print(f"{'envelope':<26}{'same label':>12}{'same action':>13}{'->healthy':>11}{'right':>7}{'acted':>7}{'cpu s':>8}")
    with tempfile.TemporaryDirectory(prefix="bench-envelopes-") as tmp:
        for name in names:
            t0 = time.process_time()
            same_label = same_action = hidden = now_right = now_acted = 0
            changed: list[str] = []
            for ex in excerpts:
                path = Path(tmp) / f"{name}-{ex.log.stem}.log"
                path.write_text(wrap(texts[ex.name], ENVELOPES[name]), encoding="utf-8", newline="")
                v, p = verdict_of(path), plain[ex.name]
                path.unlink()
                same_label += v.label is p.label
                same_action += v.action is p.action
                hidden += p.label is not Label.HEALTHY and v.label is Label.HEALTHY
                now_right += v.label is ex.label
                now_acted += action_confusion(ex.label, v.label, v.action) is None
                if v.label is not p.label or v.action is not p.action:
                    changed.append(f"    {ex.name:<58} {p.label.value}/{p.action.value} -> "
                                   f"{v.label.value}/{v.action.value}")
            n = len(excerpts)
            print(f"{name:<26}{same_label:>7}/{n:<4}{same_action:>8}/{n:<4}{hidden:>11}{now_right:>7}{now_acted:>7}"
                  f"{time.process_time() - t0:>8.1f}", flush=True)
            for line in changed[: args.show]:
                print(line)
    print(f"cpu: {time.process_time() - started:.1f}s  (right/acted: against the excerpts' own labels, as "
          "bench_diagnose_corpus counts them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
