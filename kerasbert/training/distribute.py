"""Distribution strategies of a training run: one device, mirrored, or several workers.

``mirrored`` is ``tf.distribute.MirroredStrategy`` over the process's GPUs (else its CPU)
on TensorFlow's backend, and on JAX's Keras's own ``keras.distribution.DataParallel`` over
the process's devices (:class:`KerasDataParallel`): every weight on every device, every
batch split among them, the gradients summed across them.

``multi-worker`` is ``tf.distribute.MultiWorkerMirroredStrategy`` over the cluster in
``TF_CONFIG``. Every worker runs the same command and the same steps, each on its part
of every global batch (:func:`shard_by_data`). Only the chief (task ``chief``, else
``worker`` 0) writes the run directory ``--output``. The other workers write the same
files into a temporary folder of their own, removed when the run ends
(:func:`worker_run`): saving, evaluating and stopping early must happen on every worker
alike, since each of them joins collectives that all workers take part in.

What a worker needs from the chief travels over the same collectives, so the workers
need no shared filesystem: the outcome of the checks made before training
(:func:`check_together`; one failing worker stops them all, none waits forever) and the
backup a resumed run starts from (:func:`share_files`).

Example::

    # on each host of the cluster, with its own TF_CONFIG
    strategy = make_strategy("multi-worker")    # reads TF_CONFIG; before any other op
    is_chief(strategy)                          # True on the chief, False on the other workers
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from kerasbert.training.options import RunOptions
    from kerasbert.training.rundir import RunDirectory

STRATEGIES = ("mirrored", "multi-worker")
_CHUNK_WORDS = 1 << 24  # 64 MiB of int32 per collective when files are sent


#: The strategies each Keras backend besides TensorFlow runs (TensorFlow: all).
BACKEND_STRATEGIES = {"jax": ("mirrored",), "torch": ()}


class KerasDataParallel:
    """``mirrored`` on JAX: ``keras.distribution.DataParallel`` over every device of the
    process (its GPUs, else its CPU; ``XLA_FLAGS=--xla_force_host_platform_device_count=N``
    makes N of a CPU), answering the few questions a run asks of a ``tf.distribute``
    strategy. The run trains inside :meth:`scope` from its first step to its last, where
    Keras splits each batch among the devices.

    A batch whose rows do not split evenly (an epoch's last, a dev set's last) is given
    whole to every device instead, which computes the same step: JAX cannot split it,
    and no row is dropped or repeated.
    """

    def __init__(self) -> None:
        from keras import distribution

        class _AnyBatch(distribution.DataParallel):
            def get_data_layout(self, data_shape: Sequence[int]) -> Any:
                if data_shape and data_shape[0] % self.device_mesh.devices.size:
                    return distribution.TensorLayout([None] * len(data_shape),
                                                     self.device_mesh)
                return super().get_data_layout(data_shape)

        devices = distribution.list_devices()
        self.distribution = _AnyBatch(devices=devices)
        self.num_replicas_in_sync = len(devices)
        self.extended = _Extended(should_checkpoint=True, worker_devices=tuple(devices))

    def scope(self) -> contextlib.AbstractContextManager[Any]:
        """Keras's distribution scope: weights made in it lie on every device, and each
        step run in it splits its batch."""
        return self.distribution.scope()


@dataclasses.dataclass(frozen=True)
class _Extended:
    should_checkpoint: bool
    worker_devices: tuple


def backend_refusal(name: str | None, backend: str) -> str | None:
    """Why strategy ``name`` does not run on Keras's ``backend``, or None where it does."""
    if not name or backend == "tensorflow" or name in BACKEND_STRATEGIES.get(backend, ()):
        return None
    here = ", ".join(f"--strategy {other}" for other in BACKEND_STRATEGIES.get(backend, ()))
    return (f"--strategy {name} runs on TensorFlow's backend only "
            f"(on {backend}: {here or 'none'})")


def make_strategy(name: str | None) -> Any:
    """The strategy called ``name`` (None: the default strategy): a ``tf.distribute``
    strategy, or on JAX a :class:`KerasDataParallel`.

    ``multi-worker`` reads the cluster from the ``TF_CONFIG`` environment variable and
    must be made before TensorFlow runs its first operation; it returns once every
    worker of the cluster has started.
    """
    import keras
    import tensorflow as tf

    backend = keras.backend.backend()
    refusal = backend_refusal(name, backend)
    if refusal:
        raise ValueError(f"{refusal}, and Keras runs on {backend!r}")
    if not name:
        return tf.distribute.get_strategy()
    if backend == "jax":
        return KerasDataParallel()
    if name == "mirrored":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    if name == "multi-worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"strategy {name!r} is not supported; use {' or '.join(STRATEGIES)}")


def whole_run(strategy: Any) -> contextlib.AbstractContextManager[Any]:
    """The context a run trains in from its first step to its last: the Keras
    distribution's scope of a :class:`KerasDataParallel`, else none (a ``tf.distribute``
    strategy is entered where the model is built)."""
    if isinstance(strategy, KerasDataParallel):
        return strategy.scope()
    return contextlib.nullcontext()


def is_chief(strategy: Any) -> bool:
    """Whether this process writes the run directory: True except on the non-chief
    workers of a multi-worker run."""
    return bool(strategy.extended.should_checkpoint)


def worker_count(strategy: Any) -> int:
    """The number of processes that train together (1 unless multi-worker)."""
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    return strategy.num_replicas_in_sync // len(strategy.extended.worker_devices)


def shard_by_data(dataset: Any) -> Any:
    """``dataset`` of global batches, split batch by batch among the workers.

    Each worker reads the whole dataset and keeps its part of every batch, so the
    workers together see exactly the batches one process would see. A generator's
    dataset cannot be split by files; saying so spares TensorFlow's warning.
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def fit_under(model: Any, strategy: Any) -> Any:
    """Lets Keras ``fit`` train the compiled ``model`` under ``strategy`` as it would on
    one device; returns ``model``.

    Keras 3 goes wrong under a distribution strategy in three places, mended here on
    this model and its optimizer alone (the default strategy is left as it is):

    - before the first step it builds the metrics from a batch that it draws from a
      first iterator of the data, then trains on a second one. A dataset that goes on
      from where the first iterator stopped (an endless generator of epochs) would
      train on other batches than one device does; and under several workers the
      batch is averaged over the replicas with ``strategy.reduce``, which cannot
      reduce a nested batch, so ``fit`` fails at once (keras-team/keras#20585). Only
      shapes and dtypes are needed: here they come from the dataset's
      ``element_spec``, and no batch is drawn;
    - the optimizer clips each replica's part of the gradient by ``global_clipnorm``
      before the parts are summed, so the clipping differs from one device's (as soon
      as the norm is near the limit) and changes with the number of replicas. Here the
      summed gradient is clipped, once;
    - under several workers, it averages each train or test step's logs over the
      replicas along axis 0, which a scalar lacks. The logs are metric results,
      already the same on every replica, so each step returns them with an axis of
      length 1 and the average is the value itself.

    The first two replace private methods of Keras's (:mod:`kerasbert.internals` checks
    they are still called); with the fast paths off (``KERASBERT_FAST=0``) they are left
    out, and ``fit`` builds and clips as Keras does. The third takes public API only and
    stays.
    """
    import tensorflow as tf

    from kerasbert import internals
    from kerasbert.training.optimizer import inner_optimizer

    if isinstance(strategy, KerasDataParallel):
        return model  # Keras's own distribution: nothing to mend
    with strategy.scope():
        if not tf.distribute.has_strategy():
            return model  # the default strategy: none of this applies
    if internals.fast_paths_enabled("distribution"):  # off: Keras's own build and clipping
        internals.build_from_element_spec(model, strategy)
        # A LossScaleOptimizer clips nothing: its inner optimizer clips, after unscaling.
        updating = inner_optimizer(model.optimizer)
        if updating.global_clipnorm and strategy.num_replicas_in_sync > 1:
            # Keras's own clipping, moved after the sum: it also turns the embeddings'
            # sparse gradients dense, as on one device, and Adam treats the two apart.
            internals.clip_after_sum(updating)
    if worker_count(strategy) > 1:
        def with_replica_axis(step: Callable[[Any], Any]) -> Callable[[Any], Any]:
            def step_with_axis(data: Any) -> Any:
                return tf.nest.map_structure(lambda value: tf.reshape(value, [1]), step(data))
            return step_with_axis

        model.train_step = with_replica_axis(model.train_step)
        model.test_step = with_replica_axis(model.test_step)
    return model


def check_together(strategy: Any, check: Callable[[], Any]) -> Any:
    """Runs ``check()`` on every worker and returns its value; if it fails on any
    worker, every worker stops.

    The failing worker raises its own error; the others raise a
    :class:`~kerasbert.training.rundir.RunError` that quotes it and names the worker.
    Without this, a worker whose checks passed would wait for the failed one forever.
    """
    from kerasbert.training.rundir import RunError

    error = value = None
    try:
        value = check()
    except Exception as caught:  # whatever stops this worker must reach the others
        error = caught
    if worker_count(strategy) > 1:
        mine = (str(error).strip().splitlines() or [type(error).__name__])[0] if error else ""
        reports = _gather_bytes(strategy, mine.encode())
        failed = [(i, message) for i, message in enumerate(reports) if message]
        if failed and error is None:
            index, message = failed[0]
            raise RunError(f"{message.decode()} (on {_task_name(strategy, index)}; every "
                           "worker stops)")
    if error is not None:
        raise error
    return value


def share_files(strategy: Any, folder: str, names: Sequence[str] = ()) -> Sequence[str]:
    """Copies files of the chief's ``folder`` into ``folder`` on every other worker.

    Call it on every worker. The chief sends ``names`` (paths relative to its
    ``folder``); the others ignore their ``names``, write what the chief sent, each file
    atomically, and return the chief's names.
    """
    from kerasbert import files

    if worker_count(strategy) == 1:
        return list(names)
    chief = is_chief(strategy)
    # Only the chief sends: the other workers' parts are empty, so the whole is the chief's.
    names = json.loads(b"".join(_gather_bytes(strategy, json.dumps(list(names)).encode()
                                              if chief else b"")))
    for name in names:
        content = b""
        if chief:
            with open(os.path.join(folder, name), "rb") as f:
                content = f.read()
        content = b"".join(_gather_bytes(strategy, content))
        if not chief:
            with files.atomic_path(os.path.join(folder, name)) as temporary:
                with open(temporary, "wb") as f:
                    f.write(content)
    return names


@contextlib.contextmanager
def worker_run(strategy: Any, run: RunDirectory,
               options: RunOptions) -> Iterator[tuple[RunDirectory, RunOptions]]:
    """Yields the ``(run, options)`` this process trains with.

    The chief (and a run on one machine) gets them as given, and sends the other
    workers what a resumed run reads:
    :meth:`~kerasbert.training.rundir.RunDirectory.resume_files`. Another worker
    gets a new temporary folder, removed on exit, that holds a copy of those files, and
    options naming it as ``output``; it resumes exactly when the chief does.

    Args:
        strategy: the run's strategy.
        run: the :class:`kerasbert.training.rundir.RunDirectory` of ``--output``, already checked.
        options: the run's options (``output``, ``resume``).
    """
    if is_chief(strategy):
        share_files(strategy, run.path, run.resume_files() if options.resume else [])
        yield run, options
        return
    with tempfile.TemporaryDirectory(prefix="kerasbert-worker-",
                                     ignore_cleanup_errors=True) as folder:
        received = share_files(strategy, folder)
        yield (dataclasses.replace(run, path=folder),
               dataclasses.replace(options, output=folder, resume=bool(received)))


def _gather_bytes(strategy: Any, data: bytes) -> list[bytes]:
    """Every worker's ``data``, in the cluster's order (the chief first).

    Collectives only sum, so each worker's bytes go, as int32 words, into its own
    slot of a buffer that is zero elsewhere; the sum is every worker's data. Slots
    are per replica, and only the first replica of each worker fills its slot.
    """
    import numpy as np

    local = len(strategy.extended.worker_devices)
    words = np.frombuffer(data + bytes(-len(data) % 4), dtype=np.int32)
    sizes = _sum_over_replicas(
        strategy, lambda replica: np.eye(1, strategy.num_replicas_in_sync, replica,
                                         dtype=np.int64)[0] * len(data) * (replica % local == 0))
    sizes = [int(size) for size in sizes[::local]]
    lengths = [-(-size // 4) for size in sizes]
    starts = np.cumsum([0] + lengths)
    buffer = np.zeros(starts[-1], dtype=np.int32)
    for first in range(0, len(buffer), _CHUNK_WORDS):
        last = min(first + _CHUNK_WORDS, len(buffer))

        def part(replica: int, first: int = first, last: int = last) -> np.ndarray:
            chunk = np.zeros(last - first, dtype=np.int32)
            if replica % local == 0:
                start = starts[replica // local]
                low, high = max(first, start), min(last, start + len(words))
                if low < high:
                    chunk[low - first:high - first] = words[low - start:high - start]
            return chunk

        buffer[first:last] = _sum_over_replicas(strategy, part)
    return [buffer[start:start + length].tobytes()[:size]
            for start, length, size in zip(starts, lengths, sizes)]


def _sum_over_replicas(strategy: Any, value: Callable[[int], np.ndarray]) -> Any:
    """The sum over all replicas of ``value(replica id)`` (a NumPy array), on every worker."""
    import tensorflow as tf

    per_replica = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(value(context.replica_id_in_sync_group)))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None).numpy()


def _task_name(strategy: Any, index: int) -> str:
    """The task of the ``index``-th worker in the cluster's order: the chief, then workers."""
    jobs = strategy.cluster_resolver.cluster_spec().as_dict()
    if "chief" in jobs:
        return "the chief" if index == 0 else f"worker {index - 1}"
    return "the chief (worker 0)" if index == 0 else f"worker {index}"
