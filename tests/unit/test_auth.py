"""Secret loading (env, 0600 file) and message signing, without sockets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuron_watch.errors import ConfigError
from neuron_watch.wire.auth import AuthError, Signer, derive_keys, load_secret, write_secret_file

SECRET = b"0123456789abcdef0123456789abcdef"


def test_secret_from_env() -> None:
    assert load_secret({"NEURON_WATCH_SECRET": SECRET.decode() + "\n"}, None) == SECRET


def test_no_secret_is_refused_with_the_next_step() -> None:
    with pytest.raises(ConfigError) as ei:
        load_secret({}, None)
    assert "NEURON_WATCH_SECRET" in ei.value.hint and "--secret-file" in ei.value.hint


def test_short_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 16"):
        load_secret({"NEURON_WATCH_SECRET": "short"}, None)


def test_secret_file_0600_is_read_and_wins_over_env(tmp_path: Path) -> None:
    f = tmp_path / "secret"
    write_secret_file(str(f))
    assert f.stat().st_mode & 0o777 == 0o600
    s = load_secret({"NEURON_WATCH_SECRET": SECRET.decode()}, str(f))
    assert len(s) == 64 and s != SECRET
    with pytest.raises(ConfigError, match="cannot create"):
        write_secret_file(str(f))  # never overwrites


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_group_or_world_readable_file_is_refused(tmp_path: Path, mode: int) -> None:
    f = tmp_path / "secret"
    f.write_bytes(SECRET)
    os.chmod(f, mode)
    with pytest.raises(ConfigError) as ei:
        load_secret({}, str(f))
    assert f"{mode:04o}" in ei.value.message and "chmod 600" in ei.value.hint
    assert SECRET.decode() not in str(ei.value)  # never echo the secret


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nope"):
        load_secret({}, str(tmp_path / "nope"))


JOB = "job-a"


def test_sign_verify_and_direction() -> None:
    agent, coord = Signer.for_agent(SECRET, JOB), Signer.for_coordinator(SECRET, JOB)
    frames = [b"header", b"body"]
    assert coord.verify(agent.sign(frames)) == frames
    assert agent.verify(coord.sign(frames)) == frames
    # An agent's own message reflected back to an agent is not a command.
    with pytest.raises(AuthError):
        agent.verify(agent.sign(frames))
    k = derive_keys(SECRET, JOB)
    assert len({k.agent, k.coordinator, SECRET}) == 3


def test_wrong_secret_altered_or_reframed_messages_fail() -> None:
    agent = Signer.for_agent(SECRET, JOB)
    coord = Signer.for_coordinator(SECRET, JOB)
    signed = agent.sign([b"header", b"body"])
    with pytest.raises(AuthError, match="bad signature"):
        Signer.for_coordinator(b"another secret of 32 bytes......", JOB).verify(signed)
    with pytest.raises(AuthError):
        coord.verify([b"header", b"bodY", signed[2]])
    with pytest.raises(AuthError):  # moving the frame boundary changes the MAC
        coord.verify([b"headerb", b"ody", signed[2]])
    with pytest.raises(AuthError, match="unsigned"):
        coord.verify([b"header", b"body"])
    with pytest.raises(AuthError) as ei:
        coord.verify([b"x"])
    assert ei.value.problem == "auth"


def test_the_job_id_is_bound_into_the_keys() -> None:
    """Two jobs with one secret (exported in a shell profile) never verify each other's messages;
    the coordinator, holding the secret, can still tell such a neighbour."""
    a, b = derive_keys(SECRET, "job-a"), derive_keys(SECRET, "job-b")
    assert len({a.agent, a.coordinator, b.agent, b.coordinator}) == 4
    # the job id is length-prefixed: no (label, job) pair runs into another
    assert derive_keys(SECRET, "") != derive_keys(SECRET, "\x00")
    signed_b = Signer.for_agent(SECRET, "job-b").sign([b"header", b"body"])
    coord_a = Signer.for_coordinator(SECRET, "job-a")
    with pytest.raises(AuthError, match="bad signature"):
        coord_a.verify(signed_b)
    other = coord_a.other_job("job-b")
    assert other is not None and other.verify(signed_b) == [b"header", b"body"]
    # ... and answers it with job b's coordinator key, which b's agent accepts
    assert Signer.for_agent(SECRET, "job-b").verify(other.sign([b"h", b"refused"])) == [b"h", b"refused"]
    assert Signer.for_agent(SECRET, "job-b").other_job("job-a") is None  # agents hold no secret for that


def test_status_queries_use_a_key_of_no_job() -> None:
    status = Signer.for_status(SECRET)
    signed = status.sign([b"q", b"b"])
    assert Signer.for_status(SECRET).verify(signed) == [b"q", b"b"]
    with pytest.raises(AuthError):
        Signer.for_coordinator(SECRET, "").verify(signed)
