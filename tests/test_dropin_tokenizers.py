"""kerasbert.tokenizers against bert4keras 0.11.5's tokenizers, on the same texts.

bert4keras runs once, in its own interpreter (it needs Keras 2); every comparison of this
file reads its one JSON answer.
"""

import json
import os

import numpy as np
import pytest

from kerasbert import Tokenizer as KerasbertTokenizer
from kerasbert.tokenizers import SpTokenizer, Tokenizer, load_vocab, save_vocab
from peers import have_transformers4, run_bert4keras, run_transformers4

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "checkpoints", "chinese_L-12_H-768_A-12", "vocab.txt")
REVIEWS = os.path.join(ROOT, "kerasbert", "resources", "reviews", "dev.tsv")

ENGLISH = [
    "BERT模型在2018年发布，效果stunning！GPU加速x10。",
    "It's a state-of-the-art model (2.5 times faster), isn't it? Yes: $5, 1,000 + 3 = x/y.",
    "Ünïcödé façade — naïve café, ΟΔΟΣ and σοφία; Привет, мир! 東京タワー 서울",
    "e-mail: someone@example.com, URL https://example.org/a?b=c&d=1 #hashtag @user",
    "ＦＵＬＬ－ｗｉｄｔｈ　ｔｅｘｔ，全角字符１２３《书名》「引号」",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2028line\u2029para\u200bzero\u200dwidth\ufeffbom",
    "Ǆemal İstanbul ẞtraße ﬁne ﬂow Ω K Å \ue000private \x00nul \ufffdreplacement",
    "a" * 150 + " " + "b" * 199 + " " + "x" * 201 + " unaffable",
    "[CLS] [SEP] [UNK] [MASK] [PAD] ##ing ## #",
    "", "   ", "。", "ΣΑΣ ΟΔΟΣ.",
]
ENCODE_CASES = [  # (second text, maxlen, pattern, truncate_from)
    (None, None, "S*E*E", "right"), (None, 8, "S*E*E", "right"), (None, 8, "S*E*E", "left"),
    (1, None, "S*E*E", "right"), (1, 12, "S*E*E", "right"), (1, 12, "S*ES*E", "left"),
    (1, 9, "S*ES*E", "right"), (1, 10, "S*E*E", 2),
]
SMALL_DICT = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "语言模型": 5,
              "语": 6, "言": 7, "模": 8, "型": 9, "好": 10, "hello": 11, "##lo": 12, "hel": 13,
              "<s>": 14, "!": 15}


# Characters the rules treat apart: letters with accents and case, marks, controls,
# format, private-use and unassigned code points, spaces, punctuation, CJK, emoji.
POOL = ("aZ09 .,-'\"#$([{~ÀéßİıΣσςΩЖжǅﬁ\u0301\u0327\u00a0\u2003\u3000\u2028\u2029\t\n\r"
        "\x00\x01\x0b\x1c\x85\u200b\u200d\ufeff\ufffd\ue000\U000f0000\u0378\U0002b820"
        "语言模型好，。《》「」！？ＡＢｃ１２😀👍🏽が한")


def texts():
    with open(REVIEWS, encoding="utf-8") as f:
        lines = [line.split("\t", 1)[1].strip() for line in f.readlines()[1:61]]
    mixed = np.random.default_rng(0).choice(list(POOL), size=(40, 24))
    return lines + ENGLISH + ["".join(row) for row in mixed]


# Runs under both libraries: the script's body names Tokenizer / load_vocab from either.
SCRIPT = """
import json

def run(Tokenizer, load_vocab, vocab, texts, cases, small):
    out = {}
    for lower in (True, False):
        tokenizer = Tokenizer(vocab, do_lower_case=lower)
        rows = []
        for n, text in enumerate(texts):
            tokens = tokenizer.tokenize(text)
            other = texts[(n + 1) % len(texts)]
            encoded = []
            for second, maxlen, pattern, side in cases:
                encoded.append(tokenizer.encode(text, other if second else None, maxlen=maxlen,
                                                pattern=pattern, truncate_from=side))
            try:
                offsets = tokenizer.rematch(text, tokens)
            except ValueError:
                offsets = "ValueError"
            ids = encoded[0][0]
            rows.append({"tokens": tokens, "short": tokenizer.tokenize(text, maxlen=6),
                         "encoded": encoded, "decoded": tokenizer.decode(ids),
                         "offsets": offsets,
                         "listed": tokenizer.encode(list(tokens), tokens[:3], maxlen=7)})
        out[str(lower)] = rows
    framed = Tokenizer(small, token_start=None, token_end="<s>",
                       token_translate={"hello": "hel"},
                       pre_tokenize=lambda text: text.split("|"))
    out["framed"] = [framed.tokenize(t) + [framed.encode(t, t, maxlen=6)]
                     for t in ("语言模型|好", "hello|hellolo!|好语", "语言|模型")]
    keep = load_vocab(vocab, simplified=True, startswith=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    out["simplified"] = [len(keep[0]), keep[1][:50], keep[1][-50:]]
    out["cjk_punctuation"] = Tokenizer._cjk_punctuation()
    return out
"""


@pytest.fixture(scope="module")
def bert4keras_answers():
    arguments = json.dumps([VOCAB, texts(), ENCODE_CASES, SMALL_DICT])
    # The default run's one live question to bert4keras (the others are replayed from
    # tests/fixtures/peers/): a broken tf-keras or bert4keras install fails here.
    return run_bert4keras(SCRIPT + f"""
from bert4keras.tokenizers import Tokenizer, load_vocab
print(json.dumps(run(Tokenizer, load_vocab, *json.loads({arguments!r}))))
""", live=True)


@pytest.fixture(scope="module")
def kerasbert_answers():
    scope = {}
    exec(SCRIPT, scope)
    answers = scope["run"](Tokenizer, load_vocab, VOCAB, texts(), ENCODE_CASES, SMALL_DICT)
    return json.loads(json.dumps(answers))  # tuples as lists, as the oracle's JSON has them


@pytest.mark.peer
@pytest.mark.parametrize("lower", ["True", "False"])
@pytest.mark.parametrize("part", ["tokens", "short", "encoded", "decoded", "offsets", "listed"])
def test_tokenizer_equals_bert4keras(bert4keras_answers, kerasbert_answers, lower, part):
    ours = [row[part] for row in kerasbert_answers[lower]]
    theirs = [row[part] for row in bert4keras_answers[lower]]
    different = [(text[:40], o, t) for text, o, t in zip(texts(), ours, theirs) if o != t]
    if part == "encoded":  # which cases differ
        different = [(text, [n for n, (a, b) in enumerate(zip(o, t)) if a != b], o[0], t[0])
                     for text, o, t in different]
    assert not different, f"{len(different)} texts differ: {different[:3]}"


@pytest.mark.peer
def test_frame_tokens_translation_pre_tokenize_and_simplified_vocab_equal_bert4keras(
        bert4keras_answers, kerasbert_answers):
    assert kerasbert_answers["framed"] == bert4keras_answers["framed"]
    assert kerasbert_answers["simplified"] == bert4keras_answers["simplified"]
    assert kerasbert_answers["cjk_punctuation"] == bert4keras_answers["cjk_punctuation"]


def test_bert4keras_defaults_and_attributes():
    tokenizer = Tokenizer(VOCAB)
    assert tokenizer._do_lower_case is False and tokenizer._word_maxlen == 200
    assert (tokenizer._token_pad_id, tokenizer._token_unk_id, tokenizer._token_mask_id,
            tokenizer._token_start_id, tokenizer._token_end_id) == (0, 100, 103, 101, 102)
    assert tokenizer._vocab_size == 21128
    assert tokenizer.tokenize("BERT") == ["[CLS]", "BERT", "[SEP]"]  # cased: kept whole
    assert tokenizer.encode("BERT")[0] == [101, 100, 102]
    assert tokenizer.stem("##ing") == "ing" and Tokenizer._is_space("\u3000")
    assert Tokenizer._is_control("\u200b") and Tokenizer._is_control("\t")
    # kerasbert's own tokenizer keeps Google's rules and its lowercasing default.
    assert KerasbertTokenizer(VOCAB).tokenize("BERT") == ["[CLS]", "be", "##rt", "[SEP]"]


def test_vocab_round_trip_and_refusals(tmp_path):
    path = tmp_path / "vocab.txt"
    save_vocab(str(path), {"[PAD]": 0, "b": 2, "a": 1})
    assert path.read_text(encoding="utf-8") == "[PAD]\na\nb\n"
    assert load_vocab(str(path)) == {"[PAD]": 0, "a": 1, "b": 2}
    path.write_text("a\nb 7\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3: token 'a' is already on line 1"):
        load_vocab(str(path))
    with pytest.raises(FileNotFoundError, match="no SentencePiece model file at 'spm.model'"):
        SpTokenizer("spm.model")
    with pytest.raises(ValueError, match="is not a SentencePiece model"):
        SpTokenizer(str(path))


# Two SentencePiece models trained here on the shipped reviews and the texts above: T5's
# layout (<pad> 0, </s> 1, <unk> 2, no <s>) and ALBERT's ([CLS], [SEP], [MASK] as pieces).
SP_MODELS = {
    "t5": {"pad_id": 0, "eos_id": 1, "unk_id": 2, "bos_id": -1},
    "albert": {"pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3,
               "user_defined_symbols": ["[CLS]", "[SEP]", "[MASK]"]},
}
SP_SETTINGS = {  # name -> the model and SpTokenizer's keywords (token_translate as pairs)
    "t5": ("t5", {"token_start": None, "token_end": "</s>"}),
    "t5-default-frame": ("t5", {}),
    "albert": ("albert", {}),
    "albert-translated": ("albert", {"token_translate": [["▁好", "▁不"]],
                                     "pre_tokenize": True}),
}

SP_SCRIPT = """
import json

def run_sp(SpTokenizer, settings, texts, cases):
    out = {}
    for name, (path, keywords) in settings.items():
        keywords = dict(keywords)
        if "token_translate" in keywords:
            keywords["token_translate"] = dict(keywords["token_translate"])
        if keywords.pop("pre_tokenize", False):
            keywords["pre_tokenize"] = lambda text: text.split("，")
        tokenizer = SpTokenizer(path, **keywords)
        rows = []
        for n, text in enumerate(texts):
            other = texts[(n + 1) % len(texts)]
            encoded = [tokenizer.encode(text, other if second else None, maxlen=maxlen,
                                        pattern=pattern, truncate_from=side)
                       for second, maxlen, pattern, side in cases]
            ids = encoded[0][0]
            rows.append({"tokens": tokenizer.tokenize(text),
                         "short": tokenizer.tokenize(text, maxlen=6), "encoded": encoded,
                         "decoded": tokenizer.decode(ids),
                         "decoded_past_end": tokenizer.decode(ids + [10 ** 6]),
                         "back": tokenizer.ids_to_tokens(ids)})
        ids = {token: getattr(tokenizer, "_token_%s_id" % token, None)
               for token in ("pad", "unk", "mask", "start", "end")}
        out[name] = {"rows": rows, "ids": ids, "size": tokenizer._vocab_size}
    return out
"""


@pytest.fixture(scope="module")
def sp_settings(tmp_path_factory):
    import sentencepiece

    folder = tmp_path_factory.mktemp("spm")
    for name, ids in SP_MODELS.items():
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(texts()[:60] * 3 + ENGLISH),
            model_prefix=str(folder / name), vocab_size=1000, num_threads=1,
            character_coverage=0.98, minloglevel=2, **ids)
    return {name: (str(folder / f"{model}.model"), keywords)
            for name, (model, keywords) in SP_SETTINGS.items()}


@pytest.fixture(scope="module")
def sp_answers(sp_settings):
    arguments = json.dumps([sp_settings, texts(), ENCODE_CASES])
    theirs = run_bert4keras(SP_SCRIPT + f"""
from bert4keras.tokenizers import SpTokenizer
print(json.dumps(run_sp(SpTokenizer, *json.loads({arguments!r}))))
""")
    scope = {}
    exec(SP_SCRIPT, scope)
    ours = json.loads(json.dumps(scope["run_sp"](SpTokenizer, sp_settings, texts(),
                                                 ENCODE_CASES)))
    return ours, theirs


@pytest.mark.peer
@pytest.mark.parametrize("setting", list(SP_SETTINGS))
def test_sp_tokenizer_equals_bert4keras(sp_answers, setting):
    ours, theirs = (answers[setting] for answers in sp_answers)
    assert ours["ids"] == theirs["ids"] and ours["size"] == theirs["size"] == 1000
    for part in ours["rows"][0]:
        different = [(text[:40], o[part], t[part]) for text, o, t in
                     zip(texts(), ours["rows"], theirs["rows"]) if o[part] != t[part]]
        assert not different, f"{part}: {len(different)} texts differ: {different[:3]}"
    # The comparison means something: many pieces, the unknown piece's id among the ids.
    tokens = {token for row in ours["rows"] for token in row["tokens"]}
    ids = [i for row in ours["rows"] for i in row["encoded"][0][0]]
    assert len(tokens) > 500 and ours["ids"]["unk"] in ids


HF_T5_SCRIPT = """
import json, sys
import transformers
from transformers import T5Tokenizer

path, texts = json.load(sys.stdin)
# legacy=True: the pieces of SentencePiece itself, as T5's published tokenizer gave them.
tokenizer = T5Tokenizer(vocab_file=path, extra_ids=0, legacy=True)
print(json.dumps({"version": transformers.__version__,
                  "tokens": [tokenizer.tokenize(text) for text in texts],
                  "ids": [tokenizer(text)["input_ids"] for text in texts],
                  "pairs": [tokenizer(a, b)["input_ids"] for a, b in zip(texts, texts[1:])]}))
"""


@pytest.mark.peer
def test_sp_tokenizer_equals_the_slow_t5_tokenizer_of_transformers(sp_settings):
    if not have_transformers4():
        pytest.skip("the transformers 4.57 oracle is not installed in .oracles/transformers4 "
                    "(make test installs it)")
    path, keywords = sp_settings["t5"]
    texts_ = texts() + ENGLISH
    # The default run's one live question to transformers 4.57 (the oracle folder's install).
    theirs = run_transformers4(HF_T5_SCRIPT, stdin=json.dumps([path, texts_]), USE_TF="0",
                               USE_TORCH="0", live=True)
    assert theirs["version"].startswith("4.57.")
    ours = SpTokenizer(path, **keywords)
    # T5's frame: the pieces, then </s>; a pair: each text with its own </s>.
    assert [ours.tokenize(text)[:-1] for text in texts_] == theirs["tokens"]
    assert [ours.encode(text)[0] for text in texts_] == theirs["ids"]
    assert [ours.encode(a, b)[0] for a, b in zip(texts_, texts_[1:])] == theirs["pairs"]
    assert len({token for row in theirs["tokens"] for token in row}) > 500


def test_sp_tokenizer_t5_layout(sp_settings):
    path, keywords = sp_settings["t5"]
    tokenizer = SpTokenizer(path, **keywords)
    assert (tokenizer._token_pad, tokenizer._token_pad_id, tokenizer._token_end_id) == (
        "<pad>", 0, 1)
    assert not hasattr(tokenizer, "_token_start_id")
    token_ids, segment_ids = tokenizer.encode("这本书很好看", "价格有点贵")
    assert token_ids[-1] == 1 and token_ids.count(1) == 2 and set(segment_ids) == {0, 1}
    assert tokenizer.decode(token_ids) == "这本书很好看 价格有点 ⁇ "  # 贵 is not a piece
