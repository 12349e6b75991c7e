"""BERT (and RoBERTa-wwm, which ships as BERT): the graph every family starts from, its
Google variable table, its Hugging Face layout and its audit formulas.

The graph, per bert4keras 0.11.5 and Google's ``modeling.py``::

    Input-Token ─ Embedding-Token ─┐
    Input-Segment ─ Embedding-Segment ─ Embedding-Token-Segment (add)
      ─ Embedding-Position (add) ─ Embedding-Norm ─ Embedding-Dropout
      ─ L × [ Transformer-i-MultiHeadSelfAttention ─ -Dropout ─ -Add ─ -Norm
              Transformer-i-FeedForward ─ -Dropout ─ -Add ─ -Norm ]
      ─ heads (Pooler / NSP / MLM), if asked for

bert4keras's options change the embeddings: ``custom_position_ids`` adds ``Input-Position``
(the ids ``Embedding-Position`` reads), ``hierarchical_position`` reads the table past its
end, ``shared_segment_embeddings`` looks segment ids up in ``Embedding-Token`` (no
``Embedding-Segment``).

Token id 0 is padding: ``Embedding-Token`` emits a mask that every layer passes on and
attention honours, so outputs at real tokens do not depend on padding. A family changes
what differs by overriding a step (``apply_embeddings``, ``attention_layer``...) and the
class attributes below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import keras

from kerasbert.models import names
from kerasbert.models.checkpoint_names import (
    MLM_OUTPUT_BIAS,
    NSP_OUTPUT_WEIGHTS,
    POSITION_EMBEDDINGS,
    SQUAD_OUTPUT_BIAS,
    SQUAD_OUTPUT_WEIGHTS,
    WORD_EMBEDDINGS,
    attention_variables,
    dense,
    norm,
)
from kerasbert.models.families import model_type_of
from kerasbert.models.families.base import (
    AuditRow,
    HuggingFaceLayout,
    HuggingFaceRecipe,
    Step,
    Transformer,
    layer_names,
)
from kerasbert.models.kernels import Dropout
from kerasbert.models.layers import (
    Add,
    BiasAdd,
    ConditionalLayerNorm,
    FeedForward,
    FirstToken,
    MultiHeadSelfAttention,
    PositionEmbedding,
    ScaleFreeNorm,
    TokenEmbedding,
    get_activation,
    hierarchical_alpha,
)

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig

# --------------------------------------------------------- Hugging Face's layout
# A Linear's ``weight`` is [out, in] and becomes a transposed ``kernel``; an Embedding's
# ``weight`` is the table itself; LayerNorm's weight/bias (or gamma/beta) are gamma/beta.
HF_LAYER_MODULES = {
    "attention.self.query": "attention/self/query",
    "attention.self.key": "attention/self/key",
    "attention.self.value": "attention/self/value",
    "attention.output.dense": "attention/output/dense",
    "attention.output.LayerNorm": "attention/output/LayerNorm",
    "intermediate.dense": "intermediate/dense",
    "output.dense": "output/dense",
    "output.LayerNorm": "output/LayerNorm",
}
HF_HEADS = {
    "pooler.dense": "bert/pooler/dense",
    "cls.predictions.transform.dense": "cls/predictions/transform/dense",
    "cls.predictions.transform.LayerNorm": "cls/predictions/transform/LayerNorm",
}
# Stored as Google stores them (the NSP / SOP weight and a ForQuestionAnswering model's
# span weight are [2, hidden] in both).
HF_PLAIN = {
    "cls.predictions.bias": MLM_OUTPUT_BIAS,
    "cls.seq_relationship.weight": NSP_OUTPUT_WEIGHTS,
    "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
    "qa_outputs.weight": SQUAD_OUTPUT_WEIGHTS,
    "qa_outputs.bias": SQUAD_OUTPUT_BIAS,
}
HF_TIED = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")
HF_LAYER = r"encoder\.layer\.(?P<index>\d+)\.(?P<module>.+)"


def hf_embedding_modules(scope: str) -> dict[str, str]:
    return {"embeddings.LayerNorm": f"{scope}/embeddings/LayerNorm"}


class BERT(Transformer):
    """Google's BERT, as bert4keras 0.11.5 builds it (``model="bert"`` / ``"roberta"``)."""

    model_type = "bert"
    default_name = "bert"
    #: The dense layers and attention projections have biases (RoFormer-v2: none).
    use_bias = True
    #: RoFormer-v2's weightless norms (and embedding dropout before the norm).
    scale_free_norm = False
    #: One attention and one feed-forward block used by every layer (ALBERT).
    shared_layers = False
    #: BERT's masked-LM head (``MLM-Dense``, ``MLM-Norm``, ``MLM-Bias``), which pretraining
    #: trains.
    masked_lm = True
    unilm_seq2seq = True
    conditional_norms = True
    #: Whether its models may take position ids (``custom_position_ids``): bert4keras's
    #: GPT-2 graphs take token ids alone.
    position_inputs = True
    config_rules: tuple[tuple[Any, ...], ...] = (
        # Hugging Face's BERT configs say where positions come from; BERT's are a table.
        ("position_embedding_type", lambda value, values, family: value == "absolute"
         or model_type_of(family) != BERT.model_type,
         "kerasbert's BERT has absolute position embeddings; NEZHA (relative) and RoFormer "
         "(rotary) are their own model= values"),
    )
    hf_layout: HuggingFaceLayout | HuggingFaceRecipe | None = HuggingFaceLayout(
        "bert.", "bert", {**hf_embedding_modules("bert"), **HF_HEADS},
        HF_LAYER, "bert/encoder/layer_{index}", HF_LAYER_MODULES, HF_PLAIN,
        ("embeddings.position_ids",) + HF_TIED)

    def __init__(self, config: BertConfig, hierarchical_position: bool | float | None = None,
                 custom_position_ids: bool = False, shared_segment_embeddings: bool = False,
                 **kwargs: Any) -> None:
        """bert4keras's position and segment keywords besides :class:`Transformer`'s.

        Args:
            config: the :class:`BertConfig`.
            hierarchical_position: True (alpha 0.4) or alpha: positions past
                ``max_position_embeddings`` decomposed on the same table (see
                :class:`~kerasbert.models.layers.PositionEmbedding`), up to its square.
            custom_position_ids: the model takes each token's position id as a third input,
                ``Input-Position`` (after ``Input-Token`` and ``Input-Segment``).
            shared_segment_embeddings: segment ids are looked up in ``Embedding-Token``;
                no ``Embedding-Segment``.
            **kwargs: :class:`Transformer`'s.

        Raises:
            ValueError: an option the family's positions or inputs give no meaning to.
        """
        super().__init__(config, **kwargs)
        # As given (bert4keras's attribute); the layer takes alpha.
        self.hierarchical_position = hierarchical_position
        self.custom_position_ids = bool(custom_position_ids)
        self.shared_segment_embeddings = bool(shared_segment_embeddings)
        self.check_position_options()

    def check_position_options(self) -> None:
        """Raises for a position or segment option this family cannot build."""
        where = f"model={self.family!r}"
        if self.custom_position_ids and not self.position_inputs:
            raise ValueError(f"custom_position_ids=True: {where} takes token ids alone, as "
                             "bert4keras's (no Input-Position)")
        if self.custom_position_ids and self.position not in ("absolute", "rotary"):
            raise ValueError(f"custom_position_ids=True: {where} has {self.position} "
                             "positions, made from distances within the sequence, which no "
                             "position id changes (bert4keras leaves Input-Position unused)")
        if hierarchical_alpha(self.hierarchical_position) is not None and \
                self.position != "absolute":
            raise ValueError(f"hierarchical_position={self.hierarchical_position!r}: {where} has "
                             f"{self.position} positions, no position table to decompose (any "
                             "length fits)")
        if self.shared_segment_embeddings and self.segment_vocab_size == 0:
            raise ValueError(f"shared_segment_embeddings=True: {where} has no segment input "
                             "(type_vocab_size is 0)")

    # ----------------------------------------------------------------- layers
    def norm(self, name: str) -> keras.layers.Layer:
        """The layer norm named ``name`` (made once)."""
        if self.scale_free_norm:
            return self.apply(layer=ScaleFreeNorm, epsilon=self.config.layer_norm_eps, name=name)
        return self.layer_norm(name)

    def layer_norm(self, name: str) -> keras.layers.Layer:
        """The layer norm with ``gamma`` and ``beta`` named ``name`` (made once): Keras's, or
        one steered by the condition of a model built with ``layer_norm_cond``."""
        condition = self.norm_condition
        if condition is None:
            return self.apply(layer=keras.layers.LayerNormalization,
                              epsilon=self.config.layer_norm_eps, name=name)
        return self.apply(layer=ConditionalLayerNorm, epsilon=self.config.layer_norm_eps,
                          conditional=True, hidden_units=condition.hidden_size,
                          hidden_activation=condition.hidden_act,
                          hidden_initializer=self.initializer, name=name)

    def dense(self, inputs: Any, units: int, name: str,
              activation: str | Callable[..., Any] | None = None) -> Any:
        """``inputs`` through a dense layer named ``name`` with BERT's initializer."""
        return self.apply(inputs=inputs, layer=keras.layers.Dense, units=units,
                          activation=activation, use_bias=self.use_bias,
                          kernel_initializer=self.initializer, name=name)

    def layer_names(self, index: int) -> tuple[str, str]:
        """The attention and feed-forward names of encoder layer ``index``."""
        return layer_names(index, shared=self.shared_layers)

    @classmethod
    def bound(cls, model: keras.Model, **options: Any) -> Transformer:
        """:meth:`Transformer.bound`, reading segments through ``Embedding-Token`` where the
        model does (``shared_segment_embeddings``)."""
        if names.shares_segment_table({layer.name for layer in model.layers}):
            options.setdefault("shared_segment_embeddings", True)
        return super().bound(model, **options)

    # ----------------------------------------------------------------- graph
    def get_inputs(self) -> keras.KerasTensor | list[keras.KerasTensor]:
        """``Input-Token``, ``Input-Segment`` when the config has segment types, then
        ``Input-Position`` with ``custom_position_ids``."""
        wanted = [names.INPUT_TOKEN]
        if self.segment_vocab_size > 0:
            wanted.append(names.INPUT_SEGMENT)
        if self.custom_position_ids:
            wanted.append(names.INPUT_POSITION)
        return [self.apply(layer=keras.Input, shape=(self.sequence_length,), name=name)
                for name in wanted]

    def apply_embeddings(self, inputs: list[keras.KerasTensor],
                         step: Step | None = None) -> keras.KerasTensor:
        """Token (+ segment) (+ position) embeddings, norm, dropout (and the mapping to the
        hidden size where the embeddings are narrower)."""
        x = self.token_and_segment(inputs)
        if self.position == "absolute":
            x = self.position_embedding(x, step)
        x = self.embedding_norm(x)
        if self.embedding_size != self.hidden_size:  # ALBERT, ELECTRA: factorised
            x = self.dense(x, self.hidden_size, names.EMBEDDING_MAPPING)
        return x

    def position_embedding(self, x: Any, step: Step | None = None) -> Any:
        """``x`` plus ``Embedding-Position`` (hierarchical where asked for)."""
        return self.apply(inputs=x, layer=PositionEmbedding, arguments=self.positions(step),
                          max_position=self.max_position,
                          initializer_range=self.config.initializer_range,
                          hierarchical=hierarchical_alpha(self.hierarchical_position),
                          name=names.EMBEDDING_POSITION)

    def positions(self, step: Step | None = None) -> dict[str, Any] | None:
        """The position layer's call arguments: the tokens' position ids where they do not
        count from 0 (decoding: the step's; ``Input-Position``, the last input), else none.
        The decoder's own positions were checked against the table before decoding
        began."""
        if step is not None:
            return {"positions": step.position_ids, "checked": True}
        return {"positions": self.inputs[-1]} if self.custom_position_ids else None

    def token_and_segment(self, inputs: list[keras.KerasTensor]) -> Any:
        """``Embedding-Token`` (+ ``Embedding-Segment`` by ``Embedding-Token-Segment``;
        ``shared_segment_embeddings``: the segment ids through ``Embedding-Token`` too)."""
        x = self.apply(inputs=inputs[0], layer=TokenEmbedding, input_dim=self.vocab_size,
                       output_dim=self.embedding_size, embeddings_initializer=self.initializer,
                       mask_zero=True, tie_weights=True, name=names.EMBEDDING_TOKEN)
        if self.segment_vocab_size > 0:
            if self.shared_segment_embeddings:
                s = self.apply(inputs=inputs[1], name=names.EMBEDDING_TOKEN)
            else:
                s = self.apply(inputs=inputs[1], layer=keras.layers.Embedding,
                               input_dim=self.segment_vocab_size,
                               output_dim=self.embedding_size,
                               embeddings_initializer=self.initializer,
                               name=names.EMBEDDING_SEGMENT)
            # Padding is told by the token ids alone: segment 0 read through the token
            # table is no padding.
            x = self.apply(inputs=[x, s], layer=Add, first_mask_only=self.shared_segment_embeddings,
                           name=names.EMBEDDING_TOKEN_SEGMENT)
        return x

    def embedding_norm(self, x: Any) -> Any:
        """``Embedding-Norm`` then ``Embedding-Dropout`` (RoFormer-v2: the other way)."""
        norm = self.norm(names.EMBEDDING_NORM)
        if self.scale_free_norm:
            return norm(self.dropout(x, names.EMBEDDING_DROPOUT))
        return self.dropout(norm(self.norm_inputs(x)), names.EMBEDDING_DROPOUT)

    def attention_layer(self, name: str) -> keras.layers.Layer:
        """The self-attention block named ``name`` (made once)."""
        position = self.position if self.position != "absolute" else None
        return self.apply(layer=MultiHeadSelfAttention, num_heads=self.num_attention_heads,
                          head_size=self.attention_head_size,
                          dropout=self.attention_dropout_rate, position=position,
                          initializer_range=self.config.initializer_range,
                          use_bias=self.use_bias, name=name)

    def feed_forward_layer(self, name: str) -> keras.layers.Layer:
        """The feed-forward block named ``name`` (made once)."""
        return self.apply(layer=FeedForward, intermediate_size=self.intermediate_size,
                          activation=self.hidden_act,
                          initializer_range=self.config.initializer_range,
                          use_bias=self.use_bias, name=name)

    def residual_layers(self, block: str) -> None:
        """The Dropout, Add and Norm after ``block`` (made once)."""
        self.apply(layer=Dropout, rate=self.dropout_rate,
                   name=names.dropout_name(block))
        self.apply(layer=Add, name=names.add_name(block))
        self.norm(names.norm_name(block))

    def residual(self, x: Any, block: str, inputs: Any,
                 arguments: dict[str, Any] | None = None, step: Step | None = None) -> Any:
        """``Norm(x + Dropout(block(inputs, **arguments)))``, bert4keras's post-norm
        residual."""
        y = self.apply(inputs=inputs, name=block, arguments=arguments, step=step)
        y = self.dropout(y, names.dropout_name(block))
        added = self.apply(inputs=[x, y], name=names.add_name(block))
        return self.apply(inputs=self.norm_inputs(added), name=names.norm_name(block))

    def apply_main_layers(self, inputs: keras.KerasTensor, index: int,
                          step: Step | None = None) -> keras.KerasTensor:
        """Encoder layer ``index``: attention, then feed-forward, each a post-norm residual."""
        attention, feed_forward = self.layer_names(index)
        arguments = self.attention_arguments(inputs, step)
        # Made before any is called, in this order: the random draws of the initializers
        # and dropout seeds stay those of every earlier release.
        self.attention_layer(attention)
        self.feed_forward_layer(feed_forward)
        self.residual_layers(attention)
        self.residual_layers(feed_forward)
        x = self.residual(inputs, attention, inputs, arguments, step)
        return self.residual(x, feed_forward, x)

    def apply_final_layers(self, inputs: keras.KerasTensor, step: Step | None = None
                           ) -> keras.KerasTensor | list[keras.KerasTensor]:
        """The heads asked for: pooler (NSP), MLM; bert4keras's outputs: no head → the
        sequence, one head → that head, several → a list."""
        heads = self.heads(inputs, step)
        return inputs if not heads else heads[0] if len(heads) == 1 else heads

    def heads(self, x: Any, step: Step | None = None) -> list[Any]:
        """The outputs of the heads asked for, in bert4keras's order (decoding: the
        MLM's logits)."""
        heads = []
        if self.with_pool or self.with_nsp:
            # True or False (or 1 / 0, equal to them): tanh; else an activation's name
            # (mypy does not narrow a type by `in`).
            activation = "tanh" if self.with_pool in (True, False) else cast(str, self.with_pool)
            pooled = self.apply_pooler(x, activation)
            heads.append(self.apply_nsp(pooled) if self.with_nsp else pooled)
        if self.with_mlm:
            heads.append(self.apply_mlm(x, step))
        return heads

    def apply_pooler(self, x: Any, activation: str | Callable[..., Any] | None) -> Any:
        """``Pooler`` (the first token) then ``Pooler-Dense`` (H -> H, ``activation``)."""
        x = self.apply(inputs=x, layer=FirstToken, name=names.POOLER)
        return self.apply(inputs=x, layer=keras.layers.Dense, units=self.hidden_size,
                          activation=activation, kernel_initializer=self.initializer,
                          name=names.POOLER_DENSE)

    def apply_nsp(self, pooled: Any) -> Any:
        """``NSP-Proba``: the two-way next-sentence softmax on the pooled vector."""
        return self.apply(inputs=pooled, layer=keras.layers.Dense, units=2,
                          activation="softmax", kernel_initializer=self.initializer,
                          name=names.NSP_PROBA)

    def apply_mlm(self, x: Any, step: Step | None = None) -> Any:
        """The masked-LM head: ``MLM-Dense`` (H -> E, hidden_act), ``MLM-Norm``, the
        transposed ``Embedding-Token``, ``MLM-Bias``, ``MLM-Activation`` (decoding: the
        logits before it)."""
        x = self.apply(inputs=x, layer=keras.layers.Dense, units=self.embedding_size,
                       activation=get_activation(self.hidden_act),
                       kernel_initializer=self.initializer, name=names.MLM_DENSE)
        x = self.layer_norm(names.MLM_NORM)(self.norm_inputs(x))
        x = self.apply(inputs=self.tied_output(x, step), layer=BiasAdd, name=names.MLM_BIAS)
        if step is not None:
            return x
        return self.output_activation(
            x, "softmax" if self.with_mlm is True else self.with_mlm, names.MLM_ACTIVATION)

    # ------------------------------------------------------------ checkpoints
    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
        """BERT's table ``{layer name: {weight attribute: Google variable name}}``.

        Example:
            >>> BERT.checkpoint_table(12)["Embedding-Norm"]
            {'gamma': 'bert/embeddings/LayerNorm/gamma', 'beta': 'bert/embeddings/LayerNorm/beta'}
        """
        mapping = {
            names.EMBEDDING_TOKEN: {"embeddings": WORD_EMBEDDINGS},
            names.EMBEDDING_SEGMENT: {"embeddings": "bert/embeddings/token_type_embeddings"},
            names.EMBEDDING_POSITION: {"embeddings": POSITION_EMBEDDINGS},
            names.EMBEDDING_NORM: norm("bert/embeddings/LayerNorm"),
            # Where embedding_size differs from hidden_size (ALBERT, RoFormer-v2, a
            # factorised BERT).
            names.EMBEDDING_MAPPING: dense("bert/encoder/embedding_hidden_mapping_in"),
        }
        for i in range(num_hidden_layers):
            scope = f"bert/encoder/layer_{i}"
            attention, feed_forward = names.attention_name(i), names.feed_forward_name(i)
            mapping[attention] = attention_variables(f"{scope}/attention")
            mapping[names.norm_name(attention)] = norm(f"{scope}/attention/output/LayerNorm")
            mapping[feed_forward] = {
                "intermediate_kernel": f"{scope}/intermediate/dense/kernel",
                "intermediate_bias": f"{scope}/intermediate/dense/bias",
                "output_kernel": f"{scope}/output/dense/kernel",
                "output_bias": f"{scope}/output/dense/bias",
            }
            mapping[names.norm_name(feed_forward)] = norm(f"{scope}/output/LayerNorm")
        mapping.update({
            names.POOLER_DENSE: dense("bert/pooler/dense"),
            names.NSP_PROBA: {"kernel": NSP_OUTPUT_WEIGHTS,
                              "bias": "cls/seq_relationship/output_bias"},
            names.MLM_DENSE: dense("cls/predictions/transform/dense"),
            names.MLM_NORM: norm("cls/predictions/transform/LayerNorm"),
            names.MLM_BIAS: {"bias": MLM_OUTPUT_BIAS},
            names.SPAN_DENSE: {"kernel": SQUAD_OUTPUT_WEIGHTS, "bias": SQUAD_OUTPUT_BIAS},
        })
        return mapping

    # ------------------------------------------------------------------ audit
    @classmethod
    def audit_rows(cls, config: BertConfig, with_pool: bool | str = False,
                   with_nsp: bool = False, with_mlm: bool | str = False,
                   with_discriminator: bool | str = False) -> list[AuditRow]:
        """The layers that hold parameters, as ``(group, layer, formula, count)`` in graph
        order (V vocabulary, H hidden, E embedding width, T segment types, P positions,
        I intermediate)::

            Embedding-Token       V·H          MultiHeadSelfAttention  4·(H·H+H)
            Embedding-Segment     T·H          FeedForward             2·H·I+I+H
            Embedding-Position    P·H          each LayerNorm          2·H
            Pooler-Dense          H·H+H        NSP-Proba               2·H+2
            MLM  H·H+H + 2·H + V (the output matrix is Embedding-Token, counted once)

        Factorised embeddings are E wide (V·E, T·E, P·E, 2·E) with ``Embedding-Mapping``
        E·H+H; a family's module changes the rest (its own rows, shared layers counted once).
        """
        V, H, T, P, I, E = (config.vocab_size, config.hidden_size,  # noqa: E741
                            config.type_vocab_size if cls.segment_inputs else 0,
                            config.max_position_embeddings, config.intermediate_size,
                            config.embedding_size)
        e = "E" if E != H else "H"  # BERT's tables say H
        rows = [("embeddings", names.EMBEDDING_TOKEN, f"V·{e}", V * E)]
        if T > 0:
            rows.append(("embeddings", names.EMBEDDING_SEGMENT, f"T·{e}", T * E))
        if cls.position == "absolute":
            rows.append(("embeddings", names.EMBEDDING_POSITION, f"P·{e}", P * E))
        rows += cls.norm_rows("embeddings", names.EMBEDDING_NORM, E, e)
        if E != H:
            rows.append(cls.dense_row("embeddings", names.EMBEDDING_MAPPING, "E", E, "H", H))
        rows += cls.position_rows(config)
        attention, feed_forward = (("4·(H·H+H)", 4 * (H * H + H)), ("2·H·I+I+H", 2 * H * I + I + H))
        if not cls.use_bias:
            attention, feed_forward = ("4·H·H", 4 * H * H), ("2·H·I", 2 * H * I)
        blocks = dict.fromkeys(layer_names(i, cls.shared_layers)
                               for i in range(config.num_hidden_layers))
        for attention_name, feed_forward_name in blocks:
            rows.append(("encoder", attention_name, *attention))
            rows += cls.norm_rows("encoder", names.norm_name(attention_name), H, "H")
            rows.append(("encoder", feed_forward_name, *feed_forward))
            rows += cls.norm_rows("encoder", names.norm_name(feed_forward_name), H, "H")
        return rows + cls.head_rows(config, with_pool, with_nsp, with_mlm, with_discriminator)

    @classmethod
    def norm_rows(cls, group: str, layer: str, width: int, letter: str) -> list[AuditRow]:
        """A layer norm's row (none for RoFormer-v2's weightless norms)."""
        return [] if cls.scale_free_norm else [(group, layer, f"2·{letter}", 2 * width)]

    @classmethod
    def dense_row(cls, group: str, layer: str, inputs: str, fan_in: int, outputs: str,
                  fan_out: int) -> AuditRow:
        """A dense layer's row: ``in·out+out`` (``in·out`` without biases)."""
        bias = f"+{outputs}" if cls.use_bias else ""
        return (group, layer, f"{inputs}·{outputs}{bias}",
                fan_in * fan_out + (fan_out if cls.use_bias else 0))

    @classmethod
    def position_rows(cls, config: BertConfig) -> list[AuditRow]:
        """Rows of position weights inside the encoder (NEZHA's relative table)."""
        return []

    @classmethod
    def head_rows(cls, config: BertConfig, with_pool: bool | str, with_nsp: bool,
                  with_mlm: bool | str, with_discriminator: bool | str) -> list[AuditRow]:
        """The heads' rows."""
        H, V, E = config.hidden_size, config.vocab_size, config.embedding_size
        e = "E" if E != H else "H"
        rows = []
        if with_pool or with_nsp:
            rows.append(("pooler", names.POOLER_DENSE, "H·H+H", H * H + H))
        if with_nsp:
            rows.append(("nsp", names.NSP_PROBA, "2·H+2", 2 * H + 2))
        if with_mlm:
            rows.append(("mlm", names.MLM_DENSE, f"H·{e}+{e}", H * E + E))
            rows += cls.norm_rows("mlm", names.MLM_NORM, E, e)
            rows.append(("mlm", names.MLM_BIAS, "V", V))
        return rows
