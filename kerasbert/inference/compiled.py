"""A function of a model's layers compiled the way its backend compiles it, for inference.

The one place where inference switches on Keras's backend. :func:`compiled` gives, for a
function that calls a model's layers:

* on TensorFlow, a ``tf.function`` traced once for the given signature (batch and length
  unknown), or the function itself when no signature is given (decoding compiles its whole
  loop itself there);
* on JAX, one ``jax.jit`` program per input shape with the model's weights passed in as
  arguments, which the layers read through a ``keras.StatelessScope``: a weight is never
  folded into a program as a constant (a program per weight update, and a copy of every
  weight in each), and no op is dispatched from Python one at a time;
* on PyTorch, the function with no gradient kept of what it computes.

:class:`~kerasbert.inference.predictor.Predictor`, the decoders' cached step and the NER
tagger's decoding all go through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras


def compiled(function: Callable[..., Any], variables: Sequence[keras.Variable],
             signature: Sequence[str] | None = None,
             jit_compile: bool = False) -> Callable[..., Any]:
    """``function`` compiled for Keras's backend (see the module's docstring).

    Args:
        function: calls the layers whose weights are ``variables``; its arguments are
            tensors.
        variables: every weight ``function`` reads (``model.weights``).
        signature: on TensorFlow, the dtype of each argument, each ``(batch, length)``;
            None leaves the function as it is there.
        jit_compile: on TensorFlow, whether the ``tf.function`` is compiled by XLA.

    Returns:
        a function of the same arguments and results.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        return _jax_compiled(function, list(variables))
    if backend == "torch":
        import torch

        return torch.no_grad()(function)
    if backend == "tensorflow" and signature is not None:
        import tensorflow as tf

        return tf.function(function, jit_compile=jit_compile,
                           input_signature=[tf.TensorSpec((None, None), dtype)
                                            for dtype in signature])
    return function


def _jax_compiled(function: Callable[..., Any],
                  variables: list[keras.Variable]) -> Callable[..., Any]:
    import jax

    def run(values: list[Any], *arguments: Any) -> Any:
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return function(*arguments)

    program = jax.jit(run)
    return lambda *arguments: program([variable.value for variable in variables], *arguments)
