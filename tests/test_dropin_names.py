"""The count of bert4keras's public names that kerasbert provides (docs/bert4keras.md),
recomputed.

bert4keras 0.11.5's modules are read as source (``ast``: top-level functions, classes and
assignments not starting with ``_``), never imported, since bert4keras must not share a
process with Keras 3. Each name is looked up on kerasbert's module of the same name: it is
provided, refused by name (looking it up raises, saying what to use instead), or absent.
"""

import ast
import importlib
import importlib.util
import os

import pytest

MODULES = ("backend", "layers", "models", "optimizers", "snippets", "tokenizers")
# The figures of docs/bert4keras.md ("Coming from bert4keras").
PROVIDED = {"backend": 30, "layers": 20, "models": 20, "optimizers": 23, "snippets": 25,
            "tokenizers": 5}
REFUSED = {"BatchConcat", "BatchSplit", "data_parallel"}
ABSENT = {"Hook"}  # bert4keras deletes it at import: no script sees it


def public_names(path):
    names = set()
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {name for name in names if not name.startswith("_")}


def test_the_readme_counts_of_bert4keras_names():
    spec = importlib.util.find_spec("bert4keras")
    if spec is None:
        pytest.skip("bert4keras is not installed (make installs it as an oracle)")
    folder = spec.submodule_search_locations[0]
    provided, refused, absent = {}, set(), set()
    for module in MODULES:
        ours = importlib.import_module(f"kerasbert.{module}")
        count = 0
        for name in sorted(public_names(os.path.join(folder, f"{module}.py"))):
            try:
                getattr(ours, name)
                count += 1
            except AttributeError as error:
                (refused if "provided" in str(error) or "refused" in str(error)
                 else absent).add(name)
            except Exception:  # a refusal of its own kind, naming what to use instead
                refused.add(name)
        provided[module] = count
    assert provided == PROVIDED
    assert refused == REFUSED and absent == ABSENT
    assert sum(PROVIDED.values()) == 123 and sum(PROVIDED.values()) + len(REFUSED) + 1 == 127
    docs = open(os.path.join(os.path.dirname(__file__), "..", "docs", "bert4keras.md"),
                encoding="utf-8").read()
    said = " ".join(docs[docs.index("**Names.**"):docs.index("### Keywords")].split())
    assert f"kerasbert provides {sum(PROVIDED.values())}:" in said
    for module, count in PROVIDED.items():
        assert f"{module} {count} of" in said, module
    assert f"The other {len(REFUSED)} are refused by name" in said
