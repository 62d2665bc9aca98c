"""``pipetel.rows.query`` against a real VictoriaLogs fed by the shipped fleet gateway: the Zephyr
example writes its rows to a local rows file and, over OTLP, through a collector running
``otel-collector/gateway-stores.yaml`` into VictoriaLogs; the query gives back the local rows,
with the same keys and types, for every filter ``pipetel rows --url`` takes."""

import json
import math

import pytest

import peers
import pipetel.rows

EXECUTION = "tokenize-2026-12-01"


def _same(remote, local):
    """Whether a row from the store equals the local one: same keys, equal text, integers and
    booleans of the same type, floats within a few units in the last place."""
    # The store keeps the resource's host and pid on every row; a local row names them on its
    # start row only (or not at all, for rows reported explicitly).
    remote = dict(remote)
    for resource in ("host.name", "process.pid"):
        if resource not in local and remote.pop(resource, None) is None:
            return False
    if sorted(remote) != sorted(local):
        return False
    for k, v in local.items():
        r = remote[k]
        # VictoriaLogs keeps text: a float counter that only ever held whole numbers in the
        # answer comes back as an int (documented, as for `pipetel rows --url`).
        if k.startswith("pipeline.counter.") and isinstance(v, float) and v.is_integer() and type(r) is int:
            r = float(r)
        if type(r) is not type(v):
            return False
        if isinstance(v, float):
            if not math.isclose(r, v, rel_tol=1e-15, abs_tol=0.0):
                return False
        elif r != v:
            return False
    return True


def _matching(remote_rows, local_rows):
    """Asserts the two lists hold the same rows (the local ones matched one by one)."""
    assert len(remote_rows) == len(local_rows), (remote_rows, local_rows)
    left = list(remote_rows)
    for row in local_rows:
        found = [i for i, r in enumerate(left) if _same(r, row)]
        assert found, f"no row from the store equals {row}; left: {left}"
        left.pop(found[0])


def test_query_gives_back_the_local_rows_with_every_filter(stores_gateway, victoria_logs, run_example, tmp_path):
    rows_file = tmp_path / "rows.jsonl"
    env = peers.clean_env()
    env.update(stores_gateway.env())
    env.update(
        OTEL_SERVICE_NAME="zephyr-coordinator",
        OTEL_METRICS_EXPORTER="none",
        PIPETEL_ROWS_FILE=str(rows_file),
    )
    run_example("zephyr_stats", env, timeout=90)
    local = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert len(local) == 5, local  # 2 shards x (start, end) + the stage row

    def stored():
        rows = pipetel.rows.query(victoria_logs.url, execution=EXECUTION, frame=False)
        return rows if len(rows) >= len(local) else None

    remote = peers.wait_until("every row in VictoriaLogs", stored, 60.0, lambda: stores_gateway.process.output(40))
    _matching(remote, local)
    assert [r["timestamp_ms"] for r in remote] == sorted(r["timestamp_ms"] for r in remote), "oldest first"
    assert all(isinstance(r, dict) for r in remote)

    ns = lambda r: r.get("pipeline.namespace")
    cases = [
        (dict(stage="tokenize"), lambda r: r.get("pipeline.stage.name") == "tokenize"),
        (dict(shard=1), lambda r: r.get("pipeline.shard.index") == 1),
        (dict(status="end"), lambda r: r.get("pipeline.status") == "end"),
        (dict(namespace="zephyr.worker"), lambda r: ns(r) == "zephyr.worker"),
        (dict(namespace="zephyr"), lambda r: ns(r) in ("zephyr.worker", "zephyr.stage")),
        (dict(service="zephyr-coordinator", status="succeeded"), lambda r: r.get("pipeline.status") == "succeeded"),
        (dict(execution="another-run"), lambda r: False),
        (dict(service="another-service"), lambda r: False),
    ]
    for filters, keep in cases:
        got = pipetel.rows.query(victoria_logs.url, frame=False, **{"execution": EXECUTION, **filters})
        want = [r for r in local if keep(r)]
        assert want or filters in (dict(execution="another-run"), dict(service="another-service")), filters
        _matching(got, want)

    # A DataFrame by default when pandas is installed, the list of dicts otherwise.
    default = pipetel.rows.query(victoria_logs.url, execution=EXECUTION)
    try:
        import pandas
    except ImportError:
        assert isinstance(default, list) and len(default) == len(local)
        with pytest.raises(ImportError):
            pipetel.rows.query(victoria_logs.url, execution=EXECUTION, frame=True)
    else:
        assert isinstance(default, pandas.DataFrame) and len(default) == len(local)
        assert set(default.columns) == {k for r in local for k in r} | {"host.name", "process.pid"}


def test_query_errors_name_the_store_and_the_argument(victoria_logs):
    with pytest.raises(pipetel.rows.RowsQueryError, match=r"/nothing/select/logsql/query: HTTP 4\d\d"):
        pipetel.rows.query(victoria_logs.url + "/nothing", frame=False)
    with pytest.raises(pipetel.rows.RowsQueryError, match="127.0.0.1:9"):
        pipetel.rows.query("http://127.0.0.1:9", frame=False, timeout=2)
    with pytest.raises(ValueError, match="http://"):
        pipetel.rows.query("victoria-logs:9428")
    with pytest.raises(ValueError, match="shard"):
        pipetel.rows.query(victoria_logs.url, shard=-1)
    with pytest.raises(TypeError, match="pipeline.stage.name"):
        pipetel.rows.query(victoria_logs.url, stage=3)


def test_the_query_is_the_one_pipetel_rows_url_sends():
    q = pipetel.rows.logsql(stage="tok\"en", execution="e1", shard=2, status="end", namespace="zephyr", service="s")
    assert q == (
        '"pipeline.namespace":* (event_name:="zephyr" or event_name:"zephyr."*) '
        '"pipeline.stage.name":="tok\\"en" "pipeline.execution.id":="e1" "pipeline.shard.index":="2" '
        '"pipeline.status":="end" "service.name":="s" | sort by (_time)'
    )
