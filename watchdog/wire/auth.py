"""The per-job secret and message signing for the coordinator/agent link.

Every message carries an HMAC-SHA256 over its frames (each frame length-prefixed, so frame
boundaries are signed too). The header inside the signed frames names the sender, its session
and sequence number, so a signed message cannot be altered, re-attributed or silently replayed
(:class:`neuron_watch.wire.protocol.SequenceTracker` refuses repeats).

Two keys are derived from the job secret *and the job id*, one per direction, so an agent's message
can never be reflected back to an agent as a command: ``agent`` signs agent -> coordinator traffic,
``coordinator`` signs commands. Binding the job id into the keys means two jobs that share a secret
(one exported in a shell profile) can never merge: a message of one job does not verify with the
other's keys, whatever its header says. The coordinator can still tell such a neighbour from a
stranger (it holds the secret: :meth:`Signer.other_job` derives the other job's keys) and refuses
it by name. A third key, bound to no job, signs the operator's read-only status queries and their
replies (the operator need not know the job id). Why HMAC and not CURVE: see docs/multinode.md
("Security").

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
from neuron_watch.wire.protocol import ProtocolError

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
    """The two signing keys of a job, derived from its secret and its id."""

    agent: bytes
    coordinator: bytes


def _sub(secret: bytes, label: bytes, job: str) -> bytes:
    # Length-prefixed job id: no two (label, job) pairs give the same input.
    j = job.encode("utf-8")
    return hmac.new(secret, b"neuron-watch/wire/v4/" + label + b"/" + len(j).to_bytes(4, "big") + j,
                    hashlib.sha256).digest()


def derive_keys(secret: bytes, job: str) -> Keys:
    """Per-direction keys of ``job``: HMAC-SHA256(secret, label + job) -- the secret itself never
    signs anything, and another job's keys differ even with the same secret."""
    return Keys(agent=_sub(secret, b"agent", job), coordinator=_sub(secret, b"coordinator", job))


def status_key(secret: bytes) -> bytes:
    """The key of status queries and replies (read-only; bound to no job)."""
    return _sub(secret, b"status", "")


def _mac(keyed: hmac.HMAC, frames: Sequence[bytes]) -> bytes:
    # ``keyed``: HMAC-SHA256 of the key and nothing yet, copied per message (the same MAC as one made
    # from the key each time, without hashing the key's pads again: ~2 us less a message, ~2,500
    # messages a second at the coordinator of 1,024 nodes)
    h = keyed.copy()
    for f in frames:
        h.update(len(f).to_bytes(8, "big"))
        h.update(f)
    return h.digest()


class Signer:
    """Signs outgoing frames with one key and checks incoming frames against another."""

    def __init__(self, send_key: bytes, recv_key: bytes, secret: bytes = b"") -> None:
        self._send_mac = hmac.new(send_key, digestmod=hashlib.sha256)
        self._recv_mac = hmac.new(recv_key, digestmod=hashlib.sha256)
        self._secret = secret  # kept by a coordinator's signer only (other_job)
        self._others: dict[str, Signer] = {}

    @classmethod
    def for_coordinator(cls, secret: bytes, job: str) -> Signer:
        k = derive_keys(secret, job)
        return cls(send_key=k.coordinator, recv_key=k.agent, secret=secret)

    @classmethod
    def for_agent(cls, secret: bytes, job: str) -> Signer:
        k = derive_keys(secret, job)
        return cls(send_key=k.agent, recv_key=k.coordinator)

    @classmethod
    def for_status(cls, secret: bytes) -> Signer:
        """Both ends of a status query (query and reply are told apart by their kind)."""
        k = status_key(secret)
        return cls(send_key=k, recv_key=k)

    def other_job(self, job: str) -> Signer | None:
        """A coordinator's signer for another ``job`` with the same secret (to verify and answer a
        neighbour it refuses); None for a signer made without the secret. At most 64 are kept."""
        if not self._secret:
            return None
        s = self._others.get(job)
        if s is None:
            if len(self._others) >= 64:
                self._others.pop(next(iter(self._others)))
            s = self._others[job] = Signer.for_coordinator(self._secret, job)
        return s

    def sign(self, frames: Sequence[bytes]) -> list[bytes]:
        """``frames`` plus a last frame holding their MAC."""
        return [*frames, _mac(self._send_mac, frames)]

    def verify(self, frames: Sequence[bytes]) -> list[bytes]:
        """The frames without the MAC frame.

        Raises:
            AuthError: no MAC frame, or the MAC does not match (wrong secret, wrong direction, altered).
        """
        if len(frames) < 2 or len(frames[-1]) != MAC_BYTES:
            raise AuthError(f"unsigned message ({len(frames)} frames, no {MAC_BYTES}-byte signature last)")
        body = [bytes(f) for f in frames[:-1]]
        if not hmac.compare_digest(_mac(self._recv_mac, body), bytes(frames[-1])):
            raise AuthError("bad signature: the peer has another job secret, or the message was altered")
        return body
