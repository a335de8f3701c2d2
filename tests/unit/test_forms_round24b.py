# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-24 (huggingface_hub's retried requests, a float
overflow in Python's words, torch elastic's agent told to die, a logging record glued to a progress bar), as rules
of their families, with real lines and the near misses each rule must leave alone. Each line is from the corpus
(named by its excerpt), from a public thread or page (named), or is the format the program's source prints, filled
in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, read_line
from neuron_watch.diagnosis.logtext import logical_lines
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import table_tests

W, M, C, E = FormKind.COMM_WAIT, FormKind.METRIC, FormKind.CRASH, FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # huggingface_hub's backoff: the request it retries, and the wait before the next try
    ("""'(ReadTimeoutError("HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)"), '(Request ID: 7d76f590-4653-46a3-8cec-2473bc91d595)')' thrown while requesting HEAD https://huggingface.co/unsloth/Qwen2.5-7B-Instruct-bnb-4bit/resolve/main/model.safetensors.index.json""", W, None,
     "corpus (unsloth-3486-hf-head-read-timeout-outage)"),
    ("""(APIServer pid=1) [2026-05-21 23:55:54] WARNING _http.py:320: '(MaxRetryError("HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with url: /openai/gpt-oss-120b/resolve/main/config.json (Caused by ConnectTimeoutError(<HTTPSConnection(host='huggingface.co', port=443) at 0xf0ff49d14050>, 'Connection to huggingface.co timed out. (connect timeout=10)'))"), '(Request ID: 092a846c-0a2a-4c7b-9fe6-cc51013bccfa)')' thrown while requesting HEAD https://huggingface.co/openai/gpt-oss-120b/resolve/main/config.json""", W, None,
     "Avarok-Cybersecurity/dgx-vllm#16 (vLLM's API server fetching a model's config)"),
    ("(APIServer pid=1) [2026-05-21 23:55:54] WARNING _http.py:329: Retrying in 8s [Retry 4/5].", W, None,
     "Avarok-Cybersecurity/dgx-vllm#16"),
    ("HTTP Error 503 thrown while requesting GET https://huggingface.co/api/datasets/allenai/c4", W, None,
     'huggingface_hub/utils/_http.py logger.warning(f"HTTP Error {response.status_code} thrown while requesting {method} {url}"), filled in'),
    # a float computation that overflowed, in Python's words, with the overflow named
    ("2020-02-06 08:18:15 | INFO | fairseq.trainer | NOTE: overflow detected, (34, 'Numerical result out of range')", M, Label.NUMERICAL_ERROR,
     "corpus (fairseq-1678-ppl-e128-overflow-keyerror-train-wall)"),
    ("| WARNING: overflow detected, (34, 'Numerical result out of range')", M, Label.NUMERICAL_ERROR,
     "corpus (fairseq-2089-overflow-numerical-result-out-of-range-keyerror), another thread and fairseq version"),
    ("OverflowError: (34, 'Numerical result out of range')", M, Label.NUMERICAL_ERROR,
     "a Fibonacci benchmark's README (werdl), pow(phi, n) overflowing (code corpus)"),
    ("An error occurred during the validation or inside of the context: exc `<class 'OverflowError'>` ((34, 'Numerical result out of range')).", M, Label.NUMERICAL_ERROR,
     "qval's README, its logged error for a pow that overflowed (code corpus)"),
    ("OverflowError: math range error", M, Label.NUMERICAL_ERROR,
     'CPython Modules/mathmodule.c, PyErr_SetString(PyExc_OverflowError, "math range error") (math.exp of a loss too large)'),
    # torch elastic's agent told to die, in torch 1.x's and 2.x's logging
    ("WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers", C, None,
     "corpus (ms-swift-64-tqdm-then-death-signal-1-sighup); the same SIGHUP after an SSH session closed in a blog's nohup training log (code corpus)"),
    ("W0616 00:37:22.830000 4015698 torch/distributed/elastic/agent/server/api.py:719] Received Signals.SIGTERM death signal, shutting down workers", C, None,
     "a benchmark report's Errors section, a run stopped by SIGTERM (code corpus)"),
    ("WARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting down workers", C, None,
     "the AWS Neuron troubleshooting guide, 'HOST OOM issues': this line with no error above it (code corpus)"),
    # a job system's terminal status of failure
    ("Job 1 is already in terminal state FAILED_CONTROLLER. For more details, run: sky jobs logs --controller 1", E, None,
     "corpus (skypilot-5031-failed-controller-assertionerror-failed-driver)"),
    ("I 03-26 01:30:39 controller.py:311] The user job failed JobStatus.FAILED. Please check the logs below.", E, None,
     "skypilot-org/skypilot#5033 (a managed job's controller log)"),
    ("✓ Job finished (status: FAILED).", E, None, "corpus (skypilot-4599-job-failed-return-code-1)"),
    ("I 01-09 21:42:25 spot_utils.py:327] Logs finished for job 2 (status: FAILED_NO_RESOURCE).", E, Label.CONFIG_ERROR,
     "corpus (skypilot-1578-spot-setup-requirements-failed-no-resource)"),
    # a server's health probe answered with a 5xx (uvicorn's reason phrase "Service Unavailable" is read by the status
    # reader as an unavailable peer: restarted either way)
    ('[2026-04-27 03:18:18] INFO:     10.224.0.91:47582 - "GET /health_generate HTTP/1.1" 503 Service Unavailable', E, Label.COMM_ERROR,
     "corpus (sglang-22511-detokenizer-heartbeat-frozen-health-503)"),
    ('INFO:     127.0.0.1:65166 - "GET /health HTTP/1.1" 503 Service Unavailable', E, Label.COMM_ERROR,
     "a FastAPI app's bug report, uvicorn's access log after its Redis health check failed (code corpus)"),
    ('Sep 12 07:41:19 ubuntu-4gb-fsn1-1 python[65177]: 2026-09-12 07:41:19,167 aiohttp.access INFO 127.0.0.1 [12/Sep/2026:07:41:19 +0000] "GET /health HTTP/1.1" 503 249 "-" "Python-urllib/3.14"', E, None,
     "a bot's systemd journal, aiohttp's access log (code corpus)"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    'logger.warning(f"\'{err}\' thrown while requesting {method} {url}")',  # huggingface_hub's source
    'logger.warning(f"Retrying in {sleep_time}s [Retry {nb_tries}/{max_retries}].")',  # the same
    "| WARNING: overflow detected, setting loss scale to: 64.0",  # fairseq's fp16 loss scaler skipping a step
    "2023-08-01 10:00:00 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 64.0",  # the same, newer
    'logger.warning("Received %s death signal, shutting down workers", e.sigval)',  # torch's source
    "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2919043 closing signal SIGHUP",  # the agent's teardown alone
    "Providing the job id shows `Job 3 is already in terminal state SUCCEEDED. Logs will not be shown.`",  # skypilot-org/skypilot#4235
    "✓ Job finished (status: SUCCEEDED).",  # skypilot-org/skypilot#5462
    "    FAILED_NO_RESOURCE = 'FAILED_NO_RESOURCE'",  # sky/jobs/state.py
    '[2026-04-27 03:18:20] INFO:     10.224.0.91:38162 - "GET /health_generate HTTP/1.1" 200 OK',  # a probe answered
    'INFO:     172.27.0.4:60994 - "POST /v1/chat/completions HTTP/1.0" 200 OK',  # corpus (vllm-13939), a request
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_erange_from_a_system_call_is_not_numerical() -> None:
    """ERANGE from a netlink request (no overflow named) is an error of its own, not an exploded loss."""
    form = read_line("pyroute2.netlink.exceptions.NetlinkError: (34, 'Numerical result out of range')")
    assert form is None or form.label is not Label.NUMERICAL_ERROR, form


@pytest.mark.parametrize(("line", "records"), [
    # torch elastic's record where ms-swift's tqdm bar ended (corpus: ms-swift-64-tqdm-then-death-signal-1-sighup)
    (" 12%|█▏        | 2905/25120 [2:12:37<17:37:09,  2.86s/it]WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers",
     [" 12%|█▏        | 2905/25120 [2:12:37<17:37:09,  2.86s/it]",
      "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers"]),
    # a logging record after an evaluation bar at 0 (a forecasting library's run log, code corpus)
    ("Running evaluation:   0%|          | 0/1 [00:00<?, ?it/s]WARNING:root:multiple 5 does not divide base seasonality 1.Falling back to seasonality 1",
     ["Running evaluation:   0%|          | 0/1 [00:00<?, ?it/s]",
      "WARNING:root:multiple 5 does not divide base seasonality 1.Falling back to seasonality 1"]),
    # words that are not a logging record stay on the bar's line (a desktop app's cleaned HF download log, code corpus)
    ("Fetching 3 files:   0%|          | 0/3 [00:00<?, ?it/s]Warning: You are sending unauthenticated requests to the HF Hub.",
     ["Fetching 3 files:   0%|          | 0/3 [00:00<?, ?it/s]Warning: You are sending unauthenticated requests to the HF Hub."]),
])
def test_a_logging_record_glued_to_a_progress_bar_is_its_own_line(line: str, records: list[str]) -> None:
    assert logical_lines(line) == records


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("comm_timeout_transient/unsloth-3486-hf-head-read-timeout-outage.log", Label.COMM_TIMEOUT_TRANSIENT, Action.WAIT),
    ("numerical_error/fairseq-1678-ppl-e128-overflow-keyerror-train-wall.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("numerical_error/fairseq-2089-overflow-numerical-result-out-of-range-keyerror.log", Label.NUMERICAL_ERROR, Action.STOP),
    # the agent killed from outside at step 2905: not a healthy run, and a restart carries on
    ("other_crash/ms-swift-64-tqdm-then-death-signal-1-sighup.log", Label.OTHER_CRASH, Action.RESTART),
    # SkyPilot's terminal status: the controller failed, the job is over (not healthy)
    ("other_crash/skypilot-5031-failed-controller-assertionerror-failed-driver.log", Label.OTHER_CRASH, Action.RESTART),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_a_server_whose_health_probe_fails_to_the_end_is_not_healthy() -> None:
    """SGLang's /health_generate answered 503 until the server was killed: a failure (restarted), not a healthy run
    (its label is a hang, which only the thread's py-spy dumps show)."""
    verdict = diagnose_paths([str(CORPUS / "collective_hang/sglang-22511-detokenizer-heartbeat-frozen-health-503.log")]).verdict
    assert verdict.label is not Label.HEALTHY and verdict.action is Action.RESTART, verdict.reason
