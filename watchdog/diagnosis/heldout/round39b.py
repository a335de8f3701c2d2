"""Failure forms read for the misses of round issue23-heldout-39 (part B: hyperparameter search and sweeps wrapping
training): Py4J's refusal of a call the JVM side does not have, and SQLite's lock that a study's parallel workers
meet. (The summary TensorFlow's BFC allocator dumps when an allocation failed, this part's third miss, is read
with the rest of that dump by round 39 part G's module.)

Pure: no I/O. :func:`round39b_form` is asked after the forms of round 38, :func:`round39b_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* Py4J (py4j/protocol.py ``get_return_value``) raises ``Py4JJavaError("An error occurred while calling
  {target}.{name}.\\n", <the Java throwable>)`` when the JVM method threw, and ``Py4JError("An error occurred while
  calling {target}.{name}. Trace:\\n{value}\\n")`` when the gateway refused the call itself: the Java side has no
  such method or signature (``py4j.Py4JException: Method maxNumConcurrentTasks([]) does not exist``,
  ``Method predict([class org.apache.spark.api.java.JavaRDD]) does not exist``) or the two sides do not speak
  alike ("Authentication error: unexpected command"); py4j's ``JavaClass``/``JVMView`` lookup raises ``Py4JError("
  {fqn}.{name} does not exist in the JVM")`` for a class or member the JVM's jars lack (a pip pyspark against another
  Spark: ``org.apache.spark.api.python.PythonUtils.getEncryptionEnabled does not exist in the JVM``; a gateway whose
  JVM has died can answer so too, the rarer case). A Python library calling a Spark its version does not match
  meets it on every try (round issue23-heldout-39: hyperopt#594, SparkTrials on Spark 2.3, read as a crash to
  restart). ``Py4JJavaError`` (a JVM failure, whose cause the Java throwable states) and ``Py4JNetworkError`` (the
  gateway's connection) are not this form.
* SQLite answers a writer that waited past its busy timeout with ``SQLITE_BUSY``, which CPython's sqlite3 raises as
  ``sqlite3.OperationalError: database is locked`` and SQLAlchemy wraps as ``OperationalError: (sqlite3.
  OperationalError) database is locked``. Optuna's RDB storage on a SQLite file shared by many parallel trial
  processes meets it (Optuna's FAQ: SQLite is not for parallel optimisation; use a database server): the study's
  set-up, which a restart with the same workers meets again (round issue23-heldout-39: RLTrader#20, Optuna's
  "Setting status of trial#10 as TrialState.FAIL because of ... database is locked", read as a crash to restart).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round39b_form` reads hold, besides the needles failureforms already
#: searches: Py4J's refusal of a call, SQLite's lock
NEEDLES: tuple[str, ...] = (
    "JError: An error occurred while calling", "JException: Method ", "does not exist in the JVM",
    "database is locked",
)

#: Py4J's refusal of the call itself (not Py4JJavaError's JVM failure), or the gateway's missing method
_PY4J_REFUSED = re.compile(
    r"(?:(?<![\w.])(?:py4j\.protocol\.)?Py4JError: An error occurred while calling [\w$]+\.\w"
    r"|\bpy4j\.Py4JException: Method \w+\(.*\) does not exist"
    r"|(?<![\w.])(?:py4j\.protocol\.)?Py4JError: [\w$.]+ does not exist in the JVM)")

#: SQLite's busy writer as CPython's sqlite3 and SQLAlchemy print it
_SQLITE_LOCKED = re.compile(r"OperationalError\W{1,4}(?:sqlite3\.OperationalError\)\s*)?database is locked")


def round39b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("Py4JError: " in text or "Py4JException: Method" in text) and _PY4J_REFUSED.search(text):
        return Form(FormKind.ERROR, "the JVM side refused the call (a method or protocol its version lacks)",
                    Label.CONFIG_ERROR)
    if "database is locked" in text and _SQLITE_LOCKED.search(text):
        return Form(FormKind.ERROR, "a SQLite database shared by concurrent writers stayed locked",
                    Label.CONFIG_ERROR)
    return None


def round39b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round39b_form(text))
