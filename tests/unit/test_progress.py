# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Progress from any output: ``\\r``-redrawn bars through the live tail, and the global
step of each framework's progress format.

The fixtures under ``data/`` are real output, redirected to a file as torchrun does, so the ``\\r``
and escape bytes are the frameworks' own (tqdm 4.67, transformers 5, lightning 2.6, CPU):

* ``progress_hf_trainer.log``: ``Trainer`` (GPT-2 from a config), max_steps=20, eval and save every
  10 steps; ``progress_hf_trainer_resume.log``: the same run resumed to max_steps=40.
* ``progress_lightning_tqdm.log``: ``Trainer(max_epochs=3, callbacks=[TQDMProgressBar()])``, 20
  train batches per epoch, validation each epoch (local venv paths replaced by ``/opt/venv``).
* ``progress_lightning_rich.log``: the same with Lightning's default ``RichProgressBar``: to a
  file Rich prints nothing while it runs and only the final state at the end (no ``\\r`` at all).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.classify import Effect, KnowledgeBase, kb_fingerprint
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.diagnosis.logtext import logical_lines
from neuron_watch.node.tail import REDRAW_LOG_EVERY, FileTail, RankStreams

DATA = Path(__file__).parent / "data"
KB = default_knowledge_base()


def _progress(lines: list[str], kb: KnowledgeBase = KB) -> tuple[int, int | None]:
    """(number of progress matches, max step) of judge lines."""
    count, top = 0, None
    for _i, m in kb.scan(lines):
        if m.signature.effect is Effect.PROGRESS:
            count += 1
            if m.step is not None and (top is None or m.step > top):
                top = m.step
    return count, top


def _live(data: bytes, tmp_path: Path, seed: int = 0) -> list[str]:
    """The judge lines the live tail makes of ``data`` written in random pieces between polls."""
    f = tmp_path / "stdout.log"
    f.write_bytes(b"")
    t = FileTail(str(f))
    rng = random.Random(seed)
    out: list[str] = []
    pos = 0
    while pos < len(data):
        n = rng.choice((1, 7, 64, 300, 2000))
        with f.open("ab") as fh:
            fh.write(data[pos : pos + n])
        pos += n
        for text in t.read_lines():
            out.extend(logical_lines(text))
    for text in t.read_lines(final=True):
        out.extend(logical_lines(text))
    t.close()
    return out


# -- the live tail on real redrawn bars ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("progress_hf_trainer.log", 20),  # max_steps=20; the eval bar (16 batches) is not a step
        ("progress_hf_trainer_resume.log", 40),
        ("progress_lightning_tqdm.log", 60),  # 3 epochs x 20 batches
        ("progress_lightning_rich.log", 60),
    ],
)
def test_real_bars_give_the_global_step_live_and_offline_alike(name: str, step: int, tmp_path: Path) -> None:
    data = (DATA / name).read_bytes()
    for seed in (0, 1):
        d = tmp_path / str(seed)
        d.mkdir()
        count, top = _progress(_live(data, d, seed))
        assert count > 0
        assert top == step
    offline = diagnose_paths([str(DATA / name)])
    assert offline.verdict.step == step


def test_a_bar_is_seen_while_it_moves_not_only_when_its_line_ends(tmp_path: Path) -> None:
    """The Lightning run's first 40 batches are one line (no newline until validation): live,
    every poll sees the bar's newest state."""
    data = (DATA / "progress_lightning_tqdm.log").read_bytes()
    f = tmp_path / "stdout.log"
    cut = data.index(b"Epoch 0:  50%")
    f.write_bytes(data[: data.index(b"\r", cut)])
    t = FileTail(str(f))
    recs = t.read_records()
    assert recs[-1].redraw
    assert _progress([recs[-1].text]) == (1, 10)  # the judge has epoch 0, batch 10 now
    assert t.read_records() == []  # nothing new, nothing repeated
    t.close()


def test_ten_thousand_redraws_in_one_read_make_one_judge_line(tmp_path: Path) -> None:
    f = tmp_path / "stdout.log"
    f.write_bytes(b"start\n" + b"".join(b"\r %d%%|#| %d/10000 [00:01<00:01, 9.9it/s]" % (i // 100, i) for i in range(1, 10001)))
    t = FileTail(str(f))
    recs = t.read_records()
    assert [r.text for r in recs] == ["start", " 100%|#| 10000/10000 [00:01<00:01, 9.9it/s]"]
    assert recs[1].redraw
    with f.open("ab") as fh:
        fh.write(b"\n")
    final = t.read_records()
    assert [(r.text, r.seen) for r in final] == [(" 100%|#| 10000/10000 [00:01<00:01, 9.9it/s]", True)]
    assert t.read_lines() == []
    assert len(t.partial) == 0
    t.close()


def test_no_line_lost_or_doubled_across_polls_whatever_the_pieces(tmp_path: Path) -> None:
    """Complete lines come out exactly once, in order, however the writes are cut; redraws only
    add bar states (never a plain line twice)."""
    rng = random.Random(7)
    parts: list[bytes] = []
    want: list[str] = []
    for i in range(300):
        if rng.random() < 0.3:
            bar = b"".join(b"\r%3d%%|##| %d/50 [00:01<00:01, 2.0it/s]" % (k * 2, k) for k in range(1, rng.randint(2, 40)))
            parts.append(bar + b"\n")
            want.append(logical_lines(bar.decode())[0])
        else:
            line = f"line {i} " + "x" * rng.randint(0, 120)
            parts.append(line.encode() + (b"\r\n" if rng.random() < 0.2 else b"\n"))
            want.append(line)
    data = b"".join(parts)
    got = _live(data, tmp_path, seed=3)
    plain = [g for g in got if g.startswith("line ")]
    assert plain == [w for w in want if w.startswith("line ")]
    # every bar's final state is there, once as its line or as the redraw the line repeats
    finals = [w for w in want if not w.startswith("line ")]
    assert all(w in got for w in finals)


def test_rank_log_and_console_get_the_final_state_and_a_redraw_every_few_seconds(tmp_path: Path) -> None:
    root = tmp_path / "torchrun"
    d = root / "job" / "attempt_0" / "0"
    d.mkdir(parents=True)
    out = d / "stderr.log"
    out.write_bytes(b"")
    echoed: list[str] = []
    s = RankStreams("n0", str(tmp_path), echoed.append)
    s.set_log_root(str(root))
    s.rank_offset = 0
    judged: list[str] = []
    mono = 0.0
    for k in range(1, 101):  # ten redraws a second for ten seconds
        with out.open("ab") as fh:
            fh.write(b"\r%3d%%|#| %d/100 [00:01<00:01, 9.9it/s]" % (k, k))
        mono += 0.1
        judged += [ln.text for ln in s.poll(mono, mono)]
    with out.open("ab") as fh:
        fh.write(b"\n")
    judged += [ln.text for ln in s.poll(mono + 0.1, mono + 0.1)]
    s.close()
    assert len(judged) == 100  # the judge: each poll's newest state, once
    assert _progress(judged)[1] == 100
    logged = (tmp_path / "rank-0.log").read_text().splitlines()
    assert len(logged) <= 100 * 0.1 / REDRAW_LOG_EVERY + 2
    assert logged[-1] == "100%|#| 100/100 [00:01<00:01, 9.9it/s]"
    assert len("\n".join(echoed).splitlines()) == len(logged)


# -- the global step of each format ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "step"),
    [
        # Lightning: epoch * batches per epoch + batch
        ("Epoch 3:  45%|████▌     | 9/20 [00:01<00:01,  6.2it/s, v_num=0, loss=0.5]", 69),
        ("Epoch 1: 100%|██████████| 20/20 [00:00<00:00, 37.92it/s, v_num=0, train_loss=1.060, val_loss=1.210]", 40),
        ("Epoch 2:   0%|          | 0/20 [00:00<?, ?it/s, v_num=0, train_loss=0.324, val_loss=1.160]", 40),
        ("Epoch 2/2  ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 20/20 0:00:00 • 0:00:00 23.39it/s train_loss: 0.741", 60),
        # NeMo prints the global step; it wins over the bar's count
        ("Epoch 0:  22%|██▏       | 4499/20101 [22:26:14<77:48:37, 17.95s/it, loss=2.43, v_num=5563, reduced_train_loss=2.470, gradient_norm=0.121, parameter_norm=1864.0, global_step=4512.0, consumed_samples=1.16e+6, iteration_time=16.40]", 4512),
        # HF Trainer: the bar's total is max_steps
        (" 52%|█████▎    | 21/40 [00:00<00:00, 33.00it/s]", 21),
        # the DDP tutorial, at the start of epoch 5 of 16 batches
        ("[GPU0] Epoch 5 | Batchsize: 32 | Steps: 16", 80),
        ("[2023-10-31 08:58:33,237] [INFO] [logging.py:96:log_dist] [Rank 0] step=14000, skipped=25, lr=[0.001], mom=[0.9]", 14000),
        ("[2023-10-31 08:58:33,237] [INFO] [timer.py:260:stop] epoch=0/micro_step=14000/global_step=14000, RunningAvgSamplesPerSec=1412.76, CurrSamplesPerSec=1322.81, MemAllocated=0.0GB, MaxMemAllocated=0.0GB", 14000),
        ("steps: 10 loss: 2.3456 iter time (s): 0.123 samples/sec: 260.163", 10),
        (" [2024-06-01 10:00:00] iteration      100/  500000 | consumed samples:       102400 | elapsed time per iteration (ms): 1234.5 | learning rate: 1.000E-04 | global batch size:  1024 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |", 100),
        ("LOG Thu Aug  3 18:36:22 2023 - (0, 12) step_loss : 10.8750 learning_rate : 1.50e-04 throughput : 23.08 seq/s grad-norm : 3.17", 12),
        ("step 5 step_time 1.2s throughput 850.1 seq/s step loss 2.0417 grad norm 1.07", 5),
        ("Step 120/500 | lr 3.0e-04", 120),
        ("Global Step 7 | tokens/s 1234", 7),
    ],
)
def test_global_step(line: str, step: int) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.effect is Effect.PROGRESS, line
    assert m.step == step


def test_torchtitan_coloured_line_gives_its_step_after_the_escapes_go() -> None:
    # torchtitan/components/metrics.py MetricsProcessor.log: f"{color.red}step: {step:2}  {color.green}loss: ..."
    # with the logger format "[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s"
    raw = ("[titan] 2025-03-10 12:00:01,234 - root - INFO - \x1b[31mstep: 10  \x1b[32mloss:  7.9012  "
           "\x1b[38;2;180;60;0mgrad_norm:  1.2345  \x1b[38;2;54;234;195mmemory: 41.65GiB(43.84%)  "
           "\x1b[34mtps: 1,065  \x1b[36mtflops: 62.70  \x1b[35mmfu: 6.34%\x1b[39m")
    (text,) = logical_lines(raw)
    m = KB.classify(text)
    assert m is not None and m.signature.id == "progress.step_loss"
    assert (m.step, m.loss) == (10, 7.9012)


@pytest.mark.parametrize(
    "line",
    [
        "Writing model shards: 100%|██████████| 1/1 [00:00<00:00, 30.79it/s]",
        "Validation DataLoader 0: 100%|██████████| 10/10 [00:00<00:00, 45.57it/s]",
        "Sanity Checking DataLoader 0: 100%|██████████| 2/2 [00:00<00:00, 50.01it/s]",
        "[inner bar] 94%|█████████▍| 15/16 [00:05<00:00,  2.66it/s]",  # HF's evaluation bar
        "{'loss': '4.322', 'grad_norm': '1.234', 'learning_rate': '4e-05', 'epoch': '0.1562'}",
        "Epoch 3/10",
    ],
)
def test_liveness_without_a_step(line: str) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.effect is Effect.PROGRESS
    assert m.step is None


@pytest.mark.parametrize(
    "line",
    [
        "  0%|          | 0/800 [00:00<?, ?it/s]",  # HF after a resume, before its first step
        "Writing model shards:   0%|          | 0/1 [00:00<?, ?it/s]",
        "Epoch 0:   0%|          | 0/20 [00:00<?, ?it/s]",
        "[GPU0] Epoch 0 | Batchsize: 32 | Steps: 16",
        "[inner bar] 0%|          | 0/16 [00:00<?, ?it/s]",
        "Step 1: Installing dependencies",
    ],
)
def test_nothing_done_is_not_progress(line: str) -> None:
    m = KB.classify(line)
    assert m is None or m.signature.effect is not Effect.PROGRESS


def test_hf_evaluation_bar_is_marked_inner_and_its_count_is_not_the_step() -> None:
    raw = "\r 94%|█████████▍| 15/16 [00:05<00:00,  2.66it/s]\x1b[A"
    (text,) = logical_lines(raw)
    assert text.startswith("[inner bar] ")
    m = KB.classify(text)
    assert m is not None and m.signature.effect is Effect.PROGRESS and m.step is None


# -- the classifier's count groups, for --progress-regex too -------------------------------------------


def test_progress_regex_may_count_with_epoch_n_total() -> None:
    kb = default_knowledge_base(r"ep (?P<epoch>\d+) batch (?P<n>\d+) of (?P<total>\d+)")
    m = kb.classify("ep 2 batch 5 of 100")
    assert m is not None and m.signature.id == "user.progress" and m.step == 205
    assert kb.classify("ep 0 batch 0 of 100") is None or kb.classify("ep 0 batch 0 of 100").signature.id != "user.progress"  # type: ignore[union-attr]
    plain = default_knowledge_base(r"done (?P<step>\d+)")
    assert plain.classify("done 0").step == 0  # type: ignore[union-attr]  # a printed step of 0 stays a step
    assert kb_fingerprint(kb) != kb_fingerprint(plain)
