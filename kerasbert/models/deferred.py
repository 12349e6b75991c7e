"""Weights made without values, for a model a checkpoint is about to fill.

Building BERT-base the usual way draws 100M random numbers and allocates every weight,
then the checkpoint overwrites them all: most of the build time, and the model's weights
and the values read from the file are both held at the peak. Keras can instead create
variables *deferred* (inside ``keras.StatelessScope(initialize_variables=False)``: shape,
dtype and initializer, no value). The loader then creates each variable from the value
it read, once; what no checkpoint fills (dropout seeds, layers a non-strict load lacks)
is initialized by its own initializer afterwards, exactly as it would have been.

Keras has no public call to create one deferred variable from a given value; the two
private hooks used here (``_initialize``, ``_deferred_initialize``, on every backend's
``Variable`` since Keras 3.0) stay in this module, and the tests check that the fast path
is taken so that a Keras change is noticed.
"""

import contextlib

import keras
from keras.src.backend.common import global_state

_PENDING = "uninitialized_variables"  # Keras's list of deferred variables


@contextlib.contextmanager
def deferred_weights():
    """Variables created inside are deferred (no value) until :func:`set_value` or
    :func:`settle`. Within another stateless scope it defers nothing.

    Yields a list that, on exit, holds the deferred variables made inside. A caller that
    drops the model (a failed load) calls :func:`forget` on it.
    """
    made = []
    if global_state.get_global_attribute("stateless_scope") is not None:  # the caller's
        yield made
        return
    before = {id(variable) for variable in _pending()}
    with keras.StatelessScope(initialize_variables=False):
        yield made
    made.extend(variable for variable in _pending() if id(variable) not in before)


def is_deferred(variable):
    """True for a variable made by :func:`deferred_weights` and not given a value yet."""
    return getattr(variable, "_value", True) is None


def set_value(variable, value):
    """Gives ``variable`` the value ``value`` (its dtype and shape already): a deferred
    variable is created from it (one allocation), any other is assigned."""
    if is_deferred(variable):
        variable._initialize(value)
        variable._initializer = None
    else:
        variable.assign(value)


def settle(variables):
    """Initializes what is still deferred in ``variables`` with its own initializer and
    takes them all off Keras's pending list."""
    for variable in variables:
        if is_deferred(variable):
            variable._deferred_initialize()
    forget(variables)


def forget(variables):
    """Takes ``variables`` off Keras's pending list (a model dropped half-made)."""
    ours = {id(variable) for variable in variables}
    global_state.set_global_attribute(
        _PENDING, [variable for variable in _pending() if id(variable) not in ours])


def _pending():
    return global_state.get_global_attribute(_PENDING) or []
