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

import json
import os
from collections.abc import Iterable, Sequence

import keras

from kerasbert.models.layers import (
    Projection,
    ProjectionOwner,
    dense_layers,
    model_layers,
)
from kerasbert.models.names import LORA_TARGETS

#: The projections adapters may be put beside: each layer says which of its projections
#: a target names (``ProjectionOwner.LORA_PROJECTIONS``: GAU-α's input product is the
#: queries', the keys' and the values' at once).
TARGETS = LORA_TARGETS
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
    wanted = checked_targets(targets)
    found: dict[int, Projection] = {}
    for layer in model_layers(model):
        if isinstance(layer, ProjectionOwner):
            for target in wanted:
                for dense in layer.lora_projections(target):
                    found.setdefault(id(dense), dense)
    return list(found.values())


def base_variables(model: keras.Model) -> list[keras.Variable]:
    """The pretrained base of ``model``, which LoRA freezes: the weights a checkpoint was
    loaded into (:func:`~kerasbert.models.loading.loaded_from_checkpoint`; a span head or a
    classifier put on after the load is not among them); for a model no checkpoint was
    loaded into in this process (one from a ``.keras`` file), every weight its family's
    Google checkpoint names."""
    from kerasbert.models.loading import loaded_from_checkpoint, model_targets

    loaded = loaded_from_checkpoint(model)
    if loaded:
        return loaded
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


def own_variables(model: keras.Model) -> list[keras.Variable]:
    """What a model with adapters holds beyond its pretrained base (:func:`base_variables`):
    the adapters and the task's head, in ``model.weights`` order."""
    base = {id(variable) for variable in base_variables(model)}
    return [variable for variable in model.weights if id(variable) not in base]


#: The ``format`` attribute of an adapters file (:func:`save_adapters`).
ADAPTERS_FORMAT = "kerasbert-lora-1"


def save_adapters(model: keras.Model, path: str | os.PathLike[str]) -> list[str]:
    """Writes what ``model`` holds beyond its pretrained base, with its architecture, to one
    HDF5 file at ``path``: LoRA's adapters **and** the task's head (a classifier, a CRF),
    a few megabytes for BERT-base where the whole model is 400. :func:`load_adapted` builds
    the model again from it and the base's checkpoint.

    Returns:
        the variables' paths, in the order written.

    Raises:
        ValueError: the model has no adapters, or two of its variables share a path.

    Example:
        >>> import tempfile
        >>> from kerasbert import build_transformer_model
        >>> model = build_transformer_model(dict(vocab_size=100, hidden_size=16,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=32))
        >>> _ = enable_lora(model, rank=4)
        >>> save_adapters(model, os.path.join(tempfile.mkdtemp(), "a.h5"))[:2]
        ['Transformer-0-MultiHeadSelfAttention/query/lora_kernel_a', \
'Transformer-0-MultiHeadSelfAttention/query/lora_kernel_b']
    """
    import h5py

    if not adapter_variables(model):
        raise ValueError(f"model {model.name!r}: no LoRA adapters to save (kerasbert.enable_lora "
                         "puts them in); save a model without them with model.save")
    variables = own_variables(model)
    paths = [variable.path for variable in variables]
    if len(set(paths)) != len(paths):
        twice = next(path for path in paths if paths.count(path) > 1)
        raise ValueError(f"model {model.name!r}: two weights named {twice}; give its layers "
                         "names of their own")
    architecture = keras.saving.serialize_keras_object(model)
    with h5py.File(os.fspath(path), "w") as file:
        file.attrs["format"] = ADAPTERS_FORMAT
        file.attrs["model"] = json.dumps(architecture)
        file.attrs["paths"] = json.dumps(paths)
        for i, variable in enumerate(variables):
            file.create_dataset(str(i), data=keras.ops.convert_to_numpy(variable))
    return paths


def load_adapted(path: str | os.PathLike[str], checkpoint: str | os.PathLike[str],
                 family: str | None = None) -> keras.Model:
    """The model :func:`save_adapters` wrote to ``path``, its pretrained base read from the
    Google ``checkpoint`` it was trained on (``family``: whose variable names, None: the
    model's), its adapters and head from the file.

    Raises:
        ValueError: not an adapters file, or one of another model (a weight named or
            shaped otherwise; the path named).
        kerasbert.checkpoints.io.CheckpointError: a checkpoint that does not fit the base.
    """
    import h5py

    from kerasbert.models.loading import load_checkpoint

    path = os.fspath(path)
    try:
        with h5py.File(path, "r") as file:
            if file.attrs.get("format") != ADAPTERS_FORMAT:
                raise ValueError(f"adapters in {path}: not a kerasbert LoRA adapters file")
            architecture = json.loads(file.attrs["model"])
            paths = json.loads(file.attrs["paths"])
            values = [file[str(i)][()] for i in range(len(paths))]
    except (OSError, KeyError, json.JSONDecodeError) as error:
        raise ValueError(f"adapters in {path}: cannot be read, the file is truncated or "
                         f"corrupt ({error})") from None
    model = keras.saving.deserialize_keras_object(architecture, safe_mode=True)
    # What the checkpoint lacks (a span head put on after the load) is the file's.
    report = load_checkpoint(model, checkpoint, strict=False, family=family)
    variables = own_variables(model)
    if [variable.path for variable in variables] != paths:
        unloaded = sorted(set(variable.path for variable in variables) - set(paths))
        why = (f"the checkpoint lacks {unloaded[0]} ({report.checkpoint})" if unloaded else
               f"{len(paths)} weights saved, {len(variables)} expected")
        raise ValueError(f"adapters in {path}: not of a model on this base: {why}")
    for variable, value in zip(variables, values, strict=True):
        if tuple(variable.shape) != value.shape:
            raise ValueError(f"adapters in {path}: {variable.path} is {value.shape}, the model "
                             f"takes {tuple(variable.shape)}")
        variable.assign(value)
    return model


def merged_model(model: keras.Model) -> keras.Model:
    """A copy of ``model`` without adapters, each adapted kernel replaced by ``W + alpha /
    rank · A B`` (what ``model.save`` writes; Keras's ``Dense.kernel``): the same outputs,
    computed as fast as a model that never had adapters (an export's).

    Example:
        >>> from kerasbert import build_transformer_model
        >>> model = build_transformer_model(dict(vocab_size=100, hidden_size=16,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=32))
        >>> _ = enable_lora(model, rank=4)
        >>> len(adapter_variables(merged_model(model)))
        0
    """
    adapted = [layer for layer in dense_layers(model) if layer.lora_enabled]
    quantized = [layer.path for layer in adapted if layer.quantization_mode is not None]
    if quantized:
        raise ValueError(f"{quantized[0]}: quantized to {adapted[0].quantization_mode}, so its "
                         "adapters cannot be merged into its kernel here; save the model with "
                         "model.save (Keras merges and quantizes again) or merge before "
                         "quantizing")
    values = {variable.path: variable for variable in model.weights}
    for layer in adapted:
        values[f"{layer.path}/kernel"] = layer.kernel  # Keras's Dense.kernel: W + s·A B
    merged = keras.saving.deserialize_keras_object(
        _without_adapters(keras.saving.serialize_keras_object(model)), safe_mode=True)
    for variable in merged.weights:
        if variable.path not in values:
            raise ValueError(f"model {model.name!r}: {variable.path} has no counterpart in the "
                             "model with adapters")
        variable.assign(values[variable.path])
    return merged


def _without_adapters(config: object) -> object:
    """A serialized model's config with every layer's LoRA settings removed."""
    if isinstance(config, dict):
        return {key: _without_adapters(value) for key, value in config.items()
                if key not in ("projection_lora", "lora_rank", "lora_alpha")}
    if isinstance(config, list):
        return [_without_adapters(value) for value in config]
    return config
