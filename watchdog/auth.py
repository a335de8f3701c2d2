"""The per-job secret and message signing for the coordinator/agent link.

Every message carries an HMAC-SHA256 over its frames (each frame length-prefixed, so frame
boundaries are signed too). The header inside the signed frames names the sender, its session
and sequence number, so a signed message cannot be altered, re-attributed or silently replayed
(:class:`neuron_watch.protocol.SequenceTracker` refuses repeats).

Two keys are derived from the job secret, one per direction, so an agent's message can never be
reflected back to an agent as a command: ``agent`` signs agent -> coordinator traffic,
``coordinator`` signs commands. Why HMAC and not CURVE: see docs/multinode.md ("Security").

The secret comes from ``NEURON_WATCH_SECRET`` or from a file readable by its owner only
(mode 0600, typically on the cluster's shared storage, written once per job).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from neuron_watch.errors import ConfigError
from neuron_watch.protocol import ProtocolError

SECRET_ENV = "NEURON_WATCH_SECRET"
MIN_SECRET_BYTES = 16
MAC_BYTES = 32

_MAKE_ONE = "create one with `neuron-watch coordinator --new-secret FILE` or `(umask 077; openssl rand -hex 32 > FILE)`"


class AuthError(ProtocolError):
    """A message whose signature is missing or wrong: dropped and counted, never acted on."""

    def __init__(self, message: str) -> None:
        super().__init__("auth", message)


def load_secret(env: Mapping[str, str], secret_file: str | None) -> bytes:
    """The job secret: ``secret_file`` if given, else ``$NEURON_WATCH_SECRET``.

    Raises:
        ConfigError: no secret, a secret shorter than 16 bytes, an unreadable file, or a file
            that its group or others can read (the message says how to fix each).
    """
    if secret_file:
        try:
            fd = os.open(secret_file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            raise ConfigError(f"cannot read the secret file {secret_file}: {exc.strerror}", _MAKE_ONE) from exc
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise ConfigError(f"the secret file {secret_file} is not a regular file", _MAKE_ONE)
            if mode & 0o077:
                raise ConfigError(
                    f"the secret file {secret_file} has mode {stat.S_IMODE(mode):04o}; "
                    "its group or other users can read it",
                    f"run `chmod 600 {secret_file}` (and make a new secret if others may have read it)",
                )
            data = os.read(fd, 1 << 16)
        finally:
            os.close(fd)
        origin = f"the secret file {secret_file}"
    elif env.get(SECRET_ENV):
        data = env[SECRET_ENV].encode("utf-8")
        origin = f"${SECRET_ENV}"
    else:
        raise ConfigError(
            "no job secret: the coordinator/agent link refuses to run unauthenticated",
            f"set {SECRET_ENV} on every node, or pass --secret-file FILE (mode 0600); {_MAKE_ONE}",
        )
    data = data.strip()
    if len(data) < MIN_SECRET_BYTES:
        raise ConfigError(f"{origin} holds {len(data)} bytes; at least {MIN_SECRET_BYTES} are needed", _MAKE_ONE)
    return data


def write_secret_file(path: str) -> None:
    """Create ``path`` (mode 0600, must not exist) holding a fresh random secret (64 hex digits).

    Raises:
        ConfigError: the file exists or cannot be created.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot create the secret file {path}: {exc.strerror}",
                          "choose a path that does not exist yet, on storage every node can read") from exc
    try:
        os.write(fd, (secrets.token_hex(32) + "\n").encode())
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Keys:
    """The two signing keys of a job, derived from its secret."""

    agent: bytes
    coordinator: bytes


def derive_keys(secret: bytes) -> Keys:
    """Per-direction keys: HMAC-SHA256(secret, label) -- the secret itself never signs anything."""
    def sub(label: bytes) -> bytes:
        return hmac.new(secret, b"neuron-watch/wire/v1/" + label, hashlib.sha256).digest()

    return Keys(agent=sub(b"agent"), coordinator=sub(b"coordinator"))


def _mac(key: bytes, frames: Sequence[bytes]) -> bytes:
    h = hmac.new(key, digestmod=hashlib.sha256)
    for f in frames:
        h.update(len(f).to_bytes(8, "big"))
        h.update(f)
    return h.digest()


class Signer:
    """Signs outgoing frames with one key and checks incoming frames against another."""

    def __init__(self, send_key: bytes, recv_key: bytes) -> None:
        self._send_key = send_key
        self._recv_key = recv_key

    @classmethod
    def for_coordinator(cls, secret: bytes) -> Signer:
        k = derive_keys(secret)
        return cls(send_key=k.coordinator, recv_key=k.agent)

    @classmethod
    def for_agent(cls, secret: bytes) -> Signer:
        k = derive_keys(secret)
        return cls(send_key=k.agent, recv_key=k.coordinator)

    def sign(self, frames: Sequence[bytes]) -> list[bytes]:
        """``frames`` plus a last frame holding their MAC."""
        return [*frames, _mac(self._send_key, frames)]

    def verify(self, frames: Sequence[bytes]) -> list[bytes]:
        """The frames without the MAC frame.

        Raises:
            AuthError: no MAC frame, or the MAC does not match (wrong secret, wrong direction, altered).
        """
        if len(frames) < 2 or len(frames[-1]) != MAC_BYTES:
            raise AuthError(f"unsigned message ({len(frames)} frames, no {MAC_BYTES}-byte signature last)")
        body = [bytes(f) for f in frames[:-1]]
        if not hmac.compare_digest(_mac(self._recv_key, body), bytes(frames[-1])):
            raise AuthError("bad signature: the peer has another job secret, or the message was altered")
        return body
