"""``build_transformer_model``: a config, a model family and a checkpoint make one model.

The bert4keras one-liner. Each family is a :class:`~kerasbert.models.families.Variant`
of the graph (:data:`kerasbert.models.families.VARIANTS`) and a mapping table
(:data:`kerasbert.checkpoints.loading.TABLES`).
"""

import dataclasses

import keras

from kerasbert.checkpoints.loading import load_checkpoint, save_weights_as_checkpoint
from kerasbert.models.bert import build_bert
from kerasbert.models.config import BertConfig
from kerasbert.models.deferred import deferred_weights, forget, settle
from kerasbert.models.families import variant_of


@dataclasses.dataclass
class Transformer:
    """What ``build_transformer_model(..., return_keras_model=False)`` returns.

    Example:
        With the shipped small checkpoint (its directory stands for the checkpoint):

        >>> import os, tempfile
        >>> small = "kerasbert/resources/kerasbert-zh-small"
        >>> bert = build_transformer_model(f"{small}/bert_config.json", small,
        ...                                return_keras_model=False)
        >>> bert.load_report.missing
        []
        >>> bert.save_weights_as_checkpoint(os.path.join(tempfile.mkdtemp(), "bert_model.ckpt"))[:1]
        ['bert/embeddings/LayerNorm/beta']
    """

    model: keras.Model
    config: BertConfig
    keep_tokens: list = None
    compound_tokens: list = None
    load_report: object = None
    family: str = "bert"

    def load_weights_from_checkpoint(self, checkpoint, strict=True, streaming=False):
        """Loads a Google checkpoint with this model's keep/compound tokens; see
        :func:`kerasbert.checkpoints.loading.load_checkpoint`. Returns the :class:`LoadReport`."""
        self.load_report = load_checkpoint(self.model, checkpoint, strict=strict,
                                           keep_tokens=self.keep_tokens,
                                           compound_tokens=self.compound_tokens,
                                           streaming=streaming, family=self.family)
        return self.load_report

    def save_weights_as_checkpoint(self, prefix, dtype=None):
        """Writes the weights under Google's names; see
        :func:`kerasbert.checkpoints.loading.save_weights_as_checkpoint`."""
        return save_weights_as_checkpoint(self.model, prefix, dtype=dtype, family=self.family)


def build_transformer_model(config_path=None, checkpoint_path=None, model=None, with_pool=False,
                            with_nsp=False, with_mlm=False, keep_tokens=None,
                            return_keras_model=True, compound_tokens=None, sequence_length=None,
                            name=None, strict=True, dtype=None, with_discriminator=False,
                            **overrides):
    """Builds a BERT-family model from its config, bert4keras style.

    Args:
        config_path: a ``bert_config.json`` / Hugging Face ``config.json`` path, a
            :class:`BertConfig`, or a dict of Google keys.
        checkpoint_path: a Google checkpoint to load: a prefix
            (``.../bert_model.ckpt``), a directory holding one, or a dict of arrays.
        model: the family, as bert4keras names it: ``"bert"``, ``"roberta"`` (BERT's
            graph), ``"albert"``, ``"albert_unshared"``, ``"nezha"``, ``"roformer"``,
            ``"roformer_v2"`` or ``"electra"``; None: the one the config names
            (``model_type``, ALBERT's group keys), else BERT.
        with_pool, with_nsp, with_mlm: heads, see :func:`build_bert`.
        with_discriminator: ELECTRA's head (True: sigmoid).
        keep_tokens: token ids to keep from the checkpoint vocabulary (the vocabulary
            becomes ``len(keep_tokens)``).
        return_keras_model: return the ``keras.Model`` (default) or a :class:`Transformer`.
        compound_tokens: extra tokens, each a list of existing ids whose embeddings are
            averaged; they are appended to the vocabulary.
        sequence_length: fixed input length, or None.
        name: the model's name.
        strict: with a checkpoint, raise on any missing variable or shape mismatch
            (default); False loads what fits (see ``Transformer.load_report``).
        dtype: the dtype policy of the layers (``"mixed_bfloat16"``, ``"bfloat16"``);
            None: Keras's global policy. Nothing global is changed.
        **overrides: config keys to replace (``num_hidden_layers=2``, ``dropout_rate=0``...).

    Returns:
        a ``keras.Model`` (or a :class:`Transformer` holding it).

    Raises:
        ValueError: unknown ``model``, an invalid config, a config of another model
            family, or one too large for this machine's memory (see :func:`build_bert`).
        FileNotFoundError: no checkpoint at ``checkpoint_path``.
        kerasbert.CheckpointError (a ValueError): the checkpoint is corrupt or does
            not fit the config (the message names the variable, both shapes and a hint).

    Example:
        >>> bert = build_transformer_model("checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
        >>> bert.count_params()
        101677056
    """
    if model is not None:
        variant_of(model)  # an unknown family is refused before the config is read
    config = resolve_config(config_path, family=model and model.lower(), **overrides)
    family = config.family
    vocab_size = config.vocab_size
    if keep_tokens is not None:
        vocab_size = len(keep_tokens)
    if compound_tokens is not None:
        vocab_size += len(compound_tokens)
    if vocab_size != config.vocab_size:
        config = config.replace(vocab_size=vocab_size)

    def build():
        return build_bert(config, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm,
                          sequence_length=sequence_length, name=name, dtype=dtype,
                          family=family, with_discriminator=with_discriminator)

    if checkpoint_path is None:
        keras_model = build()
        return keras_model if return_keras_model else Transformer(
            keras_model, config, keep_tokens, compound_tokens, family=family)
    # The weights are made without values and created from what the checkpoint holds:
    # no random draw to overwrite, one copy of each weight (see models/deferred.py).
    with deferred_weights() as deferred:
        keras_model = build()
    built = Transformer(keras_model, config, keep_tokens, compound_tokens, family=family)
    try:
        # The model is new and is dropped if the load fails: it may be loaded a group of
        # variables at a time, never holding the whole checkpoint beside its weights.
        built.load_weights_from_checkpoint(checkpoint_path, strict=strict, streaming=True)
    except BaseException:
        forget(deferred)
        raise
    settle(deferred)  # what the checkpoint did not fill: dropout seeds, a non-strict load's gaps
    return keras_model if return_keras_model else built


def resolve_config(config, family=None, **overrides):
    """A :class:`BertConfig` from a path, a dict or a config, with overrides applied,
    read for ``family`` (None: the one the config names)."""
    if config is None:
        if not overrides:
            raise ValueError("Give config_path (a bert_config.json) or the config keys as keywords")
        return BertConfig.from_dict({}, source="<keywords>", family=family, **overrides)
    if isinstance(config, BertConfig):
        if (family is None or family == config.family) and not overrides:
            return config
        return BertConfig.from_dict(config.to_dict(), source=config.source,
                                    family=family or config.family, **overrides)
    if isinstance(config, dict):
        return BertConfig.from_dict(config, family=family, **overrides)
    return BertConfig.from_json_file(config, family=family, **overrides)


