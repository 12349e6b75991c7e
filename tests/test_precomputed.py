"""The tables kerasbert ships instead of computing them at each start
(``kerasbert/resources/precomputed/``: a Tokenizer's character classes, an export's
character tables) are read from the package, and hold what the installed versions make."""

import numpy as np
import pytest

from kerasbert import shipped
from record_precomputed import TABLES


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_shipped_table_is_read_and_is_the_one_made_here(name):
    key, make = TABLES[name]
    with np.load(shipped.precomputed_file(name)) as found:
        assert str(found["key"]) == key(), (
            f"{name} was made on other versions: run python tests/record_precomputed.py")
    read = shipped.precomputed(name, key(), lambda: pytest.fail(f"{name} was made, not read"))
    made = make()
    assert sorted(read) == sorted(made)
    for field, array in made.items():
        np.testing.assert_array_equal(read[field], array, err_msg=f"{name}: {field}")
        assert read[field].dtype == array.dtype, f"{name}: {field}"
