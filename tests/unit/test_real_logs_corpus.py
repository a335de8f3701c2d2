"""The real-log corpus is well formed (the accuracy on it is a benchmark, not a test)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.fixtures.real_logs import CORPUS, CorpusError, load_corpus


def test_every_excerpt_has_a_label_a_source_and_a_reason() -> None:
    excerpts = load_corpus()
    assert excerpts, f"no excerpts under {CORPUS}"
    for ex in excerpts:
        assert ex.reason and ex.source.startswith("https://")


def test_no_excerpt_is_kept_twice() -> None:
    seen: dict[str, str] = {}
    for ex in load_corpus():
        digest = hashlib.sha256(ex.log.read_bytes().strip()).hexdigest()
        assert digest not in seen, f"{ex.name} repeats {seen[digest]}"
        seen[digest] = ex.name


def test_a_log_without_metadata_is_refused(tmp_path: Path) -> None:
    (tmp_path / "oom").mkdir()
    (tmp_path / "oom" / "x.log").write_text("CUDA out of memory\n")
    with pytest.raises(CorpusError, match=r"needs both x\.log and x\.toml"):
        load_corpus(tmp_path)


def test_an_unknown_label_is_refused(tmp_path: Path) -> None:
    (tmp_path / "scary").mkdir()
    with pytest.raises(CorpusError, match="not a label"):
        load_corpus(tmp_path)
