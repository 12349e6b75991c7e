"""What each model family changes in BERT's graph, as bert4keras 0.11.5 builds them.

One :class:`Variant` per ``model=`` value; :func:`kerasbert.models.bert.build_bert`
reads it. The checkpoint side of a family (its variable names) is in
:mod:`kerasbert.checkpoints.tables`.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Variant:
    """A family's departures from BERT.

    Attributes:
        position: ``"absolute"`` (a learned ``Embedding-Position``), ``"relative"``
            (NEZHA's ``Embedding-Relative-Position`` inside attention) or ``"rotary"``
            (RoFormer's ``Embedding-Rotary-Position``).
        shared_layers: one attention and one feed-forward block used by every layer
            (ALBERT's ``Transformer-MultiHeadSelfAttention``).
        use_bias: False for RoFormer-v2's bias-free dense layers.
        scale_free_norm: RoFormer-v2's norms: no mean, no weights; embedding dropout
            comes before ``Embedding-Norm``.
        heads: ``"bert"`` (pooler, NSP, MLM), ``"electra"`` (the discriminator) or
            ``"roformer_v2"`` (an MLM head of the tied embedding only).
        default_name: the model's name when none is given.
    """

    position: str = "absolute"
    shared_layers: bool = False
    use_bias: bool = True
    scale_free_norm: bool = False
    heads: str = "bert"
    default_name: str = "bert"


#: ``model=`` value -> its variant. RoBERTa-wwm-ext ships as a BERT checkpoint: BERT's graph.
VARIANTS = {
    "bert": Variant(),
    "roberta": Variant(),
    "albert": Variant(shared_layers=True, default_name="albert"),
    "albert_unshared": Variant(default_name="albert"),
    "nezha": Variant(position="relative", default_name="nezha"),
    "roformer": Variant(position="rotary", default_name="roformer"),
    "roformer_v2": Variant(position="rotary", use_bias=False, scale_free_norm=True,
                           heads="roformer_v2", default_name="roformer_v2"),
    "electra": Variant(heads="electra", default_name="electra"),
}


def model_type_of(family):
    """The ``model_type`` a family's configs carry (``albert_unshared`` reads ALBERT's).

    Example:
        >>> model_type_of("roformer_v2"), model_type_of("roberta")
        ('roformer', 'bert')
    """
    return {"albert_unshared": "albert", "roformer_v2": "roformer",
            "roberta": "bert"}.get(family, family)


def variant_of(family, with_pool=False, with_nsp=False, with_mlm=False,
               with_discriminator=False):
    """The :class:`Variant` of ``family``, after checking that it has the heads asked for.

    Raises:
        ValueError: an unknown family, or a head it does not have (ELECTRA has no pooler,
            NSP or MLM head, as in bert4keras; only ELECTRA has the discriminator).

    Example:
        >>> variant_of("albert").shared_layers
        True
    """
    if not isinstance(family, str) or family.lower() not in VARIANTS:
        raise ValueError(f"model={family!r} is not supported; supported: {', '.join(VARIANTS)}")
    variant = VARIANTS[family.lower()]
    asked = {"with_pool": with_pool, "with_nsp": with_nsp, "with_mlm": with_mlm}
    if variant.heads == "electra":
        wrong = [flag for flag, value in asked.items() if value]
    else:
        wrong = ["with_discriminator"] if with_discriminator else []
    if variant.heads == "roformer_v2" and (with_pool or with_nsp):
        wrong = [flag for flag in ("with_pool", "with_nsp") if asked[flag]]
    if wrong:
        raise ValueError(f"model={family!r} has no {' / '.join(wrong)} head")
    return variant
