"""`pipetel.LoggingHandler`: Python `logging` records reach a real collector as OTel log records
with the current span's trace and span ids (the program runs as a subprocess: it calls init)."""

import logging
import subprocess
import sys

import peers
import pipetel

PROGRAM = r"""
import logging, sys, threading
import pipetel

guard = pipetel.init("logging-handler")
log = logging.getLogger("app.worker")
log.setLevel(1)
log.propagate = False
log.addHandler(pipetel.LoggingHandler())

log.info("outside %s", "spans")
with pipetel.span("work") as s:
    print("span", s.trace_id, s.span_id, flush=True)
    for level in (5, 10, 20, 25, 30, 40, 50):
        log.log(level, "level %d inside", level)
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("failed inside")
    # A new thread starts with no current span.
    t = threading.Thread(target=lambda: log.info("in a thread"), name="helper")
    t.start(); t.join()
    log.info("%d bad arguments", "x")   # a formatting error goes to handleError
    log.info("after the bad one")
guard.shutdown()
print("done", flush=True)
"""

EXPECTED = {
    # level: (severity number, severity text)
    5: (1, "TRACE"),
    10: (5, "DEBUG"),
    20: (9, "INFO"),
    25: (12, "INFO"),
    30: (13, "WARNING"),
    40: (17, "ERROR"),
    50: (21, "CRITICAL"),
}


def test_records_reach_the_collector_with_the_current_span_ids_and_severities(collector):
    env = peers.clean_env()
    env.update(collector.env("grpc"), OTEL_METRICS_EXPORTER="none", OTEL_TRACES_EXPORTER="otlp")
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "done" in done.stdout, done.stdout
    # The formatting error went to handleError (printed, not raised) and logging went on.
    assert "--- Logging error ---" in done.stderr and "TypeError" in done.stderr, done.stderr
    _, trace_id, span_id = next(l for l in done.stdout.splitlines() if l.startswith("span ")).split()

    mine = lambda r: r.resource.get("service.name") == "logging-handler" and r.attributes.get("logger.name") == "app.worker"
    got = collector.wait_for(lambda r: sum(1 for x in r.logs if mine(x)) >= 11, timeout=30)
    records = {x.body: x for x in got.logs if mine(x)}
    assert len(records) == 11, sorted(records)
    assert "%d bad arguments" not in records

    outside = records["outside spans"]
    assert outside.trace_id == "" and outside.span_id == ""
    assert outside.severity_number == 9 and outside.severity_text == "INFO"
    assert outside.attributes["code.function.name"] == "<module>"
    assert outside.attributes["code.file.path"] == "<string>"
    assert outside.attributes["code.line.number"] == 11
    assert outside.attributes["thread.name"] == "MainThread"
    assert "exception.type" not in outside.attributes
    assert outside.time_unix_nano > 0

    for level, (number, text) in EXPECTED.items():
        r = records[f"level {level} inside"]
        assert (r.severity_number, r.severity_text) == (number, text), (level, r)
        assert (r.trace_id, r.span_id) == (trace_id, span_id), (level, r)

    failed = records["failed inside"]
    assert (failed.severity_number, failed.trace_id, failed.span_id) == (17, trace_id, span_id)
    assert failed.attributes["exception.type"] == "ZeroDivisionError"
    assert failed.attributes["exception.message"] == "division by zero"
    assert "Traceback" in failed.attributes["exception.stacktrace"]
    assert failed.attributes["exception.stacktrace"].endswith("ZeroDivisionError: division by zero\n")

    threaded = records["in a thread"]
    assert threaded.trace_id == "" and threaded.span_id == ""
    assert threaded.attributes["thread.name"] == "helper"

    after = records["after the bad one"]
    assert (after.trace_id, after.span_id) == (trace_id, span_id)

    # The span itself arrived with the same ids.
    spans = collector.wait_for(lambda r: any(s.span_id == span_id for s in r.spans), timeout=30).spans
    (work,) = [s for s in spans if s.span_id == span_id]
    assert work.name == "work" and work.trace_id == trace_id


def test_a_formatter_given_to_the_handler_formats_the_body_and_emit_never_raises(capsys):
    # In this process init may not have run: the record is dropped, but formatting still runs
    # and an error in it goes to handleError instead of raising.
    handler = pipetel.LoggingHandler()
    formatted = []
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    orig = handler.format
    handler.format = lambda record: formatted.append(orig(record)) or formatted[-1]
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "value %s", ("v",), None)
    handler.emit(record)
    assert formatted == ["[WARNING] value v"]
    bad = logging.LogRecord("x", logging.WARNING, __file__, 1, "value %d", ("v",), None)
    handler.emit(bad)  # must not raise
    assert "--- Logging error ---" in capsys.readouterr().err
