#! -*- coding:utf-8 -*-
# Semi-supervised sentiment classification by virtual adversarial training: a few labelled
# reviews train the model, and many unlabelled ones teach it to keep its predictions when
# their token embeddings are pushed the way that changes them most.

import json

import numpy as np
from kerasbert.adversarial import virtual_adversarial_training  # Keras 3: no Keras 2 graph to patch
from kerasbert.backend import keras
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer
from keras.layers import Dense, Lambda
from keras.utils import to_categorical

num_classes = 2
maxlen = 32
batch_size = 16
train_frac = 0.5  # the share of the training reviews that keep their labels
use_vat = True  # compare with False
epochs = 8

config_path = 'bert_config.json'
dict_path = 'vocab.txt'

# Reviews: fond or cross according to a few of their words.
fillers = list(u'这个电影手机饭店服务东西我们很真的了也还是就')
fond = list(u'好棒赞喜爱美乐')
cross = list(u'差坏烂糟恨厌苦')


def write_corpus():
    rng = np.random.RandomState(11)
    for name, size in [('train', 192), ('valid', 64)]:
        with open('sentiment.%s.data' % name, 'w', encoding='utf-8') as f:
            for _ in range(size):
                label = rng.randint(2)
                words = list(rng.choice(fillers, rng.randint(6, 14)))
                for _ in range(rng.randint(1, 3)):
                    words.insert(rng.randint(len(words) + 1),
                                 rng.choice(fond if label else cross))
                f.write(u'%s\t%d\n' % (u''.join(words), label))
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
np.random.seed(5)
keras.utils.set_random_seed(5)
train_data = load_data('sentiment.train.data')
valid_data = load_data('sentiment.valid.data')

# Labelled and unlabelled reviews
num_labeled = int(len(train_data) * train_frac)
unlabeled_data = [(t, 0) for t, l in train_data[num_labeled:]]
train_data = train_data[:num_labeled]

tokenizer = Tokenizer(dict_path, do_lower_case=True)


class data_generator(DataGenerator):
    """Batches of (token ids, segment ids) and one-hot labels."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids, batch_labels = [], [], []
        for is_end, (text, label) in self.sample(random):
            token_ids, segment_ids = tokenizer.encode(text, maxlen=maxlen)
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            batch_labels.append(label)
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                batch_labels = to_categorical(batch_labels, num_classes)
                yield [batch_token_ids, batch_segment_ids], batch_labels
                batch_token_ids, batch_segment_ids, batch_labels = [], [], []


train_generator = data_generator(train_data, batch_size)
valid_generator = data_generator(valid_data, batch_size)

bert = build_transformer_model(
    config_path=config_path,
    return_keras_model=False,
)

output = Lambda(lambda x: x[:, 0])(bert.model.output)
output = Dense(
    units=num_classes,
    activation='softmax',
    kernel_initializer=bert.initializer
)(output)

# The model trained on labelled reviews
model = keras.models.Model(bert.model.input, output)
model.summary()

model.compile(
    loss='kld',
    optimizer=Adam(2e-3),
    metrics=['categorical_accuracy'],
)

# The same layers, trained by virtual adversarial training on unlabelled reviews
model_vat = keras.models.Model(bert.model.input, output)
model_vat.compile(
    loss='kld',
    optimizer=Adam(1e-3),
    metrics=['categorical_accuracy'],
)

# One line turns it on (after compile); the pushes are smaller than for a base-size BERT,
# whose embedding matrix is thousands of times larger.
virtual_adversarial_training(model_vat, 'Embedding-Token', epsilon=0.05, xi=0.5)


def evaluate(data):
    total, right = 0., 0.
    for x_true, y_true in data:
        y_pred = model.predict(x_true, verbose=0).argmax(axis=1)
        y_true = y_true.argmax(axis=1)
        total += len(y_true)
        right += (y_true == y_pred).sum()
    return right / total


class Evaluator(keras.callbacks.Callback):
    """Evaluates each epoch, keeps the best weights; a VAT step after each labelled one."""
    def __init__(self):
        self.best_val_acc = 0.
        self.data = data_generator(unlabeled_data, batch_size).forfit()
        self.losses, self.vat_losses = [], []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs['loss']))
        val_acc = evaluate(valid_generator)
        if val_acc > self.best_val_acc:
            self.best_val_acc = val_acc
            model.save_weights('best_model.weights.h5')  # Keras 3: the name must end .weights.h5
        print(u'val_acc: %.5f, best_val_acc: %.5f' % (val_acc, self.best_val_acc))

    def on_batch_end(self, batch, logs=None):
        if use_vat:
            dx, dy = next(self.data)
            self.vat_losses.append(float(model_vat.train_on_batch(dx, dy)[0]))


if __name__ == '__main__':

    evaluator = Evaluator()

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
        'accuracy': evaluator.best_val_acc,
        'check_vat_steps': len(evaluator.vat_losses) == epochs * len(train_generator),
        'check_vat_losses_finite': bool(np.isfinite(evaluator.vat_losses).all()),
    }))
