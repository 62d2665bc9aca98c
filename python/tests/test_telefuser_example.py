"""TeleFuser's metrics documentation (python/examples/telefuser_metrics.py, adapted only in its
import lines plus pipetel's start-up) runs as a subprocess with ``init``: what it recorded reaches
real Prometheus (scraping the pull endpoint, asked in PromQL) and the real collector (OTLP)."""

import time

import peers
import pipetel

# Prometheus selector -> value the document's snippets leave behind.
EXACT = {
    "telefuser_requests_total": 1,
    # The document's own "tasks_completed" counter (1 + 5) is the service metrics' counter of
    # that name (one registry per prefix), which record_task_completed adds 1 to.
    "telefuser_tasks_completed_total": 7,
    "telefuser_tasks_created_total": 1,
    "telefuser_tasks_failed_total": 1,
    "telefuser_tasks_cancelled_total": 1,
    "telefuser_queue_size": 10,
    "telefuser_queue_pending": 5,
    "telefuser_queue_processing": 2,
    "telefuser_task_duration_seconds_count": 1,
    "telefuser_task_duration_seconds_sum": 1.5,
    'telefuser_task_duration_seconds_bucket{le="2.5"}': 1,
    'telefuser_task_duration_seconds_bucket{le="1"}': 0,
    "telefuser_file_size_bytes_count": 3,
    "telefuser_file_size_bytes_sum": 1.75,
    'telefuser_file_size_bytes_bucket{le="100"}': 3,
    "telefuser_latency_seconds_count": 3,
    "telefuser_latency_seconds_sum": 1.6,
    'telefuser_http_requests_total{method="GET",status="200"}': 0,
    # Stage "decoded": 5 calls + 1 failing + 3 async; "my_stage": total.inc() + record_execution.
    'function_calls_total{stage="decoded"}': 9,
    'function_errors_total{stage="decoded",error_type="err"}': 1,
    'function_calls_total{stage="my_stage"}': 2,
    'function_errors_total{stage="my_stage",error_type="err"}': 1,
    'function_in_flight{stage="my_stage"}': 1,
    'function_in_flight{stage="decoded"}': 0,
    "custom_metric": 42,
    "app_requests_total": 0,
    "system_cpu_usage": 0,
}


def with_job(selector: str) -> str:
    if "{" in selector:
        return selector[:-1] + ',job="pipetel"}'
    return selector + '{job="pipetel"}'


def test_telefuser_documentation_reaches_prometheus_and_the_collector(collector, prometheus):
    assert hasattr(pipetel, "init"), "pipetel.init is not bound in this build"
    env = peers.both_ways_env(collector, prometheus)
    started = time.time()
    proc = peers.spawn_example("telefuser_metrics", env, args=["--linger-seconds", "90"])
    try:
        lines = peers.read_until(proc, "ready", timeout=60)
        # The document's prints: counter.value, then the histogram's count, sum and average.
        assert lines[lines.index("6.0") : lines.index("6.0") + 4] == ["6.0", "3", "1.75", str(1.75 / 3)], lines

        (target,) = prometheus.wait_until_up()
        assert target["lastError"] == ""
        for selector, value in EXACT.items():
            prometheus.wait_for_value(with_job(selector), float(value), timeout=20)
        (median,) = prometheus.query(with_job('telefuser_latency_seconds{quantile="0.5"}'))
        assert abs(median.value - 0.5) <= 0.005  # the sketch's 1 % bound
        assert {s.labels["quantile"] for s in prometheus.query(with_job("telefuser_latency_seconds"))} == {
            "0.5", "0.75", "0.9", "0.95", "0.99"
        }
        (now,) = prometheus.query(with_job("telefuser_memory_used_bytes"))
        assert started - 5 <= now.value <= time.time() + 5  # set_to_current_time

        def arrived(r: peers.Received) -> bool:
            requests = r.latest("telefuser_requests")
            calls = r.latest("function.calls", stage="decoded")
            sizes = r.latest("telefuser_file_size_bytes")
            created = r.latest("telefuser.tasks.created")
            return bool(
                requests and requests.value == 1 and calls and calls.value == 9
                and sizes and sizes.count == 3 and created and created.value == 1
            )

        got = collector.wait_for(arrived, timeout=30)
        requests = got.latest("telefuser_requests")
        assert requests.kind == "sum" and requests.is_monotonic
        assert requests.resource["service.name"] == "telefuser-metrics"
        assert requests.description == "Total number of requests"
        assert got.latest("telefuser_tasks_completed").value == 7
        assert got.latest("telefuser_queue_size").value == 10
        assert got.latest("telefuser_http_requests", method="GET", status="200").value == 0
        sizes = got.latest("telefuser_file_size_bytes")
        assert sizes.kind == "histogram" and sizes.sum == 1.75
        assert sizes.bounds == [100, 1000, 10000, 100000, 1000000] and sizes.bucket_counts[0] == 3
        duration = got.latest("telefuser.task.duration")
        assert duration.kind == "histogram" and (duration.count, duration.sum) == (1, 1.5) and duration.unit == "s"
        assert got.latest("function.errors", stage="decoded", **{"error.type": "err"}).value == 1
        assert got.latest("function.calls", stage="my_stage").value == 2
        assert got.latest("function.in_flight", stage="my_stage").value == 1
        assert got.latest("telefuser_latency_seconds_count").value == 3
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            code = proc.wait(timeout=30)
        except Exception:
            proc.kill()
            proc.wait()
            raise
    assert code == 0, proc.stderr.read() if proc.stderr else ""
