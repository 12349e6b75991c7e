"""Distribution strategies of a training run: one device, mirrored, or several workers."""

STRATEGIES = ("mirrored", "multi-worker")


def make_strategy(name):
    """The ``tf.distribute`` strategy called ``name`` (None: the default strategy).

    ``multi-worker`` reads the cluster from the ``TF_CONFIG`` environment variable.
    """
    import tensorflow as tf

    if not name:
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    if name == "multi-worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"strategy {name!r} is not supported; use {' or '.join(STRATEGIES)}")
