"""The Keras models kerasbert makes: functional models whose ``fit`` on arrays is fast.

Given NumPy arrays, Keras 3's ``fit`` makes a new data iterator at every epoch, and tearing
the old one down leaves a core idle at each epoch's start: on a small BERT, ten-step epochs
ran at 64–70 samples/s against 88 from one endless pipeline. Every model kerasbert returns
(:func:`kerasbert.build_transformer_model`, the heads of :mod:`kerasbert.models.heads`, the
task models) is a plain ``keras.Model`` whose ``fit`` feeds arrays through one endless
pipeline instead: Keras's own batches (its shuffling per epoch, ``batch_size``, last partial
batch, ``class_weight``, ``sample_weight``, ``validation_split``), repeated, with
``steps_per_epoch`` set, so one iterator lasts the whole run; arrays given as
``validation_data`` are fed the same way. Anything else (a ``tf.data.Dataset``, a generator,
``steps_per_epoch`` given, ``shuffle="batch"``) goes to Keras's ``fit`` unchanged, and so
does everything with the fast paths off (``KERASBERT_FAST=0``, see
:mod:`kerasbert.internals`).

The method is set on the model object, not on its class: what is saved (``.keras``,
``.weights.h5``, SavedModel) is Keras's functional model, as before.

Example:
    >>> import numpy as np
    >>> inputs = keras.Input((3,))
    >>> model = functional_model(inputs, keras.layers.Dense(1)(inputs), name="tiny")
    >>> model.compile("sgd", "mse")
    >>> x, y = np.ones((10, 3), "float32"), np.zeros((10, 1), "float32")
    >>> history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    >>> len(history.history["loss"]), type(model).__name__
    (2, 'Functional')
"""

from __future__ import annotations

import functools
from typing import Any

import keras
import numpy as np

from kerasbert import internals

#: Keras's ``fit`` default batch size.
DEFAULT_BATCH_SIZE = 32


def functional_model(inputs: Any, outputs: Any, name: str | None = None) -> keras.Model:
    """``keras.Model(inputs, outputs, name=name)`` with the fast ``fit`` on arrays."""
    return with_fast_fit(keras.Model(inputs, outputs, name=name))


def with_fast_fit(model: keras.Model) -> keras.Model:
    """Gives ``model`` (a Keras model) the ``fit`` of this module; returns the model."""
    model.fit = functools.partial(fit, model)
    functools.update_wrapper(model.fit, fit)
    return model


def has_fast_fit(model: keras.Model) -> bool:
    """Whether ``model``'s ``fit`` is this module's."""
    return getattr(vars(model).get("fit"), "func", None) is fit


def fit(model: keras.Model, x: Any = None, y: Any = None, batch_size: int | None = None,
        epochs: int = 1, verbose: str | int = "auto",
        callbacks: list[keras.callbacks.Callback] | None = None,
        validation_split: float = 0.0, validation_data: Any = None, shuffle: bool | str = True,
        class_weight: dict[int, float] | None = None, sample_weight: Any = None,
        initial_epoch: int = 0, steps_per_epoch: int | None = None,
        validation_steps: int | None = None, validation_batch_size: int | None = None,
        validation_freq: int = 1) -> keras.callbacks.History:
    """Keras's ``Model.fit``, with its arguments and results; NumPy arrays (or nests of
    them) are fed through one endless pipeline of Keras's own batches (see the module).

    Returns:
        The ``History`` Keras's ``fit`` returns.

    Raises:
        ValueError: ``steps_per_epoch`` or ``validation_steps`` given and not a whole number
            of at least 1 (Keras's own ``fit`` waits forever on 0).
    """
    for name, steps in (("steps_per_epoch", steps_per_epoch),
                        ("validation_steps", validation_steps)):
        if steps is not None and (isinstance(steps, bool) or not isinstance(
                steps, (int, np.integer)) or steps < 1):
            raise ValueError(f"{name}={steps!r}: must be a whole number of at least 1 (or "
                             "None: one pass over the data)")
    rest = dict(epochs=epochs, verbose=verbose, callbacks=callbacks,
                initial_epoch=initial_epoch, validation_freq=validation_freq)
    if not _endless_possible(x, y, sample_weight, shuffle, steps_per_epoch):
        _build_before_tracing(model, x)
        return keras.Model.fit(
            model, x, y, batch_size=batch_size, validation_split=validation_split,
            validation_data=validation_data, shuffle=shuffle, class_weight=class_weight,
            sample_weight=sample_weight, steps_per_epoch=steps_per_epoch,
            validation_steps=validation_steps, validation_batch_size=validation_batch_size,
            **rest)
    batch_size = batch_size or DEFAULT_BATCH_SIZE
    if validation_split and validation_data is None:  # Keras's split: the last rows
        (x, y, sample_weight), validation_data = internals.split_for_validation(
            (x, y, sample_weight), validation_split)
    train, steps = internals.endless_array_batches(x, y, sample_weight, batch_size, shuffle,
                                                   class_weight)
    if validation_data is not None and validation_steps is None:
        val_x, val_y, val_weight = keras.utils.unpack_x_y_sample_weight(validation_data)
        if internals.are_arrays((val_x, val_y, val_weight)):
            validation_data, validation_steps = internals.endless_array_batches(
                val_x, val_y, val_weight, validation_batch_size or batch_size, shuffle=False)
    _build_before_tracing(model, train)
    return keras.Model.fit(model, train, shuffle=False, steps_per_epoch=steps,
                           validation_data=validation_data, validation_steps=validation_steps,
                           validation_batch_size=validation_batch_size if validation_steps is None
                           else None, **rest)


def _build_before_tracing(model: keras.Model, data: Any) -> None:
    """Makes ``fit``'s state of ``model`` from the shapes of ``data`` when it is a
    ``tf.data.Dataset`` of dense tensors, so the train step is traced once (see
    :func:`kerasbert.internals.build_before_tracing`); other data is left to Keras."""
    if (keras.backend.backend() != "tensorflow" or not model.compiled
            or not internals.fast_paths_enabled("build")):
        return
    import tensorflow as tf

    if not isinstance(data, tf.data.Dataset) or not all(
            type(spec) is tf.TensorSpec for spec in tf.nest.flatten(data.element_spec)):
        return
    internals.build_before_tracing(model, data.element_spec)


def _endless_possible(x: Any, y: Any, sample_weight: Any, shuffle: bool | str,
                      steps_per_epoch: int | None) -> bool:
    """Whether this ``fit`` feeds arrays through one endless pipeline."""
    return (internals.fast_paths_enabled("fit") and steps_per_epoch is None and shuffle != "batch"
            and x is not None and keras.backend.backend() == "tensorflow"
            and internals.are_arrays((x, y, sample_weight)))
