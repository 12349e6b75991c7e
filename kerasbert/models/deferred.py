"""Weights made without values, for a model a checkpoint is about to fill.

Building BERT-base the usual way draws 100M random numbers and allocates every weight,
then the checkpoint overwrites them all: most of the build time, and the model's weights
and the values read from the file are both held at the peak. Keras can instead create
variables *deferred* (inside ``keras.StatelessScope(initialize_variables=False)``: shape,
dtype and initializer, no value). The loader then creates each variable from the value
it read, once; what no checkpoint fills (dropout seeds, layers a non-strict load lacks)
is initialized by its own initializer afterwards, exactly as it would have been.

Keras has no public call to create one deferred variable from a given value; the private
hooks this takes (``Variable._initialize``, ``_deferred_initialize``, Keras's list of
pending variables) are reached through :mod:`kerasbert.internals`, which checks them at
import, and the tests check that the fast path is taken so that a Keras change is noticed.
With the fast paths off (``KERASBERT_FAST=0``) nothing is deferred: the weights are drawn,
and the loader assigns the checkpoint's values over them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from typing import Any

import keras

from kerasbert import internals


@contextlib.contextmanager
def deferred_weights() -> Iterator[list[keras.Variable]]:
    """Variables created inside are deferred (no value) until :func:`set_value` or
    :func:`settle`. Within another stateless scope (the caller's) or with the fast paths
    off it defers nothing.

    Yields a list that, on exit, holds the deferred variables made inside. A caller that
    drops the model (a failed load) calls :func:`forget` on it.
    """
    made: list[keras.Variable] = []
    if not internals.fast_paths_enabled("deferred") or internals.in_stateless_scope():
        yield made
        return
    before = {id(variable) for variable in internals.pending_variables()}
    with keras.StatelessScope(initialize_variables=False):
        yield made
    made.extend(variable for variable in internals.pending_variables()
                if id(variable) not in before)


def is_deferred(variable: keras.Variable) -> bool:
    """True for a variable made by :func:`deferred_weights` and not given a value yet."""
    return internals.is_deferred(variable)


def set_value(variable: keras.Variable, value: Any) -> None:
    """Gives ``variable`` the value ``value`` (its dtype and shape already): a deferred
    variable is created from it (one allocation), any other is assigned."""
    if is_deferred(variable):
        internals.create_from_value(variable, value)
    else:
        variable.assign(value)


def settle(variables: Collection[keras.Variable]) -> None:
    """Initializes what is still deferred in ``variables`` with its own initializer and
    takes them all off Keras's pending list."""
    for variable in variables:
        if is_deferred(variable):
            internals.initialize_deferred(variable)
    forget(variables)


def forget(variables: Collection[keras.Variable]) -> None:
    """Takes ``variables`` off Keras's pending list (a model dropped half-made)."""
    ours = {id(variable) for variable in variables}
    internals.set_pending_variables(
        [variable for variable in internals.pending_variables() if id(variable) not in ours])


@contextlib.contextmanager
def shapes_only() -> Iterator[None]:
    """Models built inside get every weight's shape and dtype but no value: enough for
    ``count_params``, ``summary`` and ``plot_model``, not for calling the model.

    BERT-base is built in about 0.1 s this way, against several seconds of drawing
    100M random numbers; ``kerasbert audit`` and ``kerasbert plot`` count and draw so.
    With the fast paths off (``KERASBERT_FAST=0``) the weights are drawn as usual.

    >>> from kerasbert import build_transformer_model
    >>> with shapes_only():
    ...     bert = build_transformer_model({"vocab_size": 100, "hidden_size": 16,
    ...         "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32})
    >>> bert.count_params()
    14304
    """
    with deferred_weights() as made:
        yield
    forget(made)
