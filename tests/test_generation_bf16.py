"""``generate(dtype="bfloat16")``: a bfloat16 copy of the weights decoded in a loop outside
XLA, its caches written in place, against float32 decoding of the same model.

bfloat16 keeps 8 bits of each number, so a row's ids may part from float32's where two
next-token scores lie close; on weights spread wide (``wide_weights``) most rows agree.
"""

import logging

import numpy as np
import pytest

from conftest import TINY
from kerasbert import build_transformer_model, hardware
from kerasbert.inference import generation
from kerasbert.inference.generation import BFLOAT16_MIN_ROWS, decoder_of, generate
from test_generation import wide_weights

# Eight prompts of different lengths (left-padded), at least BFLOAT16_MIN_ROWS.
PROMPTS = [[5, 17, 33, 9, 41], [44, 8], [61, 2, 70], [3], [12, 90, 4, 4, 7, 66, 21],
           [80, 81], [29, 31, 37, 41, 43, 47, 53, 59, 61], [95, 1, 50]]


@pytest.fixture
def bfloat16_units(monkeypatch):
    """This CPU taken to multiply bfloat16 in hardware (the mode's path runs anywhere)."""
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512_bf16"}))


@pytest.fixture(scope="module")
def models():
    return {"gpt2": wide_weights(build_transformer_model(TINY, model="gpt2")),
            "bert+unilm": wide_weights(build_transformer_model(TINY, application="unilm"))}


def agreement(rows, others):
    """The fraction of rows whose ids are all the same."""
    return float(np.mean([a == b for a, b in zip(rows, others)]))


@pytest.mark.parametrize("kind", ["gpt2", "bert+unilm"])
def test_bfloat16_decoding_gives_the_float32_ids_on_most_rows(models, kind, bfloat16_units):
    model = models[kind]
    assert len(PROMPTS) >= BFLOAT16_MIN_ROWS
    wide = generate(model, PROMPTS, max_new_tokens=8)
    narrow = generate(model, PROMPTS, max_new_tokens=8, dtype="bfloat16")
    assert decoder_of(model).low_precision.in_place  # the bfloat16 loop ran
    assert [len(row) for row in narrow] == [8] * len(PROMPTS)
    # Measured: 7 and 6 rows of 8 (GPT-2, UniLM); a flipped near-tie changes the rest of a row.
    assert agreement(narrow, wide) >= 5 / 8, (narrow, wide)
    assert narrow == generate(model, PROMPTS, max_new_tokens=8, dtype="bfloat16")
    # An end id ends each row on its own, as in float32.
    end = wide[0][2]
    ended = generate(model, PROMPTS, max_new_tokens=8, dtype="bfloat16", end_id=end)
    assert all(row[-1] == end or len(row) == 8 for row in ended)
    assert [row[:len(short)] for row, short in zip(narrow, ended)] == ended


def test_bfloat16_decoding_samples_by_its_seed(models, bfloat16_units):
    model = models["gpt2"]
    sample = dict(max_new_tokens=8, sample=True, top_k=20, top_p=0.95, temperature=1.5,
                  dtype="bfloat16")
    drawn = generate(model, PROMPTS, seed=7, **sample)
    assert drawn == generate(model, PROMPTS, seed=7, **sample)
    assert drawn != generate(model, PROMPTS, seed=8, **sample)
    assert drawn != generate(model, PROMPTS, max_new_tokens=8, dtype="bfloat16")


def test_the_bfloat16_loop_writes_its_caches_in_place(models, bfloat16_units):
    """Outside XLA a cache carried through the loop as a tensor would be copied whole at
    every step: the caches are variables, each step's keys and values assigned to a slice
    of them, and no XLA update of a slice runs."""
    import tensorflow as tf

    model = models["gpt2"]
    generate(model, PROMPTS, max_new_tokens=4, dtype="bfloat16")
    low = decoder_of(model).low_precision
    (run,) = low.in_place.values()
    ids = np.zeros((len(PROMPTS), 16), "int32")
    graph = run.get_concrete_function(*(tf.constant(x) for x in (
        ids, ids, np.zeros(len(PROMPTS), "int32"), np.zeros(2, "int32")))).graph.as_graph_def()
    ops = {node.op for node in graph.node} | {node.op for function in graph.library.function
                                              for node in function.node_def}
    assert "ResourceStridedSliceAssign" in ops
    assert not any(op.startswith("Xla") for op in ops)
    assert all(weight.dtype == "bfloat16" for layer in low.attention for weight in layer.weights)


def test_few_rows_decode_in_float32(models, bfloat16_units):
    model = build_transformer_model(TINY, model="gpt2")
    few = PROMPTS[:BFLOAT16_MIN_ROWS - 1]
    assert generate(model, few, max_new_tokens=4, dtype="bfloat16") == generate(
        model, few, max_new_tokens=4)
    assert decoder_of(model).low_precision is None  # no bfloat16 copy made


def test_without_bfloat16_units_it_decodes_in_float32_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    model = wide_weights(build_transformer_model(TINY, model="gpt2"))
    with caplog.at_level(logging.WARNING, logger="kerasbert.hardware"):
        rows = generate(model, PROMPTS, max_new_tokens=4, dtype="bfloat16")
    assert rows == generate(model, PROMPTS, max_new_tokens=4)
    warnings = [r.getMessage() for r in caplog.records if r.name == "kerasbert.hardware"]
    assert len(warnings) == 1 and "generate(dtype='bfloat16')" in warnings[0]
    assert "running in float32" in warnings[0]
    assert decoder_of(model).low_precision is None


@pytest.mark.parametrize("arguments, message", [
    ({"num_beams": 2}, "num_beams (2): beam search decodes in float32"),
    ({"use_cache": False}, "use_cache=False"),
    ({"dtype": "float16"}, "dtype ('float16'): must be one of float32, bfloat16"),
])
def test_what_bfloat16_decoding_does_not_do_is_refused_by_name(models, arguments, message):
    keywords = {"max_new_tokens": 2, "dtype": "bfloat16", **arguments}
    with pytest.raises(ValueError) as raised:
        generate(models["gpt2"], PROMPTS, **keywords)
    assert message in str(raised.value)


def test_an_encoder_decoder_is_refused_in_bfloat16():
    with pytest.raises(ValueError, match="encoder-decoder; bfloat16 decoding takes"):
        generate(build_transformer_model(TINY, model="t5"), [[5, 6]], dtype="bfloat16")
    assert generation.DTYPES == ("float32", "bfloat16")
