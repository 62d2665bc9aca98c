"""Stages whose shards run on a Ray cluster: tasks, actors and Ray Data.

Tasks and actors take a handle and run a shard where they run::

    import ray, pipetel, pipetel.ray

    @ray.remote
    def tokenize(handle, i):
        with handle.shard(i) as shard:       # pipetel starts in the Ray worker from the driver's settings
            for batch in load(i):
                shard.record(len(batch), batch.nbytes)

    pipetel.init("tokenize")
    with pipetel.stage("tokenize", shards=16) as stage:
        handle = pipetel.ray.handle(stage)   # reachable from every node of the cluster
        ray.get([tokenize.remote(handle, i) for i in range(16)])

An actor method does the same (``with handle.shard(i) as shard:`` inside the method).

Ray Data: :func:`map_batches` wraps ``Dataset.map_batches`` so that each batch the function is
called with is one shard of the stage, recording the batch's rows as items and its size in
bytes (Arrow ``nbytes``, pandas ``memory_usage(deep=True)``, NumPy ``nbytes``)::

    ds = pipetel.ray.map_batches(ray.data.read_parquet(path), embed, stage, batch_size=256)
    ds.materialize()   # Ray Data is lazy: consume the dataset before the stage ends

Everything of :mod:`pipetel.remote` holds: the driver's stage row and stage metrics count every
shard exactly once its task returned, worker rows and spans go out from the Ray worker process
that ran the shard, and the shards' spans are children of the stage's span (one trace across the
driver and the tasks). The handle listens on the Ray node address of the driver
(``ray.util.get_node_ip_address()``), so workers on other machines reach it.
"""

from typing import Any, Callable, Dict, Optional, Union

from ._pipetel import Stage
from .remote import RemoteStage

__all__ = ["batch_size_of", "handle", "map_batches"]


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the message is the point
        raise ImportError("pipetel.ray needs Ray: pip install 'ray[data]'") from e
    return ray


def handle(stage: Stage, **kwargs: Any) -> RemoteStage:
    """The remote handle of ``stage`` (:meth:`pipetel.Stage.remote`), listening on the Ray node
    address of this process unless ``listen`` is given; other keywords as
    :meth:`pipetel.remote.RemoteStage.of`."""
    if "listen" not in kwargs:
        kwargs["listen"] = _ray().util.get_node_ip_address()
    return stage.remote(**kwargs)


def batch_size_of(batch: Any) -> "tuple[int, int]":
    """``(rows, bytes)`` of a Ray Data batch: a ``pyarrow.Table``, a ``pandas.DataFrame`` or a
    dict of NumPy arrays (rows: the length of its first column)."""
    if hasattr(batch, "num_rows") and hasattr(batch, "nbytes"):  # pyarrow.Table
        return int(batch.num_rows), int(batch.nbytes)
    if hasattr(batch, "memory_usage") and hasattr(batch, "shape"):  # pandas.DataFrame
        return int(batch.shape[0]), int(batch.memory_usage(index=True, deep=True).sum())
    if isinstance(batch, dict):
        rows = 0
        nbytes = 0
        for i, column in enumerate(batch.values()):
            if i == 0:
                rows = len(column)
            nbytes += int(getattr(column, "nbytes", 0))
        return rows, nbytes
    raise TypeError(f"batch: expected a pyarrow.Table, a pandas.DataFrame or a dict of arrays, got {type(batch).__name__}")


class _Indexer:
    """Hands out shard indexes, one per batch, across the whole cluster (a Ray actor)."""

    def __init__(self) -> None:
        self.next_index = 0

    def next(self) -> int:
        index = self.next_index
        self.next_index += 1
        return index


def _run_batch(handle_: RemoteStage, indexer: Any, fn: Callable[..., Any], batch: Any, args, kwargs) -> Any:
    ray = _ray()
    index = ray.get(indexer.next.remote())
    rows, nbytes = batch_size_of(batch)
    with handle_.shard(index) as shard:
        out = fn(batch, *args, **kwargs)
        shard.record(rows, nbytes)
    return out


def map_batches(
    dataset: Any,
    fn: Union[Callable[..., Any], type],
    stage: Union[Stage, RemoteStage],
    *,
    fn_args: tuple = (),
    fn_kwargs: Optional[Dict[str, Any]] = None,
    **map_batches_kwargs: Any,
) -> Any:
    """``dataset.map_batches(fn, **map_batches_kwargs)`` where each call of ``fn`` on a batch is
    one shard of ``stage`` (a :class:`pipetel.Stage` or its :class:`~pipetel.remote.RemoteStage`
    handle), numbered from 0 in the order batches start, recording the input batch's rows and
    bytes (:func:`batch_size_of`). A batch whose ``fn`` raises is a failed shard (Ray may retry
    it: the retry is another shard). ``fn`` may be a function or a callable class (Ray Data's
    actor form: pass ``concurrency=`` as usual); ``fn_args``/``fn_kwargs`` go to each call."""
    ray = _ray()
    handle_ = stage if isinstance(stage, RemoteStage) else handle(stage)
    indexer = ray.remote(num_cpus=0)(_Indexer).remote()
    fn_kwargs = dict(fn_kwargs or {})
    if isinstance(fn, type):
        user_class = fn

        class Sharded:
            def __init__(self, *init_args: Any, **init_kwargs: Any) -> None:
                self._fn = user_class(*init_args, **init_kwargs)

            def __call__(self, batch: Any) -> Any:
                return _run_batch(handle_, indexer, self._fn, batch, fn_args, fn_kwargs)

        Sharded.__name__ = Sharded.__qualname__ = user_class.__name__
        return dataset.map_batches(Sharded, **map_batches_kwargs)

    def sharded(batch: Any) -> Any:
        return _run_batch(handle_, indexer, fn, batch, fn_args, fn_kwargs)

    sharded.__name__ = sharded.__qualname__ = getattr(fn, "__name__", "map_batches")
    return dataset.map_batches(sharded, **map_batches_kwargs)
