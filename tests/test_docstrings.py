"""Every ``>>>`` example in kerasbert's docstrings runs and shows what it says.

The examples are found with ``doctest.DocTestFinder`` in every module of the package
(``import kerasbert``, then ``pkgutil.walk_packages``) and in ``kerasbert_cli``: one test per
docstring that holds examples (a docstring without ``>>>``, such as the command line's help
text, is not a test). They run in a fresh folder that links to the checkout's
``checkpoints/`` and ``kerasbert/``, so a path such as
``checkpoints/chinese_L-12_H-768_A-12/vocab.txt`` works as a reader in the checkout would type
it, and whatever an example writes (``runs/x/labels.json``) lands in that temporary folder.

A doctest is a small, quick demonstration: tiny objects, no download, no full-size model.
The examples of one docstring get ``SECONDS`` seconds together; a longer job (a real training
run, Chinese BERT-base) belongs in a plain ``::`` code block, not in ``>>>`` lines.
"""

import doctest
import importlib
import os
import pkgutil
import signal

import pytest

import kerasbert
from conftest import ROOT

SECONDS = 10
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
LINKED = ("checkpoints", "kerasbert")  # what the examples' relative paths start with


def module_names():
    """kerasbert's modules, sub-packages included, and the console script's module."""
    failed = []
    found = [info.name for info in pkgutil.walk_packages(kerasbert.__path__, "kerasbert.",
                                                         onerror=failed.append)]
    return ["kerasbert", *sorted(found), "kerasbert_cli", *failed]


def docstrings():
    """One param per docstring with examples; a module that fails to import is a param too."""
    finder = doctest.DocTestFinder()
    params = []
    for name in module_names():
        try:
            module = importlib.import_module(name)
        except Exception as error:  # reported by the test, not as a collection error
            params.append(pytest.param(None, f"{type(error).__name__}: {error}", id=name))
            continue
        params += [pytest.param(test, None, id=test.name)
                   for test in finder.find(module, name) if test.examples]
    return params


class TooSlow(KeyboardInterrupt):
    """Raised inside an example that runs past ``SECONDS``; doctest passes a
    KeyboardInterrupt on instead of recording it as the example's output."""


def _too_slow(signum, frame):
    raise TooSlow


def where(test):
    line = test.lineno + 1 if test.lineno is not None else "?"
    return f"{os.path.relpath(test.filename, ROOT)}:{line} ({test.name})"


@pytest.mark.parametrize("test, import_error", docstrings())
def test_docstring_examples_run(test, import_error, tmp_path, monkeypatch):
    if import_error:
        pytest.fail(f"the module does not import: {import_error}")
    for name in LINKED:
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    monkeypatch.chdir(tmp_path)
    report = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    previous = signal.signal(signal.SIGALRM, _too_slow)
    signal.alarm(SECONDS)
    try:
        result = runner.run(test, out=report.append)
    except TooSlow:
        pytest.fail(f"{where(test)}: the examples ran past {SECONDS} s; a doctest must be quick "
                    "(tiny objects, no full-size model, no training run): write a longer job "
                    "as a '::' code block instead")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert not result.failed, f"{where(test)}:\n" + "".join(report)
