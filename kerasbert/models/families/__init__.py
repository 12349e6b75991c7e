"""The model families, one module each, registered here in one line each.

A family module holds everything that makes the family differ from BERT: its config
rules, its graph (a subclass of :class:`kerasbert.models.families.bert.BERT`, bert4keras's
way), its Google variable table, its Hugging Face layout and its audit formulas. This
registry names the class of each ``model=`` value as ``"module:Class"`` and imports the
module when the family is asked for: the command line reads the names without loading
Keras (it loads this module alone).

Adding a family: a module in this package and one line in :data:`FAMILIES`.
"""

import importlib

#: ``model=`` value -> ``"module:Class"`` of its family, in this package.
FAMILIES = {
    "bert": "bert:BERT",
    "roberta": "bert:BERT",  # RoBERTa-wwm-ext ships as a BERT checkpoint: BERT's graph
    "albert": "albert:ALBERT",
    "albert_unshared": "albert:ALBERTUnshared",
    "nezha": "nezha:NEZHA",
    "roformer": "roformer:RoFormer",
    "roformer_v2": "roformer:RoFormerV2",
    "gau_alpha": "gau_alpha:GAUAlpha",
    "electra": "electra:ELECTRA",
    # Before "gpt": their models have GPT's LM-Activation too, and a model's family is
    # the first whose marker layer it has.
    "gpt2": "gpt2:GPT2",
    "gpt2_ml": "gpt2_ml:GPT2ML",
    "gpt": "gpt:GPT",
    "t5": "t5:T5",
    "t5.1.0": "t5:T5",
    "t5.1.1": "t5:T5_1_1",
    "mt5.1.1": "t5:MT5_1_1",
}

def family_class(family):
    """The class of ``family`` (a ``model=`` value, any case), or ``family`` itself when it
    is already a class (a bert4keras-style subclass).

    Raises:
        ValueError: an unknown family, naming the supported ones.

    Example:
        >>> family_class("albert").__name__, family_class("roberta").__name__
        ('ALBERT', 'BERT')
    """
    if isinstance(family, type):
        return family
    if not isinstance(family, str) or family.lower() not in FAMILIES:
        raise ValueError(f"model={family!r} is not supported; supported: {', '.join(FAMILIES)}")
    module, _, name = FAMILIES[family.lower()].partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def model_type_of(family):
    """The ``model_type`` a family's configs carry (``albert_unshared`` reads ALBERT's).

    Example:
        >>> model_type_of("roformer_v2"), model_type_of("roberta")
        ('roformer', 'bert')
    """
    return family_class(family).model_type


def variant_of(family, with_pool=False, with_nsp=False, with_mlm=False,
               with_discriminator=False):
    """The class of ``family``, after checking that it has the heads asked for.

    Raises:
        ValueError: an unknown family, or a head it does not have (ELECTRA has no pooler,
            NSP or MLM head, as in bert4keras; only ELECTRA has the discriminator).

    Example:
        >>> variant_of("albert").shared_layers
        True
    """
    cls = family_class(family)
    asked = {"with_pool": with_pool, "with_nsp": with_nsp, "with_mlm": with_mlm,
             "with_discriminator": with_discriminator}
    wrong = [flag for flag, value in asked.items() if value and flag not in cls.head_flags]
    if wrong:
        raise ValueError(f"model={family if isinstance(family, str) else cls.__name__!r} has "
                         f"no {' / '.join(wrong)} head")
    return cls
