"""The CPU cost of `pipetel top` on a live store: 10,000 running shards: a store with their start and first sample rows, then a writer appending
each shard's sample every 10 s (1,000 rows/s, in batches every 100 ms), while `pipetel top`
redraws every second; prints top's CPU seconds from /proc over the measured window.

Usage: python3 crates/pipetel-cli/benches/top_cpu.py target/release/pipetel DIR
"""
import json, os, subprocess, sys, time

binary, d = sys.argv[1], sys.argv[2]
SHARDS, SECONDS = 10_000, 30
os.makedirs(d, exist_ok=True)
path = os.path.join(d, "bench.jsonl")
def row(i, status, ms):
    return json.dumps({"event": "pipeline.worker", "timestamp_ms": ms, "pipeline.namespace": "pipeline.worker",
        "pipeline.stage.name": f"stage{i % 4}", "pipeline.execution.id": "run-1", "pipeline.shard.index": i,
        "pipeline.status": status, "pipeline.items": 1000 + i, "pipeline.bytes": 4096, "pipeline.item_rate": 12.5,
        "pipeline.byte_rate": 100.0, "pipeline.cpu.time_seconds": 1.5, "pipeline.cpu.percent": 97.0,
        "pipeline.memory.current_bytes": 1 << 30, "pipeline.memory.avg_bytes": 1 << 30,
        "pipeline.memory.peak_bytes": 1 << 30}) + "\n"
now = int(time.time() * 1000)
with open(path, "w") as f:
    for i in range(SHARDS):
        f.write(row(i, "start", now - 20_000))
        f.write(row(i, "running", now - 10_000 + i))
print("store", os.path.getsize(path), "bytes", file=sys.stderr)
ticks = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks
top = subprocess.Popen([binary, "top", path, "--interval", "1"], stdout=subprocess.DEVNULL)
time.sleep(2.0)  # the first read of the whole store
c0, t0 = cpu(top.pid), time.time()
nxt = 0
with open(path, "a") as f:
    while time.time() - t0 < SECONDS:
        ms = int(time.time() * 1000)
        batch = "".join(row((nxt + k) % SHARDS, "running", ms) for k in range(100))
        f.write(batch); f.flush()
        nxt += 100
        time.sleep(0.1)
c1, t1 = cpu(top.pid), time.time()
top.terminate(); top.wait()
print(f"catch-up (first 2 s): {c0:.2f} CPU s; then {c1 - c0:.2f} CPU s over {t1 - t0:.1f} s wall "
      f"= {100 * (c1 - c0) / (t1 - t0):.2f} % of a core; rows appended meanwhile: {nxt}")
