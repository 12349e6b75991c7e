"""Seconds per test file, from pytest's JUnit XML: the budget of ``make test`` in view.

``python tests/durations.py before.xml after.xml`` writes ``tests/durations.json`` from the
last file (the conftest starts the longest files first from it, so that the workers end
together; the tests over 30 s in every run given must say why in their docstrings) and prints
a Markdown table with a column per file (the table of docs/testing.md). Each file comes from
``pytest --junitxml=FILE``.
"""

import collections
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
DURATIONS = os.path.join(HERE, "durations.json")
SLOW = 30  # seconds: a test that takes longer says in its docstring why it must ("Why slow:")


def per_test(junit_xml):
    """{(test file name, test name): seconds} (setup and teardown included)."""
    seconds = {}
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        module = case.get("classname", "").split(".")
        name = next((part for part in module if part.startswith("test_")), module[0])
        key = (f"{name}.py", case.get("name"))
        seconds[key] = seconds.get(key, 0.0) + float(case.get("time", 0))
    return seconds


def per_file(tests):
    """{test file name: seconds} summed over the test cases of ``per_test``'s result."""
    seconds = collections.Counter()
    for (name, _), time in tests.items():
        seconds[name] += time
    return dict(seconds)


def load():
    """The recorded ``{"files": {file: seconds}, "slow": {"file::test": seconds}}``."""
    if not os.path.exists(DURATIONS):
        return {"files": {}, "slow": {}}
    with open(DURATIONS) as f:
        return json.load(f)


def table(*columns):
    files = sorted(set().union(*columns), key=lambda name: -max(c.get(name, 0) for c in columns))
    rows = [f"| `{name}` | " + " | ".join(f"{c[name]:.0f}" if name in c else "-" for c in columns)
            + " |" for name in files]
    totals = " | ".join(f"**{sum(c.values()):.0f}**" for c in columns)
    return "\n".join(rows + [f"| all files | {totals} |"])


def main(paths):
    runs = [per_test(path) for path in paths]
    columns = [per_file(run) for run in runs]
    # Over 30 s in every run given that has the test: a test held up once by the other
    # worker's load is not slow.
    slow = {f"{name}::{test}": round(s, 1) for (name, test), s in sorted(runs[-1].items())
            if min(run.get((name, test), s) for run in runs) > SLOW}
    with open(DURATIONS, "w") as f:
        json.dump({"files": {name: round(s, 1) for name, s in sorted(columns[-1].items())},
                   "slow": slow}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(table(*columns))


if __name__ == "__main__":
    main(sys.argv[1:])
