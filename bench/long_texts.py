"""Long texts whose label sits at their end, built from the shipped data on the fly.

Each example is a run of People's Daily news sentences (``kerasbert/resources/peoples_daily``,
which carry no sentiment) followed by one review of the shipped sentiment split
(``kerasbert/resources/reviews``); its label is the review's. The news takes at least
``prefix_tokens`` tokens (cut mid-sentence to fit), so a model that keeps only the first
``prefix_tokens + 1`` tokens
([CLS] included) never sees the review and can only guess, while one that reads the whole
text can score as on the reviews alone. :mod:`bench.long_quality` fine-tunes both.

Nothing is written to disk: the same arguments give the same examples on every machine.

Example::

    tokenizer = Tokenizer(os.path.join(shipped.model_dir(), "vocab.txt"))
    examples = long_examples("dev", 200, tokenizer)
    examples[0].review_start >= 512  # True: the review begins past position 511
"""

import dataclasses

import numpy as np

from kerasbert import shipped
from kerasbert.tasks.ner.entities import read_conll
from kerasbert.training.data import read_examples

LABELS = ("negative", "positive")
# Between the news and the review: whitespace ends a WordPiece word, so the review's tokens
# are the same inside the long text as on their own (no piece spans the seam).
SEAM = " "


@dataclasses.dataclass(frozen=True)
class LongExample:
    """One long text: ``news + SEAM + review``, the review's label, and where it begins.

    ``review_start`` is the position of the review's first token in the text's encoding
    ([CLS] at position 0).
    """

    text: str
    label: str
    review_start: int
    review: str


def news_sentences(split):
    """The sentences of the shipped People's Daily ``split``, each as one string."""
    return ["".join(chars) for chars, _ in read_conll(shipped.data_file("peoples_daily", split))]


def token_count(tokenizer, text):
    """WordPiece tokens of ``text``, [CLS] and [SEP] not counted."""
    return len(tokenizer.encode(text)[0]) - 2


def token_counts(tokenizer, texts, cap=None):
    """:func:`token_count` of each of ``texts``, encoded in one batch (an int array); with
    ``cap``, a count above it is given as ``cap + 1`` (the long texts are cut: faster)."""
    token_ids, _ = tokenizer.encode_batch(list(texts), maxlen=None if cap is None else cap + 3)
    return (token_ids != tokenizer.token_to_id("[PAD]")).sum(axis=1) - 2


def short_reviews(split, tokenizer, max_review_tokens):
    """The reviews of ``split`` of at most ``max_review_tokens`` tokens, by label."""
    rows = read_examples(shipped.data_file("reviews", split))
    found = {label: [] for label in LABELS}
    for text, label, size in zip(rows.texts, rows.labels, token_counts(tokenizer, rows.texts,
                                                                      max_review_tokens)):
        if size <= max_review_tokens:
            found[label].append(text)
    return found


def pick_balanced(reviews, count, rng):
    """``count`` reviews, half of each label, drawn with ``rng`` and then shuffled.

    Raises:
        ValueError: ``count`` is odd, or a label has fewer than ``count // 2`` reviews.
    """
    if count % 2:
        raise ValueError(f"count ({count}) must be even: the examples are half negative, "
                         "half positive")
    picked = []
    for label in LABELS:
        pool = reviews[label]
        if len(pool) < count // 2:
            raise ValueError(f"count ({count}) needs {count // 2} {label} reviews; the split "
                             f"has {len(pool)} short enough")
        picked += [(pool[i], label) for i in rng.choice(len(pool), count // 2, replace=False)]
    return [picked[i] for i in rng.permutation(len(picked))]


class NewsStream:
    """Hands out runs of consecutive news sentences of a split, in a shuffled order, each
    sentence once until all are used (then the order starts over)."""

    def __init__(self, sentences, tokenizer, rng):
        order = rng.permutation(len(sentences))
        self.sentences = [sentences[i] for i in order]
        self.sizes = token_counts(tokenizer, self.sentences)
        self.tokenizer, self.cursor = tokenizer, 0

    def take(self, tokens):
        """The next sentences, joined and cut to ``tokens`` tokens (more only where the last
        character kept is a word of several pieces)."""
        text, estimate = "", 0
        # The sentences' own counts are a guess: digits or Latin letters ending one sentence
        # and starting the next join into fewer pieces. The joined text has the last word.
        while estimate < tokens or token_count(self.tokenizer, text) < tokens:
            index = self.cursor % len(self.sentences)
            text, estimate = text + self.sentences[index], estimate + self.sizes[index]
            self.cursor += 1
        return shortest_head(self.tokenizer, text, tokens)


def shortest_head(tokenizer, text, tokens):
    """The shortest start of ``text`` of at least ``tokens`` tokens (``text`` has as many).

    Every review then starts at the same position, so what a model must learn is where to
    look past position 512, not where each review begins.
    """
    short, long = 0, len(text)  # text[:short] has fewer tokens, text[:long] enough
    while long - short > 1:
        middle = (short + long) // 2
        if token_count(tokenizer, text[:middle]) < tokens:
            short = middle
        else:
            long = middle
    return text[:long]


def long_examples(split, count, tokenizer, prefix_tokens=512, max_review_tokens=96, seed=0):
    """``count`` long examples of ``split`` (``"train"``, ``"dev"`` or ``"test"``).

    Args:
        split: the split of both shipped files drawn from, so dev news and reviews are
            never trained on.
        count: how many; even, half of each label.
        tokenizer: a :class:`kerasbert.tokenizers.Tokenizer`, the one of the model to train
            (the token counts are its own).
        prefix_tokens: the news tokens before each review (news cut to fit); 511 or more
            puts every review past the 512 positions of a BERT checkpoint.
        max_review_tokens: only reviews this short are used, so each text stays within
            ``prefix_tokens + max_review_tokens + 2`` tokens.
        seed: the draw of reviews and of the news order.

    Returns:
        a list of :class:`LongExample`, the labels shuffled.

    Raises:
        ValueError: ``count`` is odd or larger than the short reviews of a label allow.
    """
    rng = np.random.default_rng(seed)
    reviews = pick_balanced(short_reviews(split, tokenizer, max_review_tokens), count, rng)
    news = NewsStream(news_sentences(split), tokenizer, rng)
    examples = []
    for review, label in reviews:
        prefix = news.take(prefix_tokens)
        examples.append(LongExample(text=prefix + SEAM + review, label=label,
                                    review_start=1 + token_count(tokenizer, prefix),
                                    review=review))
    return examples
