# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-39 (hyperparameter search and sweeps wrapping
training), each as a rule of its family, with real lines and the near misses the rule must leave alone: the summary
TensorFlow's BFC allocator dumps when an allocation failed, Py4J's refusal of a call the JVM side does not have, and
SQLite's lock that a study's concurrent writers meet. Each line is from the corpus (named by its excerpt) or from a
public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round39b import round39b_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

CHUNKS = "2020-11-04 16:53:37.657245: I tensorflow/core/common_runtime/bfc_allocator.cc:1034] 44 Chunks of size 39321600 totalling 1.61GiB"
PY4J_TRUNCATED = "py4j.protocol.Py4JError: An error occurred while calling o35.maxNumConcu"
OPTUNA_LOCKED = "[W 2019-06-08 15:21:37,332] Setting status of trial#10 as TrialState.FAIL because of the following error: OperationalError('(sqlite3.OperationalError) database is locked',)"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the BFC allocator's summary of a failed allocation
    (CHUNKS, ERROR, Label.OOM, "corpus (transformers-8305-tf-bfc-allocator-dump-training-in-loop)"),
    ("2020-11-04 16:53:37.657211: I tensorflow/core/common_runtime/bfc_allocator.cc:1034] 31 Chunks of size 18266112 totalling 540.02MiB",
     ERROR, Label.OOM, "corpus (transformers-8305-tf-bfc-allocator-dump-training-in-loop)"),
    ("2024-02-01 10:00:01.000001: I external/local_tsl/tsl/framework/bfc_allocator.cc:1114] 3 Chunks of size 268435456 totalling 768.00MiB",
     ERROR, Label.OOM, "xla/tsl/framework/bfc_allocator.cc DumpMemoryLog, the same words under JAX/XLA's path"),
    # Py4J's refusal of the call itself
    (PY4J_TRUNCATED, ERROR, Label.CONFIG_ERROR, "corpus (hyperopt-594-sparktrials-spark-2-3-py4jerror)"),
    ("Py4JError: An error occurred while calling o450.predict. Trace:", ERROR, Label.CONFIG_ERROR,
     "py4j/protocol.py get_return_value's Py4JError (a Spark MLlib model called with an RDD its version does not take)"),
    ("py4j.Py4JException: Method predict([class org.apache.spark.api.java.JavaRDD]) does not exist", ERROR,
     Label.CONFIG_ERROR, "py4j ReflectionEngine.getMethod's refusal, the Trace Py4JError carries"),
    ("py4j.protocol.Py4JError: org.apache.spark.api.python.PythonUtils.getEncryptionEnabled does not exist in the JVM",
     ERROR, Label.CONFIG_ERROR, "py4j java_gateway's lookup, as pyspark users report it (a pip pyspark against another Spark; fixed by pinning pyspark)"),
    ("Py4JError: ofFloat does not exist in the JVM", ERROR, Label.CONFIG_ERROR,
     "Analytics Zoo's troubleshooting page (a Spark 2.x run of a library compiled for Spark 1.6)"),
    # SQLite's lock
    (OPTUNA_LOCKED, ERROR, Label.CONFIG_ERROR, "corpus (rltrader-20-optuna-sqlite-database-is-locked-parallel-trials)"),
    ("sqlite3.OperationalError: database is locked", ERROR, Label.CONFIG_ERROR,
     "corpus (rltrader-20-optuna-sqlite-database-is-locked-parallel-trials), CPython's sqlite3"),
    ("sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database is locked", ERROR, Label.CONFIG_ERROR,
     "SQLAlchemy's wrapper of sqlite3's error (optuna#820, 32 `optuna study optimize` processes on one SQLite file)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "Splitting data into chunks of size 1600...",  # a program's own chunking, no count before the words
    "Reading data in 12 chunks of size 4.00 MiB",  # likewise, lower case and no "totalling"
    "                    'An error occurred while calling {0}{1}{2}. Trace:\\n{3}\\n'.",  # py4j's template in a traceback
    "    raise Py4JError(",  # the traceback's source line
    "        raise Py4JError(\"{0}.{1} does not exist in the JVM\".format(self._fqn, name))",  # py4j's source line
    "# the database is locked while the migration runs",  # prose
]

#: lines other readers read (a JVM failure whose Java throwable states the cause, Py4J's lost gateway) that are not
#: this round's forms
NOT_THIS_ROUND = [
    "Py4JJavaError: An error occurred while calling o57649.fit.",
    "py4j.protocol.Py4JNetworkError: Answer from Java side is empty",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_other_readers_lines_are_not_this_rounds_forms() -> None:
    for line in NOT_THIS_ROUND:
        assert round39b_form(line) is None, line


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 64


def test_a_log_of_the_allocator_summary_alone_is_oom(tmp_path: Path) -> None:
    """The chunk summary pasted without the allocator's warning or the raised status is still the device's memory
    run out: oom, not a healthy run of informational records."""
    log = tmp_path / "tf.log"
    log.write_text("2020-11-04 16:53:37.657202: I tensorflow/core/common_runtime/bfc_allocator.cc:1034] 1 Chunks of size 18265088 totalling 17.42MiB\n"
                   + CHUNKS + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OOM


def test_optuna_trial_failed_on_a_locked_study_is_configuration(tmp_path: Path) -> None:
    """Optuna's record of a trial failed on SQLite's lock, then its traceback: configuration (stop), not a crash to
    restart."""
    log = tmp_path / "optuna.log"
    log.write_text(OPTUNA_LOCKED + "\nTraceback (most recent call last):\n"
                   "  File \"site-packages/sqlalchemy/engine/default.py\", line 550, in do_execute\n"
                   "    cursor.execute(statement, parameters)\nsqlite3.OperationalError: database is locked\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
