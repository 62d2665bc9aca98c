"""`pipetel.init(span_exporters=..., log_exporters=..., metric_exporters=...)`: exporters written
for the OpenTelemetry Python SDK get pipetel's spans, log records and metrics as the SDK's own
objects, beside or instead of pipetel's exporters.

Every program calls ``init``, so each runs in a subprocess (one init per process) and prints
what its exporters received as JSON on its last line.
"""

import json
import subprocess
import sys
import textwrap

import pytest

import peers

pytest.importorskip("opentelemetry.sdk")

# The in-memory exporters of the SDK, and a metric exporter that keeps what it gets (the SDK's
# InMemoryMetricReader is a reader, not an exporter).
PRELUDE = """
import io, json, logging, sys
import pipetel
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult


class KeepMetrics(MetricExporter):
    def __init__(self):
        super().__init__()
        self.got = []

    def export(self, metrics_data, timeout_millis=10_000, **kwargs):
        self.got.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis=10_000):
        return True

    def shutdown(self, timeout_millis=30_000, **kwargs):
        self.shut = True


def points(exporter, name):
    # The data points of metric `name` in the last collection that has it.
    found = []
    for data in exporter.got:
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        found = [(m, p) for p in m.data.data_points]
    return found
"""


def run_py(code, timeout=60, **env):
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        env=peers.clean_env({"PYTHONUNBUFFERED": "1", **env}),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


def result(done):
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_spans_logs_and_metrics_reach_the_plugged_exporters_instead_of_pipetels():
    done = run_py(
        """
        spans, logs, metrics = InMemorySpanExporter(), InMemoryLogRecordExporter(), KeepMetrics()
        guard = pipetel.init(
            "plugged",
            span_exporters=[spans],
            log_exporters=[logs],
            metric_exporters=[metrics],
            exporters_traces=["none"],
            exporters_logs=["none"],
            exporters_metrics=["none"],
        )
        log = logging.getLogger("app.plugged")
        log.setLevel(logging.INFO)
        log.propagate = False
        log.addHandler(pipetel.LoggingHandler())

        stage = pipetel.stage("tokenize", shards=1, execution_id="run-7")
        shard = stage.shard(0)
        shard.record(5, 50)
        with pipetel.span("load", parent=shard, rows=3, source="s3") as s:
            s.add_event("opened", files=2)
            log.warning("loaded %d rows", 3)
            ids = {"trace_id": s.trace_id, "span_id": s.span_id}
        shard.finish()
        stage.finish()
        guard.flush()

        out = {"ids": ids, "spans": {}, "logs": [], "items": []}
        for sp in spans.get_finished_spans():
            out["spans"][sp.name] = {
                "trace_id": format(sp.context.trace_id, "032x"),
                "span_id": format(sp.context.span_id, "016x"),
                "sampled": sp.context.trace_flags.sampled,
                "parent": format(sp.parent.span_id, "016x") if sp.parent else None,
                "kind": sp.kind.name,
                "status": sp.status.status_code.name,
                "attributes": dict(sp.attributes),
                "events": [(e.name, dict(e.attributes)) for e in sp.events],
                "service": sp.resource.attributes["service.name"],
                "scope": sp.instrumentation_scope.name,
                "ends_after_start": sp.end_time >= sp.start_time > 0,
            }
        for r in logs.get_finished_logs():
            rec = r.log_record
            out["logs"].append({
                "body": rec.body,
                "severity": rec.severity_number.name if rec.severity_number else None,
                "span_id": format(rec.span_id, "016x"),
                "trace_id": format(rec.trace_id, "032x"),
                "event_name": rec.event_name,
                "logger": (rec.attributes or {}).get("logger.name"),
                "service": r.resource.attributes["service.name"],
            })
        for m, p in points(metrics, "pipeline.stage.items"):
            out["items"].append({
                "value": p.value,
                "attributes": dict(p.attributes),
                "monotonic": m.data.is_monotonic,
                "temporality": m.data.aggregation_temporality.name,
                "unit": m.unit,
            })
        guard.shutdown()
        out["metric_exporter_shut_down"] = getattr(metrics, "shut", False)
        print(json.dumps(out))
        """
    )
    out = result(done)
    spans = out["spans"]
    stage, shard, load = spans["stage tokenize"], spans["shard 0 of tokenize"], spans["load"]
    # The Python span, with the ids pipetel's Span reported, under the shard under the stage.
    assert (load["trace_id"], load["span_id"]) == (out["ids"]["trace_id"], out["ids"]["span_id"])
    assert load["parent"] == shard["span_id"] and shard["parent"] == stage["span_id"]
    assert stage["parent"] is None
    assert load["trace_id"] == shard["trace_id"] == stage["trace_id"]
    assert load["attributes"] == {"rows": 3, "source": "s3"}
    assert load["events"] == [["opened", {"files": 2}]]
    assert load["sampled"] and load["kind"] == "INTERNAL" and load["ends_after_start"]
    # The stage's and shard's spans (made on pipetel's `tracing` side) with their row attributes.
    assert stage["attributes"]["pipeline.stage.name"] == "tokenize"
    assert stage["attributes"]["pipeline.execution.id"] == "run-7"
    assert stage["attributes"]["pipeline.items"] == 5 and stage["attributes"]["pipeline.status"] == "succeeded"
    assert shard["attributes"]["pipeline.shard.index"] == 0 and shard["attributes"]["pipeline.bytes"] == 50
    assert {s["service"] for s in spans.values()} == {"plugged"}
    assert {s["scope"] for s in spans.values()} == {"pipetel"}

    # The Python logging record, with the ids of the span it was logged in.
    (app,) = [r for r in out["logs"] if r["logger"] == "app.plugged"]
    assert app["body"] == "loaded 3 rows" and app["severity"] == "WARN"
    assert (app["trace_id"], app["span_id"]) == (load["trace_id"], load["span_id"])
    assert app["service"] == "plugged"
    # The stage's row as a log record too (event name = the stage namespace).
    assert any(r["event_name"] == "pipeline.stage" and r["span_id"] == stage["span_id"] for r in out["logs"])

    # The stage's items counter, as the Python SDK's Sum.
    (items,) = out["items"]
    assert items["value"] == 5 and items["monotonic"] and items["temporality"] == "CUMULATIVE"
    assert items["attributes"]["pipeline.stage.name"] == "tokenize" and items["unit"] == "{item}"
    assert out["metric_exporter_shut_down"]


def test_a_plugged_exporter_goes_beside_the_configured_one():
    done = run_py(
        """
        spans, printed = InMemorySpanExporter(), io.StringIO()
        guard = pipetel.init(
            span_exporters=[spans, ConsoleSpanExporter(out=printed)],
            exporters_traces=["console"],
            exporters_metrics=["none"],
        )
        with pipetel.span("beside"):
            pass
        guard.shutdown()
        got = [s.name for s in spans.get_finished_spans()]
        # The SDK's console exporter formats the converted span (context, resource, scope, ...).
        text = json.loads(printed.getvalue())
        print(json.dumps({"got": got, "console": [text["name"], text["resource"]["attributes"]["service.name"]]}))
        """,
        OTEL_SERVICE_NAME="beside-svc",
    )
    out = result(done)
    assert out["got"] == ["beside"]
    assert out["console"] == ["beside", "beside-svc"]
    # pipetel's own console exporter printed it as well.
    assert "beside" in done.stdout.split("\n{")[0]


def test_an_exporter_that_raises_or_fails_loses_its_batch_only():
    done = run_py(
        """
        class Flaky:
            # Raises on its first export, reports FAILURE on its second, keeps the rest.
            def __init__(self, result):
                self.calls, self.kept, self.result = 0, [], result

            def export(self, batch, *args, **kwargs):
                self.calls += 1
                if self.calls == 1:
                    raise RuntimeError("collector down")
                if self.calls == 2:
                    return self.result.FAILURE
                self.kept.append(batch)
                return self.result.SUCCESS

        spans, logs = Flaky(SpanExportResult), Flaky(LogRecordExportResult)
        metrics = Flaky(MetricExportResult)
        guard = pipetel.init(
            span_exporters=[spans],
            log_exporters=[logs],
            metric_exporters=[metrics],
            exporters_traces=["none"],
            exporters_metrics=["none"],
        )
        log = logging.getLogger("flaky")
        log.propagate = False
        log.addHandler(pipetel.LoggingHandler())
        errors = []
        for name in ("first", "second", "third"):
            with pipetel.span(name):
                log.warning("in %s", name)
            try:
                guard.flush()
            except pipetel.ShutdownError as e:
                errors.append(str(e))
        guard.shutdown()
        print(json.dumps({
            "errors": errors,
            "spans": [s.name for batch in spans.kept for s in batch],
            "logs": [r.log_record.body for batch in logs.kept for r in batch],
            "metric_exports": len(metrics.kept),
        }))
        """
    )
    out = result(done)
    # The failed exports lost their batches; the next export arrived.
    assert out["spans"] == ["third"]
    assert "in third" in out["logs"] and "in first" not in out["logs"]
    assert out["metric_exports"] >= 1
    # flush reported each loss, naming the exporter and what went wrong.
    assert len(out["errors"]) == 2, out["errors"]
    assert "span_exporters[0] (Flaky): export raised RuntimeError: collector down" in out["errors"][0]
    assert "span_exporters[0] (Flaky): export returned <SpanExportResult.FAILURE: 1>" in out["errors"][1]
    assert "metrics:" in out["errors"][0]
    # The SDK logged the export errors as for any exporter, naming it.
    assert "BatchSpanProcessor.ExportError" in done.stderr
    assert "metric_exporters[0] (Flaky): export raised RuntimeError: collector down" in done.stderr
    assert "log_exporters[0] (Flaky): export returned <LogRecordExportResult.FAILURE: 1>" in done.stderr


def test_objects_that_are_not_exporters_are_type_errors_naming_the_argument():
    done = run_py(
        """
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        cases = [
            ("span_exporters[1]", dict(span_exporters=[InMemorySpanExporter(), object()])),
            ("metric_exporters[0]", dict(metric_exporters=[InMemoryMetricReader()])),
            ("log_exporters:", dict(log_exporters=InMemoryLogRecordExporter())),
        ]
        messages = []
        for name, kwargs in cases:
            try:
                pipetel.init(**kwargs)
            except TypeError as e:
                assert str(e).startswith(name), (name, str(e))
                messages.append(str(e))
            else:
                raise AssertionError(f"{kwargs} was accepted")
            assert not pipetel.is_initialized()
        # Nothing was left installed, and the exporters are not settings a remote stage copies.
        guard = pipetel.init(span_exporters=[InMemorySpanExporter()], exporters_metrics=["none"])
        settings = pipetel._pipetel._init_settings()
        guard.shutdown()
        print(json.dumps({"messages": messages, "settings": sorted(settings)}))
        """
    )
    out = result(done)
    assert "InMemoryMetricReader is not an exporter" in out["messages"][1]
    assert "expected a list of exporters" in out["messages"][2]
    assert out["settings"] == ["config_file", "exporters_metrics", "service_name"]
