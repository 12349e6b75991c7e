"""The attention layer's one call with keyword arguments, and decoding that keeps no state on
the family object.

Graphs saved before the keyword call hold a list (``[queries, keys..., position, mask]``,
read by ``MultiHeadSelfAttention.listed``): each layout must give what the keyword call
gives on the same tensors, padding included. Decoding passes each step's caches, positions
and mask as a ``Step``: the family object it runs on is the same before and after.
"""

import numpy as np
import pytest

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.inference.generation import decoder_of, generate
from kerasbert.models.families.t5 import T5Attention
from kerasbert.models.layers import MultiHeadSelfAttention
from kerasbert.models.positions import RelativePositions, RotaryPositions

HEADS, SIZE, LENGTH, CACHED = 2, 8, 5, 3


def states(length, seed):
    """``(2, length, 16)`` random states, the second row's last two at padding (masked)."""
    import keras

    x = np.random.default_rng(seed).normal(size=(2, length, HEADS * SIZE)).astype("float32")
    mask = np.ones((2, length), bool)
    mask[1, -2:] = False
    tensor = keras.ops.convert_to_tensor(x)
    return tensor, keras.ops.convert_to_tensor(mask)


def causal(length):
    import keras

    return keras.ops.convert_to_tensor(np.tril(np.ones((1, length, length), bool)))


def layouts():
    """``(name, layer, list inputs, list masks, list keywords, keyword call)`` per layout."""
    x, padding = states(LENGTH, 0)
    cache, cache_padding = states(CACHED, 1)
    import keras

    both = keras.ops.concatenate([cache, x], 1)
    both_padding = keras.ops.concatenate([cache_padding, padding], 1)
    rotary = RotaryPositions(SIZE)(x)
    relative = RelativePositions(SIZE, max_relative_position=4)(x)
    bias = keras.ops.convert_to_tensor(
        np.random.default_rng(2).normal(size=(1, HEADS, LENGTH, LENGTH)).astype("float32"))
    allowed = causal(LENGTH)
    return [
        ("rotary + mask", MultiHeadSelfAttention(HEADS, SIZE, position="rotary",
                                                 attention_mask=True),
         [x, rotary, allowed], [padding, None, None], {},
         {"position": rotary, "attention_mask": allowed}),
        ("relative", MultiHeadSelfAttention(HEADS, SIZE, position="relative"),
         [x, relative], [padding, None], {}, {"position": relative}),
        ("score bias", MultiHeadSelfAttention(HEADS, SIZE, attention_mask=True),
         [x, bias], [padding, None], {"biased": True}, {"score_bias": bias}),
        ("cached", MultiHeadSelfAttention(HEADS, SIZE, cached=True),
         [x, both, both], [padding, both_padding, both_padding], {},
         {"keys": both, "values": both, "keys_mask": both_padding,
          "values_mask": both_padding}),
        ("T5 self-attention", T5Attention(HEADS, SIZE, attention_mask=True),
         [x, x, bias, allowed], [padding, padding, None, None], {},
         {"keys": x, "keys_mask": padding, "position": bias, "attention_mask": allowed}),
        ("T5 cross-attention", T5Attention(HEADS, SIZE, position_bias=False),
         [x, both], [padding, both_padding], {},
         {"keys": both, "keys_mask": both_padding}),
    ]


@pytest.mark.parametrize("index", range(6), ids=[case[0] for case in layouts()])
def test_a_saved_graphs_list_gives_what_the_keyword_call_gives(index):
    _, layer, listed, masks, words, keywords = layouts()[index]
    old = layer(listed, mask=masks, **words)
    new = layer(listed[0], inputs_mask=masks[0], **keywords)
    np.testing.assert_array_equal(np.asarray(old), np.asarray(new))
    # The padding matters: without the keys' mask, the output is another.
    if "keys_mask" in keywords:
        keywords = {**keywords, "keys_mask": None, "values_mask": None}
        unmasked = layer(listed[0], inputs_mask=masks[0], **keywords)
        assert np.abs(np.asarray(unmasked) - np.asarray(new)).max() > 1e-4


def test_decoding_leaves_the_family_object_as_it_was():
    model = build_transformer_model(TINY, model="gpt2")
    transformer = decoder_of(model).transformer
    before = {name: (id(value), repr(value)) for name, value in vars(transformer).items()
              if not isinstance(value, dict)}
    layers = dict(transformer.layers)
    ids = generate(model, [[5, 17, 33], [44, 8]], max_new_tokens=4)
    assert [len(row) for row in ids] == [4, 4]
    assert decoder_of(model).transformer is transformer
    after = {name: (id(value), repr(value)) for name, value in vars(transformer).items()
             if not isinstance(value, dict)}
    assert after == before
    assert transformer.layers == layers
    assert not hasattr(transformer, "caches") and not hasattr(transformer, "decoding")
