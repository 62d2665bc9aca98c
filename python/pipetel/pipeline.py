"""Stages and workers: the stage table, worker rows, metrics and spans of a pipeline's stages.

Map:

* :func:`stage` starts a :class:`Stage` (``with pipetel.stage("tokenize", shards=16) as
  stage:``); on the thread running each shard, ``with stage.shard(i) as shard:`` gives a
  :class:`Shard` that counts with ``shard.record(items, nbytes)`` and ``shard.add(key, value)``.
  Each emits stage and worker rows (OTel log records, and JSON lines when ``PIPETEL_ROWS_FILE``
  is set), the stage and worker metrics, and a span per stage and shard. An exception leaving a
  shard ends it failed with the exception as reason and goes on; ``finish()`` / ``fail(reason)``
  end one by hand and return its row. ``shard.phase(name)`` (a :class:`Phase`) splits a shard's
  time (``with shard.phase("wait.input"):``, or as a decorator: a :class:`PhaseFunction`);
  ``stage.answers()`` gives its distribution, skew, stragglers, stalls and phases.
* :class:`RowWriter`: explicit rows, for a program that measures its shards itself and only
  reports (``emit_stage_stat`` and ``emit_worker_stat``, the keywords of Marin Zephyr's
  ``StatsWriter``, which :mod:`pipetel.zephyr` keeps under its own names).

A :class:`Stage` or :class:`Shard` is also a ``parent=`` for :func:`pipetel.span`. The rows'
namespace is ``pipeline`` unless ``pipetel.init(pipeline_namespace=...)`` says otherwise.
:func:`stage`, :class:`Stage` and :class:`Shard` are also at the top level.
"""

from ._pipetel import Phase, PhaseFunction, Shard, Stage, _StatsWriterCore, stage

__all__ = ["Phase", "PhaseFunction", "RowWriter", "Shard", "Stage", "stage"]


class RowWriter(_StatsWriterCore):
    """Writes explicit stage and worker rows through pipetel, for a program that measures its
    shards itself (rather than with :func:`stage`).

    * ``emit_stage_stat(stage_counters=, stage_name=, execution_id=, elapsed=, total_shards=,
      status=)``: one stage row (``stage_counters`` maps counter keys to numbers);
    * ``emit_worker_stat(shard_idx=, stage_name=, execution_id=, status=, ts=, items=,
      bytes_processed=, item_rate=, byte_rate=, cpu_time_total=, cpu_current_pct=,
      cpu_avg_pct=, mem_current_bytes=, mem_avg_bytes=, mem_peak_bytes=)``: one worker row
      (``ts`` a ``datetime``, naive meaning UTC).

    ``status`` is ``"START"``, ``"RUNNING"``, ``"END"`` or ``"FAILED"``. Each row goes where
    :func:`pipetel.init` exports (an OTel log record whose event name is the namespace, a JSON
    line when ``PIPETEL_ROWS_FILE`` is set) and the stage and worker metrics take its values.
    Bad inputs raise ``TypeError``/``ValueError`` naming the keyword (NaN, negative numbers, a
    non-``datetime`` ``ts``, an unknown status or keyword)."""

    def __init__(self) -> None:
        pass
