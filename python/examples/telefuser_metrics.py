"""TeleFuser's metrics documentation (docs/en/metrics, "Metrics System"), run on pipetel.

Every snippet of the document, in its order, with its import lines pointed at
``pipetel.telefuser`` instead of ``telefuser.metrics``. Two things are not TeleFuser's:
``init_metrics(config)``, which starts pipetel's exporters from the document's
``create_metrics_config(...)`` (TeleFuser served ``get_prometheus_format()`` from its own FastAPI
route; pipetel serves the pull endpoint and pushes OTLP), and a stand-in for
``telefuser.core.BaseStage`` (a class with a ``name``, all ``enable_stage_metrics`` needs).

    python telefuser_metrics.py                    # runs the document, prints ready, lingers
    python telefuser_metrics.py --linger-seconds 0

The exporters come from the standard variables (``OTEL_METRICS_EXPORTER=prometheus,otlp``,
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_PROMETHEUS_PORT``...). The program prints the
registry's exposition, then ``ready``, and keeps exporting until its stdin closes or the
linger time passes; then it shuts pipetel down (a last OTLP export).
"""

import argparse
import asyncio
import sys
import time

# --- pipetel start-up (not in TeleFuser's document) -------------------------------------------
from pipetel.telefuser import init_metrics

parser = argparse.ArgumentParser()
parser.add_argument("--linger-seconds", type=float, default=60.0)
cli = parser.parse_args()

# --- "Quick Start / Basic Usage" ---------------------------------------------------------------
from pipetel.telefuser import (
    get_metrics_registry,
    Counter,
    Gauge,
    Histogram,
)

# --- "Configuration" ----------------------------------------------------------------------------
from pipetel.telefuser import MetricsConfig, create_metrics_config

# Use default configuration
config = MetricsConfig()

# Custom configuration
config = create_metrics_config(
    enabled=True,
    enable_stage_metrics=True,
    enable_gpu_metrics=True,
    gpu_metrics_interval=5.0,
    namespace="telefuser",
)

guard = init_metrics(config, service_name="telefuser-metrics")  # pipetel: the exporters start here

# Get the global registry
registry = get_metrics_registry()

# Create a counter
requests_total = registry.counter(
    "requests_total",
    "Total number of requests",
)
requests_total.inc()

# Create a gauge
queue_size = registry.gauge(
    "queue_size",
    "Current queue size",
)
queue_size.set(10)

# Create a histogram
latency = registry.histogram(
    "request_latency_seconds",
    "Request latency in seconds",
)
latency.observe(0.5)

# Export in Prometheus format
print(registry.get_prometheus_format())

# --- "Metric Types / Counter" --------------------------------------------------------------------
from pipetel.telefuser import get_metrics_registry

registry = get_metrics_registry()
counter = registry.counter("tasks_completed", "Tasks completed")

counter.inc()       # Increment by 1
counter.inc(5)      # Increment by 5
# counter.dec()     # Error! Counters cannot be decremented

print(counter.value)  # Current value

# --- "Gauge" --------------------------------------------------------------------------------------
gauge = registry.gauge("memory_used_bytes", "Memory used in bytes")

gauge.set(1024)     # Set to specific value
gauge.inc()         # Increment by 1
gauge.dec()         # Decrement by 1
gauge.set_to_current_time()  # Set to Unix timestamp

# --- "Histogram" ----------------------------------------------------------------------------------
# Default buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]
histogram = registry.histogram(
    "request_duration_seconds",
    "Request duration in seconds",
)

# Custom buckets
histogram = registry.histogram(
    "file_size_bytes",
    "File size in bytes",
    buckets=[100, 1000, 10000, 100000, 1000000],
)

histogram.observe(0.5)
histogram.observe(1.2)
histogram.observe(0.05)

print(histogram.count)   # Total observations
print(histogram.sum)     # Sum of all values
print(histogram.average) # Average value

# --- "Summary" ------------------------------------------------------------------------------------
# Default quantiles: [0.5, 0.9, 0.95, 0.99]
summary = registry.summary(
    "response_time_seconds",
    "Response time in seconds",
)

# Custom quantiles
summary = registry.summary(
    "latency_seconds",
    "Latency in seconds",
    quantiles=[0.5, 0.75, 0.9, 0.95, 0.99],
)

summary.observe(0.1)
summary.observe(0.5)
summary.observe(1.0)

# --- "Labels" -------------------------------------------------------------------------------------
# Using dictionary
counter = registry.counter(
    "http_requests_total",
    "Total HTTP requests",
    labels={"method": "GET", "status": "200"},
)

# Using list of MetricLabel
from pipetel.telefuser import MetricLabel

counter = registry.counter(
    "http_requests_total",
    "Total HTTP requests",
    labels=[
        MetricLabel("method", "GET"),
        MetricLabel("status", "200"),
    ],
)

# --- "Stage Metrics" ------------------------------------------------------------------------------
from pipetel.telefuser import enable_stage_metrics, disable_stage_metrics


class BaseStage:  # stands in for telefuser.core.BaseStage
    def __init__(self, name, config):
        self.name = name
        self.config = config


class MyStage(BaseStage):
    def __init__(self, name, config):
        super().__init__(name, config)
        # Enable metrics for this stage
        enable_stage_metrics(self)

    def process(self, data):
        # Metrics are automatically tracked if using @with_metrics
        return data


# --- "Using Decorators" ---------------------------------------------------------------------------
from pipetel.telefuser import with_metrics, with_metrics_async


class MyDecoratedStage(BaseStage):
    def __init__(self, name, config):
        super().__init__(name, config)
        enable_stage_metrics(self)

    @with_metrics
    def process(self, data):
        # Execution time, success/failure automatically tracked
        return self._do_work(data)

    @with_metrics_async
    async def process_async(self, data):
        # Also works for async methods
        return await self._do_work_async(data)

    def _do_work(self, data):
        if data < 0:
            raise ValueError("negative input")
        return data * 2

    async def _do_work_async(self, data):
        await asyncio.sleep(0.001)
        return data * 2


my_stage = MyStage("my_stage", config)
stage = MyDecoratedStage("decoded", config)
for i in range(5):
    stage.process(i)
try:
    stage.process(-1)
except ValueError:
    pass


async def run_async():
    await asyncio.gather(*(stage.process_async(i) for i in range(3)))


asyncio.run(run_async())

# --- "Stage Metric Context" -----------------------------------------------------------------------
from pipetel.telefuser import enable_stage_metrics

context = enable_stage_metrics(my_stage)

# Access individual metrics
context.duration.observe(0.5)
context.total.inc()
context.errors.inc()
context.active.inc()

# Record a complete execution
context.record_execution(
    duration=0.5,
    success=True,
    input_size=1024,
    output_size=2048,
)

# --- "Service Metrics" ----------------------------------------------------------------------------
from pipetel.telefuser import get_service_metrics, ServiceMetrics

# Get global service metrics
service_metrics = get_service_metrics()

# Record task events
service_metrics.record_task_created()
service_metrics.record_task_completed(duration=1.5)
service_metrics.record_task_failed()
service_metrics.record_task_cancelled()

# Update queue metrics
service_metrics.update_queue_metrics(
    size=10,
    pending=5,
    processing=2,
)

# Collect GPU metrics
service_metrics.collect_gpu_metrics()

# Get Prometheus format
output = service_metrics.get_prometheus_format()

# --- "Advanced Usage / Custom Collectors" ---------------------------------------------------------
from pipetel.telefuser import get_metrics_registry


def get_custom_value():
    return 42


def custom_collector():
    """Collect custom metrics."""
    return [
        "# HELP custom_metric My custom metric",
        "# TYPE custom_metric gauge",
        f"custom_metric {get_custom_value()}",
    ]


registry = get_metrics_registry()
registry.add_custom_collector(custom_collector)

# --- "Multiple Registries" ------------------------------------------------------------------------
from pipetel.telefuser import MetricRegistry

# Create separate registries for different purposes
app_registry = MetricRegistry(namespace="app")
system_registry = MetricRegistry(namespace="system")

# Each registry is independent
app_registry.counter("requests", "App requests")
system_registry.gauge("cpu_usage", "CPU usage")

# --- what the document recorded, for the test, then linger while the peers read -------------------
print(output)
print(registry.get_prometheus_format())
print("ready", flush=True)
deadline = time.monotonic() + cli.linger_seconds
if cli.linger_seconds > 0:
    import select

    while time.monotonic() < deadline:
        readable, _, _ = select.select([sys.stdin], [], [], max(0.0, min(1.0, deadline - time.monotonic())))
        if readable and not sys.stdin.readline():
            break  # stdin closed: the test is done
guard.shutdown()
