"""Hugging Face BERT directory → Google checkpoint, ``bert_config.json`` and ``vocab.txt``.

Reads ``config.json`` and ``model.safetensors`` (``BertModel``, ``BertForPreTraining``
and task models; a ``bert.`` prefix is optional) and writes what Google's code,
bert4keras and :func:`kerasbert.build_transformer_model` read.
"""

import dataclasses
import os
import re
import shutil

import numpy as np

from kerasbert.checkpoints.io import (
    CheckpointError,
    dtype_name,
    is_float_dtype,
    write_checkpoint,
)
from kerasbert.checkpoints.mapping import variable_mapping
from kerasbert.models import names
from kerasbert.models.config import BertConfig

# Hugging Face module → Google variable scope. A Linear's ``weight`` is [out, in]
# and becomes a transposed ``kernel``; an Embedding's ``weight`` is the table itself.
EMBEDDING_MODULES = {
    "embeddings.word_embeddings": "bert/embeddings/word_embeddings",
    "embeddings.position_embeddings": "bert/embeddings/position_embeddings",
    "embeddings.token_type_embeddings": "bert/embeddings/token_type_embeddings",
}
MODULES = {
    "embeddings.LayerNorm": "bert/embeddings/LayerNorm",
    "pooler.dense": "bert/pooler/dense",
    "cls.predictions.transform.dense": "cls/predictions/transform/dense",
    "cls.predictions.transform.LayerNorm": "cls/predictions/transform/LayerNorm",
}
LAYER_MODULES = {
    "attention.self.query": "attention/self/query",
    "attention.self.key": "attention/self/key",
    "attention.self.value": "attention/self/value",
    "attention.output.dense": "attention/output/dense",
    "attention.output.LayerNorm": "attention/output/LayerNorm",
    "intermediate.dense": "intermediate/dense",
    "output.dense": "output/dense",
    "output.LayerNorm": "output/LayerNorm",
}
# Stored as Google stores them (``seq_relationship.weight`` is [2, hidden] in both).
PLAIN = {
    "cls.predictions.bias": "cls/predictions/output_bias",
    "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
    "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
}
# Buffers and copies of tied weights: nothing of their own to convert.
IGNORED = ("embeddings.position_ids", "cls.predictions.decoder.weight",
           "cls.predictions.decoder.bias")
_LAYER = re.compile(r"encoder\.layer\.(\d+)\.(.+)")
# Old checkpoints name LayerNorm parameters gamma/beta, newer ones weight/bias.
_NORM_PARAMETERS = {"weight": "gamma", "gamma": "gamma", "bias": "beta", "beta": "beta"}


def google_name(hf_name):
    """The Google variable for a Hugging Face parameter, and whether to transpose it.

    Returns:
        ``(name, transpose)``, or None for a parameter with no Google counterpart.

    Example:
        >>> google_name("bert.encoder.layer.3.attention.self.query.weight")
        ('bert/encoder/layer_3/attention/self/query/kernel', True)
    """
    name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
    if name in PLAIN:
        return PLAIN[name], False
    module, _, parameter = name.rpartition(".")
    if module in EMBEDDING_MODULES and parameter == "weight":
        return EMBEDDING_MODULES[module], False
    scope = MODULES.get(module)
    layer = _LAYER.fullmatch(module)
    if layer and layer.group(2) in LAYER_MODULES:
        scope = f"bert/encoder/layer_{layer.group(1)}/{LAYER_MODULES[layer.group(2)]}"
    if scope is None:
        return None
    if scope.endswith("LayerNorm"):
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
    vocab_path: str
    variables: int
    skipped: list


def convert_hf_to_google(hf_dir, prefix, dtype="float32"):
    """Converts a Hugging Face BERT directory into a Google checkpoint directory.

    Args:
        hf_dir: a directory with ``config.json`` and ``model.safetensors`` (and
            ``vocab.txt``, copied when present).
        prefix: the checkpoint to write, e.g. ``"out/minilm/bert_model.ckpt"``;
            ``bert_config.json`` and ``vocab.txt`` go beside it.
        dtype: cast the weights to this NumPy dtype (None keeps theirs).

    Returns:
        A :class:`Conversion`.

    Raises:
        FileNotFoundError: ``config.json`` or ``model.safetensors`` is missing.
        ValueError: the model is not a BERT with absolute positions, ``hf_dir`` or
            ``config.json`` is not what it should be, or (a CheckpointError)
            ``model.safetensors`` is truncated or not a safetensors file, or lacks a
            variable the config needs (named, with the file).

    Example::

        # all-MiniLM-L6-v2/: a Hugging Face model folder (downloaded)
        convert_hf_to_google("all-MiniLM-L6-v2", "out/minilm/bert_model.ckpt").variables  # 103
    """
    hf_dir, prefix = os.fspath(hf_dir), os.fspath(prefix)
    if not os.path.isdir(hf_dir):
        error = ValueError if os.path.exists(hf_dir) else FileNotFoundError
        raise error(f"Hugging Face model in {hf_dir}: not a directory, expected one holding "
                    "config.json and model.safetensors")
    config = _read_config(os.path.join(hf_dir, "config.json"))
    weights_path = os.path.join(hf_dir, "model.safetensors")
    if not os.path.isfile(weights_path):
        others = [name for name in ("pytorch_model.bin", "tf_model.h5")
                  if os.path.exists(os.path.join(hf_dir, name))]
        hint = (f" (found {', '.join(others)}; save it with safe_serialization=True)"
                if others else "")
        raise FileNotFoundError(f"weights in {hf_dir}: no model.safetensors{hint}")
    variables, skipped = _read_weights(weights_path, dtype)
    _check_complete(variables, config, weights_path)

    write_checkpoint(variables, prefix)
    directory = os.path.dirname(os.path.abspath(prefix))
    config_path = os.path.join(directory, "bert_config.json")
    config.to_json_file(config_path)
    vocab_path = None
    if os.path.exists(os.path.join(hf_dir, "vocab.txt")):
        vocab_path = os.path.join(directory, "vocab.txt")
        shutil.copyfile(os.path.join(hf_dir, "vocab.txt"), vocab_path)
    return Conversion(prefix, config_path, vocab_path, len(variables), skipped)


def _read_config(path):
    # BertConfig refuses other families (model_type, position_embedding_type...).
    config = BertConfig.from_json_file(path, family="bert")
    # Google's bert_config.json: its own keys only, none of Hugging Face's bookkeeping.
    return BertConfig.from_dict(
        {key: value for key, value in config.to_dict().items() if key not in config.extra},
        source=path)


def _read_weights(path, dtype):
    from safetensors import SafetensorError, safe_open

    variables, skipped = {}, []
    try:
        with safe_open(path, framework="numpy") as f:
            for hf_name in f.keys():
                found = google_name(hf_name)
                if found is None:
                    if hf_name.removeprefix("bert.") not in IGNORED:
                        skipped.append(hf_name)
                    continue
                name, transpose = found
                value = f.get_tensor(hf_name)
                value = value.T if transpose else value
                # bfloat16 (from ml_dtypes, which TensorFlow loads) is no np.floating.
                if dtype is not None and is_float_dtype(dtype_name(value.dtype)):
                    value = value.astype(dtype)
                variables[name] = np.ascontiguousarray(value)
    except SafetensorError as error:
        raise CheckpointError(
            f"weights in {path}: truncated or not a safetensors file ({error})") from None
    return variables, skipped


def _check_complete(variables, config, path):
    factorised = config.embedding_size != config.hidden_size
    needed = [name for layer, weights in variable_mapping(config.num_hidden_layers).items()
              if factorised or layer != names.EMBEDDING_MAPPING
              for name in weights.values() if name.startswith("bert/") and "/pooler/" not in name]
    if config.type_vocab_size == 0:
        needed.remove("bert/embeddings/token_type_embeddings")
    missing = [name for name in needed if name not in variables]
    if missing:
        raise CheckpointError(
            f"weights in {path}: lacks {len(missing)} weight(s) that a BERT with num_hidden_layers="
            f"{config.num_hidden_layers} needs, e.g. {missing[0]} (is it a BERT model?)"
        )
