#! -*- coding: utf-8 -*-
# Chinese word segmentation as per-character tagging with a softmax (0: a one-character
# word, 1: a word's first, 2: middle, 3: last character), decoded with Viterbi over the
# transitions the tags allow. BERT is loaded from a Google checkpoint.

import json
import os
import re

import numpy as np
from kerasbert.backend import keras
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import DataGenerator, ViterbiDecoder, open, sequence_padding, to_array
from kerasbert.tokenizers import Tokenizer
from keras.layers import Dense
from keras.models import Model

maxlen = 32
epochs = 8
num_labels = 4
batch_size = 16
bert_layers = 2
learning_rate = 2e-3

config_path = 'chinese_tiny/bert_config.json'
checkpoint_path = 'chinese_tiny/bert_model.ckpt'
dict_path = 'chinese_tiny/vocab.txt'

# A small lexicon; sentences are words of it, written with spaces between them.
lexicon = [u'我们', u'喜欢', u'北京', u'天安门', u'的', u'在', u'学习', u'中文', u'了',
           u'图书馆', u'看书', u'很']


def write_corpus_and_model():
    """The segmented corpus, and a stand-in for a downloaded BERT checkpoint."""
    os.makedirs('chinese_tiny', exist_ok=True)
    rng = np.random.RandomState(31)
    with open('training.utf8', 'w', encoding='utf-8') as f:
        for _ in range(224):
            f.write(u'  '.join(rng.choice(lexicon, rng.randint(4, 9))) + u'\n')
    chars = sorted(set(u''.join(lexicon)))
    with open(dict_path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + chars) + '\n')
    with open(config_path, 'w') as f:
        json.dump({
            'vocab_size': 5 + len(chars),
            'hidden_size': 32,
            'num_hidden_layers': bert_layers,
            'num_attention_heads': 2,
            'intermediate_size': 64,
            'hidden_act': 'gelu',
            'hidden_dropout_prob': 0.1,
            'attention_probs_dropout_prob': 0.1,
            'max_position_embeddings': 64,
            'type_vocab_size': 2,
            'initializer_range': 0.02,
        }, f)
    build_transformer_model(
        config_path, return_keras_model=False
    ).save_weights_as_checkpoint(checkpoint_path)


def load_data(filename):
    """One sample per line: [word 1, word 2, ...]."""
    D = []
    with open(filename, encoding='utf-8') as f:
        for l in f:
            D.append(re.split(' +', l.strip()))
    return D


keras.utils.set_random_seed(11)  # before the stand-in checkpoint's random weights
write_corpus_and_model()
data = load_data('training.utf8')
train_data, valid_data = data[:192], data[192:]

tokenizer = Tokenizer(dict_path, do_lower_case=True)


class data_generator(DataGenerator):
    """Token ids and the tag of each."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids, batch_labels = [], [], []
        for is_end, item in self.sample(random):
            token_ids, labels = [tokenizer._token_start_id], [0]
            for w in item:
                w_token_ids = tokenizer.encode(w)[0][1:-1]
                if len(token_ids) + len(w_token_ids) < maxlen:
                    token_ids += w_token_ids
                    if len(w_token_ids) == 1:
                        labels += [0]
                    else:
                        labels += [1] + [2] * (len(w_token_ids) - 2) + [3]
                else:
                    break
            token_ids += [tokenizer._token_end_id]
            labels += [0]
            segment_ids = [0] * len(token_ids)
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            batch_labels.append(labels)
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                batch_labels = sequence_padding(batch_labels)
                yield [batch_token_ids, batch_segment_ids], batch_labels
                batch_token_ids, batch_segment_ids, batch_labels = [], [], []


model = build_transformer_model(
    config_path,
    checkpoint_path,
)

output_layer = 'Transformer-%s-FeedForward-Norm' % (bert_layers - 1)
output = model.get_layer(output_layer).output
output = Dense(num_labels, activation='softmax')(output)

model = Model(model.input, output)
model.summary()

model.compile(
    loss='sparse_categorical_crossentropy',
    optimizer=Adam(learning_rate),
    metrics=['sparse_categorical_accuracy']
)

# Which tag may follow which: after a word's end (or a one-character word) a new word
# starts; after its first or a middle character the word goes on.
allowed = np.array([[1, 1, 0, 0],
                    [0, 0, 1, 1],
                    [0, 0, 1, 1],
                    [1, 1, 0, 0]])


class WordSegmenter(ViterbiDecoder):
    """Words of a text, from the best path of tags the transitions allow."""
    def tokenize(self, text):
        tokens = tokenizer.tokenize(text)
        mapping = tokenizer.rematch(text, tokens)
        token_ids = tokenizer.tokens_to_ids(tokens)
        segment_ids = [0] * len(token_ids)
        token_ids, segment_ids = to_array([token_ids], [segment_ids])
        nodes = np.log(model.predict([token_ids, segment_ids], verbose=0)[0] + 1e-8)
        labels = self.decode(nodes)
        words = []
        for i, label in enumerate(labels[1:-1]):
            if label < 2 or len(words) == 0:
                words.append([i + 1])
            else:
                words[-1].append(i + 1)
        return [text[mapping[w[0]][0]:mapping[w[-1]][-1] + 1] for w in words]


segmenter = WordSegmenter(trans=np.log(allowed + 1e-8), starts=[0], ends=[0])


def simple_evaluate(data):
    """The share of true words found."""
    total, right = 0., 0.
    for w_true in data:
        w_pred = segmenter.tokenize(''.join(w_true))
        w_pred = set(w_pred)
        w_true = set(w_true)
        total += len(w_true)
        right += len(w_true & w_pred)
    return right / total


class Evaluator(keras.callbacks.Callback):
    """Each epoch's loss."""
    def __init__(self):
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs['loss']))


if __name__ == '__main__':

    evaluator = Evaluator()
    train_generator = data_generator(train_data, batch_size)

    model.fit(
        train_generator.forfit(),
        steps_per_epoch=len(train_generator),
        epochs=epochs,
        callbacks=[evaluator],
        verbose=2,
    )

    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'word_recall': simple_evaluate(valid_data),
    }))
