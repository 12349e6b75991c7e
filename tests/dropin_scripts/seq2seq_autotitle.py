#! -*- coding: utf-8 -*-
# Title generation as UniLM seq2seq: the article is segment 0, the title segment 1, one
# BERT with the UniLM attention mask; the loss covers the title only. Titles are decoded
# with beam search.

import json

import numpy as np
from kerasbert.backend import K, keras
from kerasbert.layers import Loss
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import AutoRegressiveDecoder, DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer, load_vocab
from keras.models import Model

maxlen = 32
batch_size = 16
epochs = 20

config_path = 'bert_config.json'
dict_path = 'vocab.txt'

# An article's title is set by the topic word it holds.
titles = {u'球': u'体育新闻', u'股': u'财经快讯', u'雨': u'天气预报', u'药': u'健康提醒'}
fillers = list(u'今天有很多人在这里说了一些事情我们都知道')


def write_corpus():
    rng = np.random.RandomState(21)
    keys = sorted(titles)
    with open('articles.txt', 'w', encoding='utf-8') as f:
        for _ in range(224):
            key = keys[rng.randint(len(keys))]
            words = list(rng.choice(fillers, rng.randint(8, 16)))
            for _ in range(3):
                words.insert(rng.randint(len(words) + 1), key)
            f.write(u'%s\t%s\n' % (titles[key], u''.join(words)))
    chars = sorted(set(u''.join(list(titles) + list(titles.values()) + fillers)))
    tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '[unused1]'] + chars
    with open(dict_path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(tokens) + '\n')
    with open(config_path, 'w') as f:
        json.dump({
            'vocab_size': len(tokens),
            'hidden_size': 32,
            'num_hidden_layers': 2,
            'num_attention_heads': 2,
            'intermediate_size': 64,
            'hidden_act': 'gelu',
            'hidden_dropout_prob': 0.1,
            'attention_probs_dropout_prob': 0.1,
            'max_position_embeddings': 64,
            'type_vocab_size': 2,
            'initializer_range': 0.02,
        }, f)


write_corpus()
keras.utils.set_random_seed(5)
articles = [l.rstrip('\n').split('\t') for l in open('articles.txt', encoding='utf-8')]
train_data, valid_data = articles[:192], articles[192:200]

token_dict, keep_tokens = load_vocab(
    dict_path=dict_path,
    simplified=True,
    startswith=['[PAD]', '[UNK]', '[CLS]', '[SEP]'],
)
tokenizer = Tokenizer(token_dict, do_lower_case=True)


class data_generator(DataGenerator):
    """The article then its title in one input; no targets (the loss is in the model)."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids = [], []
        for is_end, (title, content) in self.sample(random):
            token_ids, segment_ids = tokenizer.encode(content, title, maxlen=maxlen)
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                yield [batch_token_ids, batch_segment_ids], None
                batch_token_ids, batch_segment_ids = [], []


class CrossEntropy(Loss):
    """Cross entropy of the next token, over the title (segment 1) only."""
    def compute_loss(self, inputs, mask=None):
        y_true, y_mask, y_pred = inputs
        y_true = y_true[:, 1:]  # the token each position should predict
        y_mask = y_mask[:, 1:]  # segment ids: 1 on the title
        y_pred = y_pred[:, :-1]  # predictions, one step behind
        loss = K.sparse_categorical_crossentropy(y_true, y_pred)
        loss = K.sum(loss * y_mask) / K.sum(y_mask)
        return loss


model = build_transformer_model(
    config_path,
    application='unilm',
    keep_tokens=keep_tokens,
)

output = CrossEntropy(2)(model.inputs + model.outputs)

model = Model(model.inputs, output)
model.compile(optimizer=Adam(2e-3))
model.summary()


class AutoTitle(AutoRegressiveDecoder):
    """Beam search over the title, token by token."""
    @AutoRegressiveDecoder.wraps(default_rtype='probas')
    def predict(self, inputs, output_ids, states):
        token_ids, segment_ids = inputs
        token_ids = np.concatenate([token_ids, output_ids], 1)
        segment_ids = np.concatenate([segment_ids, np.ones_like(output_ids)], 1)
        return self.last_token(model).predict([token_ids, segment_ids], verbose=0)

    def generate(self, text, topk=1):
        max_c_len = maxlen - self.maxlen
        token_ids, segment_ids = tokenizer.encode(text, maxlen=max_c_len)
        output_ids = self.beam_search([token_ids, segment_ids], topk=topk)
        return tokenizer.decode(output_ids)


autotitle = AutoTitle(start_id=None, end_id=tokenizer._token_end_id, maxlen=8)


class Evaluator(keras.callbacks.Callback):
    """Keeps the weights of the lowest loss, and each epoch's loss."""
    def __init__(self):
        self.lowest = 1e10
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs['loss']))
        if logs['loss'] <= self.lowest:
            self.lowest = logs['loss']
            model.save_weights('./best_model.weights.h5')  # Keras 3: the name must end .weights.h5


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

    right = 0.
    for title, content in valid_data:
        generated = autotitle.generate(content, topk=2)
        print(u'%s -> %s' % (content, generated))
        right += generated == title
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'vocab_size': len(token_dict),
        'exact_match': right / len(valid_data),
    }))
