"""The progress display in a Jupyter notebook, seen by a real kernel's client: ``pipetel.init``
with progress on inside an IPython kernel shows one display per cell that runs stages, updated
in place (``update_display_data`` with its ``display_id``) while they run and left with their
summary lines; no terminal escape codes reach the cell. Outside a kernel nothing changes."""

import os
import pathlib
import re
import subprocess
import sys
import textwrap
import time
from typing import Any, Dict, List, Optional

import pytest

import peers
import pipetel

#: A stage of three shards lasting about 3 s on the cell's thread.
STAGE = """
import time
with pipetel.stage("{name}", shards=3) as stage:
    for i in range(3):
        with stage.shard(i) as shard:
            for _ in range(10):
                shard.record(100, 1000)
                time.sleep({step})
"""

#: The stage's summary line in the stage table: 3000 items, 30000 bytes, 3 shards, none failed.
SUMMARY = r"^{name}\s+succeeded\s+3000\s+30000\s+\d+\.\d\ds\s+3\s+0\s"


def kernel_env(tmp_path: pathlib.Path, progress_env: Optional[str] = None) -> Dict[str, str]:
    """The kernel's environment: no inherited pipetel/OTel settings, no metrics exporter (no
    port), no rows store, and the pipetel package this test imports found first."""
    package_parent = str(pathlib.Path(pipetel.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in [package_parent, os.environ.get("PYTHONPATH", "")] if p)
    extra = {"OTEL_METRICS_EXPORTER": "none", "PIPETEL_ROWS": "false", "PYTHONPATH": path, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    if progress_env is not None:
        extra["PIPETEL_PROGRESS"] = progress_env
    return peers.clean_env(extra)


class Kernel:
    """A real IPython kernel (ipykernel, started by jupyter_client) and a client collecting each
    execution's iopub messages."""

    def __init__(self, tmp_path: pathlib.Path, env: Dict[str, str]) -> None:
        jupyter_client = pytest.importorskip("jupyter_client", reason="jupyter_client is not installed")
        pytest.importorskip("ipykernel", reason="ipykernel is not installed")
        from jupyter_client.kernelspec import KernelSpecManager

        # A kernel spec of this interpreter, so the kernel runs the Python (and pipetel) under test.
        spec = tmp_path / "kernels" / "pipetel-test"
        spec.mkdir(parents=True)
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(
            '{"argv": %s, "display_name": "pipetel test", "language": "python"}' % repr(argv).replace("'", '"')
        )
        ksm = KernelSpecManager(kernel_dirs=[str(spec.parent)], ensure_native_kernel=False)
        self.km = jupyter_client.KernelManager(kernel_name="pipetel-test", kernel_spec_manager=ksm)
        try:
            self.km.start_kernel(env=env)
            self.kc = self.km.client()
            self.kc.start_channels()
            self.kc.wait_for_ready(timeout=60)
        except Exception as e:  # the kernel or its channels, before any pipetel code runs
            self.stop()
            pytest.skip(f"an IPython kernel cannot start here: {e!r}")

    def execute(self, code: str, timeout: float = 60) -> List[Dict[str, Any]]:
        """Runs ``code`` in the kernel; returns the iopub messages of its execution, in order,
        up to the kernel going idle. Fails on an error in the cell."""
        msg_id = self.kc.execute(code)
        got: List[Dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"the cell did not finish in {timeout} s: {got}"
            msg = self.kc.get_iopub_msg(timeout=left)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            got.append(msg)
            if msg["msg_type"] == "error":
                pytest.fail("the cell raised: " + "\n".join(msg["content"]["traceback"]))
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return got

    def stop(self) -> None:
        kc = getattr(self, "kc", None)
        if kc is not None:
            kc.stop_channels()
        if self.km.has_kernel:
            self.km.shutdown_kernel(now=True)


def displays(msgs: List[Dict[str, Any]], kind: str) -> List[Dict[str, Any]]:
    return [m for m in msgs if m["msg_type"] == kind]


def text(msg: Dict[str, Any]) -> str:
    return msg["content"]["data"]["text/plain"]


def display_id(msg: Dict[str, Any]) -> str:
    return msg["content"]["transient"]["display_id"]


def no_escape_codes(msgs: List[Dict[str, Any]]) -> None:
    for m in msgs:
        if m["msg_type"] == "stream":
            assert "\x1b[" not in m["content"]["text"], m
        if m["msg_type"] in ("display_data", "update_display_data"):
            assert "\x1b" not in text(m), m


@pytest.fixture
def kernel(tmp_path: pathlib.Path):
    k = Kernel(tmp_path, kernel_env(tmp_path))
    try:
        yield k
    finally:
        k.stop()


def test_a_cell_running_a_stage_shows_one_display_updated_in_place(kernel: Kernel) -> None:
    cell = textwrap.dedent(
        """
        import pipetel
        guard = pipetel.init("notebook-test", pipeline_progress="true")
        """
    ) + STAGE.format(name="nb-tokenize", step=0.1)
    msgs = kernel.execute(cell)
    no_escape_codes(msgs)
    shown = displays(msgs, "display_data")
    assert len(shown) == 1, f"one display for the cell: {msgs}"
    ident = display_id(shown[0])
    assert ident, shown[0]
    assert shown[0]["content"]["data"]["text/html"].startswith("<pre>")
    updates = displays(msgs, "update_display_data")
    assert updates, f"the display is updated while the stage runs: {msgs}"
    assert all(display_id(u) == ident for u in updates), updates
    # While the stage runs: its live line, with rates and its shards of the 3 declared.
    live = [
        line
        for m in [shown[0]] + updates
        for line in text(m).splitlines()
        if re.match(r"^nb-tokenize\s+\S+ items/s\s+\S+ \S*B/s\s+shards \d/3 done, 0 failed, [01] running", line)
    ]
    assert len(live) >= 2, f"live lines in the first frames: {[text(m) for m in [shown[0]] + updates]}"
    assert any(re.search(r"shards [12]/3 done", line) for line in live), live
    # The cell ends with the stage's summary line under the table's header, and no live line.
    final = text(updates[-1]).splitlines()
    assert final[0].startswith("stage ") and "status" in final[0], final
    assert len(final) == 2 and re.match(SUMMARY.format(name="nb-tokenize"), final[1]), final
    assert "items/s" not in text(updates[-1])

    # A cell running no stage shows nothing; the next stage's cell gets its own display, which
    # shows that cell's stage only.
    quiet = kernel.execute("x = 1 + 1")
    assert not displays(quiet, "display_data") and not displays(quiet, "update_display_data"), quiet
    msgs = kernel.execute(STAGE.format(name="nb-index", step=0.05))
    no_escape_codes(msgs)
    shown = displays(msgs, "display_data")
    assert len(shown) == 1, msgs
    assert display_id(shown[0]) != ident
    last = ([shown[0]] + [u for u in displays(msgs, "update_display_data") if display_id(u) == display_id(shown[0])])[-1]
    lines = text(last).splitlines()
    assert len(lines) == 2 and re.match(SUMMARY.format(name="nb-index"), lines[1]), lines
    assert "nb-tokenize" not in text(last)


def test_progress_from_the_environment_and_always_also_show_in_the_notebook(tmp_path: pathlib.Path) -> None:
    """``PIPETEL_PROGRESS=always`` would draw escape codes on stderr: in a kernel it is the
    notebook display too."""
    k = Kernel(tmp_path, kernel_env(tmp_path, progress_env="always"))
    try:
        cell = textwrap.dedent(
            """
            import pipetel
            guard = pipetel.init("notebook-env-test")
            """
        ) + STAGE.format(name="nb-env", step=0.05)
        msgs = k.execute(cell)
    finally:
        k.stop()
    no_escape_codes(msgs)
    assert not [m for m in msgs if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"], msgs
    shown = displays(msgs, "display_data")
    assert len(shown) == 1, msgs
    last = ([shown[0]] + displays(msgs, "update_display_data"))[-1]
    assert re.match(SUMMARY.format(name="nb-env"), text(last).splitlines()[-1]), text(last)


def test_outside_a_kernel_the_terminal_display_is_unchanged(tmp_path: pathlib.Path) -> None:
    """A plain process with ``always`` draws on stderr as before; no IPython is imported."""
    program = textwrap.dedent(
        """
        import sys
        import pipetel, pipetel._notebook as nb
        assert not nb.in_kernel()
        with pipetel.init("terminal-test", pipeline_progress="always"):
        """
    ) + textwrap.indent(STAGE.format(name="term-stage", step=0.05), "    ") + "\nassert 'IPython' not in sys.modules\n"
    env = peers.clean_env({"OTEL_METRICS_EXPORTER": "none", "PIPETEL_ROWS": "false"})
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "\x1b[" in done.stderr, done.stderr
    assert re.search(SUMMARY.format(name="term-stage"), done.stderr, re.M), done.stderr


def test_a_failing_display_turns_off_with_one_warning(tmp_path: pathlib.Path) -> None:
    """The notebook display's error path, without a kernel: a display call that raises gives one
    ``RuntimeWarning`` and no further calls; the program runs on."""
    program = textwrap.dedent(
        """
        import time, warnings
        import pipetel
        from pipetel._notebook import _NotebookProgress

        calls = []
        def broken(*args, **kwargs):
            calls.append(args)
            raise OSError("the frontend went away")

        with pipetel.init("broken-display-test"):
            view = _NotebookProgress(broken)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with pipetel.stage("broken-stage", shards=1) as stage:
                    with stage.shard(0) as shard:
                        shard.record(1, 1)
                        view.post_run_cell()
                        view.pre_run_cell()
                        view.post_run_cell()
            assert len(calls) == 1, calls
            assert [str(w.message) for w in caught] == [
                "pipetel: the notebook progress display is turned off: OSError('the frontend went away')"
            ], [str(w.message) for w in caught]
            print("ran on")
        """
    )
    env = peers.clean_env({"OTEL_METRICS_EXPORTER": "none", "PIPETEL_ROWS": "false"})
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran on"
