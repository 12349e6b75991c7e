"""The suite's time stays in view: ``tests/durations.json`` holds the seconds of every test
file and of each test over 30 s in the last measured run (``python tests/durations.py``),
and a test that long says in its docstring why it must."""

import ast
import os
import re

from durations import SLOW, load

HERE = os.path.dirname(os.path.abspath(__file__))


def docstrings(file_name):
    """{function name: docstring} of a test file's functions."""
    with open(os.path.join(HERE, file_name), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.name: ast.get_docstring(node) or "" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_test_over_30_seconds_says_why():
    recorded = load()
    assert recorded["files"], "tests/durations.json is missing: python tests/durations.py X.xml"
    silent = []
    for test, seconds in recorded["slow"].items():
        assert seconds > SLOW
        file_name, name = test.split("::")
        found = docstrings(file_name)
        function = re.sub(r"\[.*\]$", "", name)
        assert function in found, f"{test} is in tests/durations.json but not in {file_name}"
        if "Why slow:" not in found[function]:
            silent.append(f"{test} ({seconds:.0f} s)")
    assert not silent, "a test over 30 s without 'Why slow:' in its docstring: " + ", ".join(silent)
