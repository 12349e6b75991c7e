"""The model families, one module each, registered here in one line each.

A family module holds everything that makes the family differ from BERT: its config
rules, its graph (a subclass of :class:`kerasbert.models.families.bert.BERT`, bert4keras's
way), its Google variable table, its Hugging Face layout and its audit formulas. This
registry names the class of each ``model=`` value as ``"module:Class"`` and imports the
module when the family is asked for: the command line reads the names without loading
Keras (it loads this module alone).

Adding a family: a module in this package and one line in :data:`FAMILIES`, in any place:
the order of the lines is the order in which listings show the families, nothing more.
Where several families fit a model or a checkpoint, the most specific one is meant
(:func:`most_specific`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

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
    "gpt2": "gpt2:GPT2",
    "gpt2_ml": "gpt2_ml:GPT2ML",
    "gpt": "gpt:GPT",
    "t5": "t5:T5",
    "t5.1.0": "t5:T5",
    "t5.1.1": "t5:T5_1_1",
    "mt5.1.1": "t5:MT5_1_1",
}

#: The family of a ``model=`` left out and of a config that names none: BERT, as in
#: bert4keras.
DEFAULT_FAMILY = "bert"


def family_class(family: str | type[Any]) -> type[Any]:
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


def model_type_of(family: str | type[Any]) -> str:
    """The ``model_type`` a family's configs carry (``albert_unshared`` reads ALBERT's).

    Example:
        >>> model_type_of("roformer_v2"), model_type_of("roberta")
        ('roformer', 'bert')
    """
    return family_class(family).model_type


def registered_name(cls: type[Any]) -> str:
    """The ``model=`` name of a registered family class; of a class registered under
    several names, the one spelled as its ``model_type`` (``"bert"``, not ``"roberta"``;
    ``"t5"``, not ``"t5.1.0"``), else the first in sorted order.

    Raises:
        ValueError: ``cls`` is not registered.

    Example:
        >>> registered_name(family_class("roberta")), registered_name(family_class("t5.1.0"))
        ('bert', 't5')
    """
    found = [name for name in FAMILIES if family_class(name) is cls]
    if not found:
        raise ValueError(f"{cls.__name__} is not a registered family; "
                         f"registered: {', '.join(FAMILIES)}")
    return min(found, key=lambda name: (name != cls.model_type, name))


def most_specific(families: Iterable[str]) -> list[str]:
    """Of several families that fit, the ones meant: a family whose class another one
    subclasses gives way to it (a GPT-2 model has GPT's layers too), each named by
    :func:`registered_name`. What fits, not the order of :data:`FAMILIES`, decides.

    Returns:
        the sorted names left: one, where the families that fit are one line of descent.

    Example:
        >>> most_specific(["gpt", "gpt2"]), most_specific(["roberta", "bert"])
        (['gpt2'], ['bert'])
    """
    classes = {family_class(name) for name in families}
    kept = [cls for cls in classes
            if not any(other is not cls and issubclass(other, cls) for other in classes)]
    return sorted(registered_name(cls) for cls in kept)


def variant_of(family: str | type[Any], with_pool: bool | str = False,
               with_nsp: bool = False, with_mlm: bool | str = False,
               with_discriminator: bool | str = False) -> type[Any]:
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
