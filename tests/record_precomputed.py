"""Writes the tables kerasbert ships instead of computing them at each start
(``kerasbert/resources/precomputed/``), made on the installed versions.

``python tests/record_precomputed.py`` after a change of the pinned ``tokenizers`` or of
Python (its Unicode version), or of the code that makes them; tests/test_precomputed.py
checks that the shipped tables equal the ones made here.
"""

import dataclasses
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kerasbert import shipped  # noqa: E402
from kerasbert.serving import graph_text  # noqa: E402
from kerasbert.text import rules  # noqa: E402

#: name -> (the versions the table depends on, the table made here), both functions.
TABLES = {
    # Google's character classes, read by every Tokenizer (~0.4 s to make).
    "google_classes": (rules.google_classes_key, rules.google_class_ranges),
    # bert4keras's, read by its Tokenizer (~0.5 s).
    "bert4keras_classes": (rules.google_classes_key, rules.bert4keras_class_ranges),
    # The in-graph tokenizer's character tables, read by every export (~3 s).
    **{graph_text.tables_name(lower): (
        functools.partial(graph_text.tables_key, lower),
        functools.partial(lambda lower: dataclasses.asdict(
            graph_text.make_character_tables(lower)), lower)) for lower in (True, False)},
}


def main():
    for name, (key, make) in TABLES.items():
        shipped.write_precomputed(name, key(), make())
    print(f"wrote {os.path.relpath(os.path.dirname(shipped.precomputed_file('x')))}")


if __name__ == "__main__":
    main()
