"""bert4keras's ``snippets``: data generators, padding, decoders and text helpers on Keras 3.

A bert4keras 0.11.5 script keeps ``from bert4keras.snippets import ...`` working by writing
``from kerasbert.snippets import ...``. Names, signatures, defaults and results are
bert4keras's; what differs, and why:

- ``DataGenerator.forfit()`` / ``fortest()`` return an endless ``tf.data.Dataset`` rather
  than a Python generator. Keras 3's ``fit`` refuses a generator's list inputs
  (``yield [ids, segs], y``) and fixes each length from the first two batches, so a later,
  longer batch stops the run. The dataset's signature leaves every length open; lists of
  arrays become tuples, ``y=None`` is left out. ``next(generator.forfit())`` still gives
  one batch, as bert4keras's generator did.
- ``AutoRegressiveDecoder.last_token`` slices the outputs without a ``Lambda`` layer.
- ``open`` logs its indexing instead of printing; ``parallel_apply`` hands a worker's
  exception back to the caller instead of waiting forever for its result.
- ``ViterbiDecoder.decode`` and ``Tokenizer.encode`` leave their inputs as they were.
- ``WebServing`` is refused by name: it served through a TensorFlow 1 session and
  ``bottle``; export a model with ``kerasbert export`` and serve it with TF Serving.
- ``from kerasbert.snippets import uniout`` works and does nothing, as on Python 3.

Example:
    >>> sequence_padding([[1, 2, 3], [4]])
    array([[1, 2, 3],
           [4, 0, 0]])
"""

from __future__ import annotations

import builtins
import itertools
import json
import logging
import os
import queue
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeGuard, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from kerasbert.inference.decoding import (  # noqa: F401 (bert4keras's names)
    AutoRegressiveDecoder,
    softmax,
)
from kerasbert.models.loading import orthogonally_resize  # noqa: F401 (bert4keras's name)
from kerasbert.text.padding import sequence_padding  # noqa: F401 (bert4keras's name)
from kerasbert.text.vocab import lowercase_and_normalize  # noqa: F401 (bert4keras's name)

if TYPE_CHECKING:  # annotations only; the module loads TensorFlow where it needs it
    import tensorflow as tf

log = logging.getLogger(__name__)
_F = TypeVar("_F", bound=Callable[..., Any])

is_py2 = False
uniout = None  # bert4keras's Python 2 printing hook: nothing to do on Python 3


# ------------------------------------------------------------------ text and small helpers
def to_array(*args: ArrayLike) -> np.ndarray | list[np.ndarray]:
    """``np.array`` of each argument; one argument gives one array, several a list."""
    arrays = [np.array(a) for a in args]
    return arrays[0] if len(args) == 1 else arrays


def is_string(s: object) -> TypeGuard[str]:
    """Whether ``s`` is a ``str``."""
    return isinstance(s, str)


# Full-width forms U+FF01..U+FF5E sit 0xFEE0 above ASCII; the ideographic space is U+3000.
_HALF_WIDTH = {0x3000: 0x20, **{cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}}


def strQ2B(ustring: str) -> str:  # noqa: N802  (bert4keras's name)
    """Full-width letters, digits, symbols and spaces as their half-width forms.

    Example:
        >>> strQ2B("ＡＢＣ，１２３")
        'ABC,123'
    """
    return ustring.translate(_HALF_WIDTH)


def string_matching(s: str, keywords: Iterable[str]) -> bool:
    """Whether any of the regular expressions ``keywords`` matches in ``s``."""
    return any(re.search(k, s) for k in keywords)


def convert_to_unicode(text: str | bytes, encoding: str = "utf-8", errors: str = "ignore") -> str:
    """``text`` as ``str``: bytes are decoded, anything else is returned as it is."""
    return text.decode(encoding, errors=errors) if isinstance(text, bytes) else text


convert_to_str = convert_to_unicode  # the same on Python 3


def is_one_of(x: object, ys: Iterable[object]) -> bool:
    """Whether ``x`` is one of ``ys`` by identity (``in`` would compare tensors)."""
    return any(x is y for y in ys)


def insert_arguments(**arguments: Any) -> Callable[[_F], _F]:
    """Decorator of a method (``__init__``): each keyword of ``arguments`` becomes an
    attribute of ``self``, from the call if given there (and taken out), else the default."""
    def decorator(method: _F) -> _F:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            for name, default in arguments.items():
                setattr(self, name, kwargs.pop(name, default))
            return method(self, *args, **kwargs)
        return wrapper  # type: ignore[return-value]
    return decorator


def delete_arguments(*arguments: str) -> Callable[[_F], _F]:
    """Decorator of a method that refuses the keywords ``arguments`` with a TypeError."""
    def decorator(method: _F) -> _F:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            for name in arguments:
                if name in kwargs:
                    raise TypeError(f"{type(self).__name__} got an unexpected keyword "
                                    f"argument '{name}'")
            return method(self, *args, **kwargs)
        return wrapper  # type: ignore[return-value]
    return decorator


def longest_common_substring(source: Sequence[Any],
                             target: Sequence[Any]) -> tuple[int, tuple[int, int, int, int]]:
    """The longest common contiguous run of two sequences.

    Returns:
        ``(length, (source_start, source_end, target_start, target_end))``; of several
        longest runs, the one that ends first in ``source`` (then in ``target``).

    Example:
        >>> longest_common_substring("abcde", "xbcdy")
        (3, (1, 4, 1, 4))
    """
    best, span = 0, (0, 0, 0, 0)
    previous = [0] * (len(target) + 1)
    for i, s in enumerate(source, 1):
        current = [0] * (len(target) + 1)
        for j, t in enumerate(target, 1):
            if s == t:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best, span = current[j], (i - current[j], i, j - current[j], j)
        previous = current
    return best, span


def longest_common_subsequence(source: Sequence[Any],
                               target: Sequence[Any]) -> tuple[int, list[tuple[int, int]]]:
    """The longest common (not necessarily contiguous) subsequence of two sequences.

    Returns:
        ``(length, [(source_index, target_index), ...])``, the pairs in order.

    Example:
        >>> longest_common_subsequence("abcd", "acbd")
        (3, [(0, 0), (1, 2), (3, 3)])
    """
    table = np.zeros((len(source) + 1, len(target) + 1), dtype=int)
    for i, s in enumerate(source, 1):
        for j, t in enumerate(target, 1):
            table[i, j] = (table[i - 1, j - 1] + 1 if s == t
                           else max(table[i, j - 1], table[i - 1, j]))
    pairs: list[tuple[int, int]] = []
    i, j = len(source) - 1, len(target) - 1
    while len(pairs) < table[-1, -1]:
        if source[i] == target[j]:
            pairs.append((i, j))
            i, j = i - 1, j - 1
        elif table[i + 1, j] > table[i, j + 1]:
            j -= 1
        else:
            i -= 1
    return int(table[-1, -1]), pairs[::-1]


# ------------------------------------------------------------------------------ sequences
def truncate_sequences(maxlen: int, indices: int | list[int] | tuple[int, ...],
                       *sequences: list[Any] | None) -> list[list[Any]]:
    """Cuts lists in place, one item at a time from the longest, until their lengths sum
    to at most ``maxlen``.

    Args:
        maxlen: the total length to reach. indices: where each list loses an item (an int
            for all, or one per list), e.g. ``-2`` keeps a final ``[SEP]``.
        sequences: the lists; None or empty ones are left out.

    Returns:
        the non-empty lists, cut.

    Example:
        >>> a, b = [1, 2, 3, 4], [5, 6]
        >>> truncate_sequences(4, -1, a, b)
        [[1, 2], [5, 6]]
    """
    kept = [s for s in sequences if s]
    if not isinstance(indices, (list, tuple)):
        indices = [indices] * len(kept)
    lengths = [len(s) for s in kept]
    while sum(lengths) > maxlen:
        longest = int(np.argmax(lengths))  # the first of equally long ones
        kept[longest].pop(indices[longest])
        lengths[longest] -= 1
    return kept


def text_segmentate(text: str, maxlen: int, seps: str = "\n",
                    strips: str | None = None) -> list[str]:
    """Splits ``text`` into pieces of at most about ``maxlen`` characters.

    It splits at the first separator of ``seps`` and joins neighbouring pieces while they
    fit; a piece still too long is split at the next separator, and so on.

    Args:
        seps: separators, most important first (a string of characters, or a list).
        strips: characters stripped from each piece's ends (after whitespace).

    Example:
        >>> text_segmentate("一句话。又一句话。第三句。", 6, "。")
        ['一句话。', '又一句话。', '第三句。']
    """
    text = text.strip().strip(strips)
    if not seps or len(text) <= maxlen:
        return [text]
    sep = seps[0]
    pieces = text.split(sep)
    chunks, current = [], ""
    for n, piece in enumerate(pieces):
        if current and piece and len(current) + len(piece) > maxlen - 1:
            chunks.append(current)
            current = ""
        current += piece if n == len(pieces) - 1 else piece + sep
    if current:
        chunks.append(current)
    return [part for chunk in chunks for part in text_segmentate(chunk, maxlen, seps[1:], strips)]


# ----------------------------------------------------------------------------------- files
class open:  # noqa: N801  (bert4keras's name, shadowing the builtin on purpose)
    """A file, as the builtin ``open`` gives it, that can also be indexed by line.

    Args:
        name, mode, encoding, errors: as for the builtin ``open``.
        indexable: True to index the lines (``f[i]``, ``len(f)``); a path to keep the
            index in (read from there when the file exists, else written there).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
        >>> with open(path, "w", encoding="utf-8") as f:
        ...     f.write("一\\n二\\n三\\n")
        >>> f = open(path, encoding="utf-8", indexable=True)
        >>> len(f), f[2]
        (3, '三\\n')
    """

    # What it reads and writes is typed Any: str in text mode, bytes in binary mode.
    def __init__(self, name: str | os.PathLike[str], mode: str = "r", encoding: str | None = None,
                 errors: str = "strict", indexable: bool | str = False) -> None:
        self.name, self.encoding, self.errors = name, encoding, errors
        text: dict[str, Any] = {} if "b" in mode else {"encoding": encoding, "errors": errors}
        self.file = builtins.open(name, mode, **text)
        self.iterator: Iterator[Any] | None = None
        if indexable:
            if is_string(indexable) and os.path.exists(indexable):
                with builtins.open(indexable, encoding="utf-8") as f:
                    self.offsets = json.load(f)
            else:
                self.create_indexes()
                if is_string(indexable):
                    with builtins.open(indexable, "w", encoding="utf-8") as f:
                        json.dump(self.offsets, f)

    def create_indexes(self) -> None:
        """Records where each line starts."""
        log.info("indexing the lines of %s", self.name)
        self.offsets, start = [], self.tell()
        while self.readline():
            self.offsets.append(start)
            start = self.tell()
        self.seek(0)

    def __getitem__(self, key: int) -> Any:
        self.seek(self.offsets[key])
        return self.readline()

    def __len__(self) -> int:
        return len(self.offsets)

    def _text(self, text: str | bytes) -> str | bytes:
        return convert_to_unicode(text, self.encoding, self.errors) if self.encoding else text

    def __iter__(self) -> Iterator[Any]:
        for line in self.file:
            yield self._text(line)

    def __next__(self) -> Any:
        if self.iterator is None:
            self.iterator = iter(self)
        return next(self.iterator)

    next = __next__

    def read(self) -> Any:
        return self._text(self.file.read())

    def readline(self) -> Any:
        return self._text(self.file.readline())

    def readlines(self) -> list[Any]:
        return [self._text(line) for line in self.file.readlines()]

    def write(self, text: Any) -> None:
        self.file.write(text)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def tell(self) -> int:
        return self.file.tell()

    def seek(self, offset: int = 0) -> int:
        return self.file.seek(offset)

    def __enter__(self) -> open:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# -------------------------------------------------------------------------------- parallel
class _Failed:
    """A worker's exception, sent back in place of its result."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _work(func: Callable[[Any], Any], seeds: Any, inbox: Any, outbox: Any) -> NoReturn:
    if not seeds.empty():
        np.random.seed(seeds.get())  # forked workers would otherwise share one stream
    while True:
        i, item = inbox.get()
        try:
            outbox.put((i, func(item)))
        except Exception as error:  # handed to the caller, which raises it
            outbox.put((i, _Failed(error)))


def parallel_apply_generator(
        func: Callable[[Any], Any], iterable: Iterable[Any], workers: int, max_queue_size: int,
        dummy: bool = False,
        random_seeds: bool | Sequence[int | None] | None = True) -> Iterator[tuple[int, Any]]:
    """Applies ``func`` to each item in worker processes (threads if ``dummy``), yielding
    ``(index, result)`` as results come, in any order.

    Args:
        workers: how many workers. max_queue_size: items waiting for a worker at most.
        random_seeds: True seeds each worker's ``np.random`` afresh; a list gives the
            seeds; False or None leaves the generator as it was.

    Raises:
        Exception: the exception ``func`` raised on an item.

    Example:
        >>> sorted(parallel_apply_generator(abs, [-1, 2, -3], 2, 4, dummy=True))
        [(0, 1), (1, 2), (2, 3)]
    """
    if dummy:
        from multiprocessing.dummy import Pool, Queue
    else:
        import multiprocessing

        # fork: the workers inherit func, which may be a lambda or a closure.
        context = multiprocessing.get_context("fork")
        Pool, Queue = context.Pool, context.Queue  # type: ignore[misc, assignment]  # noqa: N806
    inbox: Any = Queue(max_queue_size)
    outbox: Any = Queue()
    seeds: Any = Queue()
    if random_seeds is True:
        random_seeds = [None] * workers
    for seed in random_seeds or ():
        seeds.put(seed)
    pool = Pool(workers, _work, (func, seeds, inbox, outbox))

    def result() -> tuple[int, Any]:
        i, value = outbox.get()
        if isinstance(value, _Failed):
            raise value.error
        return i, value

    try:
        sent = received = 0
        for i, item in enumerate(iterable):
            while True:
                try:
                    inbox.put((i, item), timeout=0.01)
                    break
                except queue.Full:
                    while outbox.qsize() > 0:
                        received += 1
                        yield result()
            sent += 1
            while outbox.qsize() > 0:
                received += 1
                yield result()
        while received < sent:
            received += 1
            yield result()
    finally:
        pool.terminate()


def parallel_apply(func: Callable[[Any], Any], iterable: Iterable[Any], workers: int,
                   max_queue_size: int, callback: Callable[[Any], Any] | None = None,
                   dummy: bool = False, random_seeds: bool | Sequence[int | None] | None = True,
                   unordered: bool = True) -> list[Any] | None:
    """``func`` of each item, computed by ``workers`` processes (threads if ``dummy``).

    Returns:
        the results (in the order they came, or the items' order if ``unordered=False``);
        None when ``callback`` is given, which is called with each result instead.

    Example:
        >>> parallel_apply(abs, [-1, 2, -3], 2, 4, dummy=True, unordered=False)
        [1, 2, 3]
    """
    results: Iterable[tuple[int, Any]] = parallel_apply_generator(
        func, iterable, workers, max_queue_size, dummy, random_seeds)
    if callback is not None:
        for _, value in results:
            callback(value)
        return None
    if not unordered:
        results = sorted(results, key=lambda pair: pair[0])
    return [value for _, value in results]


# -------------------------------------------------------------------------- data for fit
def _keras_structure(batch: Any, top: bool = True) -> Any:
    """A bert4keras batch as Keras 3 reads one: the batch and its lists of arrays become
    tuples, other lists arrays, and ``(x, None)`` becomes ``(x,)``."""
    if isinstance(batch, dict):
        return {k: _keras_structure(v, False) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)) and (top or any(
            x is None or isinstance(x, (dict, np.ndarray)) or hasattr(x, "dtype")
            for x in batch)):
        while len(batch) > 1 and batch[-1] is None:
            batch = batch[:-1]
        return tuple(_keras_structure(x, False) for x in batch)
    return batch if hasattr(batch, "dtype") else np.asarray(batch)


def _spec(array: ArrayLike) -> tf.TensorSpec:
    """A TensorSpec of ``array``'s rank and dtype with its lengths open: every axis but
    those of size 1 (a label's ``(batch, 1)``, which Keras's losses read as static)."""
    import tensorflow as tf

    array = np.asarray(array)
    dtype = tf.string if array.dtype.kind in "USO" else tf.as_dtype(array.dtype)
    shape = (None,) + tuple(1 if n == 1 else None for n in array.shape[1:])
    return tf.TensorSpec(shape[:array.ndim], dtype)


_WITH_NEXT: dict[type, type] = {}  # dataset class -> its subclass that also answers next()


def _next_batch(dataset: Any) -> Any:
    return next(dataset.kerasbert_batches)


def _endless_dataset(make_batches: Callable[[], Iterator[Any]],
                     wrap: Callable[[Any], Any]) -> tf.data.Dataset:
    """An endless ``tf.data.Dataset`` of ``wrap(batch)`` for the batches of
    ``make_batches()``, whose signature comes from the first batch with its lengths open.

    ``next(dataset)`` also works and gives the batches as ``make_batches`` does: Keras 3
    only fits a ``tf.data.Dataset`` with lengths that vary, bert4keras scripts also call
    ``next`` on it, and a dataset's class is chosen by TensorFlow; so the dataset's class
    is swapped for a subclass that adds ``__next__`` and nothing else.
    """
    import tensorflow as tf

    batches = make_batches()
    first = wrap(next(batches))
    signature = tf.nest.map_structure(_spec, first)
    unused = [itertools.chain([first], map(wrap, batches))]

    def generate() -> Iterator[Any]:  # the batches already started, on the first pass
        return unused.pop() if unused else map(wrap, make_batches())

    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    base = type(dataset)
    if base not in _WITH_NEXT:
        _WITH_NEXT[base] = type(base.__name__, (base,), {"__next__": _next_batch})
    dataset.__class__ = _WITH_NEXT[base]
    dataset.kerasbert_batches = make_batches()
    return dataset


class DataGenerator:
    """bert4keras's data generator: subclass it and write ``__iter__(self, random=False)``,
    which yields batches (``[token_ids, segment_ids], labels`` or ``..., None``), usually
    walking ``self.sample(random)``.

    Args:
        data: the examples (a list, or any iterable). batch_size: examples per batch.
        buffer_size: the shuffling buffer of data without a length (default
            ``batch_size * 1000``).

    Example:
        >>> class Batches(DataGenerator):
        ...     def __iter__(self, random=False):
        ...         batch = []
        ...         for is_end, x in self.sample(random):
        ...             batch.append([x] * (x + 1))
        ...             if len(batch) == self.batch_size or is_end:
        ...                 yield sequence_padding(batch), np.ones((len(batch), 1))
        ...                 batch = []
        >>> generator = Batches([1, 2, 3], batch_size=2)
        >>> len(generator), next(generator.forfit(random=False))[0].tolist()
        (2, [[1, 1, 0], [2, 2, 2]])
    """

    def __init__(self, data: Iterable[Any], batch_size: int = 32,
                 buffer_size: int | None = None) -> None:
        self.data = data
        self.batch_size = batch_size
        self.steps = (-(-len(data) // batch_size)  # type: ignore[arg-type]  # has a length
                      if hasattr(data, "__len__") else None)
        self.buffer_size = buffer_size or batch_size * 1000

    def __len__(self) -> int:
        # None for data without a length: len() then raises TypeError, as in bert4keras.
        return self.steps  # type: ignore[return-value]

    def _shuffled(self) -> Iterator[Any]:
        if self.steps is not None:  # data with a length is indexed, as in bert4keras
            for i in np.random.permutation(len(self.data)):  # type: ignore[arg-type]
                yield self.data[i]  # type: ignore[index]
            return
        buffer: list[Any] = []
        full = False
        for item in self.data:  # a stream: shuffled within a moving buffer
            buffer.append(item)
            if full:
                yield buffer.pop(np.random.randint(len(buffer)))
            elif len(buffer) == self.buffer_size:
                full = True
        while buffer:
            yield buffer.pop(np.random.randint(len(buffer)))

    def sample(self, random: bool = False) -> Iterator[tuple[bool, Any]]:
        """Yields ``(is_end, example)``: each example, shuffled if ``random``, with True
        for the last one."""
        items = self._shuffled() if random else iter(self.data)
        previous = next(items, _NOTHING)
        if previous is _NOTHING:
            return
        for item in items:
            yield False, previous
            previous = item
        yield True, previous

    def __iter__(self, random: bool = False) -> Iterator[Any]:
        raise NotImplementedError("a DataGenerator subclass writes __iter__(self, random=False)")

    def _forever(self, random: bool, inputs_only: bool = False) -> Iterator[Any]:
        while True:
            empty = True
            for batch in self.__iter__(random):
                empty = False
                yield batch[0] if inputs_only else batch
            if empty:  # another pass would yield nothing either: never loop without end
                size = (len(self.data)  # type: ignore[arg-type]  # has a length
                        if self.steps is not None else "unknown")
                raise ValueError(f"{type(self).__name__}: a pass of __iter__ yielded no batch "
                                 f"(data: {size} examples); an endless generator needs at "
                                 "least one")

    def forfit(self, random: bool = True) -> tf.data.Dataset:
        """The batches without end, for ``model.fit(generator.forfit(),
        steps_per_epoch=len(generator), epochs=...)``: an endless ``tf.data.Dataset``
        whose lengths may vary from batch to batch; ``next()`` on it gives a batch."""
        return _endless_dataset(lambda: self._forever(random), _keras_structure)

    def fortest(self, random: bool = False) -> tf.data.Dataset:
        """The inputs of the batches without end, for ``model.predict(generator.fortest(),
        steps=len(generator))``; as ``forfit``."""
        return _endless_dataset(lambda: self._forever(random, inputs_only=True),
                                lambda x: (_keras_structure(x),))

    def to_dataset(self, types: Any, shapes: Any, names: str | Sequence[Any] | None = None,
                   padded_batch: bool = False) -> tf.data.Dataset:
        """A ``tf.data.Dataset`` of what ``__iter__`` yields (examples, or batches),
        batched (padded if ``padded_batch``) by ``batch_size``.

        Args:
            types, shapes: the dtype and shape of each element, in the structure
                ``__iter__`` yields. names: the names of the inputs (and outputs) to make
                dicts of (a string, a sequence of strings, or one sequence per part).
        """
        import tensorflow as tf

        wrap = _named_structure(names)
        signature = _signature(wrap(types), wrap(shapes))
        dataset = tf.data.Dataset.from_generator(
            lambda: (_shaped_like(signature, wrap(x)) for x in self._forever(True)),
            output_signature=signature)
        if padded_batch:
            padded = tf.nest.map_structure(lambda spec: spec.shape, signature)
            return dataset.padded_batch(self.batch_size, padded)
        return dataset.batch(self.batch_size)


_NOTHING = object()


def _named_structure(names: str | Sequence[Any] | None) -> Callable[[Any], Any]:
    """A function turning a ``to_dataset`` element into dicts keyed by ``names``.

    A target part with one name stays a tensor: Keras 3 fits a one-output model on a
    tensor only, where Keras 2 also took ``{output_name: tensor}``.
    """
    if names is None:
        return lambda x: x
    if is_string(names):
        return lambda x: {names: x}
    if is_string(names[0]):
        return lambda x: dict(zip(names, x))

    def named(x: Any) -> tuple[Any, ...]:
        parts = [dict(zip(n, part)) for n, part in zip(names, x)]
        return tuple(part if n == 0 or len(part) > 1 else next(iter(part.values()))
                     for n, part in enumerate(parts))
    return named


def _signature(types: Any, shapes: Any) -> Any:
    """TensorSpecs in the structure of ``types`` (lists made tuples); ``shapes`` holds a
    shape (itself a list) where ``types`` holds a dtype."""
    import tensorflow as tf

    if isinstance(types, dict):
        return {k: _signature(types[k], shapes[k]) for k in types}
    if isinstance(types, (list, tuple)):
        return tuple(_signature(t, s) for t, s in zip(types, shapes))
    return tf.TensorSpec(shapes, tf.as_dtype(types))


def _shaped_like(signature: Any, value: Any) -> Any:
    """``value`` with the dicts and tuples of ``signature`` down to its tensors."""
    if isinstance(signature, dict):
        return {k: _shaped_like(signature[k], value[k]) for k in signature}
    if isinstance(signature, tuple):
        return tuple(_shaped_like(s, v) for s, v in zip(signature, value))
    return value


# -------------------------------------------------------------------------------- decoders
class ViterbiDecoder:
    """The best label path under transition scores, in numpy.

    Args:
        trans: ``(num_labels, num_labels)`` scores, ``trans[i, j]`` of label i then j.
        starts, ends: the labels a path may start / end with (None: any).

    Example:
        >>> decoder = ViterbiDecoder(np.array([[1., -1.], [-1., 1.]]), starts=[0])
        >>> decoder.decode(np.array([[0., 2.], [0., 0.1], [0., 5.]])).tolist()
        [0, 1, 1]
    """

    def __init__(self, trans: np.ndarray, starts: Sequence[int] | None = None,
                 ends: Sequence[int] | None = None) -> None:
        self.trans = trans
        self.num_labels = len(trans)
        labels = range(self.num_labels)
        self.non_starts = [] if starts is None else [i for i in labels if i not in starts]
        self.non_ends = [] if ends is None else [i for i in labels if i not in ends]

    def decode(self, nodes: ArrayLike) -> np.ndarray:
        """The best path of ``nodes`` (``(length, num_labels)`` scores), as label ids: the
        model code's :func:`kerasbert.models.crf.viterbi_decode`, the labels a path may not
        start or end with scored ``-inf`` there."""
        from kerasbert.models.crf import viterbi_decode

        nodes = np.asarray(nodes)
        nodes = nodes.astype(np.result_type(nodes.dtype, np.float32))  # a copy
        nodes[0, self.non_starts] = -np.inf
        nodes[-1, self.non_ends] = -np.inf
        trans = np.asarray(self.trans, nodes.dtype)
        return np.asarray(viterbi_decode(nodes[None], trans)[0]).astype(int)


class WebServing:
    """Refused: bert4keras's ``WebServing`` ran a ``bottle`` server inside a TensorFlow 1
    session. Export the model (``kerasbert export``) and serve it with TF Serving."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "kerasbert.snippets.WebServing is not provided: it served through a TensorFlow 1 "
            "session; export the model with `kerasbert export` and serve the SavedModel")
