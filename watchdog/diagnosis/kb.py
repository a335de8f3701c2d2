"""Load the packaged knowledge base (the only I/O around :mod:`neuron_watch.diagnosis.classify`)."""

from __future__ import annotations

import functools
from importlib import resources

from neuron_watch.diagnosis.classify import KnowledgeBase


@functools.lru_cache(maxsize=8)
def default_knowledge_base(progress_regex: str | None = None) -> KnowledgeBase:
    """The packaged ``signatures.toml``, plus the user's progress regex if given."""
    text = resources.files("neuron_watch.diagnosis").joinpath("signatures.toml").read_text(encoding="utf-8")
    return KnowledgeBase.from_toml(text, progress_regex=progress_regex)
