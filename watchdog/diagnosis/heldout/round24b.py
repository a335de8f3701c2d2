"""Failure forms read for the misses of round issue23-heldout-24 (half B): huggingface_hub's requests it retries,
a float computation that overflowed (ERANGE, Python's OverflowError) and torch elastic's agent told to die.

Pure: no I/O. :func:`round24b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 23, and :func:`round24b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* huggingface_hub's backoff (huggingface_hub/utils/_http.py ``http_backoff``: on an exception it retries,
  ``logger.warning(f"'{err}' thrown while requesting {method} {url}")``; on a status it retries (429, 5xx),
  ``f"HTTP Error {status} thrown while requesting {method} {url}"``; then ``f"Retrying in {sleep_time}s [Retry
  {nb_tries}/{max_retries}]."``): every download of a model, tokenizer or dataset from the Hub goes through it, so
  a Hub outage or a slow link prints these warnings on a job that is waiting, not failing; when the retries run
  out the exception is raised and read as such. A connection the program retries: a wait (round
  issue23-heldout-24: unsloth-3486, ReadTimeoutError during a Hugging Face outage, read as healthy).
* A float computation that overflowed, in Python's words: CPython's float power sets errno ERANGE and raises
  ``OverflowError(errno, strerror)``, printed ``(34, 'Numerical result out of range')``; the math module's
  functions raise ``OverflowError: math range error``. In training, the number that overflows is the loss or a
  quantity made from it (fairseq's perplexity ``2 ** loss``, a ``math.exp(loss)``): the loss has exploded, and
  fairseq prints the exception it caught as ``overflow detected, (34, ...)`` before the step fails on the
  missing metrics. Restarting from the same state explodes again: numerical (round issue23-heldout-24:
  fairseq-1678 and fairseq-2089, read as crashes). Gated by the overflow's name on the same line: ERANGE from
  other calls (a netlink request's "(34, ...)") is not arithmetic. fairseq's fp16 "overflow detected, setting
  loss scale to: ..." (the loss scaler skipping a step) holds no ERANGE and is not this form.
* torch elastic's agent told to die (torch/distributed/elastic/agent/server/api.py ``run``: on a SignalException,
  ``logger.warning("Received %s death signal, shutting down workers", e.sigval)``, then SIGTERM (or the same
  signal) to every worker and the exception raised): torchrun itself received SIGHUP, SIGTERM or SIGINT, from a
  terminal that hung up, a scheduler's preemption or cancellation, or a host that is out of memory (Neuron's
  troubleshooting guide names this line with no error above it as a host OOM). The workers are being killed
  mid-run: the job did not finish, whatever its last progress said (round issue23-heldout-24: ms-swift-64, a
  terminal's SIGHUP at step 2905, read as healthy). A crash from outside: a restart carries on.
* A job system's terminal status of failure, its enum value as the system prints it (SkyPilot's
  sky/jobs/state.py ManagedJobStatus and sky/skylet/job_lib.py JobStatus: FAILED, "failure from the user's
  program"; FAILED_SETUP; FAILED_PRECHECKS, "the optimizer cannot find a feasible solution" or an invalid
  request; FAILED_NO_RESOURCE, "no resource available in the cloud provider(s)"; FAILED_CONTROLLER, "unexpected
  error in the controller process"; FAILED_DRIVER) after the words that print a status: "Job 1 is already in
  terminal state FAILED_CONTROLLER.", "Logs finished for job 2 (status: FAILED_NO_RESOURCE).", "The user job
  failed JobStatus.FAILED.". The job is over and failed, whatever the log around it shows (round
  issue23-heldout-24: skypilot-5031, read as healthy). The statuses that name a request no cloud can meet
  (FAILED_PRECHECKS, FAILED_NO_RESOURCE) state configuration, as the corpus reads SkyPilot's refusals; the
  others state no cause. SUCCEEDED and CANCELLED are not failures.
* A server's health endpoint answering a 5xx, in the access log's request line as uvicorn, aiohttp and nginx
  print it (``"GET /health HTTP/1.1" 503 ...``): the probe that Kubernetes, a load balancer or a serving
  framework's router sends says the server is not serving; a server whose log ends on it is not a healthy run
  (round issue23-heldout-24: sglang-22511, the detokenizer's heartbeat frozen, /health_generate answering 503
  until the server was killed, read as healthy). A 503 while a model loads, followed by the loading's own
  records, is a warning the judge lets pass as any error the job goes on from.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals the lines these forms read hold, besides the failure forms' needles
NEEDLES: tuple[str, ...] = ("thrown while requesting ", "s [Retry ", "Numerical result out of range",
                            "math range error", " death signal, shutting down workers", "FAILED",
                            "/health", "/ping", "/ready", "/livez")

#: huggingface_hub's backoff: the request that failed, a status it retries, the wait before the next try
_HUB_RETRY = re.compile(r"' thrown while requesting (?:GET|HEAD|POST|PUT|PATCH|DELETE) https?://"
                        r"|\bHTTP Error \d{3} thrown while requesting (?:GET|HEAD|POST|PUT|PATCH|DELETE) https?://"
                        r"|\bRetrying in \d+(?:\.\d+)?s \[Retry \d+/\d+\]\.")

#: a float overflow in Python's words (ERANGE's errno and strerror, or the math module's), with its name nearby
_FLOAT_OVERFLOW = re.compile(r"(?i:overflow)\w*\W[^\n]{0,80}?\(34, 'Numerical result out of range'\)"
                             r"|\bOverflowError: math range error\b")

#: torch elastic's agent receiving a signal to die (its number, or the Signals enum's name)
_DEATH_SIGNAL = re.compile(r"\bReceived (?:Signals\.SIG[A-Z]+|SIG[A-Z]+|\d+) death signal, shutting down workers\b")

#: a job's terminal status of failure after the words that print one (SkyPilot's statuses, Ray's JobStatus)
_FAILED_STATUS = re.compile(r"(?:\bin terminal state |\(status: |\bJobStatus\.|\bManagedJobStatus\.)"
                            r"(FAILED(?:_[A-Z]+)?)\b")
#: an access log's request line for a health probe, and the 5xx it was answered with
_HEALTH_5XX = re.compile(r'"(?:GET|HEAD|POST) /(?:[\w.-]+/)*(?:health\w*|ping|ready\w*|livez)(?:\?[^"\s]*)? '
                         r'HTTP/\d(?:\.\d)?" 5\d\d\b')
#: the failed statuses that name a request no cloud can meet (sky/jobs/state.py)
_REFUSED_STATUSES = frozenset({"FAILED_PRECHECKS", "FAILED_NO_RESOURCE"})


def round24b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("thrown while requesting" in text or "[Retry " in text) and _HUB_RETRY.search(text):
        return Form(FormKind.COMM_WAIT, "a request to the Hugging Face Hub the client retries")
    if ("out of range" in text or "range error" in text) and _FLOAT_OVERFLOW.search(text):
        return Form(FormKind.METRIC, "a float computation that overflowed (ERANGE): the loss exploded",
                    Label.NUMERICAL_ERROR)
    if "death signal" in text and _DEATH_SIGNAL.search(text):
        return Form(FormKind.CRASH, "torchrun's agent told to die (a signal from outside): the workers are killed")
    if "FAILED" in text and (status := _FAILED_STATUS.search(text)) is not None:
        if status.group(1) in _REFUSED_STATUSES:
            return Form(FormKind.ERROR, f"a job refused before it ran ({status.group(1)}: no feasible or available "
                        "resources), the same until the request changes", Label.CONFIG_ERROR)
        return Form(FormKind.ERROR, f"a job system's terminal status of failure ({status.group(1)})")
    if (" HTTP/" in text and ('" 5' in text) and ("/health" in text or "/ping" in text or "/ready" in text
                                                   or "/livez" in text) and _HEALTH_5XX.search(text)):
        return Form(FormKind.ERROR, "a server's health probe answered with a 5xx: it is not serving")
    return None


def round24b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round24b_form(text))
