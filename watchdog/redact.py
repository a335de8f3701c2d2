"""Mask the user info (``user:password@``) of URLs, by the URL's structure. Pure.

Why not a regular expression over the authority: a password may hold any character, raw. A raw
``@`` (``mqtt://u:p@ss@broker/x``) authenticates: the host follows the *last* ``@``. A raw ``/``,
``?`` or ``#`` ends the authority where ``urllib.parse.urlsplit`` looks for it (``_splitnetloc``
stops at the first ``/?#``), so ``mqtt://u:pa/ss@broker`` parses as host ``u``, port ``pa`` and a
path holding the rest of the password; a mask that stops at the first ``/?#`` printed it whole.
A token-only URL (``mqtt://TOKEN@broker``) has no ``:`` and must be masked as well.

So the user info ends at the last ``@`` of the authority as ``urlsplit`` finds it, and where that
authority holds no ``@`` (a raw ``/?#`` in the password cut it short), at the last ``@`` of the URL
that a host follows (:func:`userinfo_end`): nothing after it can belong to the password. A URL
ends at white space or a quote in free text, and at the end of a value that begins with one.
Masking a path's ``@`` too (``http://h/p@x`` shows as ``http://***@x``) hides more than needed
and leaks nothing.

An environment that leaves the node (an incident bundle's ``env.json``) is masked by name as well
(:func:`redact_env`): a credential's value needs no URL around it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

MASK = "***"
#: what ends a URL in free text: white space, quotes and angle brackets
_END_OF_URL = frozenset(" \t\r\n\v\f\"'<>")
#: a host (a name, IPv4 or a bracketed IPv6 address) and an optional port, up to the end of the
#: authority (``/?#``, or where a URL ends)
_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%!$&()*+,;=-]+)(?::\d*)?(?=[/?#\s\"'<>]|$)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def userinfo_end(url: str) -> int | None:
    """In ``url`` (the text after ``scheme://``, up to the URL's end), the index of the ``@`` that
    ends its user info, or None if it has none.

    An authority that holds an ``@`` before the first ``/?#`` is read as ``urlsplit`` reads it: the
    user info ends at its last ``@`` (a path's or a query's ``@`` after it stays). Otherwise a
    password may hold a raw ``/?#`` that cut the authority short: the user info ends at the last
    ``@`` of the URL that a host follows (``http://h/p@x`` is masked too: a token holding ``/``
    looks the same).
    """
    netloc_end = len(url)
    for c in "/?#":
        i = url.find(c)
        if 0 <= i < netloc_end:
            netloc_end = i
    at = url.rfind("@", 0, netloc_end)
    if at >= 0:
        return at
    at = len(url)
    while (at := url.rfind("@", 0, at)) >= 0:
        if _HOST.match(url, at + 1):
            return at
    return None


def mask_urls(text: str) -> str:
    """``text`` with the user info of every ``scheme://user:pass@host`` in it replaced by ``***``.

    Works on a single URL (the whole value is the URL) and on free text (an environment value, a
    command line, an exception's message: a URL ends at white space or a quote).
    ``mqtt://u:p@ss@b:1/x`` -> ``mqtt://***@b:1/x``; ``mqtt://u:p/a#s?s@b/x`` -> ``mqtt://***@b/x``;
    ``mqtt://tok@b`` -> ``mqtt://***@b``; text without ``://`` or without user info comes back
    unchanged.
    """
    if "://" not in text:
        return text
    # a value that begins with a URL is read as one (a password may even hold a space)
    whole = _SCHEME.match(text) is not None
    out: list[str] = []
    pos = 0
    while (sep := text.find("://", pos)) >= 0:
        start = sep + 3
        end = start
        if whole:
            end = len(text)
        else:
            while end < len(text) and text[end] not in _END_OF_URL:
                end += 1
        at = userinfo_end(text[start:end])
        out.append(text[pos:start])
        if at is None:
            pos = start
            continue
        # no check of the scheme's spelling: masking a non-URL's '@' costs nothing, missing one leaks
        out.append(f"{MASK}@")
        pos = start + at + 1
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


#: the name of an environment variable that holds a credential: its value is never shown
_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|KEY|AUTH|SESSION", re.IGNORECASE)
#: an AWS access key id in any text (long-term ``AKIA``, temporary ``ASIA``)
_AWS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")
#: what a credential's value becomes
REDACTED = "***redacted***"


def redact_value(value: str) -> str:
    """``value`` with the user info of URLs (``user:pass@``, ``token@``) and AWS access key ids masked. Pure."""
    value = mask_urls(value)
    return _AWS_KEY_ID.sub("AKIA" + "*" * 16, value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` safe to upload. Pure.

    Values of names containing SECRET, TOKEN, PASSWORD/PASSWD/PASSPHRASE, CREDENTIAL, KEY, AUTH or
    SESSION (any case; covers AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, NEURON_WATCH_SECRET,
    HF_TOKEN, ...) become ``***redacted***``; other values keep their text minus URL passwords and
    AWS key ids.
    """
    out: dict[str, str] = {}
    for name in sorted(env):
        value = env[name]
        out[name] = REDACTED if (_SECRET_NAME.search(name) and value) else redact_value(value)
    return out
