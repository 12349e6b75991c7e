"""Writes the tables kerasbert ships instead of computing them at each start
(``kerasbert/resources/precomputed/``), made on the installed versions.

``python tests/record_precomputed.py`` after a change of the pinned ``tokenizers`` or of
Python (its Unicode version), or of the code that makes them; tests/test_tokenizer.py,
tests/test_dropin_tokenizers.py and tests/test_serving.py check that the shipped tables
equal the ones made here.
"""

import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kerasbert import shipped, tokenizers  # noqa: E402
from kerasbert.serving import graph_text  # noqa: E402
from kerasbert.text import vocab  # noqa: E402


def main():
    shipped.write_precomputed("google_classes", vocab.google_classes_key(),
                              vocab.google_class_ranges())
    shipped.write_precomputed("bert4keras_classes", vocab.google_classes_key(),
                              tokenizers.engine_class_ranges())
    for do_lower_case in (True, False):
        shipped.write_precomputed(
            graph_text.tables_name(do_lower_case), graph_text.tables_key(do_lower_case),
            dataclasses.asdict(graph_text.make_character_tables(do_lower_case)))
    print(f"wrote {os.path.relpath(os.path.dirname(shipped.precomputed_file('x')))}")


if __name__ == "__main__":
    main()
