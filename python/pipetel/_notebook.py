"""Progress in a Jupyter notebook (``PIPETEL_PROGRESS`` / ``pipetel.init(pipeline_progress=...)``
inside an IPython kernel).

A kernel's stderr is not a terminal, and the terminal display's escape codes would garble a
cell, so :func:`pipetel.init` keeps the terminal display off there and calls :func:`start`: each
cell that runs stages gets ONE output (``IPython.display.display(..., display_id=True)``) that
is updated in place about every second while its stages run, and left showing the cell's final
frame: the stage table's header, the summary line of each stage that ended during the cell, and
the live line of any stage still running. The frames are the Rust core's
(``pipetel._pipetel._ProgressLines``); this module only shows them.

Nothing here may break a program: an error while showing turns the display off with one
warning.
"""

from __future__ import annotations

import html
import importlib
import sys
import threading
import warnings
from typing import Any, Callable, Dict, List, Optional

from ._pipetel import _ProgressLines

#: Seconds between two updates of a cell's display while its stages run.
INTERVAL = 1.0

#: The display started by :func:`start` (``init`` is once per process, so there is one).
_progress: Optional["_NotebookProgress"] = None


def in_kernel() -> bool:
    """Whether this process is an IPython kernel (a Jupyter notebook's, or any ipykernel client's):
    IPython is imported and its running shell has a ``kernel``. A terminal IPython has none."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def bundle(lines: List[str]) -> Dict[str, str]:
    """A frame as the display's MIME bundle: plain text, and the same text preformatted in HTML."""
    text = "\n".join(lines)
    return {"text/plain": text, "text/html": "<pre>" + html.escape(text) + "</pre>"}


class _NotebookProgress:
    """The display of the running cell: a view of the stages (ended since the cell started, and
    running), shown once there is something to show and updated while it changes."""

    def __init__(self, display: Callable[..., Any]) -> None:
        self._display = display
        self._lock = threading.Lock()
        self._view = _ProgressLines()
        self._handle: Any = None
        self._shown: Optional[str] = None
        # `init` runs inside a cell: that cell is the first to show progress.
        self._in_cell = True
        self._off = False

    def pre_run_cell(self, info: Any = None) -> None:
        """A cell starts: a fresh view and, when something shows, a display of its own. The
        previous cell's display gets its last frame first (a stage it ran may have ended since)."""
        with self._lock:
            self._refresh()
            self._view = _ProgressLines()
            self._handle = None
            self._shown = None
            self._in_cell = True

    def post_run_cell(self, result: Any = None) -> None:
        """A cell ended: its display shows the final frame (on the main thread, in the cell's
        output). A stage still running after it (on a thread of its own) keeps updating it."""
        with self._lock:
            self._refresh()
            self._in_cell = False

    def run(self) -> None:
        """The updating thread: a frame about every :data:`INTERVAL` seconds."""
        stop = threading.Event()
        while not self._off:
            stop.wait(INTERVAL)
            with self._lock:
                self._refresh()

    def _refresh(self) -> None:
        """Shows the frame now if it changed (the lock held). Only a running cell creates a
        display; an error turns the display off for good with one warning."""
        if self._off:
            return
        try:
            lines = self._view.lines()
            if not lines:
                return
            data = bundle(lines)
            if data["text/plain"] == self._shown:
                return
            if self._handle is None:
                if not self._in_cell:
                    return
                self._handle = self._display(data, raw=True, display_id=True)
            else:
                self._handle.update(data, raw=True)
            self._shown = data["text/plain"]
        except Exception as e:
            self._off = True
            warnings.warn(f"pipetel: the notebook progress display is turned off: {e!r}", RuntimeWarning, stacklevel=1)


def start() -> None:
    """Starts the notebook display in this kernel (:func:`pipetel.init` calls it when progress is
    on); raises when IPython's display machinery is missing (``init`` turns that into one
    warning)."""
    global _progress
    if _progress is not None:
        return
    # Imported by name: IPython is no dependency of pipetel (a kernel has it).
    ipython = importlib.import_module("IPython")
    display = importlib.import_module("IPython.display").display
    shell = ipython.get_ipython()
    if shell is None:
        raise RuntimeError("no IPython shell is running")
    progress = _NotebookProgress(display)
    shell.events.register("pre_run_cell", progress.pre_run_cell)
    shell.events.register("post_run_cell", progress.post_run_cell)
    threading.Thread(target=progress.run, name="pipetel-notebook-progress", daemon=True).start()
    _progress = progress
