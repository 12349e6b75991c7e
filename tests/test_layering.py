"""Imports flow one way: every module of the package sits on a floor of :data:`LAYERS`, and
imports only from its own floor or the floors below, with no circle between modules and none
between packages (``kerasbert.models`` importing ``kerasbert.checkpoints`` while a module of
``kerasbert.checkpoints`` imports one of ``kerasbert.models`` is a circle, whichever modules).

The imports are read from the source with ``ast``, everywhere in a module (a function's lazy
``import`` counts as much as one at the top, and so does one under ``if TYPE_CHECKING:``), and
a string that names a module of the package
(``importlib.import_module("kerasbert.tasks.ner.export")``) counts as an import.
"""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The floors, top first; a module belongs to the floor of its longest prefix here. A module
#: imports from its own floor or below, never from above. Each package has a floor of its
#: own; only the base holds several (single modules).
LAYERS = (
    ("the public API", ("kerasbert",)),
    ("the console script", ("kerasbert_cli",)),
    ("the command line", ("kerasbert.cli",)),
    ("tasks", ("kerasbert.tasks",)),
    ("pretraining", ("kerasbert.pretraining",)),
    ("serving", ("kerasbert.serving",)),
    ("inference", ("kerasbert.inference",)),
    ("training", ("kerasbert.training",)),
    # The model object loads its checkpoint (bert4keras's load_weights_from_checkpoint), so
    # the model-aware loader and the Hugging Face converter are models' modules.
    ("models", ("kerasbert.models",)),
    # Given their converter by the caller (kerasbert.models.convert.download_preset).
    ("presets", ("kerasbert.presets",)),
    # Checkpoint files only: reading, writing, vocabulary rows; no model.
    ("checkpoints", ("kerasbert.checkpoints",)),
    ("text", ("kerasbert.text",)),
    ("the base", ("kerasbert.files", "kerasbert.disk_space", "kerasbert.quiet",
                  "kerasbert.hardware",
                  "kerasbert.shipped", "kerasbert.internals")),
    ("the data's build scripts", ("kerasbert.resources",)),
)

#: Imports that run up a floor today, each with its reason; the owner of the module removes
#: the entry when the import goes.
KNOWN_UPWARD = {}


def package_modules():
    """``{module name: path}`` of every module of the package, and the console script."""
    found = {"kerasbert_cli": os.path.join(ROOT, "kerasbert_cli.py")}
    for folder, _, names in os.walk(os.path.join(ROOT, "kerasbert")):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(source, module, modules, is_package=False):
    """The modules of ``modules`` that ``source`` (the text of ``module``) imports."""
    found = set()

    def add(name, names=()):
        for imported in names:
            if f"{name}.{imported}" in modules:
                found.add(f"{name}.{imported}")
            elif name in modules:
                found.add(name)
        if not names and name in modules:
            found.add(name)

    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            add(base, [alias.name for alias in node.names])
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and "." in node.value and node.value in modules):
            found.add(node.value)
    found.discard(module)
    return found


def import_graph():
    modules = package_modules()
    return {module: imports(open(path, encoding="utf-8").read(), module, modules,
                            path.endswith("__init__.py"))
            for module, path in modules.items()}


def package(module):
    """The package ``module`` belongs to: ``kerasbert.<name>`` (a subpackage, or a module right
    under ``kerasbert``); ``kerasbert`` itself and the console script are their own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph):
    """``graph`` (module -> the modules it imports) read between packages: package -> the
    other packages that any of its modules imports."""
    found = {}
    for module, targets in graph.items():
        found.setdefault(package(module), set()).update(package(target) for target in targets)
    for name, targets in found.items():
        targets.discard(name)
    return found


def floor(module):
    """The index in :data:`LAYERS` of ``module``'s floor (0 is the top), or None."""
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > len(best[1]):
                    best = (index, prefix)
    return None if best is None else best[0]


def cycles(graph):
    """The import circles of ``graph``: its strongly connected components of more than
    one module (Tarjan's algorithm, without recursion)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_module_has_a_floor():
    assert [m for m in sorted(import_graph()) if floor(m) is None] == [], (
        "add these modules to LAYERS in tests/test_layering.py")


def test_no_import_runs_up_a_floor():
    upward = {(module, target) for module, targets in import_graph().items()
              for target in targets if floor(module) is not None and floor(target) is not None
              and floor(target) < floor(module)}
    assert [f"{module} ({LAYERS[floor(module)][0]}) imports {target} "
            f"({LAYERS[floor(target)][0]})"
            for module, target in sorted(upward - set(KNOWN_UPWARD))] == []


def test_no_import_circle():
    assert cycles(import_graph()) == []


def test_no_import_circle_between_packages():
    graph = import_graph()
    loops = cycles(package_graph(graph))
    # Each circle with the module imports that make it.
    assert [(loop, sorted(f"{module} imports {target}" for module, targets in graph.items()
                          for target in targets if package(module) != package(target)
                          and {package(module), package(target)} <= set(loop)))
            for loop in loops] == []


def test_each_package_has_a_floor_of_its_own():
    """Two packages sharing a floor could import each other unseen by the floors; the base
    holds single modules only."""
    modules = package_modules()
    for name, prefixes in LAYERS:
        packages = [prefix for prefix in prefixes
                    if any(module.startswith(prefix + ".") for module in modules)]
        assert len(prefixes) == 1 or packages == [], f"{name} holds the packages {packages}"


def test_the_reader_sees_lazy_relative_and_named_imports():
    modules = {"kerasbert", "kerasbert.a", "kerasbert.a.b", "kerasbert.a.c", "kerasbert.d"}
    source = ("import os\nfrom . import c\n"
              "def f():\n    from kerasbert.d import thing\n"
              "def g():\n    importlib.import_module('kerasbert.a')\n")
    assert imports(source, "kerasbert.a.b", modules) == {"kerasbert.a.c", "kerasbert.d",
                                                         "kerasbert.a"}
    assert cycles({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}) == [["x", "y", "z"]]
    assert cycles({"x": {"y"}, "y": set()}) == []
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from kerasbert.d import Thing\n")
    assert imports(source, "kerasbert.a.b", modules) == {"kerasbert.d"}


def test_the_package_graph_sees_a_circle_made_by_different_modules():
    # models.base -> checkpoints.loading and checkpoints.convert -> models.names: no circle
    # between modules, one between the two packages.
    graph = {"kerasbert.models.base": {"kerasbert.checkpoints.loading"},
             "kerasbert.checkpoints.loading": set(),
             "kerasbert.checkpoints.convert": {"kerasbert.models.names"},
             "kerasbert.models.names": set(), "kerasbert.files": set()}
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["kerasbert.checkpoints", "kerasbert.models"]]
    assert package("kerasbert") == "kerasbert" and package("kerasbert_cli") == "kerasbert_cli"
    assert package("kerasbert.models.families.bert") == "kerasbert.models"


@pytest.mark.parametrize("module, target", [
    ("kerasbert.models.bert", "kerasbert.training"),
    ("kerasbert.inference.predictor", "kerasbert.tasks.qa.span_qa"),
    ("kerasbert.serving.saved_model", "kerasbert.tasks"),
    ("kerasbert.checkpoints.io", "kerasbert.models.loading"),
    ("kerasbert.presets.download", "kerasbert.models.convert"),
    ("kerasbert.checkpoints.keep_tokens", "kerasbert.presets.table"),
    ("kerasbert.text.vocab", "kerasbert.checkpoints.io"),
])
def test_the_floors_refuse_what_the_house_rule_refuses(module, target):
    assert floor(target) < floor(module)


def test_the_layout_page_names_every_module():
    """The Layout block of docs/architecture.md names every module of the package (by file
    name, under the folder it sits in), and no module that is gone."""
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        page = f.read()
    block = page.split("## Layout", 1)[1].split("```", 2)[1]
    # Up to the package's last line: below it are the console script, tests/ and bench/.
    block = block.split("\nkerasbert_cli.py", 1)[0]
    named = set()
    for line in block.splitlines():
        for word in line.replace(",", " ").split():
            word = word.strip("():;`")
            if word.endswith(".py") and "/" not in word:  # "inference/entities.py": a reference
                named.add(word)
    named.discard("__init__.py")
    modules = set()
    for folder, _, names in os.walk(os.path.join(ROOT, "kerasbert")):
        if "resources" in os.path.relpath(folder, ROOT).split(os.sep):
            continue  # the data's own build scripts
        modules.update(name for name in names if name.endswith(".py") and name != "__init__.py")
    assert sorted(modules - named) == [], "modules docs/architecture.md's Layout leaves out"
    assert sorted(named - modules) == [], "docs/architecture.md names modules that are gone"
