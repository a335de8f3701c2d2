# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""The record heads of common libraries and glibc's aborts (forms_conventions), each as a rule of its family, with
real lines and the near misses the rule must leave alone. Each line is from a public thread or repository (named),
or is the format the library's source prints (the source is named). None of them was in the corpus when the rules
were written: they were found by asking what the logging libraries around a training job print, not by a miss."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.forms_conventions import convention_form
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests

ERROR, CRASH = FormKind.ERROR, FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # logrus's terminal head: the level cut to four letters, the seconds since start or the time
    ("ERRO[0000] error waiting for container: context canceled", ERROR, None,
     "docker run's client (logrus), as pasted under NVIDIA/nvidia-docker#1034 and many threads"),
    ("FATA[0000] Cannot connect to the Docker daemon. Is 'docker -d' running on this host? ", CRASH, None,
     "docker 1.x's client (logrus), a blog's paste of `docker info`"),
    ("FATA[0000] error starting vm: error at 'starting': exit status 1", CRASH, None, "abiosoft/colima docs/FAQ.md"),
    ("ERRO[2024-05-01T12:00:00Z] failed to create shim task: OCI runtime create failed", ERROR, Label.CONFIG_ERROR,
     "logrus text_formatter.go with FullTimestamp (the time in brackets)"),
    # log15's terminal head at its critical level
    ("CRIT[01-02|15:04:05.123] database is corrupt                      path=/data/chain", ERROR, None,
     "log15 format.go TerminalFormat (termTimeFormat \"01-02|15:04:05.000\")"),
    # Jupyter's and Tornado's head
    ("[E 2023-05-11 00:59:57.452 ServerApp] Uncaught exception GET /lab/api/settings?1683766797224 (172.17.0.1)",
     ERROR, None, "a JupyterLab server's log in a gophernotes thread"),
    ("[E 00:38:12.179 NotebookApp] Exception while loading config file /root/.jupyter/jupyter_notebook_config.py",
     ERROR, None, "a Jupyter Notebook server's log (a notes repository on prompt-toolkit versions)"),
    ("[C 240501 12:00:00 app:88] Running as root is not recommended. Use --allow-root to bypass.", ERROR, None,
     "tornado/log.py LogFormatter's head (DEFAULT_DATE_FORMAT %y%m%d) at CRITICAL, the notebook's words"),
    # a level in small letters in brackets: structlog's padded ConsoleRenderer, nginx
    ("2023-11-15 14:55:50 [error    ] Benchmark failed on server_id=17084 with <class '__main__.PerformanceBelowExpected'>: Hardware performance is below expectations server_id=17084.",
     ERROR, None, "a GPU-server benchmark's structlog output in a public repository"),
    ("2026-02-18 09:11:10 [error    ] EventHandler failed            [app.infrastructure.memory_broker] error='NoneType' object has no attribute 'get' handler=handle_raw_html_event",
     ERROR, None, "a uvicorn service's structlog output in a public repository"),
    ("2023/09/15 14:11:47 [emerg] 1#1: bind() to 0.0.0.0:80 failed (98: Address already in use)", ERROR,
     Label.CONFIG_ERROR, "nginx's error log (src/core/ngx_log.c err_levels) as pasted in a Docker thread"),
    ("nginx: [emerg] bind() to 0.0.0.0:80 failed (13: Permission denied)", ERROR, Label.CONFIG_ERROR,
     "nginx's own stderr, as a deployment guide quotes it"),
    ("2024/05/01 12:00:00 [crit] 31#31: *1 connect() to unix:/run/app.sock failed (2: No such file or directory) while connecting to upstream",
     ERROR, None, "nginx's error log at crit (ngx_log.c err_levels), an upstream socket missing"),
    # the Elastic Common Schema's key
    ('{"@timestamp":"2023-03-17T10:05:47.074367100Z","ecs.version":"1.2.0","log.level":"ERROR","message":"[379b4af3-1]  500 Server Error for HTTP GET","process.thread.name":"reactor-http-nio-5"',
     ERROR, None, "a Spring Boot service's ECS log in a public repository's notes"),
    ('  8月 03 17:34:11 k8sctrlplane01 filebeat[1690676]: {"log.level":"error","@timestamp":"2023-08-03T17:34:11.000+0800"',
     ERROR, None, "filebeat's ECS records under journald, in a public repository's notes"),
    # java.util.logging's SEVERE
    ("SEVERE: Servlet.service() for servlet [dispatcherServlet] threw exception", ERROR, None,
     "java.util.logging SimpleFormatter's second line (\"%4$s: %5$s%6$s%n\")"),
    ("01-May-2024 12:00:00.123 SEVERE [main] org.apache.catalina.core.StandardService.startInternal Failed to start connector [Connector[HTTP/1.1-8080]]",
     ERROR, None, "Tomcat's OneLineFormatter (date, level, [thread], logger, message)"),
    # the Docker client's report of the daemon's refusal: configuration unless the daemon or registry timed out
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].', ERROR,
     Label.CONFIG_ERROR, "docker run --gpus without the NVIDIA container toolkit (NVIDIA/nvidia-docker#1034)"),
    ("docker: Error response from daemon: unable to find user jovyan: no matching entries in passwd file.", ERROR,
     Label.CONFIG_ERROR, "a Kubeflow notebook image's README in a public repository"),
    ("Error response from daemon: pull access denied for neuron-train, repository does not exist or may require 'docker login'",
     ERROR, Label.CONFIG_ERROR, "docker pull's refusal (docker/cli, the daemon's message)"),
    ('docker: Error response from daemon: Get "https://registry-1.docker.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers).',
     ERROR, None, "docker run pulling through a slow network (the registry did not answer in time)"),
    # glibc's aborts of a corrupt heap or a smashed stack
    ("free(): double free detected in tcache 2", CRASH, None, "pytorch/pytorch#50137 (a model dying in its test loop)"),
    ("*** Error in `python': double free or corruption (!prev): 0x000056383cda7e40 ***", CRASH, None,
     "junyanz/pytorch-CycleGAN-and-pix2pix#251 (glibc before 2.26)"),
    ("*** Error in `/opt/conda/bin/python': double free or corruption (fasttop): 0x00007f0018011960 ***", CRASH, None,
     "bindog/pytorch-model-parallel#1"),
    ("double free or corruption (!prev)", CRASH, None, "ROCm/TheRock#1059 (torch 2.7 on ROCm 7 at exit)"),
    ("corrupted size vs. prev_size while consolidating", CRASH, None, "a Mixxx debug log in a public thread"),
    ("munmap_chunk(): invalid pointer", CRASH, None, "glibc malloc/malloc.c munmap_chunk's malloc_printerr"),
    ("malloc(): unaligned tcache chunk detected", CRASH, None, "glibc malloc/malloc.c tcache_get's malloc_printerr"),
    ("*** stack smashing detected ***: terminated", CRASH, None, "glibc debug/fortify_fail.c (2.26 and later)"),
]

#: lines of the same programs or words that are not these forms
NEAR_MISSES = [
    # the same heads at levels that are no failure
    "INFO[0000] Loading containers: start.",
    "WARN[0000] The requested image's platform (linux/amd64) does not match the detected host platform (linux/arm64/v8) and no specific platform was requested",
    "[I 2023-05-11 00:59:56.869 ServerApp] 302 GET / (172.17.0.1) 0.59ms",
    "[W 2023-05-11 00:59:57.000 ServerApp] Notebook Untitled.ipynb is not trusted",
    "2023-11-15 14:55:50 [info     ] GPU benchmark score is 7 for server_id=17084",
    "2018/11/08 20:14:09 [notice] 1#1: start worker processes",
    '{"log.level":"info","@timestamp":"2023-08-03T17:33:48.000+0800","message":"Non-zero metrics in the last 30s"}',
    "INFO: Server startup in [1234] milliseconds",
    # an error record that says it will try again
    "ERRO[0003] failed to pull layer sha256:4f4fb700ef54, retrying in 5s",
    # the words in a message, not a head
    "the allocator now detects a double free before the block is reused",
    "SEVERE_THRESHOLD=0.9 for anomaly alerts",
    "[C 1/3] building target libtokenizer",
    "Epoch 3: 100%|██████████| 500/500 [01:35<00:00, loss=0.231, v_num=0]",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({ERROR}))


def test_level_is_read_in_the_head_only() -> None:
    """A message that quotes a level in brackets far from the head is no record of that level."""
    quoted = "2024-05-01 12:00:00 INFO " + "x" * 90 + " the proxy logged [crit] for the request before"
    assert convention_form(quoted) is None


@pytest.mark.parametrize(("lines", "label", "action"), [
    # a training run whose last words are glibc's, without the shell's "Aborted" under them
    (["epoch 3 step 1200 loss 2.0417", "epoch 3 step 1210 loss 2.0398", "free(): invalid pointer"],
     Label.OTHER_CRASH, Action.RESTART),
    # a container runtime that could not start the job: docker's client, then nothing
    (["docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].",
      "ERRO[0000] error waiting for container: context canceled"], Label.CONFIG_ERROR, Action.STOP),
    # a run that goes on after a record that said it would retry stays healthy
    (["ERRO[0003] failed to pull layer sha256:4f4fb700ef54, retrying in 5s", "step 10 loss 2.31", "step 20 loss 2.12"],
     Label.HEALTHY, Action.WAIT),
])
def test_diagnose_reads_the_form_in_a_log(tmp_path: object, lines: list[str], label: Label, action: Action) -> None:
    from pathlib import Path

    log = Path(str(tmp_path)) / "run.log"
    log.write_text("\n".join(lines) + "\n")
    verdict = diagnose_paths([str(log)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
