"""A saved kerasbert model loaded in any script: :func:`load_model`.

Keras finds a saved layer by its registered name (``kerasbert>MultiHeadSelfAttention``)
only once the module that registers it is imported, and it imports modules itself only
for its own packages. ``import kerasbert`` imports nothing of Keras or TensorFlow (a
tokenizer needs neither) and changes nothing in Keras, so the objects are registered when
a model is loaded: :func:`load_model` imports every module that registers one, then asks
Keras. ``keras.saving.load_model`` itself works as well once :func:`register_saved_objects`
has run.

Example:
    >>> import kerasbert
    >>> bert = kerasbert.build_transformer_model(dict(vocab_size=100, hidden_size=16,
    ...     num_hidden_layers=1, num_attention_heads=2, intermediate_size=32), with_mlm=True)
    >>> bert.save("bert.keras")
    >>> kerasbert.load_model("bert.keras").get_layer("MLM-Bias").name
    'MLM-Bias'
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only
    import keras

#: The modules that register objects a saved kerasbert model refers to (Keras's registered
#: names ``kerasbert>...``) besides the model library's
#: (:data:`kerasbert.models.saved.MODEL_OBJECTS`) and each task's module: bert4keras's layers
#: and optimizers, and the learning-rate schedule of a run's optimizer.
SAVED_OBJECTS = ("kerasbert.layers", "kerasbert.optimizers", "kerasbert.training.optimizer")


def register_saved_objects() -> None:
    """Imports every module that registers an object a saved kerasbert model refers to
    (:data:`SAVED_OBJECTS`, the model library's and each task's module); after it,
    ``keras.saving.load_model(path, safe_mode=True)`` finds them all."""
    from kerasbert.models.saved import register_model_objects
    from kerasbert.tasks import TASKS, get_task

    register_model_objects()
    for module in SAVED_OBJECTS:
        importlib.import_module(module)
    for task in TASKS:
        get_task(task)


def load_model(filepath: str | os.PathLike[str], custom_objects: dict[str, Any] | None = None,
               compile: bool = True, safe_mode: bool = True) -> keras.Model:
    """``keras.saving.load_model`` with kerasbert's objects registered first: a run's
    ``model.keras``, or any ``.keras`` file holding kerasbert's layers, in Keras's safe
    mode by default.

    Args:
        filepath: the ``.keras`` file.
        custom_objects, compile, safe_mode: as ``keras.saving.load_model`` takes them.

    Returns:
        the model.

    Raises:
        ValueError, OSError: what Keras raises for a file it cannot load.
    """
    register_saved_objects()
    import keras

    return keras.saving.load_model(filepath, custom_objects=custom_objects, compile=compile,
                                   safe_mode=safe_mode)
