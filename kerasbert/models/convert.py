"""Hugging Face model directory → Google checkpoint, ``bert_config.json`` and ``vocab.txt``.

Reads ``config.json`` and the weights (``model.safetensors``, or else the ``tf_model.h5`` of
transformers' TensorFlow classes, which many hub repositories hold instead) of a BERT,
ALBERT, ELECTRA, RoFormer, GPT-2 or OpenAI GPT (base models, pretraining and task models;
the ``bert.`` / ``albert.`` / ``electra.`` / ``roformer.`` / ``transformer.`` prefix is
optional) and writes what Google's
code, bert4keras and :func:`kerasbert.build_transformer_model` read: each family's original
variable names (each family module's ``checkpoint_table``, :mod:`kerasbert.models.families`);
each family's Hugging Face layout is its module's ``hf_layout`` (GPT-2's and OpenAI GPT's
fused query/key/value: a ``HuggingFaceRecipe``). The span head of a BERT or
RoFormer ``...ForQuestionAnswering`` (``qa_outputs``) is written under the names of Google's
``run_squad.py``: ``cls/squad/output_weights`` and ``cls/squad/output_bias``.

A conversion replaces no file unless asked to (``overwrite``), and then only what an
earlier conversion to the same checkpoint wrote and recorded, unchanged since: each
conversion records its files' sizes and SHA-256 in ``kerasbert-conversion.json`` beside
them. Everything is checked, the free space included, before the first byte is written.

A preset that is a Hugging Face repository is converted here on download:
:func:`download_preset` gives the presets package (which knows no model) this converter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from kerasbert import disk_space, files
from kerasbert.checkpoints.io import (
    CheckpointError,
    atomic_checkpoint,
    check_prefix,
    checkpoint_files,
    checkpoint_size,
    checkpoints_in,
    dtype_name,
    is_float_dtype,
    save_variables,
)
from kerasbert.models import names
from kerasbert.models.config import BertConfig
from kerasbert.models.families import DEFAULT_FAMILY, FAMILIES, family_class, model_type_of
from kerasbert.models.families.base import (
    GoogleVariables,
    HuggingFaceLayout,
    HuggingFaceRecipe,
    Transformer,
)
from kerasbert.models.loading import table
from kerasbert.presets.download import download

# An Embedding's ``weight`` is the table itself (no transposing, no ``kernel``).
EMBEDDINGS = ("word_embeddings", "position_embeddings", "token_type_embeddings")
# The weights files read, the first one present: PyTorch's safetensors, or transformers'
# TensorFlow classes' Keras h5 (named and laid out as the PyTorch classes on reading).
WEIGHTS_FILES = ("model.safetensors", "tf_model.h5")


def layouts() -> dict[str, HuggingFaceLayout | HuggingFaceRecipe]:
    """``model_type`` -> its Hugging Face layout: each family module's ``hf_layout``.

    Example:
        >>> list(layouts())
        ['bert', 'albert', 'roformer', 'electra', 'gpt2', 'openai-gpt', 't5', 'mt5']
    """
    return {model_type: cls.hf_layout for model_type, cls in _layout_families().items()
            if cls.hf_layout is not None}


def _layout_families() -> dict[str, type[Transformer]]:
    """Hugging Face ``model_type`` -> the family whose layout reads it; of families that
    share one layout (GPT2-ML has GPT's), the one the others subclass."""
    found: dict[str, type[Transformer]] = {}
    for name in FAMILIES:
        cls = family_class(name)
        layout = cls.hf_layout
        if layout is None:
            continue
        key = layout.model_type if isinstance(layout, HuggingFaceRecipe) else cls.model_type
        if key not in found or issubclass(found[key], cls):
            found[key] = cls
    return found


def hf_description(model_type: str) -> str:
    """What to call a Hugging Face model of ``model_type`` in a message: its recipe's
    description, else its family's ``checkpoint_description``.

    Example:
        >>> hf_description("albert"), hf_description("openai-gpt")
        ('an ALBERT', 'an OpenAI GPT')
    """
    cls = _layout_families()[model_type]
    return getattr(cls.hf_layout, "description", "") or cls.checkpoint_description


# Old checkpoints name LayerNorm parameters gamma/beta, newer ones weight/bias.
_NORM_PARAMETERS = {"weight": "gamma", "gamma": "gamma", "bias": "beta", "beta": "beta"}
# Keys of a Hugging Face config that the Google config keeps (the rest is bookkeeping),
# besides those its family's layout names (its ``config_keys``).
KEPT_KEYS = ("embedding_size",)


def google_name(hf_name: str, model_type: str | None = None) -> tuple[str, bool] | None:
    """The Google variable for a Hugging Face parameter, and whether to transpose it.

    Args:
        hf_name: the parameter's name in the Hugging Face file.
        model_type: the Hugging Face ``model_type`` of a family with a layout (not a
            recipe); None: the default family's (BERT's).

    Returns:
        ``(name, transpose)``, or None for a parameter with no Google counterpart.

    Raises:
        ValueError: a ``model_type`` whose family reads its parameters by a recipe.

    Example:
        >>> google_name("bert.encoder.layer.3.attention.self.query.weight")
        ('bert/encoder/layer_3/attention/self/query/kernel', True)
        >>> google_name("albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.bias", "albert")
        ('bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/bias', False)
    """
    model_type = model_type or model_type_of(DEFAULT_FAMILY)
    layout = layouts()[model_type]
    if not isinstance(layout, HuggingFaceLayout):
        raise ValueError(f"model_type ({model_type!r}): its family reads each parameter by "
                         "its recipe, not by name")
    name = hf_name.removeprefix(layout.prefix)
    if name in layout.plain:
        return layout.plain[name], False
    module, _, parameter = name.rpartition(".")
    if module.startswith("embeddings.") and module[len("embeddings."):] in EMBEDDINGS:
        return (f"{layout.scope}/{module.replace('.', '/')}", False) if parameter == "weight" \
            else None
    scope = layout.modules.get(module)
    layer = re.fullmatch(layout.layer, module)
    if layer and layer.group("module") in layout.layer_modules:
        index = layer.groupdict().get("index")
        scope = (f"{layout.layer_scope.format(index=index)}/"
                 f"{layout.layer_modules[layer.group('module')]}")
    if scope is None:
        return None
    if scope.endswith(("LayerNorm", "LayerNorm_1")):
        norm = _NORM_PARAMETERS.get(parameter)
        return (f"{scope}/{norm}", False) if norm else None
    if parameter == "weight":
        return f"{scope}/kernel", True
    return (f"{scope}/bias", False) if parameter == "bias" else None


@dataclasses.dataclass
class Conversion:
    """What :func:`convert_hf_to_google` wrote, and the parameters it left out."""

    prefix: str
    config_path: str
    vocab_path: str | None
    variables: int
    skipped: list[str]


class WouldReplace(ValueError):
    """A conversion would replace files that were not asked to be replaced (without
    ``overwrite``), or that no earlier conversion wrote (with it)."""


def convert_hf_to_google(hf_dir: str | os.PathLike[str], prefix: str | os.PathLike[str],
                         dtype: DTypeLike | None = "float32",
                         overwrite: bool = False) -> Conversion:
    """Converts a Hugging Face BERT, ALBERT, ELECTRA, RoFormer, GPT-2 or OpenAI GPT directory
    into a Google checkpoint directory, in the family's original variable names.

    Everything is checked before anything is written: a conversion that fails, or is
    refused, leaves the folder of ``prefix`` as it was (and makes none).

    Args:
        hf_dir: a directory with ``config.json`` and ``model.safetensors`` or
            ``tf_model.h5`` (and ``vocab.txt``, copied when present).
        prefix: the checkpoint to write, e.g. ``"out/minilm/bert_model.ckpt"``;
            ``bert_config.json`` and ``vocab.txt`` go beside it.
        dtype: cast the weights to this NumPy dtype (None keeps theirs).
        overwrite: replace what an earlier conversion wrote there: the checkpoint's files
            at ``prefix``, ``bert_config.json`` and ``vocab.txt`` (never other files).

    Returns:
        A :class:`Conversion`.

    Raises:
        FileNotFoundError: ``config.json`` is missing, or both weights files.
        ValueError: the model is none of those families (or a BERT without absolute
            positions, a RoFormer that rotates values), ``hf_dir`` or
            ``config.json`` is not what it should be, or (a CheckpointError)
            the weights file is truncated or not what its name says, or lacks a
            variable the config needs (named, with the file); ``prefix`` is a directory.
        WouldReplace: a file to write exists (without ``overwrite``), or is not what a
            conversion writes (with it).
        kerasbert.disk_space.NoSpace: the disk has no room for the output.

    Example::

        # all-MiniLM-L6-v2/: a Hugging Face model folder (downloaded)
        convert_hf_to_google("all-MiniLM-L6-v2", "out/minilm/bert_model.ckpt").variables  # 103
    """
    hf_dir, prefix = os.fspath(hf_dir), os.fspath(prefix)
    if not os.path.isdir(hf_dir):
        error = ValueError if os.path.exists(hf_dir) else FileNotFoundError
        raise error(f"Hugging Face model in {hf_dir}: not a directory, expected one holding "
                    "config.json and model.safetensors")
    config, model_type = _read_config(os.path.join(hf_dir, "config.json"))
    weights_path = next((path for path in (os.path.join(hf_dir, name) for name in WEIGHTS_FILES)
                         if os.path.isfile(path)), None)
    if weights_path is None:
        hint = (" (found pytorch_model.bin; save it with safe_serialization=True)"
                if os.path.exists(os.path.join(hf_dir, "pytorch_model.bin")) else "")
        raise FileNotFoundError(f"weights in {hf_dir}: no {' or '.join(WEIGHTS_FILES)}{hint}")
    vocab_source = os.path.join(hf_dir, "vocab.txt")
    beside = os.path.dirname(prefix)
    config_path = os.path.join(beside, "bert_config.json")
    vocab_path = os.path.join(beside, "vocab.txt") if os.path.exists(vocab_source) else None
    check_output(prefix, config_path, vocab_path, overwrite)
    variables, skipped = _read_weights(weights_path, dtype, model_type)
    layout = layouts()[model_type]
    finish = getattr(layout, "finish", None)
    if finish is not None:
        finish(variables, _json_values(os.path.join(hf_dir, "config.json")))
    _check_complete(variables, config, weights_path, model_type)
    _write(variables, prefix, config, config_path, vocab_source if vocab_path else None,
           vocab_path)
    return Conversion(prefix, config_path, vocab_path, len(variables), skipped)


def download_preset(name: str, **options: Any) -> str:
    """The cached folder of preset ``name``, downloaded on first use (a Hugging Face
    repository converted by :func:`convert_hf_to_google`). The presets package knows no
    model: this is where it is given its converter.

    Args:
        name: a preset of the table (:mod:`kerasbert.presets.table`).
        **options: ``path``, ``progress``, ``timeout`` of
            :func:`kerasbert.presets.download.download`.

    Returns:
        The folder holding ``bert_config.json``, ``vocab.txt`` and ``bert_model.ckpt``.

    Raises:
        ValueError: ``name`` is no preset.
        kerasbert.presets.download.DownloadError: the download or the conversion failed
            (named, with the URL).

    Example::

        download_preset("rbt3")  # <cache>/presets/rbt3, from hfl/rbt3, converted once
    """
    return download(name, convert=convert_hf_to_google, weights_files=WEIGHTS_FILES, **options)


#: The record of a conversion's files, beside them: ``{"checkpoint": name of the prefix,
#: "files": {name: {"size", "sha256"}}}``.
RECORD = "kerasbert-conversion.json"


def check_output(prefix: str, config_path: str, vocab_path: str | None,
                 overwrite: bool) -> None:
    """Refuses, before anything is written, to replace a file that was not asked to be
    replaced: without ``overwrite`` any file of the output that exists, with it one that
    an earlier conversion to the same ``prefix`` did not write and record, or that changed
    since.

    Raises:
        ValueError: ``prefix`` is a directory, or names no file.
        WouldReplace: ``output in demo/new.ckpt: would replace demo/bert_config.json,
            demo/vocab.txt; pass --overwrite ...``.
    """
    check_prefix(prefix)
    existing = checkpoint_files(prefix) + [path for path in (config_path, vocab_path)
                                           if path and os.path.lexists(path)]
    if not existing:
        return
    if not overwrite:
        # bert_config.json and vocab.txt of another checkpoint: replaced, they would no
        # longer describe it.
        others = checkpoints_in(os.path.dirname(prefix) or ".")
        beside = f" (those of {', '.join(others)})" if others and not checkpoint_files(prefix) \
            else ""
        raise WouldReplace(
            f"output in {prefix}: would replace {', '.join(existing)}{beside}; pass --overwrite "
            "to replace an earlier conversion, or choose a new directory")
    folder = os.path.dirname(prefix)
    record, why = _record(folder), None
    for path in existing:
        entry = (record or {}).get("files", {}).get(os.path.basename(path))
        if not os.path.isfile(path):
            why = "is not a file"
        elif record is None:
            why = f"has no record of a conversion ({os.path.join(folder, RECORD)} is missing)"
        elif record.get("checkpoint") != os.path.basename(prefix):
            why = (f"belongs to the conversion to "
                   f"{os.path.join(folder, str(record.get('checkpoint')))}")
        elif entry is None:
            why = "was not written by the earlier conversion"
        elif files.fingerprint(path) != entry:
            why = "changed since the earlier conversion wrote it"
        if why:
            raise WouldReplace(
                f"output in {prefix}: {path} {why}; --overwrite replaces only the files of an "
                "earlier conversion to the same checkpoint, unchanged since: move it away or "
                "choose a new directory")


def _record(folder: str) -> dict[str, Any] | None:
    """The conversion record in ``folder`` (None: none, or not one kerasbert wrote)."""
    try:
        with open(os.path.join(folder or ".", RECORD), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("files"), dict) \
        else None


def _write(variables: dict[str, np.ndarray], prefix: str, config: BertConfig,
           config_path: str, vocab_source: str | None, vocab_path: str | None) -> None:
    """Writes the checkpoint, the config and the vocabulary under temporary names, then
    renames them into place; the free space is checked first."""
    folder = os.path.dirname(prefix) or "."
    what = "the checkpoint, bert_config.json and vocab.txt"
    size = checkpoint_size(variables) + _CONFIG_SIZE
    size += os.path.getsize(vocab_source) if vocab_source else 0
    with disk_space.room_for(folder, size, what=what, advice=disk_space.NOTHING_WRITTEN), \
            contextlib.ExitStack() as writes:
        staged_config = writes.enter_context(files.atomic_path(config_path))
        staged_vocab = writes.enter_context(files.atomic_path(vocab_path)) if vocab_path else None
        save_variables(variables, writes.enter_context(atomic_checkpoint(prefix)))
        config.to_json_file(staged_config)
        if staged_vocab and vocab_source:
            shutil.copyfile(vocab_source, staged_vocab)
    written = checkpoint_files(prefix) + [path for path in (config_path, vocab_path) if path]
    files.write_json(os.path.join(folder, RECORD), {
        "checkpoint": os.path.basename(prefix),
        "files": {os.path.basename(path): files.fingerprint(path) for path in written}})


_CONFIG_SIZE = 4096  # a bert_config.json: well under a block


def _read_config(path: str) -> tuple[BertConfig, str]:
    """The Google config of a Hugging Face ``config.json``, and its ``model_type``."""
    recipe = _recipe_of(path)
    if recipe is not None:
        values = recipe.config(_json_values(path), path)
        return BertConfig.from_dict(values, source=path), recipe.model_type
    # BertConfig refuses what no family builds (position_embedding_type, is_decoder...).
    config = BertConfig.from_json_file(path)
    model_type = model_type_of(config.family)
    if model_type not in layouts():
        raise ValueError(f"model_type ({model_type!r}) in {path}: kerasbert convert reads "
                         f"{', '.join(layouts())} models; build {model_type} from its original "
                         "checkpoint instead")
    family_class(config.family).check_hf_config(config, path)
    # Google's bert_config.json: its own keys, none of Hugging Face's bookkeeping; a family
    # other than the default keeps its model_type, so that the output says what it holds
    # (a config without one reads as the default family).
    kept_keys = KEPT_KEYS + getattr(layouts()[model_type], "config_keys", ())
    kept = {key: value for key, value in config.to_dict().items()
            if key not in config.extra or key in kept_keys}
    if model_type != model_type_of(DEFAULT_FAMILY):
        kept["model_type"] = model_type
    return BertConfig.from_dict(kept, source=path, family=config.family), model_type


def _json_values(path: str) -> dict[str, Any]:
    """A config file's JSON object (BertConfig's errors for what is not one)."""
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, ValueError):
        values = None
    if not isinstance(values, dict):
        BertConfig.from_json_file(path)  # raises its own one-line error
        raise ValueError(f"config in {path}: must be a JSON object")  # changed meanwhile
    return values


def _recipe_of(path: str) -> HuggingFaceRecipe | None:
    """The :class:`HuggingFaceRecipe` of the ``model_type`` a config names, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            model_type = json.load(f).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    layout = layouts().get(model_type) if isinstance(model_type, str) else None
    return layout if isinstance(layout, HuggingFaceRecipe) else None


def _google_variables(hf_name: str, value: np.ndarray,
                      layout: HuggingFaceLayout | HuggingFaceRecipe,
                      model_type: str) -> GoogleVariables | None:
    """``[(Google name, value)]`` of one parameter, or None where it has none."""
    if isinstance(layout, HuggingFaceRecipe):
        return layout.variables(hf_name.removeprefix(layout.prefix), value)
    found = google_name(hf_name, model_type)
    if found is None:
        return None
    name, transpose = found
    return [(name, value.T if transpose else value)]


def _ignored(hf_name: str, layout: HuggingFaceLayout | HuggingFaceRecipe) -> bool:
    name = hf_name.removeprefix(layout.prefix)
    if isinstance(layout, HuggingFaceRecipe):
        return any(re.fullmatch(pattern, name) for pattern in layout.ignored)
    return name in layout.ignored


def _read_weights(path: str, dtype: DTypeLike | None,
                  model_type: str) -> tuple[dict[str, np.ndarray], list[str]]:
    layout = layouts()[model_type]
    variables, skipped = {}, []
    for hf_name, value in _tensors(path):
        found = _google_variables(hf_name, value, layout, model_type)
        if found is None:
            if not _ignored(hf_name, layout):
                skipped.append(hf_name)
            continue
        for name, value in found:
            # bfloat16 (from ml_dtypes, which TensorFlow loads) is no np.floating.
            if dtype is not None and is_float_dtype(dtype_name(value.dtype)):
                value = value.astype(dtype)
            variables[name] = np.ascontiguousarray(value)
    return variables, skipped


def _tensors(path: str) -> Iterator[tuple[str, np.ndarray]]:
    """``(PyTorch name, array)`` of each weight of a weights file (:data:`WEIGHTS_FILES`)."""
    if os.path.basename(path) == "tf_model.h5":
        yield from _keras_h5_tensors(path)
        return
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="numpy") as f:
            names = list(f.keys())
            for name in names:
                yield name, f.get_tensor(name)
    except SafetensorError as error:
        raise CheckpointError(
            f"weights in {path}: truncated or not a safetensors file ({error})") from None


def _keras_h5_tensors(path: str) -> Iterator[tuple[str, np.ndarray]]:
    """The weights of the Keras h5 file that transformers' TensorFlow classes save, named and
    laid out as its PyTorch classes have them (:func:`pytorch_name`). A weight two layers
    share (the MLM head's tied embeddings) comes once."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            weights = [(_text(layer), _text(weight)) for layer in f.attrs["layer_names"]
                       for weight in f[_text(layer)].attrs["weight_names"]]
            seen = set()
            for layer, weight in weights:
                name, transpose = pytorch_name(weight)
                if name not in seen:
                    seen.add(name)
                    value = f[layer][weight][()]
                    if name.endswith(".bias") and value.ndim == 2 and len(value) == 1:
                        value = value[0]  # GPT-2's Conv1D keeps its bias as (1, n)
                    yield name, (value.T if transpose else value)
    except (OSError, KeyError) as error:
        raise CheckpointError(f"weights in {path}: truncated or not a Keras h5 weights file "
                              f"({_text(error)})") from None


def _text(value: object) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else " ".join(str(value).split())


def pytorch_name(tf_name: str) -> tuple[str, bool]:
    """The PyTorch name of a weight of transformers' TensorFlow classes, and whether its
    value is transposed on the way (a ``Dense`` kernel is ``(in, out)``, a ``Linear``
    weight ``(out, in)``).

    Example:
        >>> pytorch_name("tf_bert_model/bert/encoder/layer_._0/attention/self/query/kernel:0")
        ('bert.encoder.layer.0.attention.self.query.weight', True)
        >>> pytorch_name("tf_bert_for_pre_training/mlm___cls/predictions/bias:0")
        ('cls.predictions.bias', False)
        >>> pytorch_name("tf_bert_model/bert/embeddings/position_embeddings/embeddings:0")
        ('bert.embeddings.position_embeddings.weight', False)
    """
    # The model's own scope first; a head's scope is written "<role>___<name>".
    parts = [part.split("___")[-1] for part in tf_name.removesuffix(":0").split("/")[1:]]
    last = {"kernel": "weight", "embeddings": "weight", "gamma": "weight",
            "beta": "bias"}.get(parts[-1], parts[-1])
    name = re.sub(r"_\._(\d+)", r".\1", ".".join(parts[:-1] + [last]))  # layer_._0: layer.0
    return name, parts[-1] == "kernel"


def _check_complete(variables: dict[str, np.ndarray], config: BertConfig, path: str,
                    model_type: str) -> None:
    layout = layouts()[model_type]
    scope = layout.scope
    # An encoder may come without its pooler.
    left_out = {names.POOLER_DENSE, *getattr(layout, "optional", ())}
    if config.embedding_size == config.hidden_size:
        left_out.add(names.EMBEDDING_MAPPING)
    mapping = table(config.family)(config.num_hidden_layers)
    needed = [name for layer, weights in mapping.items() if layer not in left_out
              for name in weights.values() if not scope or name.startswith(f"{scope}/")]
    if config.type_vocab_size == 0 and f"{scope}/embeddings/token_type_embeddings" in needed:
        needed.remove(f"{scope}/embeddings/token_type_embeddings")
    missing = [name for name in dict.fromkeys(needed) if name not in variables]
    if missing:
        family = hf_description(model_type)
        raise CheckpointError(
            f"weights in {path}: lacks {len(missing)} weight(s) that {family} with "
            f"num_hidden_layers={config.num_hidden_layers} needs, e.g. {missing[0]} "
            f"(is it {family} model?)"
        )
