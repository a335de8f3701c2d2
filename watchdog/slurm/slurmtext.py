"""Slurm text, parsed and formatted without I/O.

* :func:`expand_nodelist` turns a Slurm hostlist (``n[1-3,5]``, ``compute1-dy-queue1-i1-[1-16]``,
  ``rack[1-2]-n[01-02]``, ``a,b``) into names, the way ``scontrol show hostnames`` does.
* :func:`parse_records` reads ``scontrol show node|job`` output (multi-line or ``-o``) into dicts;
  :func:`parse_nodes` / :func:`parse_jobs` give typed views of the fields we use.
* :func:`format_drain_reason` builds ``neuron-watch: <label>: <short evidence>`` with a length cap;
  :func:`is_our_reason` recognises it again (also with the ``[user@time]`` suffix Slurm appends).

Pure: no ``os``, no subprocess; callers run ``scontrol`` and pass its stdout in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from neuron_watch.errors import UsageError

#: Prefix of every drain reason neuron-watch sets; how we recognise our own drains later.
REASON_PREFIX = "neuron-watch:"
#: Default cap on a drain reason. Slurm stores longer ones, but `sinfo -R` truncates and
#: long reasons with quotes/newlines have broken site tooling that parses them.
REASON_MAX = 120

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"bad Slurm nodelist {text!r}: unbalanced ']'", "check the node list")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise UsageError(f"bad Slurm nodelist {text!r}: unbalanced '['", "check the node list")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _expand_range(body: str, whole: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise UsageError(f"bad Slurm nodelist {whole!r}: {item!r} is not N or N-M",
                             "use the form prefix[1-4,7]")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0  # n[01-03] keeps the padding
        a, b = int(lo), int(hi)
        if b < a:
            raise UsageError(f"bad Slurm nodelist {whole!r}: range {item!r} runs backwards",
                             "write the lower bound first")
        if b - a > 100_000:
            raise UsageError(f"Slurm nodelist {whole!r}: range {item!r} is implausibly large",
                             "check the node list")
        out.extend(str(i).zfill(width) for i in range(a, b + 1))
    return out


def _expand_one(name: str, whole: str) -> list[str]:
    m = re.search(r"\[([^\[\]]*)\]", name)
    if not m:
        if "[" in name or "]" in name:
            raise UsageError(f"bad Slurm nodelist {whole!r}", "check the brackets")
        return [name]
    head, tail = name[: m.start()], name[m.end():]
    # tail may hold further bracket groups (rack[1-2]-n[1-2]): cartesian product, left group outermost
    return [head + v + rest for v in _expand_range(m.group(1), whole) for rest in _expand_one(tail, whole)]


def expand_nodelist(text: str) -> list[str]:
    """Expand a Slurm hostlist into node names, in Slurm's order, without duplicates.

    Raises:
        UsageError: the text is not a hostlist (unbalanced brackets, ``[a-b]`` that is not numeric,
            backwards range).
    """
    names: list[str] = []
    seen: set[str] = set()
    for part in _split_top(text.strip()):
        for n in _expand_one(part, text):
            if n not in seen:
                seen.add(n)
                names.append(n)
    return names


def join_nodelist(names: Iterable[str]) -> str:
    """Names as a comma list Slurm accepts everywhere a hostlist goes (``--exclude``, ``nodename=``)."""
    return ",".join(dict.fromkeys(n for n in names if n))


# ---------------------------------------------------------------------------------------------
# scontrol show ... output

#: Keys whose value is the rest of the line when they start it (their values contain spaces).
_WHOLE_LINE_KEYS = {"Reason", "OS", "Comment", "Command", "WorkDir", "StdOut", "StdErr", "StdIn",
                    "AdminComment", "SystemComment"}
_RECORD_KEYS = ("NodeName", "JobId", "PartitionName")
_TOKEN = re.compile(r"^([A-Za-z][A-Za-z0-9_:/.]*)=(.*)$", re.S)


def parse_records(text: str) -> list[dict[str, str]]:
    """Parse ``scontrol show node`` / ``show job`` output (multi-line or ``-o``) into one dict per record.

    A new record starts at a line beginning with ``NodeName=``, ``JobId=`` or ``PartitionName=``, or
    after a blank line. ``Reason=``/``OS=``/``Command=`` ... starting a line take the rest of that line
    (they contain spaces); other values end at whitespace, and a word without ``=`` is glued to the
    previous value (``Reason=Prolog error`` in ``-o`` output).
    """
    records: list[dict[str, str]] = []
    cur: dict[str, str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            cur = None
            continue
        if cur is None or line.startswith(_RECORD_KEYS):
            cur = {}
            records.append(cur)
        key0 = line.split("=", 1)[0]
        if key0 in _WHOLE_LINE_KEYS:
            cur[key0] = line.split("=", 1)[1].strip()
            continue
        last: str | None = None
        for tok in line.split():
            m = _TOKEN.match(tok)
            # In `-o` output a node's Reason comes last and may hold any words: glue the rest to it.
            if m and not (last == "Reason" and "NodeName" in cur):
                last = m.group(1)
                cur[last] = m.group(2)
            elif last is not None:
                cur[last] = f"{cur[last]} {tok}"
    return records


@dataclass(frozen=True)
class NodeInfo:
    """The parts of ``scontrol show node`` neuron-watch acts on."""

    name: str
    state: str  # base state, e.g. IDLE, ALLOCATED, DOWN
    flags: frozenset[str]  # DRAIN, COMPLETING, NOT_RESPONDING ...
    reason: str  # without Slurm's "[user@time]" suffix; "" when none
    addr: str

    @property
    def drained(self) -> bool:
        """Draining or drained (no new jobs will start here)."""
        return "DRAIN" in self.flags or self.state in ("DRAINED", "DRAINING")

    @property
    def drained_by_us(self) -> bool:
        return self.drained and is_our_reason(self.reason)


def _strip_reason_suffix(reason: str) -> str:
    return re.sub(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$", "", reason).strip()


def parse_nodes(text: str) -> list[NodeInfo]:
    """Typed :class:`NodeInfo` for every ``NodeName=`` record in ``scontrol show node`` output."""
    out = []
    for rec in parse_records(text):
        if "NodeName" not in rec:
            continue
        parts = rec.get("State", "UNKNOWN").split("+")
        reason = rec.get("Reason", "")
        out.append(NodeInfo(
            name=rec["NodeName"],
            state=parts[0].rstrip("*"),
            flags=frozenset(p.rstrip("*") for p in parts[1:]),
            reason="" if reason in ("(null)", "None") else _strip_reason_suffix(reason),
            addr=rec.get("NodeAddr", ""),
        ))
    return out


@dataclass(frozen=True)
class JobInfo:
    """The parts of ``scontrol show job`` neuron-watch acts on."""

    job_id: str
    state: str
    reason: str
    restarts: int
    requeue: bool
    nodes: tuple[str, ...]  # expanded NodeList ("(null)" -> empty)
    excluded: tuple[str, ...]  # expanded ExcNodeList


def _nodes_field(value: str) -> tuple[str, ...]:
    return () if value in ("", "(null)", "None") else tuple(expand_nodelist(value))


def parse_jobs(text: str) -> list[JobInfo]:
    """Typed :class:`JobInfo` for every ``JobId=`` record in ``scontrol show job`` output."""
    out = []
    for rec in parse_records(text):
        if "JobId" not in rec:
            continue
        try:
            restarts = int(rec.get("Restarts", "0"))
        except ValueError:
            restarts = 0
        out.append(JobInfo(
            job_id=rec["JobId"],
            state=rec.get("JobState", "UNKNOWN"),
            reason=rec.get("Reason", ""),
            restarts=restarts,
            requeue=rec.get("Requeue", "0") == "1",
            nodes=_nodes_field(rec.get("NodeList", "")),
            excluded=_nodes_field(rec.get("ExcNodeList", "")),
        ))
    return out


# ---------------------------------------------------------------------------------------------
# drain reasons

def _clean(text: str) -> str:
    # Quotes, '=' and control characters confuse `scontrol update` and tools that parse
    # `scontrol show node` (a '=' in a Reason reads as a new key); collapse whitespace.
    text = re.sub(r"[\"'`=\x00-\x1f\x7f]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def format_drain_reason(label: str, evidence: str, max_len: int = REASON_MAX) -> str:
    """``neuron-watch: <label>: <short evidence>``, cleaned and cut to ``max_len`` characters.

    The prefix and the label always survive; the evidence is shortened with ``...``.

    Raises:
        UsageError: ``max_len`` leaves no room for the prefix and the label.
    """
    head = f"{REASON_PREFIX} {_clean(label) or 'unknown'}"
    if len(head) > max_len:
        raise UsageError(f"drain reason cap {max_len} is shorter than {head!r}", "raise the cap")
    ev = _clean(evidence)
    if not ev:
        return head
    full = f"{head}: {ev}"
    if len(full) <= max_len:
        return full
    room = max_len - len(head) - 2 - 3
    return head if room <= 0 else f"{head}: {ev[:room].rstrip()}..."


def is_our_reason(reason: str) -> bool:
    """Whether a node's Reason was set by neuron-watch (Slurm's ``[user@time]`` suffix allowed)."""
    return _strip_reason_suffix(reason).startswith(REASON_PREFIX)


def reason_label(reason: str) -> str | None:
    """The label inside one of our reasons (``hardware_error``), or None when it is not ours."""
    r = _strip_reason_suffix(reason)
    if not r.startswith(REASON_PREFIX):
        return None
    return r[len(REASON_PREFIX):].strip().split(":", 1)[0].strip() or None


def nodes_of(names: Sequence[str]) -> str:
    """Human list for messages: ``n1, n2`` (empty -> ``(none)``)."""
    return ", ".join(names) if names else "(none)"
