"""Mask the user info (``user:password@``) of URLs, by the URL's structure. Pure.

Why not a regular expression: a password may hold a raw ``@`` (``mqtt://u:p@ss@broker/x``
authenticates: ``urllib.parse.urlsplit`` takes the netloc up to the first ``/?#`` and the host
after its *last* ``@``), and a regex that stops at the first ``@`` left ``ss@`` in the config
written to events.jsonl, MQTT, env.json and timeline.json (issue 16, finding 7). A token-only URL
(``mqtt://TOKEN@broker``) has no ``:`` and must be masked as well. So the authority is found the
way ``urlsplit`` finds it (``urllib/parse.py``: ``_splitnetloc`` ends it at the first ``/?#``) and
everything up to its last ``@`` is replaced.
"""

from __future__ import annotations

from urllib.parse import urlsplit

MASK = "***"
#: what ends an authority: urlsplit's delimiters, and (in free text) white space and quotes
_END_OF_NETLOC = frozenset("/?#") | frozenset(" \t\r\n\v\f\"'<>")


def mask_urls(text: str) -> str:
    """``text`` with the user info of every ``scheme://user:pass@host`` in it replaced by ``***``.

    Works on a single URL and on free text (an environment value, a command-line argument).
    ``mqtt://u:p@ss@b:1/x`` -> ``mqtt://***@b:1/x``; ``mqtt://tok@b`` -> ``mqtt://***@b``;
    text without ``://`` or without ``@`` in an authority comes back unchanged.
    """
    if "://" not in text:
        return text
    out: list[str] = []
    pos = 0
    while True:
        sep = text.find("://", pos)
        if sep < 0:
            break
        start = sep + 3
        end = start
        while end < len(text) and text[end] not in _END_OF_NETLOC:
            end += 1
        netloc = text[start:end]
        # no check of the scheme's spelling: masking a non-URL's '@' costs nothing, missing one leaks
        if "@" in netloc:
            host = netloc.rsplit("@", 1)[1]
            out.append(text[pos:start])
            out.append(f"{MASK}@{host}")
        else:
            out.append(text[pos:end])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def mask_value(value: object) -> object:
    """``value`` with :func:`mask_urls` applied to every string in it (lists, tuples, dicts)."""
    if isinstance(value, str):
        return mask_urls(value)
    if isinstance(value, dict):
        return {k: mask_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_value(v) for v in value]
    return value


def shown_url(url: str) -> str:
    """What a log may say of a URL whose secret may be anywhere in it (a chat webhook's token is its
    path): ``https://hooks.example.com/...``, the scheme, host and port only."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return "<not a URL>"
    if not parts.scheme or not parts.hostname:
        return "<not a URL>"
    return f"{parts.scheme}://{parts.hostname}" + (f":{port}" if port else "") + "/..."
