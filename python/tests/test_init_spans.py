"""pipetel.init, the guard, spans and traceparent.

Every program that calls ``init`` runs in a subprocess (one init per process); spans made
before any ``init`` (no-op spans that keep a remote parent) are tested in this process.
"""

import asyncio
import os
import re
import subprocess
import sys
import textwrap
import threading

import pytest

import peers
import pipetel

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def clean_env(**extra):
    env = peers.clean_env(extra)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_py(code, timeout=60, **env):
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


def console_spans(stdout):
    """The spans the console exporter printed: name -> (trace id, span id, parent id, status)."""
    spans = {}
    for block in stdout.split("\n\tName         : ")[1:]:
        name = block.splitlines()[0].strip()
        field = lambda label: re.search(rf"\t{label}\s*: (.*)", block).group(1).strip()
        parent = field("ParentSpanId")
        spans[name] = {
            "trace_id": field("TraceId"),
            "span_id": field("SpanId"),
            "parent": None if parent.startswith("None") else parent,
            "status": field("Status"),
        }
    return spans


# ----- settings -----


def test_unknown_keyword_and_bad_values_raise_config_error_naming_the_keyword():
    out = run_py(
        """
        import pipetel
        cases = [
            dict(prometheus_prot=1),
            dict(prometheus_port="9464"),
            dict(prometheus_port=70000),
            dict(exporters_metrics="prometheus"),
            dict(exporters_metrics=["carrier-pigeon"]),
            dict(pipeline_namespace="Zephyr"),
            dict(traces_sampler_arg=float("nan")),
            dict(prometheus_port=object()),
            dict(prometheus_port=2**70),
        ]
        for kwargs in cases:
            (key,) = kwargs
            try:
                pipetel.init(**kwargs)
            except pipetel.ConfigError as e:
                assert isinstance(e, pipetel.PipetelError)
                assert f"`{key}`" in str(e), (key, str(e))
                print("refused", key)
            else:
                raise AssertionError(f"{kwargs} was accepted")
            assert not pipetel.is_initialized()
        # Nothing was left installed: a good init still works.
        with pipetel.init("ok", prometheus_port=0) as guard:
            assert pipetel.is_initialized()
            assert guard.prometheus_addr.startswith("127.0.0.1:")
        print("done")
        """
    )
    assert out.count("refused") == 9 and out.endswith("done\n")


def test_keywords_beat_variables_and_the_file(tmp_path):
    config = tmp_path / "pipetel.toml"
    config.write_text('service_name = "from-file"\n[prometheus]\nport = 1\npath = "/from-file"\n')
    out = run_py(
        f"""
        import pipetel, urllib.request
        guard = pipetel.init(config_file={str(config)!r}, prometheus_port=0)
        host, port = guard.prometheus_addr.rsplit(":", 1)
        assert port not in ("1", "2"), guard.prometheus_addr
        # The file's path applies (nothing overrode it).
        body = urllib.request.urlopen(f"http://{{guard.prometheus_addr}}/from-file").read().decode()
        assert "target_info" in body and 'service_name="from-env"' in body, body[:500]
        guard.flush()
        guard.shutdown()
        guard.shutdown()  # twice is fine
        assert not guard.active
        print("ok")
        """,
        OTEL_EXPORTER_PROMETHEUS_PORT="2",
        OTEL_SERVICE_NAME="from-env",
    )
    assert out == "ok\n"


def test_bad_file_key_and_bad_variable_are_config_errors(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[prometheus]\nprot = 1\n")
    out = run_py(
        f"""
        import pipetel
        try:
            pipetel.init(config_file={str(config)!r})
        except pipetel.ConfigError as e:
            assert "prot" in str(e) and "bad.toml" in str(e), str(e)
            print("file refused")
        import os
        os.environ["OTEL_EXPORTER_PROMETHEUS_PORT"] = "many"
        try:
            pipetel.init()
        except pipetel.ConfigError as e:
            assert "OTEL_EXPORTER_PROMETHEUS_PORT" in str(e), str(e)
            print("variable refused")
        """
    )
    assert out == "file refused\nvariable refused\n"


def test_second_init_raises_already_initialized():
    out = run_py(
        """
        import pipetel
        guard = pipetel.init(exporters_metrics=[])
        try:
            pipetel.init(exporters_metrics=[])
        except pipetel.AlreadyInitialized as e:
            assert isinstance(e, pipetel.InitError) and isinstance(e, pipetel.PipetelError)
            print("refused:", e)
        assert guard.prometheus_addr is None
        guard.shutdown()
        """
    )
    assert out.startswith("refused: pipetel is already initialised")


def test_port_in_use_is_an_init_error_naming_the_address():
    out = run_py(
        """
        import socket, pipetel
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
        port = s.getsockname()[1]
        try:
            pipetel.init(prometheus_port=port)
        except pipetel.InitError as e:
            assert not isinstance(e, pipetel.AlreadyInitialized)
            assert str(port) in str(e), str(e)
            print("refused")
        """
    )
    assert out == "refused\n"


# ----- spans without init (no-op spans that carry a remote parent) -----


def test_spans_before_init_carry_a_remote_parent_through_threads_and_tasks():
    assert pipetel.traceparent() is None
    with pipetel.span("outside") as s:
        assert s.traceparent is None and not s.is_recording
    trace_id = TP.split("-")[1]
    with pipetel.span("remote child", parent=TP) as s:
        assert pipetel.current_span() is s
        assert pipetel.traceparent().split("-")[1] == trace_id

        async def task():
            return pipetel.traceparent()

        async def main():
            return await asyncio.gather(asyncio.create_task(task()), asyncio.create_task(task()))

        assert {tp.split("-")[1] for tp in asyncio.run(main())} == {trace_id}
        seen = {}
        t = threading.Thread(target=lambda: seen.update(bare=pipetel.traceparent()))
        t.start()
        t.join()
        # A new thread starts without a current span (pass parent= explicitly).
        assert seen["bare"] is None
    assert pipetel.current_span() is None


def test_span_arguments_are_checked():
    with pytest.raises(ValueError, match="parent: invalid traceparent"):
        pipetel.span("x", parent="00-zz-01")
    with pytest.raises(TypeError, match="parent"):
        pipetel.span("x", parent=42)
    with pytest.raises(TypeError, match='attribute "rows"'):
        pipetel.span("x", rows=object())
    with pytest.raises(TypeError, match="one type"):
        pipetel.span("x", mixed=[1, "a"])
    with pytest.raises(ValueError, match="64-bit"):
        pipetel.span("x", big=2**80)
    with pytest.raises(TypeError):
        pipetel.traced(42)


def test_exception_in_span_is_re_raised():
    with pytest.raises(KeyError):
        with pipetel.span("fails"):
            raise KeyError("k")
    assert pipetel.current_span() is None


# ----- spans through the real tracer (console exporter, in a subprocess) -----

SPANS_PROGRAM = """
import asyncio, threading, pipetel

guard = pipetel.init("spans", exporters_traces=["console"], exporters_metrics=[], log_console=False)

@pipetel.traced
def sync_work():
    return pipetel.traceparent()

@pipetel.traced(name="async work", attributes={"kind": "async"})
async def async_work(i):
    await asyncio.sleep(0.01)
    with pipetel.span(f"task {i}"):
        await asyncio.sleep(0)

with pipetel.span("root", rows=3) as root:
    assert pipetel.traceparent() == root.traceparent
    with pipetel.span("child") as child:
        tp = sync_work()
        assert tp.split("-")[1] == root.trace_id and tp.split("-")[2] != child.span_id

    async def main():
        await asyncio.gather(*(asyncio.create_task(async_work(i)) for i in range(2)))
    asyncio.run(main())

    def in_thread():
        with pipetel.span("thread explicit", parent=root):
            pass
        with pipetel.span("thread bare"):
            pass
    t = threading.Thread(target=in_thread); t.start(); t.join()
    try:
        with pipetel.span("fails"):
            raise ValueError("bad row 7")
    except ValueError:
        print("re-raised")
with pipetel.span("remote", parent="%s"):
    pass
assert pipetel.traceparent() is None
guard.shutdown()
"""


def test_spans_nest_across_threads_and_asyncio_tasks():
    out = run_py(SPANS_PROGRAM % TP)
    assert "re-raised" in out
    spans = console_spans(out)
    root = spans["root"]
    assert root["parent"] is None
    for name in ("child", "async work", "thread explicit", "fails"):
        assert spans[name]["parent"] == root["span_id"], name
        assert spans[name]["trace_id"] == root["trace_id"], name
    assert spans["sync_work"]["parent"] == spans["child"]["span_id"]
    # Each asyncio task's inner span is a child of that task's own `async work` span.
    assert spans["task 1"]["trace_id"] == root["trace_id"]
    assert spans["task 1"]["parent"] != root["span_id"]
    assert spans["thread bare"]["parent"] is None and spans["thread bare"]["trace_id"] != root["trace_id"]
    assert "Error" in spans["fails"]["status"] and "bad row 7" in spans["fails"]["status"]
    remote = spans["remote"]
    assert remote["trace_id"] == TP.split("-")[1] and remote["parent"] == TP.split("-")[2]


# ----- fork safety (what docs/src/python.md documents) -----


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_after_init_works_and_shuts_down_at_once():
    out = run_py(
        """
        import os, time, pipetel
        guard = pipetel.init("forked", prometheus_port=0, shutdown_timeout_ms=20000)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                with pipetel.span("in child"):
                    with pipetel.stage("child stage", shards=1) as stage:
                        with stage.shard(0) as shard:
                            shard.record(1, 1)
                try:
                    pipetel.init()
                    code = 3
                except pipetel.AlreadyInitialized:
                    pass
                start = time.monotonic()
                guard.flush()
                guard.shutdown()
                if time.monotonic() - start > 10:
                    code = 4
            except BaseException as e:
                print("child failed:", repr(e), flush=True)
                code = 5
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        guard.shutdown()
        """
    )
    assert out.strip() == "child exit 0"


# ----- end to end: spans reach the real collector with the right parents -----


def test_spans_reach_the_collector_with_their_parents_across_a_subprocess(collector, run_example):
    env = {**collector.env("grpc"), "OTEL_METRICS_EXPORTER": "none", "OTEL_TRACES_EXPORTER": "otlp"}
    done = run_example("spans_across_processes", env)
    root_tp = next(l.split()[1] for l in done.stdout.splitlines() if l.startswith("root "))
    _, trace_id, root_id, _ = root_tp.split("-")
    names = {"root", "in thread", "fetch", "stage tokenize", "shard 0 of tokenize", "in shard", "child process", "child work"}

    def arrived(r: peers.Received) -> bool:
        return names <= {s.name for s in r.spans if s.trace_id == trace_id}

    got = collector.wait_for(arrived, timeout=30)
    spans = [s for s in got.spans if s.trace_id == trace_id]
    by_name = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    (root,) = by_name["root"]
    assert root.span_id == root_id and root.parent_span_id == "" and root.attributes["job"] == "example"
    assert root.resource["service.name"] == "spans-parent"
    assert by_name["in thread"][0].parent_span_id == root_id
    assert len(by_name["fetch"]) == 3
    assert all(s.parent_span_id == root_id and s.attributes["kind"] == "async" for s in by_name["fetch"])
    (stage,) = by_name["stage tokenize"]
    assert stage.parent_span_id == root_id
    (shard,) = by_name["shard 0 of tokenize"]
    assert shard.parent_span_id == stage.span_id
    assert by_name["in shard"][0].parent_span_id == shard.span_id
    (child,) = by_name["child process"]
    assert child.parent_span_id == root_id and child.resource["service.name"] == "spans-child"
    assert by_name["child work"][0].parent_span_id == child.span_id
