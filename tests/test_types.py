"""The public API is typed: every function and class of ``kerasbert.__all__`` has annotations
on its parameters and its return, and mypy finds no error in the public modules.

Which files mypy checks, and how, is the ``[mypy]`` section of ``setup.cfg``; mypy keeps its
cache in ``.mypy_cache/`` of the checkout, so a run after the first takes about a second.
"""

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
