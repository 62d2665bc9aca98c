"""The end-to-end harness itself, against the real peers, with nothing of pipetel in between: an
OTLP/HTTP JSON request posted to the collector comes back decoded, and an exposition served from
this process is scraped by Prometheus and answered by PromQL."""

import http.server
import json
import threading
import time

import peers


def _post_json(url: str, payload: dict) -> int:
    import urllib.request

    req = urllib.request.Request(
        url, data=json.dumps(payload).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status


def test_collector_decodes_metrics_logs_and_spans_it_received(collector):
    now = time.time_ns()
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "harness"}}]}
    metrics = {
        "resourceMetrics": [
            {
                "resource": resource,
                "scopeMetrics": [
                    {
                        "scope": {"name": "harness.scope"},
                        "metrics": [
                            {
                                "name": "harness.items",
                                "unit": "{item}",
                                "sum": {
                                    "aggregationTemporality": 2,
                                    "isMonotonic": True,
                                    "dataPoints": [
                                        {
                                            "attributes": [{"key": "stage", "value": {"stringValue": "tok"}}],
                                            "timeUnixNano": str(now),
                                            "asInt": "42",
                                        }
                                    ],
                                },
                            },
                            {
                                "name": "harness.latency",
                                "unit": "s",
                                "histogram": {
                                    "aggregationTemporality": 2,
                                    "dataPoints": [
                                        {
                                            "timeUnixNano": str(now),
                                            "count": "3",
                                            "sum": 0.75,
                                            "bucketCounts": ["1", "2", "0"],
                                            "explicitBounds": [0.1, 0.5],
                                        }
                                    ],
                                },
                            },
                        ],
                    }
                ],
            }
        ]
    }
    logs = {
        "resourceLogs": [
            {
                "resource": resource,
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": str(now),
                                "eventName": "harness.row",
                                "body": {"stringValue": "a row"},
                                "attributes": [
                                    {"key": "items", "value": {"intValue": "7"}},
                                    {"key": "ratio", "value": {"doubleValue": 0.5}},
                                    {"key": "ok", "value": {"boolValue": True}},
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    traces = {
        "resourceSpans": [
            {
                "resource": resource,
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "b7ad6b7169203331",
                                "name": "harness.span",
                                "kind": 1,
                                "startTimeUnixNano": str(now),
                                "endTimeUnixNano": str(now + 1000),
                                "status": {"code": 2},
                            }
                        ]
                    }
                ],
            }
        ]
    }
    for path, payload in (("metrics", metrics), ("logs", logs), ("traces", traces)):
        assert _post_json(f"{collector.otlp_http_endpoint}/v1/{path}", payload) == 200

    got = collector.wait_for(lambda r: r.metrics and r.logs and r.spans, timeout=20)
    items = got.latest("harness.items", stage="tok")
    assert items is not None and items.value == 42.0 and items.kind == "sum" and items.is_monotonic
    assert items.resource["service.name"] == "harness" and items.scope == "harness.scope"
    latency = got.latest("harness.latency")
    assert latency is not None
    assert (latency.count, latency.sum, latency.bucket_counts, latency.bounds) == (3, 0.75, [1, 2, 0], [0.1, 0.5])
    (row,) = got.events("harness.row")
    assert row.body == "a row" and row.attributes == {"items": 7, "ratio": 0.5, "ok": True}
    (span,) = got.spans
    assert (span.name, span.trace_id, span.status_code) == ("harness.span", "0af7651916cd43dd8448eb211c80319c", 2)
    assert collector.env()["OTEL_EXPORTER_OTLP_ENDPOINT"] == collector.otlp_grpc_endpoint


class _Exposition(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_prometheus_scrapes_a_target_added_after_start_and_answers_promql(prometheus):
    _Exposition.body = (
        b"# TYPE harness_items_total counter\n"
        b'harness_items_total{stage="tok"} 42\n'
        b'harness_items_total{stage="emb"} 8\n'
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", peers.free_port()), _Exposition)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        target = f"127.0.0.1:{server.server_address[1]}"
        prometheus.scrape(target)
        (t,) = prometheus.wait_until_up(timeout=20)
        assert t["labels"]["instance"] == target and t["labels"]["job"] == "pipetel"
        result = prometheus.wait_for_series('harness_items_total{job="pipetel"}', timeout=20)
        assert sorted((s.labels["stage"], s.value) for s in result) == [("emb", 8.0), ("tok", 42.0)]
        (total,) = prometheus.wait_for_value("sum(harness_items_total)", 50.0, timeout=10)
        assert total.labels == {}
    finally:
        server.shutdown()
        server.server_close()


def test_run_example_reports_the_output_of_a_failing_program(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import os, sys\nprint('value', os.environ['HARNESS_X'])\nsys.exit(3)\n")
    done = peers.run_example(script, {"HARNESS_X": "7"}, check=False)
    assert done.returncode == 3 and done.stdout == "value 7\n"
    try:
        peers.run_example(script, {"HARNESS_X": "8"})
    except AssertionError as e:
        assert "exited with 3" in str(e) and "value 8" in str(e)
    else:
        raise AssertionError("a failing example did not raise")
