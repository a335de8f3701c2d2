"""Artifact stores for incident bundles: a local directory or an S3 prefix, behind one contract.

    storage = open_storage("s3://bucket/prefix", os.environ)       # or a directory / file:// URI
    tree = upload_tree(storage, bundle_dir, incident_key(job_id, n, node), deadline_s=60)
    if tree.failed:                                                  # report in events, retry at exit
        later = retry_pending(storage, tree.failed, deadline_s=120)

Contract (:class:`Storage`): ``put(local_path, key, deadline=...) -> UploadResult`` never raises for
a failed upload and never runs past ``deadline`` (a ``time.monotonic()`` value) by more than one
request timeout; the result says whether the object is verified in the store, was skipped because
the same bytes were already there (resumable), or failed with a clear message (bucket, endpoint and
the next step; never a secret). Local files are never deleted here: the caller may remove them once
``UploadResult.verified`` is true.

S3 details: keys are ``<prefix>/<key>``; the file's sha256 travels in the object metadata
(``x-amz-meta-sha256``) and is compared with ``head_object`` after the upload (size + checksum);
large files go multipart (boto3 ``TransferConfig``). Credentials come from the standard AWS chain
(env, profile, instance role); ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` select another
S3-compatible endpoint. botocore's own retries are switched off so that the one bounded retry loop
here (tenacity, explicit ``stop``/``wait``, pure :func:`is_retryable`, a log line before each wait)
is the only one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from neuron_watch.errors import StorageError, UsageError
from neuron_watch.redact import mask_urls

log = logging.getLogger("neuron_watch.outputs.storage")

#: Files at or above this size are uploaded in parts (S3 needs >= 5 MiB parts).
MULTIPART_THRESHOLD = 8 * 1024 * 1024
MULTIPART_CHUNKSIZE = 8 * 1024 * 1024
#: Attempts per file (first try included) before the file is reported as failed.
MAX_ATTEMPTS = 6
#: Per-request socket timeouts: a silent server must not hold a put past its deadline for long.
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 20.0

_RETRYABLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "RequestTimeout",
        "RequestTimeoutException",
        "InternalError",
        "ServiceUnavailable",
        "PriorConnectionTimeout",
        "ChecksumMismatch",  # ours: head_object disagreed right after a put; the next put repairs it
    }
)
_FATAL_CODES = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "NoSuchBucket",
        "InvalidBucketName",
        "ExpiredToken",
        "InvalidToken",
        "AuthorizationHeaderMalformed",
        "AccountProblem",
        "PermanentRedirect",
        "InvalidRequest",
    }
)
# botocore / urllib3 / builtin exception class names that mean "the network or server hiccupped".
_RETRYABLE_CLASS_NAMES = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ResponseStreamingError",
        "IncompleteReadError",
        "ProxyConnectionError",
        "ConnectionError",
        "TimeoutError",
        "ConnectionResetError",
        "ConnectionRefusedError",
        "BrokenPipeError",
    }
)
_FATAL_CLASS_NAMES = frozenset({"NoCredentialsError", "PartialCredentialsError", "ParamValidationError"})


def _error_code_and_status(exc: BaseException) -> tuple[str, int]:
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return "", 0
    error = response.get("Error") or {}
    meta = response.get("ResponseMetadata") or {}
    code = str(error.get("Code", "")) if isinstance(error, Mapping) else ""
    status = meta.get("HTTPStatusCode", 0) if isinstance(meta, Mapping) else 0
    try:
        return code, int(status or (code if code.isdigit() else 0))
    except (TypeError, ValueError):
        return code, 0


def _chain(exc: BaseException) -> Iterable[BaseException]:
    """``exc`` and what it wraps (boto3 wraps a ClientError in S3UploadFailedError without ``from``)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def is_retryable(exc: BaseException) -> bool:
    """Whether retrying could help. Pure: looks only at the exception (and what it wraps).

    Retryable: throttling (SlowDown, 429, 503), server errors (5xx), request timeouts, connection
    errors (refused, reset, DNS, read/connect timeout). Not retryable: wrong or expired
    credentials, access denied, missing bucket, bad parameters, anything unknown.
    """
    for e in _chain(exc):
        names = {c.__name__ for c in type(e).__mro__}
        if names & _FATAL_CLASS_NAMES:
            return False
        code, status = _error_code_and_status(e)
        if (code in _FATAL_CODES or status in (400, 401, 403, 404)) and code not in _RETRYABLE_CODES:
            return False
        if code in _RETRYABLE_CODES or status == 429 or 500 <= status <= 599:
            return True
        if names & _RETRYABLE_CLASS_NAMES:
            return True
    return False


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class UploadResult:
    """What happened to one file. ``verified`` means the store holds these exact bytes."""

    local_path: str
    key: str
    uri: str
    size: int
    sha256: str
    verified: bool
    skipped: bool = False  # already in the store with the same checksum (resume)
    attempts: int = 0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "local_path": self.local_path,
            "key": self.key,
            "uri": self.uri,
            "size": self.size,
            "sha256": self.sha256,
            "verified": self.verified,
            "skipped": self.skipped,
            "attempts": self.attempts,
            "error": self.error,
        }


class Storage(Protocol):
    """Where incident bundles go. Implementations: :class:`LocalStorage`, :class:`S3Storage`."""

    #: Human-readable location of the store root (no credentials), e.g. ``s3://bucket/prefix``.
    uri: str

    def put(self, local_path: Path, key: str, deadline: float | None = None) -> UploadResult:
        """Store ``local_path`` under ``key``; verified, skipped or failed; never raises for I/O."""
        ...

    def list(self, prefix: str = "") -> list[str]:
        """Keys (relative to the store root) under ``prefix``, sorted. Raises StorageError."""
        ...

    def exists_with_checksum(self, key: str, sha256: str, size: int) -> bool:
        """Whether ``key`` holds exactly ``size`` bytes with this sha256. Raises StorageError."""
        ...


def _clean_key(key: str) -> str:
    parts = [p for p in key.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts) or not parts:
        raise UsageError(f"artifact key {key!r} is empty or leaves the store", "use a relative key without '..'")
    return "/".join(parts)


class LocalStorage:
    """A directory (shared file system or local disk). Writes are atomic (temp file + rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.uri = str(root)

    def _path(self, key: str) -> Path:
        return self.root / _clean_key(key)

    def put(self, local_path: Path, key: str, deadline: float | None = None) -> UploadResult:
        dest = self._path(key)
        try:
            size = local_path.stat().st_size
            digest = sha256_file(local_path)
        except OSError as exc:
            return UploadResult(str(local_path), key, str(dest), 0, "", False, error=f"cannot read {local_path}: {exc}")
        if self.exists_with_checksum(key, digest, size):
            return UploadResult(str(local_path), key, str(dest), size, digest, True, skipped=True)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.part-{os.getpid()}")
            shutil.copyfile(local_path, tmp)
            os.replace(tmp, dest)
        except OSError as exc:
            return UploadResult(
                str(local_path), key, str(dest), size, digest, False, attempts=1,
                error=f"cannot write {dest}: {exc.strerror or exc}; next step: check the --artifacts directory "
                "exists and is writable",
            )
        ok = self.exists_with_checksum(key, digest, size)
        return UploadResult(
            str(local_path), key, str(dest), size, digest, ok, attempts=1,
            error="" if ok else f"{dest} does not match {local_path} after the copy",
        )

    def list(self, prefix: str = "") -> list[str]:
        base = self.root
        if not base.is_dir():
            return []
        out = []
        for p in base.rglob("*"):
            if p.is_file() and not p.name.startswith("."):
                rel = p.relative_to(base).as_posix()
                if rel.startswith(prefix):
                    out.append(rel)
        return sorted(out)

    def exists_with_checksum(self, key: str, sha256: str, size: int) -> bool:
        dest = self._path(key)
        try:
            return dest.stat().st_size == size and sha256_file(dest) == sha256
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            raise StorageError(f"cannot read {dest}: {exc}", "check the --artifacts directory") from exc


def _client_config_kwargs() -> dict[str, Any]:
    kw: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "read_timeout": READ_TIMEOUT_S,
        # One retry loop only: ours (bounded, logged). total_max_attempts counts the first try.
        "retries": {"total_max_attempts": 1, "mode": "standard"},
        "signature_version": "s3v4",
    }
    return kw


class S3Storage:
    """An S3 (or S3-compatible) prefix. ``put`` uploads, verifies with head_object, retries boundedly."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        client: Any = None,
        max_attempts: int = MAX_ATTEMPTS,
        wait_max_s: float = 4.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.max_attempts = max_attempts
        self.wait_max_s = wait_max_s
        self._clock = clock
        self._sleep = sleep
        self._credential_source = "the AWS credential chain"
        if client is None:
            import boto3
            from botocore.config import Config

            session = boto3.session.Session(region_name=region)
            creds = session.get_credentials()
            if creds is not None and getattr(creds, "method", None):
                self._credential_source = f"AWS credentials from {creds.method}"
            kw = _client_config_kwargs()
            if endpoint_url:
                kw["s3"] = {"addressing_style": "path"}  # S3-compatible servers rarely do virtual hosts
            client = session.client(
                "s3", endpoint_url=endpoint_url, region_name=region or session.region_name or "us-east-1",
                config=Config(**kw),
            )
        self._s3 = client
        self._transfer: Any = None
        self._said_failures: set[str] = set()  # said once each, 100 at most: a missing bucket fails every file alike

    # -- helpers -----------------------------------------------------------------------------
    def _full_key(self, key: str) -> str:
        k = _clean_key(key)
        return f"{self.prefix}/{k}" if self.prefix else k

    def _where(self) -> str:
        return f"{self.uri} (endpoint {mask_urls(self.endpoint_url) if self.endpoint_url else 'AWS default'})"

    def explain(self, exc: BaseException) -> str:
        """A clear, secret-free message for ``exc``: what failed, where, and the next step."""
        for e in _chain(exc):
            code, status = _error_code_and_status(e)
            names = {c.__name__ for c in type(e).__mro__}
            if code == "NoSuchBucket":
                return (
                    f"bucket {self.bucket!r} does not exist at {self._where()}; "
                    "next step: create it or fix --artifacts"
                )
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"):
                return (
                    f"{self._credential_source} were refused by {self._where()} ({code}); next step: check "
                    "AWS_PROFILE / AWS_ACCESS_KEY_ID or refresh the session token for this endpoint"
                )
            if code in ("AccessDenied", "AllAccessDisabled") or status == 403:
                # A HEAD answer has no body, so a 403 there cannot tell a wrong key from a missing grant.
                return (
                    f"{self._where()} refused {self._credential_source} ({code or status}: wrong key/secret "
                    "or no permission); next step: check AWS_PROFILE / AWS_ACCESS_KEY_ID for this endpoint and "
                    "grant s3:PutObject, s3:GetObject and s3:ListBucket on the prefix"
                )
            if names & {"NoCredentialsError", "PartialCredentialsError"}:
                return (
                    f"no AWS credentials found for {self._where()}; next step: set AWS_PROFILE or "
                    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or attach an instance role"
                )
            if names & {"EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ReadTimeoutError"}:
                return (
                    f"cannot reach {self._where()} ({type(e).__name__}); next step: check the network, the "
                    "endpoint (AWS_ENDPOINT_URL) and the region"
                )
            if code in _RETRYABLE_CODES or status == 429 or 500 <= status <= 599:
                return f"{self._where()} answered {code or status} (throttled or failing)"
        return f"upload to {self._where()} failed: {type(exc).__name__}: {mask_urls(str(exc))}"

    def _head(self, full_key: str) -> dict[str, Any] | None:
        try:
            head: dict[str, Any] = self._s3.head_object(Bucket=self.bucket, Key=full_key)
            return head
        except Exception as exc:
            code, status = _error_code_and_status(exc)
            if status == 404 and code in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    @staticmethod
    def _meta_sha(head: Mapping[str, Any]) -> str:
        meta = head.get("Metadata") or {}
        # Servers differ in the case they return metadata names in (rclone: "Sha256").
        return next((str(v) for k, v in meta.items() if str(k).lower() == "sha256"), "")

    def _matches(self, full_key: str, sha256: str, size: int) -> bool:
        head = self._head(full_key)
        return head is not None and int(head.get("ContentLength", -1)) == size and self._meta_sha(head) == sha256

    def _upload_once(self, local_path: Path, full_key: str, sha256: str, size: int) -> None:
        from boto3.s3.transfer import TransferConfig

        if self._transfer is None:
            self._transfer = TransferConfig(
                multipart_threshold=MULTIPART_THRESHOLD, multipart_chunksize=MULTIPART_CHUNKSIZE, max_concurrency=4
            )
        self._s3.upload_file(
            str(local_path), self.bucket, full_key, ExtraArgs={"Metadata": {"sha256": sha256}}, Config=self._transfer
        )
        if not self._matches(full_key, sha256, size):
            raise _ChecksumMismatch(full_key)

    # -- the contract --------------------------------------------------------------------------
    def put(self, local_path: Path, key: str, deadline: float | None = None) -> UploadResult:
        full_key = self._full_key(key)
        uri = f"s3://{self.bucket}/{full_key}"
        try:
            size = local_path.stat().st_size
            digest = sha256_file(local_path)
        except OSError as exc:
            return UploadResult(str(local_path), key, uri, 0, "", False, error=f"cannot read {local_path}: {exc}")
        clock = self._clock
        attempts = 0

        def stop(state: RetryCallState) -> bool:
            return stop_after_attempt(self.max_attempts)(state) or (deadline is not None and clock() >= deadline)

        base_wait = wait_exponential(multiplier=0.25, min=0.25, max=self.wait_max_s)

        def wait(state: RetryCallState) -> float:
            w = float(base_wait(state))
            return max(0.0, min(w, deadline - clock())) if deadline is not None else w

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            delay = state.next_action.sleep if state.next_action else 0.0
            log.warning(
                "upload of %s to %s failed (attempt %d/%d: %s); retrying in %.2fs",
                local_path.name, uri, state.attempt_number, self.max_attempts,
                self.explain(exc) if exc else "?", delay,
            )

        def attempt() -> bool:
            nonlocal attempts
            attempts += 1
            if self._matches(full_key, digest, size):
                return attempts == 1  # True: skipped (already there before we uploaded anything)
            self._upload_once(local_path, full_key, digest, size)
            return False

        retrying = Retrying(
            stop=stop, wait=wait, retry=retry_if_exception(is_retryable), before_sleep=before_sleep,
            sleep=self._sleep, reraise=True,
        )
        try:
            skipped = retrying(attempt)
        except Exception as exc:
            msg = self.explain(exc)
            if is_retryable(exc):
                msg += (
                    f"; gave up after {attempts} attempt{'s' if attempts != 1 else ''}; the local copy is kept "
                    "for a later retry"
                )
            if not (said := msg in self._said_failures) and len(self._said_failures) < 100:
                self._said_failures.add(msg)  # the callers count the files that fail
            log.log(logging.DEBUG if said else logging.ERROR, "upload of %s failed: %s%s", local_path, msg,
                    "" if said else " (other files failing so are counted, not said again)")
            return UploadResult(str(local_path), key, uri, size, digest, False, attempts=attempts, error=msg)
        return UploadResult(str(local_path), key, uri, size, digest, True, skipped=skipped, attempts=attempts)

    def list(self, prefix: str = "") -> list[str]:
        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        keys: list[str] = []
        try:
            paginator = self._s3.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
                for obj in page.get("Contents", []) or []:
                    k = str(obj["Key"])
                    keys.append(k[len(self.prefix) + 1 :] if self.prefix else k)
        except Exception as exc:
            raise StorageError(self.explain(exc)) from exc
        return sorted(keys)

    def exists_with_checksum(self, key: str, sha256: str, size: int) -> bool:
        try:
            return self._matches(self._full_key(key), sha256, size)
        except Exception as exc:
            raise StorageError(self.explain(exc)) from exc


class _ChecksumMismatch(Exception):
    """head_object after a put did not show the size/sha256 we sent (retryable: put again)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key}: size or sha256 in the store differs from the local file after upload")
        self.response = {"Error": {"Code": "ChecksumMismatch"}, "ResponseMetadata": {}}


def open_storage(uri: str, env: Mapping[str, str] | None = None, **kwargs: Any) -> Storage:
    """The store for an ``--artifacts`` value: ``s3://bucket[/prefix]``, ``file:///dir`` or a directory.

    Raises:
        UsageError: the URI is malformed (e.g. ``s3://`` without a bucket) or uses another scheme.
    """
    env = os.environ if env is None else env
    if uri.startswith("s3://"):
        rest = uri[len("s3://") :]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise UsageError(f"--artifacts {uri!r} has no bucket", "use s3://BUCKET/PREFIX")
        endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
        return S3Storage(bucket, prefix, endpoint_url=endpoint, region=env.get("AWS_REGION") or None, **kwargs)
    if uri.startswith("file://"):
        return LocalStorage(Path(uri[len("file://") :]))
    if "://" in uri:
        raise UsageError(f"--artifacts {uri!r}: unsupported scheme", "use a directory or s3://BUCKET/PREFIX")
    return LocalStorage(Path(uri))


def incident_key(job_id: str, incident: int, node: str) -> str:
    """``<job-id>/incident-<n>/<node>``: where one node's bundle of one incident goes."""
    return f"{_clean_key(job_id)}/incident-{incident}/{_clean_key(node)}"


@dataclass
class TreeUploadResult:
    """All files of one directory: ``results`` in upload order; ``failed`` are to retry later."""

    results: list[UploadResult] = field(default_factory=list)

    @property
    def failed(self) -> list[UploadResult]:
        return [r for r in self.results if not r.verified]

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> dict[str, Any]:
        """For the ``incident`` event: counts and the first error (already secret-free)."""
        return {
            "files": len(self.results),
            "uploaded": sum(1 for r in self.results if r.verified and not r.skipped),
            "skipped": sum(1 for r in self.results if r.skipped),
            "failed": len(self.failed),
            "bytes": sum(r.size for r in self.results),
            "error": next((r.error for r in self.failed), ""),
        }


def _files(local_dir: Path) -> list[Path]:
    # manifest.json last: its presence in the store means every file it lists was sent before it.
    files = sorted(p for p in local_dir.rglob("*") if p.is_file() and not p.is_symlink())
    return sorted(files, key=lambda p: p.name == "manifest.json")


def upload_tree(
    storage: Storage,
    local_dir: Path,
    key_prefix: str,
    deadline_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> TreeUploadResult:
    """Upload every file under ``local_dir`` to ``key_prefix/<relative path>`` within ``deadline_s``.

    Files not attempted because the deadline passed are reported as failed ("deadline passed"),
    so nothing is dropped silently; pass ``result.failed`` to :func:`retry_pending` later.
    """
    deadline = clock() + deadline_s
    out = TreeUploadResult()
    for path in _files(local_dir):
        key = f"{key_prefix.rstrip('/')}/{path.relative_to(local_dir).as_posix()}"
        if clock() >= deadline:
            out.results.append(
                UploadResult(str(path), key, "", path.stat().st_size, "", False,
                             error=f"not attempted: the {deadline_s:.0f}s upload bound passed")
            )
            continue
        out.results.append(storage.put(path, key, deadline=deadline))
    return out


def retry_pending(
    storage: Storage,
    pending: Sequence[UploadResult],
    deadline_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> TreeUploadResult:
    """Try the failed uploads again (e.g. at exit) within ``deadline_s``; same result shape.

    Files that vanished locally are reported failed with the reason. Already-verified entries are
    passed through unchanged.
    """
    deadline = clock() + deadline_s
    out = TreeUploadResult()
    for r in pending:
        if r.verified:
            out.results.append(r)
            continue
        path = Path(r.local_path)
        if clock() >= deadline:
            out.results.append(replace(r, error=f"not attempted: the {deadline_s:.0f}s retry bound passed"))
        elif not path.is_file():
            out.results.append(replace(r, error=f"local file {path} is gone; it was never verified in the store"))
        else:
            out.results.append(storage.put(path, r.key, deadline=deadline))
    return out
