"""Decoding with a key/value cache (:mod:`kerasbert.inference.generation`) against decoding without
one, against bert4keras's ``AutoRegressiveDecoder`` and against Hugging Face's ``generate``.

Every language-model kind kerasbert builds (GPT, GPT-2, GPT2-ML, BERT with bert4keras's LM
and UniLM masks) must give, with the cache, the ids it gives running the whole sequence
through the model at each step: greedy and sampled, on a batch of prompts of different
lengths (left-padded, positions counted per row). GPT-2 converted from a random Hugging
Face model must generate what transformers generates.
"""

import json

import numpy as np
import pytest

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.inference.generation import Settings, choose, generate
from peers import run_bert4keras

PROMPTS = [[5, 17, 33, 9, 41], [44, 8], [61, 2, 70]]
# model= and its keywords; each a language model.
KINDS = {
    "gpt": ("gpt", {}),
    "gpt2": ("gpt2", {}),
    "gpt2_ml": ("gpt2_ml", {}),
    "bert+lm": ("bert", {"application": "lm"}),
    "bert+unilm": ("bert", {"application": "unilm"}),
}


def wide_weights(model, seed=0):
    """Random weights wide enough that the next-token scores are far apart (the greedy
    choice does not hang on the last bit), with token embeddings of one length, so that no
    token wins every step by the length of its row in the tied output matrix."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        name = weight.path.rpartition("/")[2]
        mean, spread = {"gamma": (1, 0.1), "beta": (0, 0.05)}.get(name, (0, 0.3))
        spread = 0.05 if name.endswith("bias") else spread
        weight.assign(rng.normal(mean, spread, weight.shape).astype("float32"))
    table = model.get_layer("Embedding-Token").embeddings
    rows = table.numpy()
    table.assign(rows / np.linalg.norm(rows, axis=1, keepdims=True) * 2)
    return model


@pytest.fixture(scope="module")
def models():
    return {kind: wide_weights(build_transformer_model(TINY, model=family, **keywords))
            for kind, (family, keywords) in KINDS.items()}


#: The kinds whose sampling and beams are also compared with decoding without the cache: the
#: choice of the next ids is one code for every family (``choose``, the beams' loop), so two
#: kinds, one with segments (UniLM's) and one without, cover it; every kind decodes greedily.
CHOICE_KINDS = ("gpt2", "bert+unilm")


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_cache_gives_the_ids_of_decoding_without_it(models, kind):
    model = models[kind]
    greedy = generate(model, PROMPTS, max_new_tokens=8)
    assert greedy == generate(model, PROMPTS, max_new_tokens=8, use_cache=False)
    assert [len(row) for row in greedy] == [8, 8, 8]
    if kind not in CHOICE_KINDS:
        return
    sampled = generate(model, PROMPTS, max_new_tokens=8, sample=True, top_k=20, top_p=0.95,
                       temperature=1.5, seed=7)
    assert sampled == generate(model, PROMPTS, max_new_tokens=8, sample=True, top_k=20,
                               top_p=0.95, temperature=1.5, seed=7, use_cache=False)
    assert sampled != greedy
    beams = generate(model, PROMPTS, max_new_tokens=8, num_beams=3)
    assert beams == generate(model, PROMPTS, max_new_tokens=8, num_beams=3, use_cache=False)
    assert generate(model, PROMPTS, max_new_tokens=8, num_beams=1) == greedy


@pytest.mark.parametrize("kind", ["gpt2", "bert+unilm"])
def test_each_decoding_step_reads_the_caches_and_kernels_in_place(kind):
    """XLA's program of the loop: its body writes each layer's keys and values into the
    caches it carries (no copy of a cache per step; with values kept as keys are, XLA's
    CPU compiler copied each value cache twice a step at these sizes), multiplies by
    transposed copies of the kernels, made once before it, and by the token table as it
    lies."""
    import re

    import tensorflow as tf

    from kerasbert.inference.generation import decoder_of
    from kerasbert.models import kernels

    family, keywords = KINDS[kind]
    config = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=256, max_position_embeddings=512)
    decoder = decoder_of(build_transformer_model(config, model=family, **keywords))
    ids = tf.constant(np.arange(1, 9, dtype="int32")[None])

    def program(stage):
        with kernels.separate_products():
            return decoder.compiled_run(Settings(128)).experimental_get_compiler_ir(
                ids, tf.zeros_like(ids), tf.ones((1,), "int32"), tf.constant([0, 0]))(
                stage=stage)

    def loop_and_entry(hlo):
        body = {f"%{name}" for name in re.findall(r"body=%([\w.\-]+)", hlo)}
        computations = re.split(r"\n(?=\S)", hlo)
        return (next(c for c in computations if c.split(" ", 1)[0] in body),
                next(c for c in computations if c.startswith("ENTRY")))

    optimized = program("optimized_hlo")
    body, _ = loop_and_entry(optimized)
    assert body.count("dynamic-update-slice") >= 2 * config["num_hidden_layers"]
    assert not re.search(r"= \w+\[\d+,\d+,\d+,\d+\]\S* copy\(", body)  # a cache copied
    # The LM head reads the token table (100 x 64) as it lies: nothing in the program
    # holds it transposed (XLA wrote it out transposed at every step, in one fused loop).
    assert "f32[64,100]" not in optimized
    body, entry = loop_and_entry(program("hlo"))
    assert len(decoder.products) == 2 * config["num_hidden_layers"]
    # query, key, value, output, feed-forward in and out: each kernel transposed once
    assert entry.count("opt-barrier(") >= 6 * config["num_hidden_layers"]
    assert not re.search(r"transpose\([^)]*\), dimensions=\{1,0\}", body)


def test_beam_search_ends_as_bert4keras_ends_it(models):
    """A prompt ends when its best output ends; outputs that end without being the best
    leave the beam (:meth:`kerasbert.snippets.AutoRegressiveDecoder.beam_search`)."""
    model = models["gpt"]
    early = 0
    for end in sorted({row[1] for row in generate(model, PROMPTS, max_new_tokens=8,
                                                  num_beams=3)}):
        kwargs = dict(max_new_tokens=8, num_beams=3, end_id=end)
        found = generate(model, PROMPTS, **kwargs)
        assert found == generate(model, PROMPTS, use_cache=False, **kwargs)
        assert all(end not in row[:-1] for row in found)
        early += sum(row[-1] == end and len(row) < 8 for row in found)
    assert early


def test_a_row_generates_what_it_generates_alone(models):
    """Padding and batch mates change nothing (prompts are padded on the left)."""
    model = models["gpt2"]
    assert [generate(model, [prompt], max_new_tokens=8)[0] for prompt in PROMPTS] == \
        generate(model, PROMPTS, max_new_tokens=8)


def test_segment_ids_of_the_prompt_and_the_new_tokens(models):
    model = models["bert+unilm"]
    segments = [[0, 0, 0, 1, 1], [0, 0], [0, 0, 1]]
    kwargs = dict(max_new_tokens=6, segment_ids=segments)
    assert generate(model, PROMPTS, **kwargs) == generate(model, PROMPTS, use_cache=False,
                                                          **kwargs)
    # UniLM's new tokens are targets (segment 1) unless told otherwise.
    assert generate(model, PROMPTS, **kwargs) == generate(model, PROMPTS, new_segment_id=1,
                                                          **kwargs)
    assert generate(model, PROMPTS, **kwargs) != generate(model, PROMPTS, new_segment_id=0,
                                                          **kwargs)


def test_each_row_stops_at_its_end_id_and_not_before_min_new_tokens(models):
    model = models["gpt2"]
    free = generate(model, PROMPTS, max_new_tokens=8)
    end = free[1][0]  # row 1 would say it first
    stopped = generate(model, PROMPTS, max_new_tokens=8, end_id=end)
    for row, alone in zip(stopped, free):
        expected = alone[:alone.index(end) + 1] if end in alone else alone
        assert row == expected
    assert stopped[1] == [end]
    later = generate(model, PROMPTS, max_new_tokens=8, end_id=[end], min_new_tokens=3)
    assert all(end not in row[:3] for row in later)
    assert later == generate(model, PROMPTS, max_new_tokens=8, end_id=[end], min_new_tokens=3,
                             use_cache=False)


def test_a_seed_gives_the_same_draws_and_another_seed_others(models):
    model = models["gpt"]
    first = generate(model, PROMPTS, max_new_tokens=12, sample=True, seed=1)
    assert first == generate(model, PROMPTS, max_new_tokens=12, sample=True, seed=1)
    assert first != generate(model, PROMPTS, max_new_tokens=12, sample=True, seed=2)


def test_draws_follow_the_softmax_kept_to_top_k_and_top_p():
    import tensorflow as tf

    logits = tf.constant([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    expected = tf.nn.softmax(logits)[0].numpy()
    draws = 4000

    def frequencies(**settings):
        settings = Settings(1, sample=True, **settings)
        chosen = tf.function(lambda logits, rows: choose(
            logits, tf.constant(0), settings, tf.constant([3, 0]), rows), jit_compile=True,
            autograph=False)(tf.repeat(logits, draws, axis=0), tf.range(draws))
        return np.bincount(chosen.numpy(), minlength=6) / draws

    # Each frequency within four standard errors of its probability.
    tolerance = 4 * np.sqrt(expected * (1 - expected) / draws) + 1e-3
    assert np.all(np.abs(frequencies() - expected) < tolerance)
    top2 = frequencies(top_k=2)
    assert top2[2:].sum() == 0
    np.testing.assert_allclose(top2[:2], expected[:2] / expected[:2].sum(), atol=0.03)
    # top_p 0.8: the fewest best ids whose probabilities reach 0.8 (here the first three).
    assert np.cumsum(expected)[1] < 0.8 <= np.cumsum(expected)[2]
    nucleus = frequencies(top_p=0.8)
    assert nucleus[3:].sum() == 0 and nucleus[2] > 0
    hot = frequencies(temperature=0.25)
    assert hot[0] > frequencies()[0] + 0.2


def test_what_cannot_be_decoded_is_refused_by_name(models):
    with pytest.raises(ValueError, match="not a language model: it has no causal"):
        generate(build_transformer_model(TINY), PROMPTS)
    with pytest.raises(ValueError, match="incremental decoding of rotary positions"):
        generate(build_transformer_model(TINY, model="roformer", application="lm"), PROMPTS)
    model = models["gpt2"]
    with pytest.raises(ValueError, match=r"token_ids\[1\]: token id 0 is padding"):
        generate(model, [[5, 6], [0, 7]])
    with pytest.raises(ValueError, match="top_k, top_p: sampling settings; pass sample=True"):
        generate(model, PROMPTS, top_k=5, top_p=0.9)
    with pytest.raises(ValueError, match="max_new_tokens \\(30\\): the longest prompt \\(5 ids\\) "
                                         "and the new ids exceed the model's 32 positions"):
        generate(model, PROMPTS, max_new_tokens=30)
    with pytest.raises(ValueError, match="min_new_tokens \\(9\\): must be an integer from 0 to "
                                         "max_new_tokens \\(8\\)"):
        generate(model, PROMPTS, max_new_tokens=8, min_new_tokens=9)


# Each value is checked before the decoding loop, with or without the cache: a compiled
# gather clamps an id outside its table (150 read as 99) and answers anyway.
BAD_INPUTS = [
    ("gpt2", dict(token_ids=[[5, 150]]), r"token_ids\[0\]: token id 150 is outside the "
                                          r"model's range 1 to 99"),
    ("gpt2", dict(token_ids=[[5, -1]]), r"token id -1 is outside the model's range 1 to 99"),
    ("gpt2", dict(token_ids=[[5, 2 ** 31]]), r"token id 2147483648 is outside"),
    ("gpt2", dict(token_ids=[5, 6, 7]), r"token_ids\[0\]: 5 is not a list of token ids; pass "
                                        r"one list per prompt, e\.g\. token_ids=\[\[5, 6, 7\]\]"),
    ("gpt2", dict(token_ids=[[[5, 6]]]), r"token_ids\[0\]: \[\[5, 6\]\] is not a list of token"),
    ("gpt2", dict(token_ids=[[5.0, 6.0]]), r"token_ids\[0\]: a prompt is a non-empty list of "
                                           r"token ids \(integers\)"),
    ("gpt2", dict(token_ids="abc"), r"token_ids: 'abc' is not a list of prompts"),
    ("t5", dict(token_ids=[[150]]), r"token id 150 is outside the model's range 1 to 99"),
    ("t5", dict(token_ids=[[-4]]), r"token id -4 is outside"),
    ("bert+unilm", dict(token_ids=[[5, 6]], segment_ids=[[0, 5]]),
     r"segment_ids\[0\]: segment id 5 is outside the model's range 0 to 1"),
    ("bert+unilm", dict(token_ids=[[5, 6]], segment_ids=[[0, -1]]), r"segment id -1 is outside"),
    ("bert+unilm", dict(token_ids=[[5, 6]], new_segment_id=9),
     r"new_segment_id \(9\): outside the model's range 0 to 1"),
    ("gpt2", dict(token_ids=[[5]], sample=True, top_k=500),
     r"top_k \(500\): outside the model's range 1 to 100"),
    ("gpt2", dict(token_ids=[[5]], sample=True, top_k=0), r"top_k \(0\): outside"),
    ("gpt2", dict(token_ids=[[5]], sample=True, top_p=0), r"top_p \(0\): must be a number in "
                                                         r"\(0, 1\]"),
    ("gpt2", dict(token_ids=[[5]], sample=True, temperature=0),
     r"temperature \(0\.0\): must be positive"),
    ("gpt2", dict(token_ids=[[5]], end_id=2.7), r"end_id \(2\.7\): must be a whole number from "
                                                r"0 to 99"),
    ("gpt2", dict(token_ids=[[5]], end_id="2"), r"end_id \('2'\): must be a whole number"),
    ("gpt2", dict(token_ids=[[5]], end_id=100), r"end_id \(100\): outside the model's range"),
    ("gpt2", dict(token_ids=[[5]], max_new_tokens=True), r"max_new_tokens \(True\): must be a "
                                                        r"positive integer"),
    ("t5", dict(token_ids=[[5]], max_new_tokens=2 ** 31 - 1),
     r"max_new_tokens \(2147483647\): the key/value caches of 1 row\(s\) would need [\d,.]+ "
     r"GiB"),
]


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("kind, arguments, message", BAD_INPUTS)
def test_an_id_segment_or_setting_outside_the_model_is_refused_by_name(
        models, t5_model, kind, arguments, message, use_cache):
    model = t5_model if kind == "t5" else models[kind]
    arguments = dict(arguments)
    with pytest.raises(ValueError, match=message):
        generate(model, arguments.pop("token_ids"), use_cache=use_cache,
                 **{"max_new_tokens": 3, **arguments})


@pytest.mark.parametrize("family, keywords", [("gpt2", {}), ("bert", {"application": "unilm"}),
                                              ("t5", {})])
def test_a_mixed_precision_model_decodes_through_its_caches_as_without_them(family, keywords):
    """Under a mixed bfloat16 policy the cached loop reads the float32 weights in bfloat16,
    as the layers do (it failed: a float32 bias met bfloat16 rows)."""
    # Weights spread wide, so that bfloat16's rounding (in another order on each path)
    # cannot swap two next-token scores.
    model = wide_weights(build_transformer_model(TINY, model=family, dtype="mixed_bfloat16",
                                                 **keywords))
    cached = generate(model, PROMPTS, max_new_tokens=4)
    assert cached == generate(model, PROMPTS, max_new_tokens=4, use_cache=False)
    assert [len(row) for row in cached] == [4, 4, 4]


@pytest.fixture(scope="module")
def t5_model():
    return build_transformer_model(TINY, model="t5")


@pytest.mark.peer
def test_greedy_and_beam_search_equal_bert4keras_autoregressive_decoder(tmp_path):
    """bert4keras's own decoder (beam search of one, i.e. greedy, and of three, with and
    without an end id) on its own GPT-2 and GPT checkpoints, against :func:`generate` with
    the cache on the same checkpoints."""
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(TINY))
    theirs = run_bert4keras(f"""
        import json
        import numpy as np
        import tensorflow as tf
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.backend import K
        from bert4keras.models import build_transformer_model
        from bert4keras.snippets import AutoRegressiveDecoder
        out = {{}}
        for family in ("gpt2", "gpt"):
            bert = build_transformer_model({str(config)!r}, model=family,
                                           return_keras_model=False)
            rng = np.random.default_rng(0)
            values = []
            for w in bert.model.trainable_weights:  # as wide_weights draws them
                name = w.name.split(":")[0].rpartition("/")[2]
                mean, spread = {{"gamma": (1, 0.1), "beta": (0, 0.05)}}.get(name, (0, 0.3))
                spread = 0.05 if name.endswith("bias") else spread
                value = rng.normal(mean, spread, K.int_shape(w)).astype("float32")
                if w.name.startswith("Embedding-Token/"):
                    value = value / np.linalg.norm(value, axis=1, keepdims=True) * 2
                values.append((w, value))
            K.batch_set_value(values)
            bert.save_weights_as_checkpoint({str(tmp_path)!r} + "/" + family + ".ckpt")
            model = bert.model

            class Decoder(AutoRegressiveDecoder):
                @AutoRegressiveDecoder.wraps(default_rtype="probas")
                def predict(self, inputs, output_ids, states):
                    ids = np.concatenate([inputs[0], output_ids], 1)
                    if family == "gpt2":
                        return self.last_token(model).predict(ids)
                    return self.last_token(model).predict([ids, np.zeros_like(ids)])

            for topk, end in ((1, -1), (3, -1), (3, 50)):
                rows = []
                for prompt in {PROMPTS!r}:
                    decoder = Decoder(start_id=None, end_id=end, maxlen=8)
                    found = decoder.beam_search([np.array(prompt)], topk=topk)
                    rows.append([int(i) for i in found])
                out[f"{{family}} {{topk}} {{end}}"] = rows
        print(json.dumps(out))
    """)
    for family in ("gpt2", "gpt"):
        model = build_transformer_model(str(config), str(tmp_path / f"{family}.ckpt"),
                                        model=family)
        assert generate(model, PROMPTS, max_new_tokens=8) == theirs[f"{family} 1 -1"]
        assert generate(model, PROMPTS, max_new_tokens=8, num_beams=3) == \
            theirs[f"{family} 3 -1"]
        assert generate(model, PROMPTS, max_new_tokens=8, num_beams=3, end_id=50) == \
            theirs[f"{family} 3 50"]


@pytest.mark.peer
@pytest.mark.parametrize("family", ["gpt2", "openai-gpt"])
def test_a_model_converted_from_hugging_face_generates_what_transformers_generates(
        tmp_path, family):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from kerasbert.cli.main import main

    torch.manual_seed(0)
    sizes = dict(vocab_size=120, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    if family == "gpt2":
        theirs = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            **sizes, bos_token_id=1, eos_token_id=1))
    else:
        theirs = transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(**sizes))
    theirs.eval()
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.normal_(0, 0.3)
    theirs.save_pretrained(tmp_path / "hf")
    assert main(["convert", "--from-hf", str(tmp_path / "hf"), "--to",
                 str(tmp_path / "google" / "bert_model.ckpt")]) == 0
    ours = build_transformer_model(str(tmp_path / "google" / "bert_config.json"),
                                   str(tmp_path / "google" / "bert_model.ckpt"),
                                   final_activation="linear")
    # The config's model_type built the family: GPT-2's final norm, GPT's post-norm layers.
    assert ("Output-Norm" in [layer.name for layer in ours.layers]) == (family == "gpt2")
    with torch.no_grad():
        logits = theirs(torch.tensor(PROMPTS[:1])).logits.numpy()
    np.testing.assert_allclose(ours.predict(np.array(PROMPTS[:1]), verbose=0), logits,
                               atol=1e-5, rtol=0)
    settings = dict(max_new_tokens=12, do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        if family == "gpt2":  # left-padded as transformers pads a batch for generation
            width = max(map(len, PROMPTS))
            ids = torch.tensor([[0] * (width - len(p)) + p for p in PROMPTS])
            expected = theirs.generate(ids, attention_mask=(ids != 0).long(),
                                       **settings)[:, width:].tolist()
        else:  # OpenAI GPT counts positions from the first column: one prompt at a time
            expected = [theirs.generate(torch.tensor([p]), **settings)[0, len(p):].tolist()
                        for p in PROMPTS]
    assert generate(ours, PROMPTS, max_new_tokens=12) == expected
