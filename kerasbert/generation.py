"""Text generation with kerasbert's language models, one new token at a time through a
key/value cache.

:func:`generate` takes a language model built by :func:`kerasbert.build_transformer_model`
(``model="gpt"``, ``"gpt2"``, ``"gpt2_ml"``, or a BERT-family model with
``application="lm"`` / ``"unilm"`` and its MLM head) and prompts of token ids, and returns
each prompt's new ids: greedy, or sampled with a temperature, top-k and top-p; up to
``max_new_tokens`` or an end id, each row stopping on its own.

With the cache (the default), the prompt runs through the layers once and each new token
once more: every attention layer keeps the keys and values of the tokens before
(:meth:`kerasbert.models.layers.MultiHeadSelfAttention.cached_call`), and the whole loop is
one compiled XLA program. Without it (``use_cache=False``) each step runs the model on the
whole sequence so far, as bert4keras's ``AutoRegressiveDecoder`` does: the same ids, many
times slower; kept as the reference the cached loop is tested against.

Token id 0 is padding, as everywhere in kerasbert: prompts of different lengths are padded
on the left and each row's positions count from its own first token, so a row generates
what it would alone. A model whose attention has rotary or relative positions (RoFormer,
NEZHA) is refused.

Example:
    >>> import kerasbert
    >>> model = kerasbert.build_transformer_model(dict(
    ...     vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    ...     intermediate_size=32, max_position_embeddings=32), model="gpt2")
    >>> rows = generate(model, [[5, 6, 7], [8]], max_new_tokens=4)
    >>> [len(row) for row in rows]
    [4, 4]
    >>> rows == generate(model, [[5, 6, 7], [8]], max_new_tokens=4, use_cache=False)
    True
"""

import dataclasses
import weakref

import numpy as np

from kerasbert.models import names

#: Sampling settings that need ``sample=True``.
SAMPLING = ("temperature", "top_k", "top_p")


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the next token is chosen (see :func:`generate`)."""

    max_new_tokens: int
    min_new_tokens: int = 0
    end_ids: tuple = ()
    sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def check(self):
        """Raises ValueError naming a setting out of range."""
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens ({self.max_new_tokens!r}): must be a positive "
                             "integer")
        if not isinstance(self.min_new_tokens, int) or not \
                0 <= self.min_new_tokens <= self.max_new_tokens:
            raise ValueError(f"min_new_tokens ({self.min_new_tokens!r}): must be an integer "
                             f"from 0 to max_new_tokens ({self.max_new_tokens})")
        if not self.temperature > 0:
            raise ValueError(f"temperature ({self.temperature!r}): must be positive")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k ({self.top_k!r}): must be a positive integer or None")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p ({self.top_p!r}): must be in (0, 1]")


def choose(logits, step, settings, seed, rows):
    """The next id of each row from its ``(batch, vocabulary)`` logits at decoding ``step``
    (0 for the first new token): the end ids are ruled out before ``min_new_tokens``; then
    the highest, or a draw from the softmax of ``logits / temperature`` kept to its ``top_k``
    best and to the fewest best whose probabilities sum to ``top_p``.

    ``seed`` is a ``(2,)`` int32 tensor, ``rows`` each row's index among the prompts: a
    draw depends on them and on ``step`` alone, not on which rows run together.
    """
    import tensorflow as tf

    logits = tf.cast(logits, "float32")
    vocabulary = tf.shape(logits)[1]
    never = tf.constant(-np.inf, "float32")
    if settings.end_ids and settings.min_new_tokens:
        ends = tf.reduce_any(tf.equal(tf.range(vocabulary)[:, None],
                                      tf.constant(settings.end_ids, "int32")[None]), axis=1)
        logits = tf.where(tf.logical_and(ends[None], step < settings.min_new_tokens),
                          never, logits)
    if not settings.sample:
        return tf.argmax(logits, axis=-1, output_type="int32")
    logits = logits / settings.temperature
    if settings.top_k:
        kth = tf.math.top_k(logits, k=settings.top_k).values[:, -1:]
        logits = tf.where(logits < kth, never, logits)
    if settings.top_p < 1:
        ordered = tf.sort(logits, axis=-1, direction="DESCENDING")
        probabilities = tf.nn.softmax(ordered, axis=-1)
        before = tf.cumsum(probabilities, axis=-1, exclusive=True)
        # The smallest logit still kept: those whose predecessors sum to less than top_p.
        kept = tf.where(before < settings.top_p, ordered, tf.constant(np.inf, "float32"))
        logits = tf.where(logits < tf.reduce_min(kept, axis=-1, keepdims=True), never, logits)
    # The Gumbel-max draw: argmax(logits + Gumbel noise) follows softmax(logits); each
    # row's noise comes from its own seed.
    seeds = tf.stack([tf.fill(tf.shape(rows), seed[0]),
                      seed[1] + rows * settings.max_new_tokens + tf.cast(step, "int32")], 1)
    uniform = tf.map_fn(
        lambda row_seed: tf.random.stateless_uniform(
            [vocabulary], row_seed, minval=np.finfo("float32").tiny, maxval=1.0),
        seeds, fn_output_signature="float32")
    return tf.argmax(logits - tf.math.log(-tf.math.log(uniform)), axis=-1, output_type="int32")


class Decoder:
    """A language model's layers, read once, for :func:`generate` (one per model, kept as
    long as the model lives).

    Args:
        model: the Keras model (or the ``Transformer`` object ``return_keras_model=False``
            gives).

    Raises:
        ValueError: a model that is not a language model kerasbert can decode.
    """

    def __init__(self, model):
        from kerasbert.checkpoints.loading import table_family
        from kerasbert.models.attention_masks import AttentionMask
        from kerasbert.models.families import family_class
        from kerasbert.models.layers import MultiHeadSelfAttention

        self.model = model
        self.layers = {layer.name: layer for layer in model.layers}
        self.family = family_class(table_family(model))
        masks = [layer for layer in model.layers if isinstance(layer, AttentionMask)]
        if not masks:
            raise ValueError(f"model {model.name!r} is not a language model: it has no causal "
                             "attention mask (build it with model='gpt' / 'gpt2' / 'gpt2_ml', "
                             "or application='lm' / 'unilm' and its MLM head)")
        self.mask = masks[0]
        activation = self.layers.get(names.LM_ACTIVATION) or self.layers.get(
            names.MLM_ACTIVATION)
        if activation is None:
            raise ValueError(f"model {model.name!r} has no language-model head "
                             f"({names.LM_ACTIVATION} or {names.MLM_ACTIVATION})")
        self.activation = activation
        self.attention = [self.layers[names.attention_name(i)]
                          for i in range(len(model.layers))
                          if names.attention_name(i) in self.layers]
        if not self.attention or not all(isinstance(layer, MultiHeadSelfAttention)
                                         for layer in self.attention):
            raise ValueError(f"model {model.name!r}: its layers are not kerasbert's "
                             "Transformer-i-MultiHeadSelfAttention (ALBERT's shared layers "
                             "are not decoded)")
        for layer in self.attention:
            if layer.position:
                raise ValueError(f"model {model.name!r}: incremental decoding of "
                                 f"{layer.position} positions is not supported")
        self.segments = len(model.inputs) > 1
        self.max_position = (self.layers[names.EMBEDDING_POSITION].max_position
                             if names.EMBEDDING_POSITION in self.layers else None)
        self.compiled = {}
        self.logits_model = None

    # ------------------------------------------------------------- the graph
    def embed(self, ids, segments, positions):
        """Token (+ segment) + position embeddings (+ norm, + mapping) of new tokens."""
        from keras import ops

        x = self.layers[names.EMBEDDING_TOKEN](ids)
        if self.segments and names.EMBEDDING_SEGMENT in self.layers:
            x = x + self.layers[names.EMBEDDING_SEGMENT](segments)
        if names.EMBEDDING_POSITION in self.layers:
            table = self.layers[names.EMBEDDING_POSITION].embeddings
            x = x + ops.cast(ops.take(table, positions, axis=0), x.dtype)
        if names.EMBEDDING_NORM in self.layers:
            x = self.layers[names.EMBEDDING_NORM](x)
        if names.EMBEDDING_MAPPING in self.layers:
            x = self.layers[names.EMBEDDING_MAPPING](x)
        return x

    def prompt_mask(self, ids, segments):
        """``(batch or 1, length, length)``: which prompt token each may attend to, by the
        model's own attention mask (UniLM's from the segment ids)."""
        return self.mask(segments if self.mask.kind == "unilm" else ids)

    def run(self, ids, segments, new_segments, seed, settings):
        """The compiled loop: ``(new ids (batch, max_new_tokens), lengths (batch,))``."""
        import tensorflow as tf

        batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
        slots = length + settings.max_new_tokens
        present = tf.concat([ids != 0, tf.zeros((batch, settings.max_new_tokens), "bool")], 1)
        positions = tf.maximum(tf.cumsum(tf.cast(ids != 0, "int32"), axis=1) - 1, 0)
        caches = []
        for layer in self.attention:
            shape = (batch, layer.num_heads, slots, layer.head_size)
            caches.append((tf.zeros(shape, layer.compute_dtype),
                           tf.zeros(shape, layer.compute_dtype)))
        allowed = tf.logical_and(self.prompt_mask(ids, segments), present[:, None, :length])
        allowed = tf.pad(allowed, [[0, 0], [0, 0], [0, settings.max_new_tokens]])
        x, caches = self.family.cached_blocks(self.layers, self.embed(ids, segments, positions),
                                              caches, 0, allowed)
        logits = self.family.cached_head(self.layers, x[:, -1])
        outputs = tf.zeros((batch, settings.max_new_tokens), "int32")
        lengths = tf.zeros((batch,), "int32")
        finished = tf.zeros((batch,), "bool")
        last = positions[:, -1]
        ends = tf.constant(settings.end_ids or (-1,), "int32")

        def more(step, *_):
            return step < settings.max_new_tokens

        def body(step, logits, caches, present, last, finished, outputs, lengths):
            token = tf.where(finished, 0, choose(logits, step, settings, seed, tf.range(batch)))
            outputs = tf.tensor_scatter_nd_update(
                outputs, tf.stack([tf.range(batch), tf.fill((batch,), step)], 1), token)
            lengths = lengths + tf.cast(tf.logical_not(finished), "int32")
            finished = tf.logical_or(finished, tf.reduce_any(
                tf.equal(token[:, None], ends[None]), axis=1))
            slot = length + step
            present = tf.tensor_scatter_nd_update(
                present, tf.stack([tf.range(batch), tf.fill((batch,), slot)], 1), token != 0)
            last = last + 1
            x = self.embed(token[:, None], new_segments[:, None], last[:, None])
            x, caches = self.family.cached_blocks(self.layers, x, caches, slot,
                                                  present[:, None, :])
            logits = self.family.cached_head(self.layers, x[:, -1])
            return step + 1, logits, caches, present, last, finished, outputs, lengths

        def going(step, logits, caches, present, last, finished, outputs, lengths):
            return tf.logical_and(more(step), tf.logical_not(tf.reduce_all(finished)))

        loop = tf.while_loop(going, body, (tf.constant(0), logits, caches, present, last,
                                           finished, outputs, lengths))
        return loop[6], loop[7]

    def compiled_run(self, settings):
        """:meth:`run` compiled by XLA, once per settings."""
        import tensorflow as tf

        if settings not in self.compiled:
            def run(ids, segments, new_segments, seed):
                return self.run(ids, segments, new_segments, seed, settings)
            self.compiled[settings] = tf.function(run, jit_compile=True, reduce_retracing=True)
        return self.compiled[settings]

    # ---------------------------------------------------------- no cache
    def logits_of(self, ids, segments):
        """The last position's logits of each row, running the whole model (no cache)."""
        import keras

        if self.logits_model is None:
            import tensorflow as tf

            inner = keras.Model(self.model.inputs, self.activation.input)
            self.logits_model = tf.function(
                lambda inputs: inner(inputs, training=False)[:, -1], reduce_retracing=True)
        inputs = [ids, segments] if self.segments else ids
        return self.logits_model(inputs)

    def run_without_cache(self, ids, segments, new_segments, seed, settings):
        """bert4keras's way: the whole sequence through the model at every step (rows of one
        length at a time, unpadded)."""
        import tensorflow as tf

        ids, segments = np.asarray(ids), np.asarray(segments)
        batch = len(ids)
        # Compiled as in the cached loop: XLA draws other random numbers than TensorFlow's
        # own kernels from the same seed.
        chooser = tf.function(lambda logits, step, seed, rows: choose(
            logits, step, settings, seed, rows), jit_compile=True, autograph=False)
        outputs = np.zeros((batch, settings.max_new_tokens), "int32")
        lengths = np.zeros(batch, "int32")
        for length in sorted({int((row != 0).sum()) for row in ids}):
            rows = np.flatnonzero((ids != 0).sum(axis=1) == length)
            tokens = ids[rows][:, ids.shape[1] - length:]
            types = segments[rows][:, ids.shape[1] - length:]
            finished = np.zeros(len(rows), bool)
            for step in range(settings.max_new_tokens):
                logits = self.logits_of(tokens, types)
                token = chooser(logits, tf.constant(step), seed,
                                tf.constant(rows, "int32")).numpy()
                token = np.where(finished, 0, token)
                outputs[rows, step] = token
                lengths[rows] += ~finished
                finished |= np.isin(token, settings.end_ids)
                if finished.all():
                    break
                tokens = np.concatenate([tokens, token[:, None]], axis=1)
                types = np.concatenate([types, new_segments[rows][:, None]], axis=1)
        return outputs, lengths


_DECODERS = weakref.WeakKeyDictionary()


def decoder_of(model):
    """The :class:`Decoder` of ``model`` (made once per model)."""
    model = getattr(model, "model", model)  # the Transformer object: its Keras model
    if model not in _DECODERS:
        _DECODERS[model] = Decoder(model)
    return _DECODERS[model]


def _prompts(token_ids, segment_ids, where="token_ids"):
    """Left-padded ``(ids, segments)`` int32 arrays of ragged prompts."""
    rows = [np.asarray(row).reshape(-1) for row in token_ids]
    if not rows:
        raise ValueError(f"{where}: no prompt")
    for index, row in enumerate(rows):
        if row.size == 0 or not np.issubdtype(row.dtype, np.integer):
            raise ValueError(f"{where}[{index}]: a prompt is a non-empty list of token ids")
        if (row == 0).any():
            raise ValueError(f"{where}[{index}]: token id 0 is padding, not a prompt token")
    types = ([np.zeros(len(row), "int32") for row in rows] if segment_ids is None
             else [np.asarray(row).reshape(-1) for row in segment_ids])
    if len(types) != len(rows) or any(len(t) != len(r) for t, r in zip(types, rows)):
        raise ValueError("segment_ids: one segment id per prompt token, as token_ids")
    length = max(len(row) for row in rows)
    ids = np.zeros((len(rows), length), "int32")
    segments = np.zeros((len(rows), length), "int32")
    for index, (row, types_row) in enumerate(zip(rows, types)):
        ids[index, length - len(row):] = row
        segments[index, length - len(row):] = types_row
    return ids, segments


def generate(model, token_ids, max_new_tokens=32, end_id=None, min_new_tokens=0,
             sample=False, temperature=1.0, top_k=None, top_p=None, seed=0,
             segment_ids=None, new_segment_id=None, use_cache=True):
    """New token ids for each prompt, from a kerasbert language model.

    Args:
        model: a language model from :func:`kerasbert.build_transformer_model` (see the
            module's text), its Keras model or its ``Transformer`` object.
        token_ids: the prompts: a list of lists of ids (lengths may differ) or a 2-D array;
            0 is padding and may not occur in a prompt.
        max_new_tokens: the most new ids per row.
        end_id: an id, or a list of ids, that ends a row (kept as its last id); None: rows
            run to ``max_new_tokens``.
        min_new_tokens: the end ids are not chosen before this many new ids.
        sample: False: the highest-scoring id (greedy); True: a random draw, shaped by
            ``temperature``, ``top_k`` (keep the k best; None: all) and ``top_p`` (keep
            the fewest best whose probabilities sum to at least p; None: all).
        seed: the draws' seed (an int): the same seed gives the same ids.
        segment_ids: the prompts' segment ids (models with ``Input-Segment``); None: 0.
        new_segment_id: the new tokens' segment id; None: 1 under UniLM's mask, else each
            row's last prompt segment.
        use_cache: False runs the whole sequence through the model at each step (the
            reference the cache is tested against; much slower).

    Returns:
        one list of ints per prompt: its new ids, ending at the first end id.

    Raises:
        ValueError: a model kerasbert cannot decode, a malformed prompt, a setting out of
            range, a sampling setting without ``sample=True``, or prompts that would run
            past the model's positions.
    """
    import tensorflow as tf

    given = {"temperature": temperature != 1.0, "top_k": top_k is not None,
             "top_p": top_p is not None}
    if not sample and any(given.values()):
        raise ValueError(f"{', '.join(k for k in SAMPLING if given[k])}: sampling settings; "
                         "pass sample=True to sample (greedy decoding ignores them)")
    end_ids = () if end_id is None else tuple(
        int(i) for i in (end_id if isinstance(end_id, (list, tuple, np.ndarray)) else [end_id]))
    settings = Settings(max_new_tokens, min_new_tokens, end_ids, bool(sample),
                        float(temperature), int(top_k or 0), float(top_p or 1.0))
    settings.check()
    decoder = decoder_of(model)
    ids, segments = _prompts(token_ids, segment_ids)
    if decoder.max_position is not None and \
            int((ids != 0).sum(axis=1).max()) + max_new_tokens > decoder.max_position:
        raise ValueError(f"max_new_tokens ({max_new_tokens}): the longest prompt "
                         f"({int((ids != 0).sum(axis=1).max())} ids) and the new ids exceed "
                         f"the model's {decoder.max_position} positions")
    if new_segment_id is None:
        new_segments = (np.ones(len(ids), "int32") if decoder.mask.kind == "unilm"
                        else segments[:, -1])
    else:
        new_segments = np.full(len(ids), int(new_segment_id), "int32")
    seed = tf.constant([int(seed) % (2 ** 31), 0], "int32")
    if use_cache:
        outputs, lengths = decoder.compiled_run(settings)(
            tf.constant(ids), tf.constant(segments), tf.constant(new_segments), seed)
        outputs, lengths = outputs.numpy(), lengths.numpy()
    else:
        outputs, lengths = decoder.run_without_cache(ids, segments, new_segments, seed,
                                                     settings)
    return [row[:n].tolist() for row, n in zip(outputs, lengths)]
