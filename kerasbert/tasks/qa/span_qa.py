"""Span question answering: BERT's start/end head, and answers found in long contexts.

The head is Hugging Face's ``BertForQuestionAnswering.qa_outputs`` and Google's
``run_squad.py`` output layer: one dense layer from each token's vector to a start and an
end logit, stored as ``cls/squad/output_weights`` and ``cls/squad/output_bias``.
:class:`QuestionAnswerer` does what transformers 4.x's ``pipeline("question-answering")``
does with such a model: it cuts a long context into overlapping windows, runs the model on
all of them in batches, and picks the best span of context tokens over all windows, scored
and returned as the pipeline returns it (:mod:`kerasbert.tasks.qa.answer_spans`).

Example::

    # bert_config.json, bert_model.ckpt.* (encoder and cls/squad/*), vocab.txt; e.g. from
    # `kerasbert convert --from-hf` of a BertForQuestionAnswering
    answer = QuestionAnswerer.from_checkpoint("out/squad")
    answer(question="Who?", context="My name is Foo")
    # {'score': 0.98..., 'start': 11, 'end': 14, 'answer': 'Foo'}
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from kerasbert.inference.predictor import Predictor, predict_in_batches
from kerasbert.models import names
from kerasbert.models.build import build_transformer_model
from kerasbert.models.layers import truncated_normal
from kerasbert.models.loading import load_checkpoint
from kerasbert.models.model import functional_model
from kerasbert.tasks import TASKS
from kerasbert.tasks.qa.answer_spans import (
    MAX_QUESTION_LEN,
    Context,
    Windows,
    default_doc_stride,
    ranked_answers,
    read_context,
    window_bounds,
    window_refusals,
)
from kerasbert.text.padding import sequence_padding
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.training.rundir import (
    TRAIN_OPTIONS_FILE,
    check_finished,
    load_run_model,
    read_json,
)

#: The longest answer, in tokens, of a ``--task qa`` run: Chinese answers are one token per
#: character.
RUN_MAX_ANSWER_LEN = 30


def add_span_head(model: keras.Model, initializer_range: float = 0.02,
                  dtype: str | keras.DTypePolicy | None = None) -> keras.Model:
    """Adds ``Span-Dense`` (H -> 2) on the sequence output: start and end logits per token.

    Args:
        model: a model from :func:`kerasbert.build_transformer_model` whose one output is
            the sequence ``[batch, length, hidden]``.
        initializer_range: stddev of the kernel's truncated-normal initializer.
        dtype: the dtype policy of the head; None: Keras's global policy.

    Returns:
        A new ``keras.Model`` with the same inputs, output ``[batch, length, 2]``: the
        start logits at ``[..., 0]``, the end logits at ``[..., 1]``.

    Raises:
        ValueError: the model has several outputs, or its output is not a sequence.

    Example:
        >>> from kerasbert import build_transformer_model
        >>> bert = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32, max_position_embeddings=32, type_vocab_size=2))
        >>> qa = add_span_head(bert)
        >>> qa.output.shape, qa.count_params() - bert.count_params()
        ((None, None, 2), 34)
    """
    if len(model.outputs) != 1 or len(model.outputs[0].shape) != 3:
        shapes = [tuple(output.shape) for output in model.outputs]
        raise ValueError(f"add_span_head needs a model whose one output is the sequence "
                         f"[batch, length, hidden]; {model.name} outputs {shapes} (build it "
                         "without with_pool / with_nsp / with_mlm)")
    logits = keras.layers.Dense(
        2, kernel_initializer=truncated_normal(initializer_range), name=names.SPAN_DENSE,
        dtype=dtype)(model.outputs[0])
    return functional_model(model.inputs, logits, name=f"{model.name}_span_qa")


class QuestionAnswerer:
    """Answers questions with a span of the context, as ``pipeline("question-answering")``.

    Args:
        model: a model from :func:`add_span_head` (or any with inputs token and segment ids
            and output ``[batch, length, 2]`` start/end logits); or a directory: a finished
            run of ``kerasbert train --task qa`` (its best model, its vocabulary, and the
            settings ``kerasbert predict`` answers it with), or a checkpoint directory as
            :meth:`from_checkpoint` reads it.
        tokenizer: the :class:`kerasbert.Tokenizer` of the model's vocabulary (none for a
            directory).
        max_seq_len: tokens per window, [CLS], question and both [SEP] included; None:
            384 (a run: its ``maxlen``).
        doc_stride: context tokens each window shares with the one before (the
            pipeline's meaning; Google's ``run_squad.py`` steps by it instead); None:
            :func:`~kerasbert.tasks.qa.answer_spans.default_doc_stride`, the pipeline's
            default.
        max_question_len: question tokens kept (the pipeline with a fast tokenizer keeps
            them all; Google's ``max_query_length``).
        max_answer_len: the most tokens an answer spans; None: 15 (a run: 30).
        align_to_words: widen an answer to whole words (the pipeline's default).
        batch_size: windows per model call.
        handle_impossible_answer: also consider "no answer" (SQuAD v2.0), scored as the
            lowest [CLS] score over the windows; when it wins, the answer is ``""`` at
            ``start = end = 0`` (the pipeline's option of the same name); None: False (a
            run: True).

    Raises:
        ValueError: a setting that is not a positive integer, ``doc_stride`` not below
            ``max_seq_len``, ``max_seq_len`` beyond the model's position table, a
            model whose output is not ``[batch, length, 2]``, or a run of another task.
        TypeError: a model without its tokenizer, or a directory with one.
        kerasbert.training.rundir.RunError: an unfinished or damaged run directory.

    Example:
        A tiny random model: the answer is a span of the context, whatever its score.

        >>> import keras
        >>> from kerasbert import Tokenizer, build_transformer_model
        >>> keras.utils.set_random_seed(0)
        >>> bert = build_transformer_model(dict(
        ...     vocab_size=21128, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        ...     intermediate_size=32, max_position_embeddings=64, type_vocab_size=2))
        >>> answer = QuestionAnswerer(add_span_head(bert),
        ...     Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt"), max_seq_len=64)
        >>> found = answer(question="谁？", context="我叫小明，住在北京。")
        >>> sorted(found), "我叫小明，住在北京。"[found["start"]:found["end"]] == found["answer"]
        (['answer', 'end', 'score', 'start'], True)
    """

    def __init__(self, model: keras.Model | str | os.PathLike[str],
                 tokenizer: Tokenizer | None = None, max_seq_len: int | None = None,
                 doc_stride: int | None = None, max_question_len: int = MAX_QUESTION_LEN,
                 max_answer_len: int | None = None, align_to_words: bool = True,
                 batch_size: int = 32, handle_impossible_answer: bool | None = None) -> None:
        if isinstance(model, (str, os.PathLike)):
            if tokenizer is not None:
                raise TypeError("QuestionAnswerer(directory) reads the directory's vocab.txt: "
                                "leave out tokenizer")
            model, tokenizer, defaults = _from_directory(os.fspath(model))
        elif tokenizer is None:
            raise TypeError("QuestionAnswerer(model, tokenizer): a model needs the Tokenizer "
                            "of its vocabulary")
        else:
            defaults = _DEFAULTS
        max_seq_len = defaults["max_seq_len"] if max_seq_len is None else max_seq_len
        max_answer_len = defaults["max_answer_len"] if max_answer_len is None else max_answer_len
        if handle_impossible_answer is None:
            handle_impossible_answer = defaults["handle_impossible_answer"]
        if doc_stride is None and _is_count(max_seq_len):
            doc_stride = default_doc_stride(max_seq_len)
        settings = dict(max_seq_len=max_seq_len, doc_stride=doc_stride,
                        max_question_len=max_question_len, max_answer_len=max_answer_len,
                        batch_size=batch_size)
        for key, value in settings.items():
            if not _is_count(value) or (value == 0 and key != "doc_stride"):
                rule = "a non-negative" if key == "doc_stride" else "a positive"
                raise ValueError(f"{key} ({value!r}) must be {rule} integer")
        if doc_stride is None or doc_stride >= max_seq_len:  # never None here (checked above)
            raise ValueError(f"doc_stride ({doc_stride}) must be smaller than max_seq_len "
                             f"({max_seq_len})")
        shape = tuple(model.outputs[0].shape) if len(model.outputs) == 1 else None
        if shape is None or len(shape) != 3 or shape[-1] != 2:
            raise ValueError(f"QuestionAnswerer needs a model with one output [batch, length, "
                             f"2] (start and end logits, see add_span_head); {model.name} "
                             f"outputs {[tuple(output.shape) for output in model.outputs]}")
        # A table read hierarchically reaches its square (the layer's max_length).
        tables = [layer for layer in model.layers if layer.name == names.EMBEDDING_POSITION]
        if tables and max_seq_len > tables[0].max_length:
            raise ValueError(f"max_seq_len ({max_seq_len}) exceeds the model's position table "
                             f"({tables[0].max_length} positions, max_position_embeddings "
                             f"{tables[0].max_position}"
                             f"{', read hierarchically' if tables[0].hierarchical else ''})")
        self.model, self.tokenizer = model, tokenizer
        self.max_seq_len, self.doc_stride = max_seq_len, doc_stride
        self.max_question_len, self.max_answer_len = max_question_len, max_answer_len
        self.align_to_words, self.batch_size = bool(align_to_words), batch_size
        self.handle_impossible_answer = bool(handle_impossible_answer)
        self._predict = Predictor(model)

    @classmethod
    def from_checkpoint(cls, directory: str | os.PathLike[str], do_lower_case: bool = True,
                        **options: Any) -> QuestionAnswerer:
        """A QuestionAnswerer for a Google checkpoint directory with a span head.

        Args:
            directory: holds ``bert_config.json``, ``vocab.txt`` and one checkpoint with the
                encoder and ``cls/squad/output_weights`` / ``cls/squad/output_bias``.
            do_lower_case: of the tokenizer (True for uncased and Chinese models).
            **options: the constructor's settings (``max_seq_len``, ``doc_stride``...).

        Returns:
            A :class:`QuestionAnswerer`.

        Raises:
            FileNotFoundError: ``bert_config.json``, ``vocab.txt`` or the checkpoint is missing.
            kerasbert.CheckpointError: the checkpoint does not fit the config, or lacks the
                span head (see :func:`kerasbert.load_checkpoint`).

        Example::

            answer = QuestionAnswerer.from_checkpoint("out/squad", max_seq_len=256)
        """
        return cls(*_checkpoint_model(os.fspath(directory), do_lower_case), **options)

    def __call__(self, question: str | Sequence[str], context: str | Sequence[str],
                 top_k: int = 1, progress: bool = False) -> dict[str, Any] | list[Any]:
        """The best answer(s) to each question, from its context.

        Args:
            question: a question, or a list of them.
            context: the text to answer from; a list (one per question), or one text for
                all the questions.
            top_k: how many answers to give per question.
            progress: show a bar over the model's batches on stderr (when it is a
                terminal).

        Returns:
            ``{"score", "start", "end", "answer"}``: the answer is ``context[start:end]``
            (character offsets), the score the pipeline's (a probability, summed over the
            windows and spans that give the same text); with ``top_k > 1`` a list of them,
            best first (fewer if the context has fewer spans). For a list of questions, a
            list of those.

        Raises:
            TypeError: a question or context that is not a str.
            ValueError: an empty question or context, lists of different lengths, a bad
                ``top_k``, a question too long to leave room for context in ``max_seq_len``,
                or a context needing several windows that hold no more context tokens than
                ``doc_stride``.
        """
        if not _is_count(top_k) or top_k < 1:
            raise ValueError(f"top_k ({top_k!r}) must be a positive integer")
        pairs, single = _pairs(question, context)
        prepared = question_windows(self.tokenizer, pairs, self.max_seq_len, self.doc_stride,
                                    self.max_question_len)
        if not prepared:
            return []
        logits = self._logits([row for *_, rows in prepared for row in rows], progress)
        padded = sequence_padding(logits, dtype=np.float32)
        windows = [(n, start, stop, len(question_ids) + 2)
                   for n, (question_ids, _, spans, _) in enumerate(prepared)
                   for start, stop in spans]
        contexts = [found for _, found, _, _ in prepared]

        def ragged(key: str, dtype: Any) -> tf.RaggedTensor:
            return tf.RaggedTensor.from_row_lengths(
                np.array([value for found in contexts for value in getattr(found, key)], dtype),
                np.array([len(found.ids) for found in contexts], np.int64))

        best = ranked_answers(
            padded[..., 0], padded[..., 1], Windows(*np.array(windows, np.int64).T),
            tf.constant([found.text for found in contexts]), ragged("word_starts", bool),
            ragged("starts", np.int64), ragged("ends", np.int64),
            max_answer_len=self.max_answer_len, top_k=top_k,
            align_to_words=self.align_to_words,
            handle_impossible_answer=self.handle_impossible_answer)
        best = {key: value.numpy().tolist() for key, value in best.items()}
        ranked = [[{"score": best["score"][n][k], "start": best["start"][n][k],
                    "end": best["end"][n][k], "answer": best["answer"][n][k].decode("utf-8")}
                   for k in range(best["count"][n])] for n in range(len(prepared))]
        results = [answers[0] if top_k == 1 else answers for answers in ranked]
        return results[0] if single else results

    def _logits(self, rows: Sequence[tuple[list[int], list[int]]],
                progress: bool = False) -> list[np.ndarray]:
        """Each row's ``[length, 2]`` logits, the model run ``batch_size`` rows at a time
        (padded with id 0, which the model masks out)."""
        return predict_in_batches(
            self._predict, sequence_padding([ids for ids, _ in rows], dtype=np.int32),
            sequence_padding([segments for _, segments in rows], dtype=np.int32),
            self.batch_size, per_token=True, progress=progress)


#: The settings a model and its tokenizer are used with unless given (the pipeline's).
_DEFAULTS = {"max_seq_len": 384, "max_answer_len": 15, "handle_impossible_answer": False}


def _checkpoint_model(directory: str,
                      do_lower_case: bool = True) -> tuple[keras.Model, Tokenizer]:
    """``(model, tokenizer)`` of a checkpoint directory with a span head."""
    for name in ("bert_config.json", "vocab.txt"):
        if not os.path.isfile(os.path.join(directory, name)):
            raise FileNotFoundError(f"span QA model in {directory}: no {name} (expected "
                                    "bert_config.json, vocab.txt and bert_model.ckpt.*)")
    model = add_span_head(build_transformer_model(os.path.join(directory, "bert_config.json")))
    load_checkpoint(model, directory)
    return model, Tokenizer(os.path.join(directory, "vocab.txt"), do_lower_case=do_lower_case)


def run_settings(maxlen: int, no_answer: bool = True) -> dict[str, Any]:
    """The :class:`QuestionAnswerer` settings of a ``--task qa`` run trained with
    ``maxlen``; ``no_answer``: whether "no answer" is considered."""
    return {"max_seq_len": maxlen, "max_answer_len": RUN_MAX_ANSWER_LEN,
            "handle_impossible_answer": bool(no_answer)}


def _from_directory(directory: str) -> tuple[keras.Model, Tokenizer, dict[str, Any]]:
    """``(model, tokenizer, default settings)`` of a finished ``--task qa`` run (its best
    model and the settings ``kerasbert predict`` answers with) or a checkpoint directory."""
    options_path = os.path.join(directory, TRAIN_OPTIONS_FILE)
    if not os.path.isfile(options_path):
        return (*_checkpoint_model(directory), _DEFAULTS)
    check_finished(directory)
    saved = read_json(options_path, "options")
    task = saved.get("task") or TASKS[0] if isinstance(saved, dict) else None
    if task != "qa" or not isinstance(saved.get("maxlen"), int):
        raise ValueError(f"run in {directory}: a {task or 'foreign'} run; QuestionAnswerer "
                         "takes a run of kerasbert train --task qa")
    model = load_run_model(directory)
    tokenizer = Tokenizer(os.path.join(directory, "vocab.txt"))
    return model, tokenizer, run_settings(saved["maxlen"])


def _is_count(value: Any) -> bool | np.bool_:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0


def _pairs(question: str | Sequence[str],
           context: str | Sequence[str]) -> tuple[list[tuple[str, str]], bool]:
    """``([(question, context)...], single)`` from the call's arguments."""
    single = isinstance(question, str)
    questions, contexts = _texts(question, "question"), _texts(context, "context")
    if isinstance(context, str):
        contexts *= len(questions)
    elif single:
        raise TypeError(f"one question needs one context, a str; received {len(contexts)}")
    if len(contexts) != len(questions):
        raise ValueError(f"received {len(questions)} questions but {len(contexts)} contexts; "
                         "give one context per question, or one for all")
    for what, texts in (("question", questions), ("context", contexts)):
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"{what}[{index}] must be a str, received "
                                f"{type(text).__name__}: {text!r:.60}")
            if not text:
                raise ValueError(f"{what}[{index}] is empty")
    return list(zip(questions, contexts)), single


def _texts(value: str | Sequence[str], what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError(f"{what} must be a str or a list of str, received "
                    f"{type(value).__name__}: {value!r:.60}")


def question_windows(
        tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]], max_seq_len: int,
        doc_stride: int, max_question_len: int = MAX_QUESTION_LEN,
) -> list[tuple[list[int], Context, list[tuple[int, int]], list[tuple[list[int], list[int]]]]]:
    """Questions and their contexts as the model's windows, cut by
    :func:`~kerasbert.tasks.qa.answer_spans.window_bounds` (as the export's graph cuts them).

    Args:
        pairs: ``(question, context)`` texts.

    Returns:
        Per pair, ``(question ids, Context, spans, rows)``: each window's context tokens
        ``(start, stop)`` and its ``(token ids, segment ids)``, ``[CLS] question [SEP]
        context part [SEP]``.

    Raises:
        ValueError: a context without a token, a question that leaves no room for context
            in ``max_seq_len``, or a context needing several windows that hold no more
            context tokens than ``doc_stride`` (the first such pair named).
    """
    if not pairs:
        return []
    asked = [tokenizer.tokens_to_ids(tokenizer.tokenize(question)[1:-1][:max_question_len])
             for question, _ in pairs]
    contexts = [read_context(tokenizer, context) for _, context in pairs]
    tokens = np.array([len(found.ids) for found in contexts])
    length = max_seq_len - np.array([len(ids) for ids in asked]) - 3
    for bad, reason in window_refusals(tokens, length, doc_stride):
        if bad.any():
            n = int(np.argmax(bad))
            raise ValueError(reason.format(asked=f" ({len(asked[n])} tokens)",
                                           max_seq_len=max_seq_len, stride=doc_stride,
                                           length=f" ({length[n]})")
                             + f": {pairs[n][0]!r:.60}")
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    found: list[tuple[list[int], Context, list[tuple[int, int]],
                      list[tuple[list[int], list[int]]]]] = [
        (ids, context, [], []) for ids, context in zip(asked, contexts)]
    for n, start, stop in zip(*(bound.numpy().tolist()
                                for bound in window_bounds(tokens, length, doc_stride))):
        question_ids, context, spans, rows = found[n]
        spans.append((start, stop))
        rows.append(([cls, *question_ids, sep, *context.ids[start:stop], sep],
                     [0] * (len(question_ids) + 2) + [1] * (stop - start + 1)))
    return found
