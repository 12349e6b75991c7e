"""Text generation with kerasbert's language models, one new token at a time through a
key/value cache.

:func:`generate` takes a language model built by :func:`kerasbert.build_transformer_model`
(``model="gpt"``, ``"gpt2"``, ``"gpt2_ml"``, or a BERT-family model with
``application="lm"`` / ``"unilm"`` and its MLM head) and prompts of token ids, and returns
each prompt's new ids: greedy, or sampled with a temperature, top-k and top-p; up to
``max_new_tokens`` or an end id, each row stopping on its own. With T5's encoder-decoder
(``model="t5"``, ``"t5.1.1"``, ``"mt5.1.1"``; :class:`Seq2SeqDecoder`) the prompts are the
sources and the decoder starts from id 0; each decoder layer also keeps the keys and values
of the encoder's output, computed once.

With the cache (the default), the prompt runs through the layers once and each new token
once more: every attention layer keeps the keys and values of the tokens before
(the ``cache`` of :class:`kerasbert.models.layers.MultiHeadSelfAttention`): the model's
own steps run again, its family's forward path, on the new tokens; the whole loop is
one compiled XLA program. Without it (``use_cache=False``) each step runs the model on the
whole sequence so far, as bert4keras's ``AutoRegressiveDecoder`` does: the same ids, many
times slower; kept as the reference the cached loop is tested against.

With ``dtype="bfloat16"`` a decoder-only model decodes on a bfloat16 copy of its weights
(made once), in a loop outside XLA whose products run on oneDNN's bfloat16 kernels and whose
caches are variables written in place: faster at batch on CPUs with bfloat16 units.

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

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from keras import ops

from kerasbert import internals
from kerasbert.inference.compiled import compiled
from kerasbert.models import kernels, names
from kerasbert.text.padding import sequence_padding

if TYPE_CHECKING:  # annotations only
    import keras

    from kerasbert.models.families.base import Transformer

#: Prompts are padded on the left to a multiple of this many ids (fewer compiled programs).
PAD_TO = 8
#: Sampling settings that need ``sample=True``.
SAMPLING = ("temperature", "top_k", "top_p")
#: What ``generate(dtype=...)`` takes.
DTYPES = ("float32", "bfloat16")
#: The fewest rows that ``dtype="bfloat16"`` decodes in bfloat16; fewer run the float32
#: loop, faster there (see :func:`generate`).
BFLOAT16_MIN_ROWS = 2


def padded_width(longest: Any) -> Any:
    """``longest`` rounded up to a multiple of :data:`PAD_TO`: the width of a batch of
    prompts, from an ``int`` or, in an exported graph, a tensor.

    Example:
        >>> padded_width(1), padded_width(8), padded_width(9)
        (8, 8, 16)
    """
    return (longest + PAD_TO - 1) // PAD_TO * PAD_TO


def written_slot(present: Any, slot: Any, value: Any) -> Any:
    """``present`` (``(batch, slots)`` bool) with column ``slot`` set to ``value``
    (``(batch,)``)."""
    slots = ops.arange(ops.shape(present)[1], dtype="int32")
    here = ops.equal(slots[None], ops.cast(slot, "int32"))
    return ops.where(here, value[:, None], present)


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
    num_beams: int = 1

    def check(self) -> None:
        """Raises ValueError naming a setting out of range."""
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or self.max_new_tokens < 1:
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
        if not isinstance(self.num_beams, int) or self.num_beams < 1:
            raise ValueError(f"num_beams ({self.num_beams!r}): must be a positive integer")
        if self.num_beams > 1 and self.sample:
            raise ValueError(f"num_beams ({self.num_beams}): beam search does not sample; "
                             "pass num_beams=1 with sample=True")


def choose(logits: Any, step: Any, settings: Settings, seed: Any, rows: Any) -> Any:
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
    chosen = tf.argmax(logits - tf.math.log(-tf.math.log(uniform)), axis=-1, output_type="int32")
    return tf.ensure_shape(chosen, logits.shape[:1])  # map_fn loses the batch's size


def choose_here(logits: np.ndarray, step: int, settings: Settings, seed: int,
                rows: np.ndarray) -> np.ndarray:
    """:func:`choose` in NumPy, for the loops that run outside TensorFlow (Keras's JAX and
    PyTorch backends): the same ids when greedy; a draw depends on ``seed``, its row's index
    and ``step`` alone, as there, but is another draw than TensorFlow's."""
    logits = np.array(logits, "float32")
    if settings.end_ids and step < settings.min_new_tokens:
        logits[:, list(settings.end_ids)] = -np.inf
    if not settings.sample:
        return logits.argmax(axis=-1).astype("int32")
    logits = logits / settings.temperature
    if settings.top_k:
        kth = np.sort(logits, axis=-1)[:, -settings.top_k][:, None]
        logits = np.where(logits < kth, -np.inf, logits)
    if settings.top_p < 1:
        ordered = -np.sort(-logits, axis=-1)
        probabilities = np.exp(ordered - ordered[:, :1])
        probabilities /= probabilities.sum(axis=-1, keepdims=True)
        before = np.cumsum(probabilities, axis=-1) - probabilities
        kept = np.where(before < settings.top_p, ordered, np.inf)
        logits = np.where(logits < kept.min(axis=-1, keepdims=True), -np.inf, logits)
    uniform = np.stack([np.random.default_rng([seed, int(row) * settings.max_new_tokens + step])
                        .uniform(np.finfo("float32").tiny, 1.0, logits.shape[1])
                        for row in rows]).astype("float32")
    return (logits - np.log(-np.log(uniform))).argmax(axis=-1).astype("int32")


class Decoder:
    """A language model's layers, read once, for :func:`generate` (one per model, kept as
    long as the model lives).

    Args:
        model: the Keras model (or the ``Transformer`` object ``return_keras_model=False``
            gives).

    Raises:
        ValueError: a model that is not a language model kerasbert can decode.
    """

    def __init__(self, model: keras.Model) -> None:
        from kerasbert.models.attention_masks import AttentionMask
        from kerasbert.models.families import family_class
        from kerasbert.models.layers import FeedForward, MultiHeadSelfAttention, ScaleOffset
        from kerasbert.models.loading import table_family

        self.model = model
        self.layers = {layer.name: layer for layer in model.layers}
        family = family_class(table_family(model))
        masks = [layer for layer in model.layers if isinstance(layer, AttentionMask)]
        if not masks:
            raise ValueError(f"model {model.name!r} is not a language model: it has no causal "
                             "attention mask (build it with model='gpt' / 'gpt2' / 'gpt2_ml', "
                             "or application='lm' / 'unilm' and its MLM head)")
        if names.INPUT_POSITION in self.layers:
            raise ValueError(f"model {model.name!r} takes its position ids ({names.INPUT_POSITION}"
                             "); decoding counts positions itself: build it without "
                             "custom_position_ids")
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
        if any(isinstance(layer, ScaleOffset) and layer.conditional for layer in model.layers):
            raise ValueError(f"model {model.name!r}: incremental decoding of conditional layer "
                             "norms (layer_norm_cond) is not supported; decode by calling the "
                             "whole model (kerasbert.snippets.AutoRegressiveDecoder)")
        # Their products read transposed copies of the kernels in the compiled loop.
        self.products = [layer for layer in model.layers
                         if isinstance(layer, (MultiHeadSelfAttention, FeedForward))]
        self.segments = len(model.inputs) > 1
        self.vocab_size = self.layers[names.EMBEDDING_TOKEN].input_dim
        self.segment_vocab = (self.layers[names.EMBEDDING_SEGMENT].input_dim
                              if self.segments and names.EMBEDDING_SEGMENT in self.layers
                              else None)
        self.max_position = (self.layers[names.EMBEDDING_POSITION].max_length
                             if names.EMBEDDING_POSITION in self.layers else None)
        self.transformer = family.bound(
            model, with_mlm="with_mlm" in family.head_flags and names.MLM_ACTIVATION in self.layers)
        self.compiled: dict[Settings, Callable[..., tuple[Any, Any]]] = {}
        self.logits_model: Callable[[Any], Any] | None = None
        self.in_place: dict[tuple[Any, ...], Callable[..., tuple[Any, Any]]] = {}
        self.low_precision: Decoder | None = None
        self.step_program: Callable[..., tuple[Any, list[tuple[Any, ...]], Any, Any]] | None = None
        self.loops: dict[Settings, Callable[..., tuple[Any, Any]]] = {}

    # ------------------------------------------------------------- the graph
    def forward(self, ids: Any, segments: Any, positions: Any, caches: list[tuple[Any, ...]],
                start: Any, allowed: Any) -> tuple[Any, list[tuple[Any, ...]]]:
        """The model's own steps (its family's, as in its graph) on new tokens at cache slot
        ``start``, each attention layer through its cache.

        Returns:
            ``(logits of each row's last token, caches)``.
        """
        from kerasbert.models.families.base import Step

        model, start = self.transformer, ops.cast(start, "int32")
        step = Step({layer.name: {"keys": keys, "values": values, "start": start}
                     for layer, (keys, values) in zip(self.attention, caches)},
                    positions, allowed)
        x = model.apply_embeddings([ids, segments] if self.segments else [ids], step)
        for index in range(model.num_hidden_layers):
            x = model.apply_main_layers(x, index, step)
        logits = model.apply_final_layers(x[:, -1], step)
        return logits, [(step.caches[layer.name]["keys"], step.caches[layer.name]["values"])
                        for layer in self.attention]

    def prompt_mask(self, ids: Any, segments: Any) -> Any:
        """``(batch or 1, length, length)``: which prompt token each may attend to, by the
        model's own attention mask (UniLM's from the segment ids)."""
        return self.mask(segments if self.mask.kind == "unilm" else ids)

    def cache_shapes(self, batch: int, slots: int) -> list[tuple[tuple[int, ...], ...]]:
        """Each attention layer's ``(keys, values)`` cache shapes: the values with their
        slots last (see :class:`~kerasbert.models.layers.MultiHeadSelfAttention`)."""
        return [((batch, layer.num_heads, slots, layer.head_size),
                 (batch, layer.num_heads, layer.head_size, slots)) for layer in self.attention]

    def prefill(self, ids: Any, segments: Any, extra: int,
                caches: list[tuple[Any, ...]] | None = None
                ) -> tuple[Any, list[tuple[Any, ...]], Any, Any]:
        """The prompts through the layers, filling caches with ``extra`` free slots (new
        zeros, or the variables ``caches``, written in place).

        Returns:
            ``(logits of each row's next id, caches, present, last)``: ``present`` marks the
            slots that hold a token (not padding), ``last`` each row's last position.
        """
        batch, length = ops.shape(ids)[0], ops.shape(ids)[1]
        present = ops.concatenate([ops.not_equal(ids, 0), ops.zeros((batch, extra), "bool")], 1)
        positions = ops.maximum(ops.cumsum(ops.cast(ops.not_equal(ids, 0), "int32"), axis=1) - 1, 0)
        if caches is None:
            caches = [tuple(ops.zeros(shape, layer.compute_dtype) for shape in shapes)
                      for layer, shapes in zip(self.attention,
                                               self.cache_shapes(batch, length + extra))]
        allowed = ops.logical_and(self.prompt_mask(ids, segments), present[:, None, :length])
        allowed = ops.concatenate(
            [allowed, ops.zeros((ops.shape(allowed)[0], ops.shape(allowed)[1], extra), "bool")], 2)
        logits, caches = self.forward(ids, segments, positions, caches, 0, allowed)
        return logits, caches, present, positions[:, -1]

    def step(self, token: Any, new_segments: Any, last: Any, present: Any,
             caches: list[tuple[Any, ...]],
             slot: Any) -> tuple[Any, list[tuple[Any, ...]], Any, Any]:
        """One new id per row at cache ``slot`` (its position ``last + 1``).

        Returns:
            ``(logits of the next id, caches, present, last)``.
        """
        present = written_slot(present, slot, ops.not_equal(token, 0))
        last = last + 1
        logits, caches = self.forward(token[:, None], new_segments[:, None], last[:, None],
                                      caches, slot, present[:, None, :])
        return logits, caches, present, last

    def slot(self, length: Any, step: Any) -> Any:
        """The cache slot of the id chosen at ``step`` (after a prompt ``length`` wide)."""
        return length + step

    def run(self, ids: Any, segments: Any, new_segments: Any, seed: Any,
            settings: Settings) -> tuple[Any, Any]:
        """The compiled loop: ``(new ids (batch, max_new_tokens), lengths (batch,))``.

        The layers' weights are read in the model's compute dtype, as its layers read them
        (under a mixed policy: bfloat16 products of float32 weights)."""
        with internals.autocast(self.attention[0].compute_dtype):
            if settings.num_beams > 1:
                return self.run_beams(ids, segments, new_segments, settings)
            return self.run_one(ids, segments, new_segments, seed, settings)

    def run_one(self, ids: Any, segments: Any, new_segments: Any, seed: Any,
                settings: Settings,
                variables: list[tuple[Any, ...]] | None = None) -> tuple[Any, Any]:
        """Greedy or sampled decoding, one output per row (see :meth:`run`); with
        ``variables``, the caches are those variables, written in place (the loop carries
        no cache)."""
        import tensorflow as tf

        batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
        logits, caches, present, last = self.prefill(ids, segments, settings.max_new_tokens,
                                                     variables)
        if variables is not None:
            caches = []
        outputs = tf.zeros((batch, settings.max_new_tokens), "int32")
        lengths = tf.zeros((batch,), "int32")
        finished = tf.zeros((batch,), "bool")
        ends = tf.constant(settings.end_ids or (-1,), "int32")

        def going(step: Any, logits: Any, caches: Any, present: Any, last: Any, finished: Any,
                  outputs: Any, lengths: Any) -> Any:
            return tf.logical_and(step < settings.max_new_tokens,
                                  tf.logical_not(tf.reduce_all(finished)))

        def body(step: Any, logits: Any, caches: Any, present: Any, last: Any, finished: Any,
                 outputs: Any, lengths: Any) -> tuple[Any, ...]:
            token = tf.where(finished, 0, choose(logits, step, settings, seed, tf.range(batch)))
            outputs = tf.tensor_scatter_nd_update(
                outputs, tf.stack([tf.range(batch), tf.fill((batch,), step)], 1), token)
            lengths = lengths + tf.cast(tf.logical_not(finished), "int32")
            finished = tf.logical_or(finished, tf.reduce_any(
                tf.equal(token[:, None], ends[None]), axis=1))
            logits, written, present, last = self.step(
                token, new_segments, last, present, variables or caches,
                self.slot(length, step))
            caches = [] if variables is not None else written
            return step + 1, logits, caches, present, last, finished, outputs, lengths

        loop = tf.while_loop(going, body, (tf.constant(0), logits, caches, present, last,
                                           finished, outputs, lengths))
        return loop[6], loop[7]

    def run_greedy(self, ids: Any, segments: Any, new_segments: Any,
                   settings: Settings) -> tuple[Any, Any]:
        """Greedy decoding through the cache as one loop in ``keras.ops``
        (``keras.ops.while_loop``: ``jax.lax.while_loop`` on JAX), the id chosen where the
        logits are, as :func:`choose` chooses it: ``(new ids, lengths)``."""
        batch, length = ops.shape(ids)[0], ops.shape(ids)[1]
        logits, caches, present, last = self.prefill(ids, segments, settings.max_new_tokens)
        ends = ops.convert_to_tensor(settings.end_ids or (-1,), "int32")
        banned = ops.any(ops.equal(ops.arange(self.vocab_size, dtype="int32")[:, None],
                                   ends[None]), axis=1)
        columns = ops.arange(settings.max_new_tokens, dtype="int32")

        def going(step: Any, logits: Any, caches: Any, present: Any, last: Any, finished: Any,
                  outputs: Any, lengths: Any) -> Any:
            return ops.logical_and(step < settings.max_new_tokens,
                                   ops.logical_not(ops.all(finished)))

        def body(step: Any, logits: Any, caches: Any, present: Any, last: Any, finished: Any,
                 outputs: Any, lengths: Any) -> tuple[Any, ...]:
            logits = ops.cast(logits, "float32")
            if settings.end_ids and settings.min_new_tokens:
                early = ops.logical_and(banned[None], step < settings.min_new_tokens)
                logits = ops.where(early, -np.inf, logits)
            token = ops.where(finished, 0, ops.cast(ops.argmax(logits, axis=-1), "int32"))
            outputs = ops.where(ops.equal(columns[None], step), token[:, None], outputs)
            lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
            finished = ops.logical_or(finished, ops.any(ops.equal(token[:, None], ends[None]),
                                                        axis=1))
            logits, caches, present, last = self.step(token, new_segments, last, present,
                                                      caches, self.slot(length, step))
            return (step + 1, ops.cast(logits, "float32"), caches, present, last, finished,
                    outputs, lengths)

        loop = ops.while_loop(going, body, (
            ops.convert_to_tensor(0, "int32"), ops.cast(logits, "float32"), caches, present,
            last, ops.zeros((batch,), "bool"),
            ops.zeros((batch, settings.max_new_tokens), "int32"), ops.zeros((batch,), "int32")))
        return loop[6], loop[7]

    def compiled_greedy(self, settings: Settings) -> Callable[..., tuple[Any, Any]]:
        """:meth:`run_greedy` as the backend compiles it, once per settings (on JAX one
        program per prompt shape)."""
        if settings not in self.loops:
            def run(ids: Any, segments: Any, new_segments: Any) -> tuple[Any, Any]:
                with internals.autocast(self.attention[0].compute_dtype):
                    return self.run_greedy(ids, segments, new_segments, settings)
            self.loops[settings] = compiled(run, self.model.weights)
        return self.loops[settings]

    def run_stepwise(self, ids: np.ndarray, segments: np.ndarray, new_segments: np.ndarray,
                     seed: int, settings: Settings) -> tuple[np.ndarray, np.ndarray]:
        """Greedy or sampled decoding through the cache on Keras's other backends (JAX,
        PyTorch): :meth:`run_one`'s prefill and steps, one step at a time from Python, each
        id chosen by :func:`choose_here`."""
        batch, length = ids.shape
        outputs = np.zeros((batch, settings.max_new_tokens), "int32")
        lengths = np.zeros(batch, "int32")
        finished = np.zeros(batch, bool)
        step_function = self.compiled_step()
        with internals.autocast(self.attention[0].compute_dtype):
            logits, caches, present, last = self.prefill(
                ops.convert_to_tensor(ids), ops.convert_to_tensor(segments),
                settings.max_new_tokens)
            new_segments = ops.convert_to_tensor(new_segments)
            for step in range(settings.max_new_tokens):
                token = np.where(finished, 0, choose_here(
                    ops.convert_to_numpy(logits), step, settings, seed, np.arange(batch)))
                outputs[:, step] = token
                lengths += ~finished
                finished |= np.isin(token, settings.end_ids)
                if finished.all() or step + 1 == settings.max_new_tokens:
                    break
                logits, caches, present, last = step_function(
                    ops.convert_to_tensor(token), new_segments, last, present, caches,
                    ops.convert_to_tensor(self.slot(length, step), "int32"))
        return outputs, lengths

    def compiled_step(self) -> Callable[..., tuple[Any, list[tuple[Any, ...]], Any, Any]]:
        """:meth:`step` as the backend compiles it
        (:func:`~kerasbert.inference.compiled.compiled`): on JAX one program per batch and
        cache width, not one dispatch per op."""
        if self.step_program is None:
            self.step_program = compiled(self.step, self.model.weights)
        return self.step_program

    def run_beams(self, ids: Any, segments: Any, new_segments: Any,
                  settings: Settings) -> tuple[Any, Any]:
        """Beam search as bert4keras's ``AutoRegressiveDecoder.beam_search``: ``num_beams``
        outputs per prompt, each step the best continuations of all of them; a prompt ends
        when its best-scoring output ends with an end id, and an output that ends without
        being the best leaves, narrowing the beam. Returns what :meth:`run` returns."""
        import tensorflow as tf

        beams = settings.num_beams
        # Static sizes (the loop is traced per shape), so that its state keeps its shape.
        batch, length = ids.shape[0], ids.shape[1]
        logits, caches, present, last = self.prefill(ids, segments, settings.max_new_tokens)
        # Row b * beams + k holds beam k of prompt b.
        logits, present, last = (tf.repeat(x, beams, axis=0) for x in (logits, present, last))
        caches = [tuple(tf.repeat(x, beams, axis=0) for x in pair) for pair in caches]
        new_segments = tf.repeat(new_segments, beams, axis=0)
        never = tf.constant(-np.inf, "float32")
        # At first the beams are one output: only beam 0 counts.
        scores = tf.tile(tf.concat([[0.0], tf.fill((beams - 1,), never)], 0)[None], [batch, 1])
        width = tf.fill((batch,), min(beams, logits.shape[1]))
        outputs = tf.zeros((batch, beams, settings.max_new_tokens), "int32")
        done = tf.zeros((batch,), "bool")
        best_ids = tf.zeros((batch, settings.max_new_tokens), "int32")
        best_lengths = tf.zeros((batch,), "int32")
        ends = tf.constant(settings.end_ids or (-1,), "int32")
        ranks = tf.range(beams)[None]

        def going(step: Any, logits: Any, caches: Any, present: Any, last: Any, scores: Any,
                  done: Any, *_: Any) -> Any:
            return tf.logical_and(step < settings.max_new_tokens,
                                  tf.logical_not(tf.reduce_all(done)))

        def body(step: Any, logits: Any, caches: Any, present: Any, last: Any, scores: Any,
                 done: Any, width: Any, outputs: Any, best_ids: Any,
                 best_lengths: Any) -> tuple[Any, ...]:
            log_probabilities = tf.nn.log_softmax(tf.cast(logits, "float32"))
            if settings.end_ids and settings.min_new_tokens:
                vocabulary = tf.shape(logits)[1]
                is_end = tf.reduce_any(tf.equal(tf.range(vocabulary)[:, None], ends[None]), 1)
                log_probabilities = tf.where(
                    tf.logical_and(is_end[None], step < settings.min_new_tokens),
                    never, log_probabilities)
            vocabulary = log_probabilities.shape[1]
            candidates = scores[:, :, None] + tf.reshape(log_probabilities,
                                                         (batch, beams, vocabulary))
            top = tf.math.top_k(tf.reshape(candidates, (batch, -1)), k=beams)
            # Only as many outputs as the beam is wide now.
            kept_scores = tf.where(ranks < width[:, None], top.values, never)
            parents, tokens = top.indices // vocabulary, top.indices % vocabulary
            rows = tf.reshape(parents + tf.range(batch)[:, None] * beams, (-1,))
            def reorder(x: Any) -> Any:  # each row takes its parent's state (the shape stays known)
                return tf.ensure_shape(tf.gather(x, rows), x.shape)

            caches = [tuple(reorder(x) for x in pair) for pair in caches]
            present, last = reorder(present), reorder(last)
            outputs = tf.ensure_shape(tf.gather(outputs, parents, batch_dims=1), outputs.shape)
            index = tf.stack([tf.repeat(tf.range(batch), beams), tf.tile(tf.range(beams), [batch]),
                              tf.fill((batch * beams,), step)], 1)
            outputs = tf.tensor_scatter_nd_update(outputs, index, tf.reshape(tokens, (-1,)))
            ended = tf.logical_and(
                tf.reduce_any(tf.equal(tokens[:, :, None], ends[None, None]), axis=2),
                kept_scores > never)
            best = tf.argmax(kept_scores, axis=1, output_type="int32")
            best_ended = tf.gather(ended, best, batch_dims=1)
            last_step = step + 1 >= settings.max_new_tokens
            finishing = tf.logical_and(tf.logical_not(done),
                                       tf.logical_or(best_ended, last_step))
            chosen = tf.gather(outputs, best, batch_dims=1)
            best_ids = tf.where(finishing[:, None], chosen, best_ids)
            best_lengths = tf.where(finishing, step + 1, best_lengths)
            done = tf.logical_or(done, finishing)
            # Outputs that ended without being the best leave the beam.
            scores = tf.where(ended, never, kept_scores)
            width = width - tf.reduce_sum(tf.cast(ended, "int32"), axis=1)
            logits, caches, present, last = self.step(
                tf.reshape(tokens, (-1,)), new_segments, last, present, caches,
                self.slot(length, step))
            return (step + 1, logits, caches, present, last, scores, done, width, outputs,
                    best_ids, best_lengths)

        loop = tf.while_loop(going, body, (tf.constant(0), logits, caches, present, last, scores,
                                           done, width, outputs, best_ids, best_lengths))
        return loop[9], loop[10]

    def compiled_run(self, settings: Settings) -> Callable[..., tuple[Any, Any]]:
        """:meth:`run` compiled by XLA, once per settings."""
        import tensorflow as tf

        if settings not in self.compiled:
            def run(ids: Any, segments: Any, new_segments: Any, seed: Any) -> tuple[Any, Any]:
                with kernels.transposed_kernels(self.products):
                    return self.run(ids, segments, new_segments, seed, settings)
            # Traced per shape (never relaxed to unknown sizes): XLA compiles per shape anyway,
            # and the loop's state keeps its static shape.
            self.compiled[settings] = tf.function(run, jit_compile=True, autograph=False)
        return self.compiled[settings]

    # ------------------------------------------------------------ bfloat16
    def bfloat16(self) -> Decoder:
        """The :class:`Decoder` of a bfloat16 copy of the model
        (:func:`kerasbert.inference.predictor.with_dtype_policy`): its weights rounded
        once, made at the first call and kept as long as this decoder."""
        if self.low_precision is None:
            from kerasbert.inference.predictor import with_dtype_policy

            self.low_precision = type(self)(with_dtype_policy(self.model, "bfloat16"))
        return self.low_precision

    def run_in_place(self, settings: Settings, batch: int,
                     width: int) -> Callable[..., tuple[Any, Any]]:
        """:meth:`run_one` as a TensorFlow graph without XLA, for ``batch`` prompts
        ``width`` ids wide: its products run on oneDNN's kernels, which multiply bfloat16
        on the CPU's bfloat16 units (XLA's CPU compiler multiplies it slower than float32),
        and its caches are variables written in place (a tensor carried through a loop
        outside XLA is copied at every write). Made once per settings and shape; only the
        last one is kept, with its caches.
        """
        import tensorflow as tf

        key = (settings, batch, width)
        if key not in self.in_place:
            self.in_place.clear()  # the caches of another shape are let go
            variables = [tuple(tf.Variable(tf.zeros(shape, layer.compute_dtype),
                                           trainable=False) for shape in shapes)
                         for layer, shapes in zip(self.attention, self.cache_shapes(
                             batch, width + settings.max_new_tokens))]

            def run(ids: Any, segments: Any, new_segments: Any, seed: Any) -> tuple[Any, Any]:
                with internals.autocast(self.attention[0].compute_dtype):
                    return self.run_one(ids, segments, new_segments, seed, settings, variables)

            self.in_place[key] = tf.function(run, jit_compile=False, autograph=False)
        return self.in_place[key]

    # ---------------------------------------------------------- no cache
    def logits_of(self, ids: Any, segments: Any) -> Any:
        """The last position's logits of each row, running the whole model (no cache)."""
        import keras

        if self.logits_model is None:
            inner = keras.Model(self.model.inputs, self.activation.input)
            self.logits_model = traced(lambda inputs: inner(inputs, training=False)[:, -1])
        inputs = [ids, segments] if self.segments else ids
        return self.logits_model(inputs)

    #: The id decoding starts from, before the first new one (T5's decoder: 0), or None.
    start_id: int | None = None

    def groups(self, ids: np.ndarray, segments: np.ndarray,
               new_segments: np.ndarray) -> list[tuple[np.ndarray, list[np.ndarray]]]:
        """The prompts as the whole model reads them: ``(rows, prompt)`` per group of rows of
        one length, unpadded (tokens, segments, the new ids' segment)."""
        groups = []
        for length in sorted({int((row != 0).sum()) for row in ids}):
            rows = np.flatnonzero((ids != 0).sum(axis=1) == length)
            groups.append((rows, [ids[rows][:, ids.shape[1] - length:],
                                  segments[rows][:, ids.shape[1] - length:],
                                  new_segments[rows][:, None]]))
        return groups

    def prompt_of(self, ids: np.ndarray, segments: np.ndarray, new_segments: np.ndarray,
                  row: int) -> list[np.ndarray]:
        """Row ``row``'s prompt, unpadded, for bert4keras's ``AutoRegressiveDecoder``."""
        real = ids[row] != 0
        return [ids[row][real], segments[row][real], new_segments[row:row + 1]]

    def next_logits(self, prompt: Sequence[np.ndarray], decoded: np.ndarray) -> Any:
        """The next id's logits after ``prompt`` and the ids ``decoded`` so far, running the
        whole model."""
        tokens = np.concatenate([prompt[0], decoded], 1)
        types = np.concatenate([prompt[1], np.broadcast_to(prompt[2], decoded.shape)], 1)
        return self.logits_of(tokens, types)

    def run_without_cache(self, ids: np.ndarray, segments: np.ndarray, new_segments: np.ndarray,
                          seed: Any, settings: Settings) -> tuple[np.ndarray, np.ndarray]:
        """bert4keras's way: the whole sequence through the model at every step (``seed``:
        :func:`generate`'s, a tensor on TensorFlow, else an int)."""
        ids, segments = np.asarray(ids), np.asarray(segments)
        if on_tensorflow():
            import tensorflow as tf

            # Compiled as in the cached loop: XLA draws other random numbers than
            # TensorFlow's own kernels from the same seed.
            compiled = tf.function(lambda logits, step, seed, rows: choose(
                logits, step, settings, seed, rows), jit_compile=True, autograph=False)

            def chooser(logits: Any, step: int, seed: Any, rows: np.ndarray) -> np.ndarray:
                return compiled(logits, tf.constant(step), seed,
                                tf.constant(rows, "int32")).numpy()
        else:
            def chooser(logits: Any, step: int, seed: Any, rows: np.ndarray) -> np.ndarray:
                return choose_here(ops.convert_to_numpy(logits), step, settings, seed, rows)
        outputs = np.zeros((len(ids), settings.max_new_tokens), "int32")
        lengths = np.zeros(len(ids), "int32")
        for rows, prompt in self.groups(ids, segments, np.asarray(new_segments)):
            decoded = np.zeros((len(rows), 0), "int32")
            finished = np.zeros(len(rows), bool)
            for step in range(settings.max_new_tokens):
                token = chooser(self.next_logits(prompt, decoded), step, seed, rows)
                token = np.where(finished, 0, token)
                outputs[rows, step] = token
                lengths[rows] += ~finished
                finished |= np.isin(token, settings.end_ids)
                if finished.all():
                    break
                decoded = np.concatenate([decoded, token[:, None]], axis=1)
        return outputs, lengths

    def beams_without_cache(self, ids: np.ndarray, segments: np.ndarray,
                            new_segments: np.ndarray, seed: Any,
                            settings: Settings) -> tuple[np.ndarray, np.ndarray]:
        """Beam search by :class:`kerasbert.inference.decoding.AutoRegressiveDecoder` (bert4keras's
        loop) on the whole sequence at every step, one prompt at a time."""
        from kerasbert.inference.decoding import AutoRegressiveDecoder

        decoder, skip = self, 0 if self.start_id is None else 1

        class Beams(AutoRegressiveDecoder):
            @AutoRegressiveDecoder.wraps(default_rtype="logits")
            def predict(self, inputs: Sequence[np.ndarray], output_ids: np.ndarray,
                        states: Any) -> np.ndarray:
                decoded = output_ids[:, skip:]
                logits = np.array(ops.convert_to_numpy(decoder.next_logits(inputs, decoded)))
                if settings.end_ids and decoded.shape[1] < settings.min_new_tokens:
                    logits[:, list(settings.end_ids)] = -np.inf
                return logits

        ids, segments = np.asarray(ids), np.asarray(segments)
        outputs = np.zeros((len(ids), settings.max_new_tokens), "int32")
        lengths = np.zeros(len(ids), "int32")
        for row in range(len(ids)):
            search = Beams(start_id=self.start_id, end_id=list(settings.end_ids),
                           maxlen=settings.max_new_tokens)
            found = list(search.beam_search(self.prompt_of(ids, segments, new_segments, row),
                                            topk=settings.num_beams))[skip:]
            outputs[row, :len(found)] = found
            lengths[row] = len(found)
        return outputs, lengths


class Seq2SeqDecoder(Decoder):
    """An encoder-decoder's layers (T5's family) for :func:`generate`: the encoder runs once
    on the sources, each decoder layer keeps the keys and values of the encoder's output
    (computed once) besides those of the tokens it has decoded; the decoder starts from id
    0, as T5's does. The prompts are the sources, padded on the right.

    Raises:
        ValueError: a model without T5's decoder and LM head.
    """

    def __init__(self, model: keras.Model) -> None:
        from kerasbert.models.attention_masks import AttentionMask
        from kerasbert.models.families import family_class
        from kerasbert.models.loading import table_family

        self.model = model
        self.layers = {layer.name: layer for layer in model.layers}
        self.transformer = family_class(table_family(model)).bound(model)
        self.mask = next(layer for layer in model.layers if isinstance(layer, AttentionMask))
        self.attention = [self.layers[names.side_name(names.DECODER, names.attention_name(i))]
                          for i in range(len(model.layers)) if names.side_name(
                              names.DECODER, names.attention_name(i)) in self.layers]
        self.cross = [self.layers[names.cross_attention_name(i)]
                      for i in range(len(self.attention))]
        head = self.layers.get("Decoder-Output-LM") or self.layers.get(
            "Decoder-Output-LM-Activation")
        if head is None:
            raise ValueError(f"model {model.name!r} has no language-model head (built with "
                             "with_lm=False)")
        self.activation = head.activation
        self.products = []  # T5's products have no bias: affine reads their kernels as they lie
        self.segments = False
        self.vocab_size = self.layers[names.EMBEDDING_TOKEN].input_dim
        self.segment_vocab = None
        self.max_position = None
        self.compiled = {}
        self.logits_model = None
        self.in_place = {}
        self.low_precision = None
        self.step_program = None
        self.loops = {}

    def slot(self, length: Any, step: Any) -> Any:
        return step + 1  # slot 0 holds the start id

    def prefill(self, ids: Any, segments: Any, extra: int,
                caches: list[tuple[Any, ...]] | None = None
                ) -> tuple[Any, list[tuple[Any, ...]], Any, Any]:
        """The sources through the encoder, the caches made, and the start id decoded.

        Raises:
            ValueError: ``caches`` given: an encoder-decoder makes its own.
        """
        if caches is not None:
            raise ValueError(f"model {self.model.name!r}: an encoder-decoder's caches are "
                             "not written in place")
        batch = ops.shape(ids)[0]
        context = self.transformer.encode(ids)
        made: list[tuple[Any, ...]] = []
        for layer, cross in zip(self.attention, self.cross):
            # The values with their slots last (MultiHeadSelfAttention); the source's padding
            # travels with the caches (beam search reorders rows).
            heads, width, dtype = layer.num_heads, layer.head_size, layer.compute_dtype
            made.append((
                ops.zeros((batch, heads, extra + 1, width), dtype),
                ops.zeros((batch, heads, width, extra + 1), dtype),
                cross.heads(context, "key"),
                ops.transpose(cross.heads(context, "value"), (0, 1, 3, 2)), ops.not_equal(ids, 0)))
        present = ops.zeros((batch, extra + 1), "bool")
        start = ops.zeros((batch,), "int32")
        return self.step(start, None, ops.full((batch,), -1, "int32"), present, made, 0)

    def step(self, token: Any, new_segments: Any, last: Any, present: Any,
             caches: list[tuple[Any, ...]],
             slot: Any) -> tuple[Any, list[tuple[Any, ...]], Any, Any]:
        """The decoder's own steps (T5's family's) on one new id per row at ``slot``."""
        # Slot 0 (the start id, 0) is a token, as is every id decoded after it.
        present = written_slot(present, slot,
                               ops.logical_or(ops.not_equal(token, 0), ops.equal(slot, 0)))
        model, start = self.transformer, ops.cast(slot, "int32")
        from kerasbert.models.families.base import Step

        both = {}
        for layer, cross, (keys, values, cross_keys, cross_values, source) in zip(
                self.attention, self.cross, caches):
            both[layer.name] = {"keys": keys, "values": values, "start": start}
            both[cross.name] = {"keys": cross_keys, "values": cross_values, "present": source}
        step = Step(both, start, present[:, None, :])
        logits = model.decode(None, token[:, None], step)[:, -1]
        return logits, [(step.caches[layer.name]["keys"], step.caches[layer.name]["values"],
                         *cache[2:]) for layer, cache in zip(self.attention, caches)], \
            present, last + 1

    def logits_of(self, ids: Any, segments: Any) -> Any:
        """The next id's logits of ``segments`` (here: the decoder's ids so far) after the
        sources ``ids``, running the whole model."""
        import keras

        if self.logits_model is None:
            model = self.model
            self.logits_model = traced(lambda inputs: model(inputs, training=False)[:, -1])
        output = self.logits_model([ids, segments])
        # The log of the head's softmax: the softmax's order and draws.
        if keras.activations.get(self.activation) is keras.activations.softmax:
            return ops.log(output)
        return output

    start_id = 0

    def groups(self, ids: np.ndarray, segments: np.ndarray,
               new_segments: np.ndarray) -> list[tuple[np.ndarray, list[np.ndarray]]]:
        """All sources at once (padded on the right: the encoder masks the padding)."""
        return [(np.arange(len(ids)), [ids])]

    def prompt_of(self, ids: np.ndarray, segments: np.ndarray, new_segments: np.ndarray,
                  row: int) -> list[np.ndarray]:
        return [ids[row][ids[row] != 0]]

    def next_logits(self, prompt: Sequence[np.ndarray], decoded: np.ndarray) -> Any:
        """The next id's logits of the decoder's ids (the start id, then ``decoded``) after
        the sources ``prompt[0]``."""
        start = np.full((len(decoded), 1), self.start_id, "int32")
        return self.logits_of(prompt[0], np.concatenate([start, decoded], 1))


def on_tensorflow() -> bool:
    """Whether Keras runs on TensorFlow, where decoding is one compiled XLA program."""
    import keras

    return keras.backend.backend() == "tensorflow"


def traced(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``function`` as a TensorFlow graph on TensorFlow's backend, else itself."""
    if not on_tensorflow():
        return function
    import tensorflow as tf

    return tf.function(function, reduce_retracing=True)


_DECODERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def decoder_of(model: keras.Model | Transformer) -> Decoder:
    """The :class:`Decoder` (or :class:`Seq2SeqDecoder`) of ``model`` (made once per model)."""
    keras_model: keras.Model = getattr(model, "model", model)  # a Transformer: its model
    if keras_model not in _DECODERS:
        seq2seq = any(layer.name == names.ENCODER_INPUT_TOKEN for layer in keras_model.layers)
        _DECODERS[keras_model] = (Seq2SeqDecoder if seq2seq else Decoder)(keras_model)
    return _DECODERS[keras_model]


def _ids(rows: Iterable[Any], where: str, low: int, high: int, what: str) -> list[np.ndarray]:
    """``rows`` (a list of prompts' values) checked: each a flat list of integers from
    ``low`` to ``high - 1``; the first one outside names ``where``, its row and the range."""
    arrays: list[np.ndarray] = []
    for index, row in enumerate(rows):
        if isinstance(row, (str, bytes)) or np.ndim(row) != 1:
            raise ValueError(f"{where}[{index}]: {row!r} is not a list of {what}; pass one "
                             f"list per prompt, e.g. {where}=[[5, 6, 7]] for one prompt")
        array = np.asarray(row)
        if array.size == 0 or not (np.issubdtype(array.dtype, np.integer)
                                   or array.dtype == object and all(
                                       isinstance(v, (int, np.integer))
                                       and not isinstance(v, bool) for v in array)):
            raise ValueError(f"{where}[{index}]: a prompt is a non-empty list of {what} "
                             "(integers)")
        outside = [int(v) for v in array.tolist() if not low <= int(v) < high]
        if outside:
            raise ValueError(f"{where}[{index}]: {what[:-1]} {outside[0]} is outside the "
                             f"model's range {low} to {high - 1}")
        arrays.append(array.astype("int64"))
    return arrays


def _prompts(token_ids: Sequence[Sequence[int]] | np.ndarray,
             segment_ids: Sequence[Sequence[int]] | np.ndarray | None,
             decoder: Decoder | None = None,
             where: str = "token_ids") -> tuple[np.ndarray, np.ndarray]:
    """Left-padded ``(ids, segments)`` int32 arrays of ragged prompts, each id and segment
    id checked against ``decoder``'s tables (an id outside them is refused, never clamped)."""
    if isinstance(token_ids, (str, bytes)) or not hasattr(token_ids, "__len__") or \
            getattr(token_ids, "ndim", 1) == 0:
        raise ValueError(f"{where}: {token_ids!r} is not a list of prompts")
    if len(token_ids) == 0:
        raise ValueError(f"{where}: no prompt")
    vocab = decoder.vocab_size if decoder is not None else 2 ** 31
    for index, row in enumerate(token_ids):
        if np.ndim(row) == 1 and 0 in np.asarray(row).tolist():
            raise ValueError(f"{where}[{index}]: token id 0 is padding, not a prompt token")
    rows = _ids(token_ids, where, 1, vocab, "token ids")
    if segment_ids is None:
        types = [np.zeros(len(row), "int64") for row in rows]
    else:
        if isinstance(segment_ids, (str, bytes)) or not hasattr(segment_ids, "__len__") or \
                getattr(segment_ids, "ndim", 1) == 0 or len(segment_ids) != len(rows):
            raise ValueError("segment_ids: one list of segment ids per prompt, as token_ids")
        segment_vocab = getattr(decoder, "segment_vocab", None) or 2 ** 31
        types = _ids(segment_ids, "segment_ids", 0, segment_vocab, "segment ids")
    if any(len(t) != len(r) for t, r in zip(types, rows)):
        raise ValueError("segment_ids: one segment id per prompt token, as token_ids")
    length = padded_width(max(len(row) for row in rows))
    return (sequence_padding(rows, length, mode="pre", dtype="int32"),
            sequence_padding(types, length, mode="pre", dtype="int32"))


def _whole(where: str, value: Any, low: int, high: int) -> int:
    """``value`` as an int when it is a whole number from ``low`` to ``high - 1`` (not a
    bool, a float or a string); else a ValueError naming ``where``, the value and the range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{where} ({value!r}): must be a whole number from {low} to "
                         f"{high - 1}")
    if not low <= int(value) < high:
        raise ValueError(f"{where} ({value!r}): outside the model's range {low} to {high - 1}")
    return int(value)


def _check_cache_fits(decoder: Decoder, batch: int, width: int, new_slots: int) -> None:
    """Refuses ``max_new_tokens`` whose key/value caches (``batch`` rows, a prompt
    ``width`` wide) could not be held: past int32 sizes, or larger than this machine's
    memory; checked before anything is allocated."""
    slots = width + new_slots
    from kerasbert.models.bert import physical_memory

    size = 2 * batch * slots * sum(layer.num_heads * layer.head_size
                                   for layer in decoder.attention) * 4
    memory = physical_memory()
    if slots >= 2 ** 31 or (memory is not None and size > memory):
        raise ValueError(f"max_new_tokens ({new_slots}): the key/value caches of "
                         f"{batch} row(s) would need {size / 2 ** 30:,.1f} GiB "
                         + (f"(this machine has {memory / 2 ** 30:,.1f})" if memory else
                            "(past what an int32 index reaches)"))


def _right_padded(ids: np.ndarray) -> np.ndarray:
    """Left-padded rows moved to the left edge (an encoder's sources start at position 0)."""
    out = np.zeros_like(ids)
    for index, row in enumerate(ids):
        real = row[row != 0]
        out[index, :len(real)] = real
    return out


def _low_precision(decoder: Decoder, dtype: str | None, num_beams: int,
                   use_cache: bool) -> bool:
    """Whether ``generate(dtype=dtype)`` decodes in bfloat16: asked for and this CPU has
    bfloat16 units (else float32, with a warning).

    Raises:
        ValueError: a ``dtype`` not in :data:`DTYPES`, or bfloat16 with what it does not
            decode (beams, no cache, an encoder-decoder).
    """
    from kerasbert.hardware import compute_policy

    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"dtype ({dtype!r}): must be one of {', '.join(DTYPES)} or None")
    if dtype != "bfloat16":
        return False
    if num_beams > 1:
        raise ValueError(f"num_beams ({num_beams}): beam search decodes in float32; "
                         "dtype='bfloat16' decodes greedily or samples")
    if not use_cache:
        raise ValueError("use_cache=False: decoding without the cache is float32's "
                         "reference; dtype='bfloat16' decodes through the cache")
    if isinstance(decoder, Seq2SeqDecoder):
        raise ValueError(f"dtype='bfloat16': model {decoder.model.name!r} is an "
                         "encoder-decoder; bfloat16 decoding takes decoder-only models")
    return compute_policy(dtype, "generate(dtype='bfloat16')") == "bfloat16"


def generate(model: keras.Model | Transformer, token_ids: Sequence[Sequence[int]] | np.ndarray,
             max_new_tokens: int = 32,
             end_id: int | list[int] | tuple[int, ...] | np.ndarray | None = None,
             min_new_tokens: int = 0, sample: bool = False, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, seed: int = 0,
             num_beams: int = 1, segment_ids: Sequence[Sequence[int]] | np.ndarray | None = None,
             new_segment_id: int | None = None, use_cache: bool = True,
             dtype: str | None = None) -> list[list[int]]:
    """New token ids for each prompt, from a kerasbert language model.

    Args:
        model: a language model from :func:`kerasbert.build_transformer_model` (see the
            module's text), its Keras model or its ``Transformer`` object.
        token_ids: the prompts (a T5's: its sources): a list of lists of ids (lengths may
            differ) or a 2-D array; 0 is padding and may not occur in a prompt.
        max_new_tokens: the most new ids per row.
        end_id: an id, or a list of ids, that ends a row (kept as its last id); None: rows
            run to ``max_new_tokens``.
        min_new_tokens: the end ids are not chosen before this many new ids.
        sample: False: the highest-scoring id (greedy); True: a random draw, shaped by
            ``temperature``, ``top_k`` (keep the k best; None: all) and ``top_p`` (keep
            the fewest best whose probabilities sum to at least p; None: all).
        seed: the draws' seed (an int): the same seed gives the same ids.
        num_beams: more than 1: beam search of that width, as bert4keras's
            ``AutoRegressiveDecoder.beam_search`` (``topk``): the best-scoring output
            (sum of log-probabilities), ended by an end id or ``max_new_tokens``.
        segment_ids: the prompts' segment ids (models with ``Input-Segment``); None: 0.
        new_segment_id: the new tokens' segment id; None: 1 under UniLM's mask, else each
            row's last prompt segment.
        use_cache: False runs the whole sequence through the model at each step (the
            reference the cache is tested against; much slower).
        dtype: None or ``"float32"``: the model's own weights, in one XLA program.
            ``"bfloat16"``: a decoder-only model's weights rounded to bfloat16 once (a
            copy kept with the model) and a loop outside XLA, whose products run on
            oneDNN's bfloat16 kernels: the fastest way at batch on CPUs with bfloat16
            units (AVX-512 BF16, AMX). Its ids are float32's but where rounding flips a
            near-tie (then the rest of the row differs); its samples are other draws than
            float32's from the same seed. Greedy or sampled, with the cache; below
            :data:`BFLOAT16_MIN_ROWS` prompts, and on a CPU without bfloat16 units (with
            one warning), the float32 loop runs instead, faster there.

    Returns:
        one list of ints per prompt: its new ids, ending at the first end id.

    Raises:
        ValueError: a model kerasbert cannot decode, a malformed prompt, a setting out of
            range, a sampling setting without ``sample=True``, prompts that would run
            past the model's positions, or ``dtype="bfloat16"`` with beams, without the
            cache, or with an encoder-decoder.
    """
    given = {"temperature": temperature != 1.0, "top_k": top_k is not None,
             "top_p": top_p is not None}
    if not sample and any(given.values()):
        raise ValueError(f"{', '.join(k for k in SAMPLING if given[k])}: sampling settings; "
                         "pass sample=True to sample (greedy decoding ignores them)")
    decoder = decoder_of(model)
    low_precision = _low_precision(decoder, dtype, num_beams, use_cache)
    vocab = decoder.vocab_size
    end_ids = () if end_id is None else tuple(
        _whole("end_id", i, 0, vocab) for i in (
            end_id if isinstance(end_id, (list, tuple, np.ndarray)) else [end_id]))
    if top_k is not None:
        _whole("top_k", top_k, 1, vocab + 1)
    if top_p is not None and not (isinstance(top_p, (int, float, np.number))
                                  and 0 < top_p <= 1):
        raise ValueError(f"top_p ({top_p!r}): must be a number in (0, 1]; None keeps every id")
    if not isinstance(temperature, (int, float, np.number)) or isinstance(temperature, bool):
        raise ValueError(f"temperature ({temperature!r}): must be a positive number")
    _whole("seed", seed, -(2 ** 63), 2 ** 63)
    settings = Settings(max_new_tokens, min_new_tokens, end_ids, bool(sample),
                        float(temperature), int(top_k or 0), float(top_p or 1.0), num_beams)
    settings.check()
    ids, segments = _prompts(token_ids, segment_ids, decoder)
    if isinstance(decoder, Seq2SeqDecoder):
        if segment_ids is not None or new_segment_id is not None:
            raise ValueError("segment_ids / new_segment_id: an encoder-decoder takes source "
                             "ids alone")
        ids = _right_padded(ids)
    if decoder.max_position is not None and \
            int((ids != 0).sum(axis=1).max()) + max_new_tokens > decoder.max_position:
        raise ValueError(f"max_new_tokens ({max_new_tokens}): the longest prompt "
                         f"({int((ids != 0).sum(axis=1).max())} ids) and the new ids exceed "
                         f"the model's {decoder.max_position} positions")
    _check_cache_fits(decoder, len(ids) * num_beams, ids.shape[1], max_new_tokens)
    if new_segment_id is not None:
        _whole("new_segment_id", new_segment_id, 0, decoder.segment_vocab or 2 ** 31)
    if new_segment_id is None:
        new_segments = (np.ones(len(ids), "int32") if decoder.mask.kind == "unilm"
                        else segments[:, -1])
    else:
        new_segments = np.full(len(ids), int(new_segment_id), "int32")
    if not on_tensorflow():
        return _generate_elsewhere(decoder, ids, segments, new_segments, int(seed) % (2 ** 31),
                                   settings, use_cache, low_precision)
    import tensorflow as tf

    seed = tf.constant([int(seed) % (2 ** 31), 0], "int32")
    if low_precision and len(ids) >= BFLOAT16_MIN_ROWS:
        outputs, lengths = decoder.bfloat16().run_in_place(settings, *ids.shape)(
            tf.constant(ids), tf.constant(segments), tf.constant(new_segments), seed)
        outputs, lengths = outputs.numpy(), lengths.numpy()
    elif use_cache:
        # One XLA program per settings and prompt width (a multiple of 8: prompts are padded
        # on the left to it); TensorFlow's note that it traces again says no more than that.
        logger, level = tf.get_logger(), tf.get_logger().level
        logger.setLevel("ERROR")
        try:
            with kernels.separate_products():
                outputs, lengths = decoder.compiled_run(settings)(
                    tf.constant(ids), tf.constant(segments), tf.constant(new_segments), seed)
        finally:
            logger.setLevel(level)
        outputs, lengths = outputs.numpy(), lengths.numpy()
    else:
        run = decoder.beams_without_cache if num_beams > 1 else decoder.run_without_cache
        outputs, lengths = run(ids, segments, new_segments, seed, settings)
    return [row[:n].tolist() for row, n in zip(outputs, lengths)]


def _generate_elsewhere(decoder: Decoder, ids: np.ndarray, segments: np.ndarray,
                        new_segments: np.ndarray, seed: int, settings: Settings,
                        use_cache: bool, low_precision: bool) -> list[list[int]]:
    """:func:`generate` on Keras's JAX and PyTorch backends: greedy decoding through the
    cache as one loop (:meth:`Decoder.run_greedy`, one ``jax.jit`` program on JAX), sampled
    decoding through the cache a step at a time from Python (:meth:`Decoder.run_stepwise`:
    the draws are NumPy's, the same with the cache and without it), beam search on the
    whole sequence at every step (bert4keras's loop).

    Raises:
        ValueError: ``dtype="bfloat16"`` (its loop is TensorFlow's).
    """
    import keras

    if low_precision:
        raise ValueError(f"dtype='bfloat16' on KERAS_BACKEND={keras.backend.backend()}: "
                         "the bfloat16 decoding loop runs on TensorFlow's backend only; "
                         "pass dtype=None (float32) or set KERAS_BACKEND=tensorflow")
    if settings.num_beams > 1:
        outputs, lengths = decoder.beams_without_cache(ids, segments, new_segments, seed,
                                                       settings)
    elif use_cache and not settings.sample:
        outputs, lengths = (ops.convert_to_numpy(x) for x in decoder.compiled_greedy(settings)(
            *(ops.convert_to_tensor(x, "int32") for x in (ids, segments, new_segments))))
    elif use_cache:
        outputs, lengths = decoder.run_stepwise(ids, segments, new_segments, seed, settings)
    else:
        outputs, lengths = decoder.run_without_cache(ids, segments, new_segments, seed,
                                                     settings)
    return [row[:n].tolist() for row, n in zip(outputs, lengths)]
