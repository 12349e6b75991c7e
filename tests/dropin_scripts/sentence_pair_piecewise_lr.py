#! -*- coding:utf-8 -*-
# Sentence-pair classification (do two questions ask the same thing?) on the pooled
# [CLS] vector, trained with a warm-up then decaying learning rate
# (extend_with_piecewise_linear_lr) and gradients accumulated over two batches.

import json

import numpy as np
from kerasbert.backend import keras
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import (
    Adam,
    extend_with_gradient_accumulation,
    extend_with_piecewise_linear_lr,
)
from kerasbert.snippets import DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer
from keras.layers import Dense, Dropout

maxlen = 32
batch_size = 16
epochs = 30
config_path = 'bert_config.json'
dict_path = 'vocab.txt'

# A question names one of five things; a pair matches when both name the same thing.
things = [u'天气', u'车票', u'手机', u'电影', u'工资']
asks = [u'怎么查', u'多少钱', u'在哪里买', u'好不好', u'什么时候']


def write_corpus():
    rng = np.random.RandomState(11)
    with open('pairs.train.data', 'w', encoding='utf-8') as f:
        for _ in range(256):
            a = rng.randint(len(things))
            b = a if rng.rand() < 0.5 else rng.randint(len(things))
            text1 = things[a] + asks[rng.randint(len(asks))]
            text2 = asks[rng.randint(len(asks))] + things[b]
            f.write(u'%s\t%s\t%d\n' % (text1, text2, int(a == b)))
    chars = sorted(set(u''.join(things + asks)))
    with open(dict_path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + chars) + '\n')
    with open(config_path, 'w') as f:
        json.dump({
            'vocab_size': 5 + len(chars),
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


def load_data(filename):
    """One sample per line: (text 1, text 2, label id)."""
    D = []
    with open(filename, encoding='utf-8') as f:
        for l in f:
            text1, text2, label = l.strip().split('\t')
            D.append((text1, text2, int(label)))
    return D


write_corpus()
keras.utils.set_random_seed(4)
train_data = load_data('pairs.train.data')

tokenizer = Tokenizer(dict_path, do_lower_case=True)


class data_generator(DataGenerator):
    """Both texts in one input, told apart by their segment ids."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids, batch_labels = [], [], []
        for is_end, (text1, text2, label) in self.sample(random):
            token_ids, segment_ids = tokenizer.encode(text1, text2, maxlen=maxlen)
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            batch_labels.append([label])
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                batch_labels = sequence_padding(batch_labels)
                yield [batch_token_ids, batch_segment_ids], batch_labels
                batch_token_ids, batch_segment_ids, batch_labels = [], [], []


bert = build_transformer_model(
    config_path=config_path,
    with_pool=True,
    return_keras_model=False,
)

output = Dropout(rate=0.1)(bert.model.output)
output = Dense(
    units=2, activation='softmax', kernel_initializer=bert.initializer
)(output)

model = keras.models.Model(bert.model.input, output)
model.summary()

train_generator = data_generator(train_data, batch_size)
total_steps = len(train_generator) * epochs

AdamGA = extend_with_gradient_accumulation(Adam, name='AdamGA')
AdamGALR = extend_with_piecewise_linear_lr(AdamGA, name='AdamGALR')
optimizer = AdamGALR(
    learning_rate=3e-3,
    grad_accum_steps=2,
    lr_schedule={total_steps // 8: 1, total_steps: 0.2},
)

model.compile(
    loss='sparse_categorical_crossentropy',
    optimizer=optimizer,
    metrics=['accuracy'],
)


class Evaluator(keras.callbacks.Callback):
    """Each epoch's loss."""
    def __init__(self):
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs['loss']))


if __name__ == '__main__':

    evaluator = Evaluator()

    history = model.fit(
        train_generator.forfit(),
        steps_per_epoch=len(train_generator),
        epochs=epochs,
        callbacks=[evaluator],
        verbose=2,
    )

    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'accuracy': float(history.history['accuracy'][-1]),
    }))
