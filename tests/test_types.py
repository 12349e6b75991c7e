"""The public API is typed: every function and class of ``kerasbert.__all__`` has annotations
on its parameters and its return, and mypy finds no error in the public modules.

Which files mypy checks, and how, is the ``[mypy]`` section of ``setup.cfg``; mypy keeps its
cache in ``.mypy_cache/`` of the checkout, so a run after the first takes about a second. Its
``[mypy-kerasbert....]`` sections name the modules where every function must be annotated.
"""

import configparser
import inspect
import os
import subprocess
import sys

import pytest

import kerasbert

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def unannotated(obj, name):
    """``"name(parameter)"`` / ``"name -> return"`` for each annotation ``obj`` lacks; of a
    class, those of its ``__init__`` and of the public methods and properties it defines
    (a property made from a lambda cannot be annotated, and is left out)."""
    if not inspect.isclass(obj):
        signature = inspect.signature(obj)
        missing = [f"{name}({parameter.name})" for parameter in signature.parameters.values()
                   if parameter.annotation is inspect.Parameter.empty]
        if signature.return_annotation is inspect.Signature.empty:
            missing.append(f"{name} -> return")
        return missing
    missing = []
    for attribute, value in vars(obj).items():
        if attribute.startswith("_") and attribute not in ("__init__", "__call__"):
            continue
        if isinstance(value, property):
            value = value.fget
        elif isinstance(value, (classmethod, staticmethod)):
            value = value.__func__
        if not inspect.isfunction(value) or value.__name__ == "<lambda>":
            continue
        bound = not isinstance(vars(obj)[attribute], staticmethod)
        signature = inspect.signature(value)
        parameters = list(signature.parameters.values())[1 if bound else 0:]
        missing += [f"{name}.{attribute}({parameter.name})" for parameter in parameters
                    if parameter.annotation is inspect.Parameter.empty]
        if signature.return_annotation is inspect.Signature.empty:
            missing.append(f"{name}.{attribute} -> return")
    return missing


def package_modules():
    """``{module name: path relative to the checkout}`` of every module of the package."""
    found = {}
    for folder, _, names in os.walk(os.path.join(ROOT, "kerasbert")):
        for name in names:
            if name.endswith(".py"):
                path = os.path.relpath(os.path.join(folder, name), ROOT)
                parts = path[:-3].split(os.sep)
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def strictly_typed(config, modules):
    """``{section pattern: the modules it matches}`` of the sections of ``config`` (setup.cfg)
    that refuse a function without annotations; ``name.*`` matches ``name`` and below, as in
    mypy."""
    found = {}
    for section in config.sections():
        if not section.startswith("mypy-kerasbert") or not config[section].getboolean(
                "disallow_untyped_defs", False):
            continue
        for pattern in section[len("mypy-"):].split(","):
            base = pattern.removesuffix(".*")
            found[pattern] = sorted(
                module for module in modules if module == base
                or pattern.endswith(".*") and module.startswith(base + "."))
    return found


def test_the_strictly_typed_modules_are_checked_by_mypy():
    # A module under a strict section but missing from [mypy] files is not read at all, so
    # its functions could lose their annotations unseen; a section matching no module has
    # outlived its module's name.
    config = configparser.ConfigParser(interpolation=None)
    config.read(os.path.join(ROOT, "setup.cfg"))
    files = set(config["mypy"]["files"].replace(",", " ").split())
    modules = package_modules()
    strict = strictly_typed(config, modules)
    assert "kerasbert.models.layers" in strict["kerasbert.models.*"]
    assert "kerasbert.models.families.t5" in strict["kerasbert.models.*"]
    assert strict["kerasbert.inference.*"]
    assert [pattern for pattern, matched in strict.items() if not matched] == []
    assert sorted(modules[module] for matched in strict.values() for module in matched
                  if modules[module] not in files) == [], "add these to [mypy] files"


def test_every_module_of_the_package_is_strictly_typed():
    # A new module must be annotated from its first line: listed in [mypy] files and under
    # a section that refuses a function without annotations.
    config = configparser.ConfigParser(interpolation=None)
    config.read(os.path.join(ROOT, "setup.cfg"))
    modules = package_modules()
    covered = {module for matched in strictly_typed(config, modules).values()
               for module in matched}
    assert sorted(set(modules) - covered) == [], "add these to a strict [mypy-...] section"


def test_every_public_function_and_class_is_annotated():
    missing = [entry for name in kerasbert.__all__
               for entry in unannotated(getattr(kerasbert, name), name)]
    assert missing == [], "annotate these (parameters and returns) in kerasbert's public API"


def test_the_annotation_check_sees_a_missing_annotation():
    def typed(x: int, *args: str, **kwargs: float) -> int:
        return x

    def untyped(x, y: int):
        return y

    class Thing:
        def __init__(self, size):
            self.size = size

        @property
        def area(self):
            return self.size ** 2

        @classmethod
        def make(cls, size: int) -> "Thing":
            return cls(size)

        @staticmethod
        def helper(value) -> int:
            return value

        width = property(lambda self: self.size)

        def _private(self, anything):
            return anything

    assert unannotated(typed, "typed") == []
    assert unannotated(untyped, "untyped") == ["untyped(x)", "untyped -> return"]
    assert unannotated(Thing, "Thing") == ["Thing.__init__(size)", "Thing.__init__ -> return",
                                           "Thing.area -> return", "Thing.helper(value)"]


@pytest.mark.slow
def test_mypy_finds_no_error_in_the_public_modules():
    # A first run (no cache yet) reads numpy's and the package's modules: 10-20 s.
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, (
        f"mypy (settings: [mypy] in setup.cfg):\n{done.stdout}{done.stderr}")
    assert "Success: no issues found" in done.stdout
