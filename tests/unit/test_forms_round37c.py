# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-37 (federated, privacy-preserving and on-device
training), each as a rule of its family, with real lines and the near misses the rule must leave alone: gRPC Python's
details of a call whose stream the transport dropped, a metric's transition to a value that is not finite, and
getopt's refusal of an option. Each line is from the corpus (named by its excerpt) or from a public thread or
repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label, Verdict
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
METRIC = FormKind.METRIC

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # gRPC Python's repr of a finished call: its details line with gRPC core's message of a dropped stream
    ('\tdetails = "Stream removed"', ERROR, Label.COMM_ERROR,
     "corpus (flower-699-client-grpc-stream-removed-after-ten-epochs): a streaming call's repr, status UNKNOWN"),
    ('    details = "Stream removed"', ERROR, Label.COMM_ERROR,
     "a public repository's notes of an _InactiveRpcError pasted with its tab made spaces (status UNKNOWN)"),
    ('\tdetails = "Received RST_STREAM with error code 8"', ERROR, Label.COMM_ERROR,
     "a public repository's traceback of an _InactiveRpcError (status CANCELLED, error received from peer)"),
    ('\tdetails = "Received RST_STREAM with error code 2"', ERROR, Label.COMM_ERROR,
     "flower#766 (a client shut down when gRPC was not stable, status INTERNAL)"),
    # a loss printed as its transition, the new value after the arrow not finite
    ("Epoch: 52 loss: 8.3066 -> nan accuracy: 48.70% -> 30.98%                        ", METRIC,
     Label.NUMERICAL_ERROR, "corpus (fl-bench-133-feddyn-loss-nan-each-epoch): the value before the arrow finite"),
    ("client [14] (valset)    loss: nan -> nan    accuracy: 0.00% -> 0.00%", METRIC, Label.NUMERICAL_ERROR,
     "FL-bench#153 (FedAvg on CIFAR-10, the clients' losses NaN before and after local training)"),
    # getopt's refusal of an option, the program's name first
    ("egg_pair_bootstrap.sh: unrecognized option '--python-venv'", ERROR, Label.CONFIG_ERROR,
     "corpus (fate-4159-egg-pair-unrecognized-option-runtask-unavailable): eggroll's bootstrap under FATE"),
    ("cat: unrecognized option '--INCORRECT'", ERROR, Label.CONFIG_ERROR,
     "a public tutorial page on stderr (GNU cat given an option it does not have)"),
    ("marathon v0.6.5: unrecognized option '--version'", ERROR, Label.CONFIG_ERROR,
     "a public Homebrew formula's test (the program's name with its version)"),
    ("mGBA: unrecognized option '--script'", ERROR, Label.CONFIG_ERROR,
     "a public repository's notes of a build without its scripting option"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # the repr's other details: a server not reachable yet (round 35 part D's wait), the server's handler raising
    '\tdetails = "failed to connect to all addresses"',
    '                            details = "Exception calling application: Aggregator does not have an aggregated tensor for',  # corpus (openfl-356-aggregator-missing-aggregated-tensor-grpc-unknown)
    # a program's source holding the repr as a string constant (a public repository's error texts)
    "    stringInternetDisconnectedSpeechToText = 'google.api_core.exceptions.Unknown: None Stream removed'",
    # a transition to a finite value, and Keras's prose of a metric that improved from inf
    "client [84] (testset)   loss: 1.5304 -> 0.1138  accuracy: 62.15% -> 96.61%     ",  # FL-bench#141
    "Epoch 00001: val_loss improved from inf to 0.69314, saving model to best.h5",  # Keras ModelCheckpoint's format
    "                nan -> 0.5 (the loss recovered)",  # no loss named before the arrow
    # a record whose level word heads it, and the usage hint getopt's refusal is followed by
    "WARNING: unrecognized option '--foo' in the configuration file, ignoring it",
    "Try 'cat --help' for more information.",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def _diagnose(tmp_path: Path, lines: list[str]) -> Verdict:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose_paths([str(log)]).verdict


def test_a_transition_to_nan_on_a_progress_line_is_the_runs_loss(tmp_path: Path) -> None:
    """The progress rule reads the finite value before the arrow; the value after it decides (FL-bench#133's rows)."""
    verdict = _diagnose(tmp_path, [
        "Epoch: 52 loss: 8.3066 -> nan accuracy: 48.70% -> 30.98%",
        "Epoch: 53 loss: 9.0291 -> nan accuracy: 48.45% -> 28.61%",
    ])
    assert verdict.label is Label.NUMERICAL_ERROR and verdict.action is Action.STOP


def test_transitions_to_finite_losses_are_progress(tmp_path: Path) -> None:
    verdict = _diagnose(tmp_path, [  # FL-bench#141's rows
        "client [84] (testset)   loss: 1.5304 -> 0.1138  accuracy: 62.15% -> 96.61%",
        "client [57] (testset)   loss: 1.2550 -> 0.5831  accuracy: 65.85% -> 92.68%",
    ])
    assert verdict.label is Label.HEALTHY


def test_a_refused_option_is_not_cleared_by_the_retries_after_it(tmp_path: Path) -> None:
    """A stated configuration error is not the attempt a retry repeats: the peers that never came up are retried in
    vain (FATE#4159: eggroll's bootstrap refused its option, then every call to its node manager was UNAVAILABLE)."""
    verdict = _diagnose(tmp_path, [
        "egg_pair_bootstrap.sh: unrecognized option '--python-venv'",
        "<_Rendezvous of RPC that terminated with:",
        "        status = StatusCode.UNAVAILABLE",
        '        details = "failed to connect to all addresses"',
    ])
    assert verdict.label is Label.CONFIG_ERROR and verdict.action is Action.STOP


def test_a_server_not_reachable_yet_is_still_a_wait(tmp_path: Path) -> None:
    """Without a configuration error before it, the same repr is a server not up yet (round 35 part D)."""
    verdict = _diagnose(tmp_path, [
        "<_Rendezvous of RPC that terminated with:",
        "        status = StatusCode.UNAVAILABLE",
        '        details = "failed to connect to all addresses"',
    ])
    assert verdict.label is Label.COMM_TIMEOUT_TRANSIENT and verdict.action is Action.WAIT


def test_a_dropped_stream_under_a_streaming_call_is_the_transport(tmp_path: Path) -> None:
    verdict = _diagnose(tmp_path, [  # flower#699's client, its receive loop's last frames
        "    raise self",
        "grpc._channel._MultiThreadedRendezvous: <_MultiThreadedRendezvous of RPC that terminated with:",
        "\tstatus = StatusCode.UNKNOWN",
        '\tdetails = "Stream removed"',
        '\tdebug_error_string = "{"created":"@1618418527.047689601","description":"Error received from peer ipv6:[::]:8080","grpc_status":2}"',
        ">",
    ])
    assert verdict.label is Label.COMM_ERROR and verdict.action is Action.RESTART
