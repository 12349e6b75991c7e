"""LoRA: low-rank adapters beside the frozen weights of a pretrained model (Hu et al., 2021).

The adapters are Keras's own: each targeted :class:`~kerasbert.models.layers.Projection`
(a Keras ``Dense``) is given ``enable_lora(rank)``, which adds ``lora_kernel_a`` (``in x
rank``) and ``lora_kernel_b`` (``rank x out``, zeros at the start, so the model begins as
it was loaded) and computes ``x (W + alpha / rank · A B) + b``. What is frozen is decided
here: every weight that a Google checkpoint of the model's family names (the pretrained
base), while the layers a task adds (a classifier's ``CLS-token``, a CRF, a span head) keep
training in full, as LoRA's paper and peft's ``modules_to_save`` do.

Saving a model with adapters (``model.save``) writes each kernel with its adapters merged
into it (Keras's ``Dense.save_own_variables``): a ``.keras`` file loads as a plain model
that gives the same outputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import keras

from kerasbert.models.layers import (
    FeedForward,
    MultiHeadSelfAttention,
    Projection,
    dense_layers,
    model_layers,
)

#: The projections adapters may be put beside: name -> (the layer kind, its projection).
TARGETS: dict[str, tuple[type[keras.layers.Layer], str]] = {
    "query": (MultiHeadSelfAttention, "query"),
    "key": (MultiHeadSelfAttention, "key"),
    "value": (MultiHeadSelfAttention, "value"),
    "attention_output": (MultiHeadSelfAttention, "output"),
    "intermediate": (FeedForward, "intermediate"),
    "output": (FeedForward, "output"),
}
#: LoRA's paper: the queries' and the values' projections.
DEFAULT_TARGETS = ("query", "value")


def checked_targets(targets: str | Iterable[str]) -> tuple[str, ...]:
    """``targets`` as a tuple of :data:`TARGETS` names (``"all"``: every one).

    Raises:
        ValueError: a name that is not a target, or none at all.

    Example:
        >>> checked_targets(["query", "value"])
        ('query', 'value')
        >>> checked_targets("querry")
        Traceback (most recent call last):
        ValueError: LoRA target 'querry': not one of query, key, value, ... (or all)
    """
    given = (targets,) if isinstance(targets, str) else tuple(targets)
    if given == ("all",):
        return tuple(TARGETS)
    for target in given:
        if target not in TARGETS:
            raise ValueError(f"LoRA target {target!r}: not one of {', '.join(TARGETS)} (or all)")
    if not given:
        raise ValueError(f"LoRA targets: none given; name some of {', '.join(TARGETS)}")
    return tuple(dict.fromkeys(given))


def target_projections(model: keras.Model, targets: Iterable[str]) -> list[Projection]:
    """The projections of ``model`` that ``targets`` (:data:`TARGETS` names) name, each once
    (ALBERT's shared layer: one)."""
    wanted = [TARGETS[target] for target in checked_targets(targets)]
    found: dict[int, Projection] = {}
    for layer in model_layers(model):
        for kind, projection in wanted:
            if isinstance(layer, kind):
                dense = getattr(layer, f"{projection}_dense")
                found.setdefault(id(dense), dense)
    return list(found.values())


def base_variables(model: keras.Model) -> list[keras.Variable]:
    """The weights of ``model`` that its family's Google checkpoint names: the pretrained
    base, which LoRA freezes."""
    from kerasbert.models.loading import model_targets

    return list({id(t.variable): t.variable for t in model_targets(model)}.values())


def enable_lora(model: keras.Model, rank: int, targets: str | Sequence[str] = DEFAULT_TARGETS,
                alpha: float | None = None) -> list[Projection]:
    """Puts LoRA adapters of ``rank`` beside the ``targets`` projections of every attention
    and feed-forward layer of ``model``, and freezes the pretrained base (every weight its
    Google checkpoint names); a task's head keeps training.

    Args:
        model: a model built by kerasbert (a task's model around one too).
        rank: the adapters' rank (LoRA's r), at least 1.
        targets: :data:`TARGETS` names (default ``("query", "value")``, as LoRA's paper), or
            ``"all"``.
        alpha: the adapters' scale is ``alpha / rank`` (None: ``rank``, a scale of 1, as
            Keras's default).

    Returns:
        the projections that were given adapters.

    Raises:
        ValueError: a rank below 1, an unknown target, a model without such projections or
            with adapters already.

    Example:
        >>> from kerasbert import build_transformer_model
        >>> model = build_transformer_model(dict(vocab_size=100, hidden_size=16,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=32))
        >>> len(enable_lora(model, rank=4))
        4
        >>> sum(int(keras.ops.size(w)) for w in model.trainable_weights)
        512
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"LoRA rank ({rank!r}): must be a whole number of at least 1")
    projections = target_projections(model, targets)
    if not projections:
        raise ValueError(f"model {model.name!r}: no {', '.join(checked_targets(targets))} "
                         "projection to put LoRA adapters beside (kerasbert's attention and "
                         "feed-forward layers have them)")
    given = [dense.path for dense in projections if dense.lora_enabled]
    if given:
        raise ValueError(f"model {model.name!r}: LoRA adapters are there already "
                         f"({given[0]}...); build the model again to change them")
    for variable in base_variables(model):
        variable.trainable = False
    for dense in projections:
        dense.enable_lora(rank, lora_alpha=alpha)
    # A predict, fit or evaluate traced before computes without the adapters: trace again.
    model.train_function = model.test_function = model.predict_function = None
    return projections


def adapter_variables(model: keras.Model) -> list[keras.Variable]:
    """The LoRA adapters of ``model`` (``lora_kernel_a``, ``lora_kernel_b``), in layer order."""
    return [variable for layer in dense_layers(model) if layer.lora_enabled
            for variable in (layer.lora_kernel_a, layer.lora_kernel_b)]
