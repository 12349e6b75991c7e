"""The model library's objects that a saved model refers to, registered with Keras at once.

Keras finds a saved layer by its registered name (``kerasbert>MultiHeadSelfAttention``) only
once the module that registers it is imported. A loader of the model library's files (a run's
``model.keras``) calls :func:`register_model_objects` first; :func:`kerasbert.load_model`
adds the bert4keras modules' and the tasks' objects.
"""

import importlib

#: The model library's modules that register objects, besides each family's module.
MODEL_OBJECTS = ("kerasbert.models.attention_masks", "kerasbert.models.crf",
                 "kerasbert.models.kernels", "kerasbert.models.layers",
                 "kerasbert.models.positions")


def register_model_objects() -> None:
    """Imports :data:`MODEL_OBJECTS` and every family's module."""
    from kerasbert.models.families import FAMILIES, family_class

    for module in MODEL_OBJECTS:
        importlib.import_module(module)
    for family in FAMILIES:
        family_class(family)
