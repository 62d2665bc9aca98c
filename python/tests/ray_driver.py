"""A Ray driver on a two-node cluster simulated on this machine (``ray.cluster_utils.Cluster``):
one stage whose shards run as Ray tasks pinned to each node, and one stage over a Ray Data
``map_batches`` (through :mod:`pipetel.ray`). Prints one JSON line with both stage rows, the
stages' traceparents, what each task saw (node id, pid, its shard's traceparent) and the
driver's pull page.

    python ray_driver.py

Used by python/tests/test_ray.py.
"""

import json
import os
import sys
import urllib.request

import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import pipetel
import pipetel.ray

TASK_SHARDS = 4
ROWS, BLOCKS, BATCH = 1000, 4, 250
NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "include_dashboard": False}


@ray.remote(num_cpus=1)
def work(handle, i):
    with handle.shard(i) as shard:
        shard.record(10 * (i + 1), 100 * (i + 1))
        with pipetel.span("in ray task", shard=i) as inner:
            inner_tp = inner.traceparent
    ctx = ray.get_runtime_context()
    return {"node": ctx.get_node_id(), "pid": os.getpid(), "traceparent": shard.traceparent, "inner": inner_tp}


def double(batch):
    return {"id": batch["id"] * 2}


def main() -> int:
    cluster = Cluster(initialize_head=True, head_node_args=dict(NODE))
    cluster.add_node(**{k: v for k, v in NODE.items() if k != "include_dashboard"})
    ray.init(address=cluster.address, include_dashboard=False, logging_level="warning", log_to_driver=False)
    try:
        cluster.wait_for_nodes()
        nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
        guard = pipetel.init("ray-driver", prometheus_port=0, exporters_metrics=["prometheus"])
        with pipetel.stage("ray-tasks", shards=TASK_SHARDS) as stage:
            handle = pipetel.ray.handle(stage, report_interval=0.5)
            refs = [
                work.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[i % len(nodes)], soft=False)).remote(
                    handle, i
                )
                for i in range(TASK_SHARDS)
            ]
            seen = ray.get(refs)
            tasks_tp = stage.traceparent
            tasks_row = stage.finish()
        with pipetel.stage("ray-data") as stage:
            ds = ray.data.range(ROWS, override_num_blocks=BLOCKS)
            out = pipetel.ray.map_batches(ds, double, stage, batch_size=BATCH, batch_format="numpy")
            total = sum(int(r["id"]) for r in out.take_all())
            data_row = stage.finish()
        page = urllib.request.urlopen(f"http://{guard.prometheus_addr}/metrics", timeout=10).read().decode()
        print(
            json.dumps(
                {
                    "nodes": nodes,
                    "pid": os.getpid(),
                    "tasks_row": tasks_row,
                    "tasks_traceparent": tasks_tp,
                    "seen": seen,
                    "data_row": data_row,
                    "data_sum": total,
                    "page": page,
                }
            ),
            flush=True,
        )
    finally:
        ray.shutdown()
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
