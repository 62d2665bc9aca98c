"""mstar's recorders on pipetel: worker processes record and send cumulative snapshots to an API
server process, which exports their sum to Prometheus and an OTLP collector.

The worker part is written against mstar's ``observability.recorders``; only its import line
differs (``from pipetel.mstar import ...``). The server part hosts a :class:`pipetel.SnapshotHub`
in a process that called :func:`pipetel.init`, which installs the exporters the standard
variables name (``OTEL_METRICS_EXPORTER=prometheus,otlp``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_PROMETHEUS_PORT``...).

    python mstar_recorders.py                 # the server: starts 2 workers, exports, lingers
    python mstar_recorders.py --workers 3 --steps 20 --linger-seconds 30

The server prints ``expected <family>{<labels>} <value>`` lines (what the workers recorded), then
``ready``, and keeps exporting until its stdin closes or the linger time passes.
"""

import argparse
import subprocess
import sys
import time

# The import line of mstar's example, pointed at pipetel:
from pipetel.mstar import Counter, EdgeTransfers, Envelope, Family, Histogram, merge, write_frame

REQUESTS = Family.counter("mstar.requests", "Requests served", "{request}", ["model", "status"])
TOKENS = Family.counter("mstar.tokens", "Tokens generated", "{token}", ["model"])
LATENCY = Family.histogram("mstar.request.duration", "Request latency", "s", ["model"], [0.05, 0.1, 0.5, 1.0])


def worker(rank: int, steps: int, interval: float) -> None:
    """One worker: record per request, publish a cumulative snapshot per step on stdout."""
    requests = Counter(REQUESTS)
    tokens = Counter(TOKENS)
    latency = Histogram(LATENCY)
    transfers = EdgeTransfers("nccl")
    out = sys.stdout.buffer
    for step in range(1, steps + 1):
        requests.inc(["llama", "ok"])
        if step % 4 == 0:
            requests.inc(["llama", "error"])
        tokens.inc(["llama"], amount=16.0 * (rank + 1))
        latency.observe(["llama"], 0.02 * (step % 6))
        transfers.record(f"rank{rank}", "rank0", 4096 * step, 2, 0.001)
        transfers.publish()
        _, edge_snapshots = transfers.latest
        write_frame(out, Envelope(f"worker-{rank}", step, [requests.snapshot(), tokens.snapshot(), latency.snapshot(), *edge_snapshots]))
        time.sleep(interval)


def expected(workers: int, steps: int) -> "list[str]":
    """What the workers record, computed here with the same recorders (and merge)."""
    snaps = {REQUESTS.name: [], TOKENS.name: [], LATENCY.name: []}
    for rank in range(workers):
        requests, tokens, latency = Counter(REQUESTS), Counter(TOKENS), Histogram(LATENCY)
        for step in range(1, steps + 1):
            requests.inc(["llama", "ok"])
            if step % 4 == 0:
                requests.inc(["llama", "error"])
            tokens.inc(["llama"], amount=16.0 * (rank + 1))
            latency.observe(["llama"], 0.02 * (step % 6))
        snaps[REQUESTS.name].append(requests.snapshot())
        snaps[TOKENS.name].append(tokens.snapshot())
        snaps[LATENCY.name].append(latency.snapshot())
    lines = []
    for family in (REQUESTS, TOKENS):
        total = merge(family, snaps[family.name])
        for labels, value in zip(total.label_values, total.values):
            pairs = ",".join(f'{k}="{v}"' for k, v in zip(family.label_names, labels))
            lines.append(f"expected {family.name}{{{pairs}}} {value:g}")
    hist = merge(LATENCY, snaps[LATENCY.name])
    lines.append(f'expected {LATENCY.name}.count{{model="llama"}} {hist.bucket_counts[0][-1]}')
    lines.append(f'expected {LATENCY.name}.sum{{model="llama"}} {hist.sums[0]!r}')
    nbytes = sum(4096 * s for s in range(1, steps + 1))
    for rank in range(workers):
        lines.append(f'expected pipeline.transfer.bytes{{pipeline.transfer.src="rank{rank}"}} {nbytes}')
    return lines


def server(workers: int, steps: int, interval: float, linger: float) -> int:
    """The API server: init pipetel, host the hub, read every worker's stdout, export."""
    import pipetel

    with pipetel.init("mstar-recorders"):
        hub = pipetel.SnapshotHub()
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--worker", str(rank), "--steps", str(steps), "--interval", str(interval)],
                stdout=subprocess.PIPE,
            )
            for rank in range(workers)
        ]
        readers = [hub.spawn_reader(p.stdout) for p in procs]
        for p, reader in zip(procs, readers):
            report = reader.join()
            if p.wait() != 0 or report.error or report.refused:
                print(f"worker failed: exit {p.returncode}, {report}", file=sys.stderr)
                return 1
        for line in expected(workers, steps):
            print(line)
        print("ready", flush=True)
        deadline = time.monotonic() + linger
        # Keep exporting until stdin closes (the caller is done) or the linger time passes.
        import select

        while time.monotonic() < deadline:
            ready, _, _ = select.select([sys.stdin], [], [], min(0.5, max(0.0, deadline - time.monotonic())))
            if ready and not sys.stdin.buffer.read1(1):
                break
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", type=int, help="run as worker RANK (started by the server)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--interval", type=float, default=0.01)
    ap.add_argument("--linger-seconds", type=float, default=5.0)
    args = ap.parse_args()
    if args.worker is not None:
        worker(args.worker, args.steps, args.interval)
        return 0
    return server(args.workers, args.steps, args.interval, args.linger_seconds)


if __name__ == "__main__":
    sys.exit(main())
