"""A model family is one module and one line of the registry, in any place.

Every registered family's model is read as that family (or, where its layers and names are
its parent's, as the parent) whatever the order of ``FAMILIES``; and the generic modules
name no family: what a family is, its class says.
"""

import ast
import pathlib
import random
import re

import numpy as np
import pytest

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.checkpoints.io import CheckpointError
from kerasbert.models.families import FAMILIES, family_class, registered_name
from kerasbert.models.loading import load_checkpoint, model_targets, other_families, table_family

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: The packages that hold no family knowledge: they ask the family classes.
GENERIC = ("models", "checkpoints", "tasks", "training", "pretraining", "cli", "serving",
           "inference")
#: (module, string literal) -> why a generic module may spell a family's ``model=`` name.
ALLOWED = {
    ("kerasbert/models/bert.py", "bert"):
        "build_bert's and make_transformer's default family=, bert4keras's default model='bert' "
        "as their signatures show it",
}


def orders():
    """The registry's lines as they are, reversed and shuffled (seeded)."""
    items = list(FAMILIES.items())
    shuffled = [random.Random(seed).sample(items, len(items)) for seed in range(3)]
    return [items, items[::-1], *shuffled]


@pytest.fixture
def reorder():
    """Puts the registry's lines in another order, in place (every module holds the same
    dict), and back afterwards."""
    original = list(FAMILIES.items())

    def put(items):
        FAMILIES.clear()
        FAMILIES.update(items)

    yield put
    put(original)


@pytest.fixture(scope="module")
def built_models():
    """``(family, heads, model)`` of every registered family: with every head it has, and
    bare where it has heads (ELECTRA's discriminator is what tells its model apart)."""
    models = []
    for name in FAMILIES:
        cls = family_class(name)
        config = dict(TINY, embedding_size=8) if cls.factorised else dict(TINY)
        for heads in {tuple(cls.head_flags), ()}:
            model = build_transformer_model(config, model=name,
                                            **dict.fromkeys(heads, True))
            models.append((name, heads, model))
    return models


def test_every_family_reads_its_model_whatever_the_registry_order(built_models, reorder):
    cases = []
    for name, heads, model in built_models:
        # The names its weights are written under, as a checkpoint of it holds them.
        available = {target.name for target in model_targets(model, family=name)}
        cases.append((name, heads, model, available))
    answers = []
    for items in orders():
        reorder(items)
        answers.append([table_family(model, available) for _, _, model, available in cases])
    assert all(answer == answers[0] for answer in answers), "the registry's order matters"
    for (name, heads, model, available), found in zip(cases, answers[0]):
        cls = family_class(name)
        assert issubclass(cls, family_class(found)), (name, heads, found)
        layers = {layer.name for layer in model.layers}
        if cls.claims_layers(layers) or cls.claims_checkpoint(layers, available):
            assert found == registered_name(cls), (name, heads, found)


def test_the_most_specific_family_is_meant_not_the_first_registered(reorder):
    gpt2 = build_transformer_model(TINY, model="gpt2")
    # GPT-2's model has GPT's LM-Activation as well as its own Output-Norm.
    assert family_class("gpt").claims_layers({layer.name for layer in gpt2.layers})
    for items in orders():
        reorder(items)
        assert table_family(gpt2) == "gpt2"


def test_a_family_s_checkpoint_in_a_bert_is_named_whatever_the_registry_order(
        built_models, reorder):
    """A checkpoint of a family whose names tell it apart, loaded into a BERT, is named as
    that family's (GPT-2's names are GPT's and its own: GPT-2's, and GPT's is GPT's)."""
    bert = build_transformer_model(TINY, with_pool=True)
    checkpoints = {name: {target.name: np.zeros(target.variable.shape, "float32")
                          for target in model_targets(model, family=name)}
                   for name, _, model in built_models}
    named = [name for _, name, _ in other_families()]
    assert {"gpt", "gpt2", "t5"} <= set(named) and "t5.1.1" not in named
    for items in orders():
        reorder(items)
        for name in named:
            description = family_class(name).checkpoint_description
            with pytest.raises(CheckpointError, match=rf"looks like {description} checkpoint "
                                                      rf".*model='{re.escape(name)}'\n"):
                load_checkpoint(bert, checkpoints[name])


def string_literals(path):
    """``(line, text)`` of every string constant of a module (f-strings' parts included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_generic_modules_name_no_family():
    """A generic module that spells a ``model=`` name as a string holds a family's
    knowledge: it belongs in the family's class (an attribute the generic code reads)."""
    found, used = [], set()
    for package in GENERIC:
        for path in sorted((ROOT / "kerasbert" / package).glob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            for line, text in string_literals(path):
                if text not in FAMILIES:
                    continue
                if (module, text) in ALLOWED:
                    used.add((module, text))
                else:
                    found.append(f"{module}:{line}: {text!r}")
    assert found == [], "family names in generic modules; ask the family's class instead"
    assert used == set(ALLOWED), f"allowed but no longer there: {set(ALLOWED) - used}"


def test_the_source_check_sees_a_family_name(tmp_path):
    path = tmp_path / "generic.py"
    path.write_text('def f(family):\n    return family == "albert"  # "gpt" in a comment\n')
    assert [text for _, text in string_literals(path) if text in FAMILIES] == ["albert"]
