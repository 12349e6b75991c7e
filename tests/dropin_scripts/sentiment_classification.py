#! -*- coding:utf-8 -*-
# Sentiment classification: the [CLS] vector of a small BERT, a softmax on top,
# batches from a DataGenerator fed to fit through forfit().

import json

import numpy as np
from kerasbert.backend import keras, set_gelu
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer
from keras.layers import Dense, Lambda

set_gelu('tanh')  # the GELU of the original Google release

num_classes = 2
maxlen = 32
batch_size = 16
epochs = 6
config_path = 'bert_config.json'
dict_path = 'vocab.txt'

# A tiny review corpus: a review is fond or cross according to the words it holds.
fillers = list('这个电影手机饭店服务东西我们很真的了也还是就')
fond = list('好棒赞喜爱美乐')
cross = list('差坏烂糟恨厌苦')


def write_corpus():
    rng = np.random.RandomState(7)
    for name, size in [('train', 192), ('valid', 64)]:
        with open('sentiment.%s.data' % name, 'w', encoding='utf-8') as f:
            for _ in range(size):
                label = rng.randint(2)
                words = list(rng.choice(fillers, rng.randint(6, 14)))
                for _ in range(rng.randint(1, 3)):
                    words.insert(rng.randint(len(words) + 1),
                                 rng.choice(fond if label else cross))
                f.write('%s\t%d\n' % (''.join(words), label))
    with open(dict_path, 'w', encoding='utf-8') as f:
        specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
        f.write('\n'.join(specials + fillers + fond + cross) + '\n')
    with open(config_path, 'w') as f:
        json.dump({
            'vocab_size': len(specials + fillers + fond + cross),
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
    """One sample per line: (text, label id)."""
    D = []
    with open(filename, encoding='utf-8') as f:
        for l in f:
            text, label = l.strip().split('\t')
            D.append((text, int(label)))
    return D


write_corpus()
np.random.seed(42)
keras.utils.set_random_seed(42)
train_data = load_data('sentiment.train.data')
valid_data = load_data('sentiment.valid.data')

tokenizer = Tokenizer(dict_path, do_lower_case=True)


class data_generator(DataGenerator):
    """Batches of (token ids, segment ids) and labels."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids, batch_labels = [], [], []
        for is_end, (text, label) in self.sample(random):
            token_ids, segment_ids = tokenizer.encode(text, maxlen=maxlen)
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
    return_keras_model=False,
)

output = Lambda(lambda x: x[:, 0], name='CLS-token')(bert.model.output)
output = Dense(
    units=num_classes,
    activation='softmax',
    kernel_initializer=bert.initializer
)(output)

model = keras.models.Model(bert.model.input, output)
model.summary()

model.compile(
    loss='sparse_categorical_crossentropy',
    optimizer=Adam(1e-3),
    metrics=['accuracy'],
)

train_generator = data_generator(train_data, batch_size)
valid_generator = data_generator(valid_data, batch_size)


def evaluate(data):
    total, right = 0., 0.
    for x_true, y_true in data:
        y_pred = model.predict(x_true, verbose=0).argmax(axis=1)
        y_true = y_true[:, 0]
        total += len(y_true)
        right += (y_true == y_pred).sum()
    return right / total


class Evaluator(keras.callbacks.Callback):
    """Keeps the weights of the best epoch, and each epoch's loss."""
    def __init__(self):
        self.best_val_acc = 0.
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs['loss']))
        val_acc = evaluate(valid_generator)
        if val_acc > self.best_val_acc:
            self.best_val_acc = val_acc
            model.save_weights('best_model.weights.h5')  # Keras 3: the name must end .weights.h5
        print(u'val_acc: %.5f, best_val_acc: %.5f' % (val_acc, self.best_val_acc))


if __name__ == '__main__':

    evaluator = Evaluator()

    model.fit(
        train_generator.forfit(),
        steps_per_epoch=len(train_generator),
        epochs=epochs,
        callbacks=[evaluator],
        verbose=2,
    )

    model.load_weights('best_model.weights.h5')
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'accuracy': float(evaluate(valid_generator)),
    }))
