#! -*- coding:utf-8 -*-
# Topic classification with ALBERT loaded from a Google checkpoint (one shared
# transformer block, factorised embeddings), three topics.

import json

import numpy as np
from kerasbert.backend import keras
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer
from keras.layers import Dense, Lambda

num_classes = 3
maxlen = 32
batch_size = 16
epochs = 10
config_path = 'albert_tiny/albert_config.json'
checkpoint_path = 'albert_tiny/albert_model.ckpt'
dict_path = 'albert_tiny/vocab.txt'

# Headlines of three topics: sport, money and weather, each with its own words.
common = list('今日我们他的了在是有这那一个')
topics = [list('球赛队员跑跳冠军'), list('钱股价银行涨跌'), list('雨雪风云晴冷热')]


def write_corpus_and_model():
    """The data, and a stand-in for a downloaded albert_tiny: a random ALBERT saved as a
    Google checkpoint with its config and vocabulary."""
    import os
    os.makedirs('albert_tiny', exist_ok=True)
    rng = np.random.RandomState(3)
    with open('topics.json', 'w', encoding='utf-8') as f:
        for _ in range(240):
            label = rng.randint(num_classes)
            words = list(rng.choice(common, rng.randint(5, 12)))
            for _ in range(3):
                words.insert(rng.randint(len(words) + 1), rng.choice(topics[label]))
            f.write(json.dumps({'sentence': ''.join(words), 'label': int(label)},
                               ensure_ascii=False) + '\n')
    chars = sorted(set(common + sum(topics, [])))
    tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + chars
    with open(dict_path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(tokens) + '\n')
    with open(config_path, 'w') as f:
        json.dump({
            'vocab_size': len(tokens),
            'embedding_size': 16,
            'hidden_size': 32,
            'num_hidden_layers': 2,
            'num_attention_heads': 2,
            'intermediate_size': 64,
            'hidden_act': 'gelu',
            'hidden_dropout_prob': 0,
            'attention_probs_dropout_prob': 0,
            'max_position_embeddings': 64,
            'type_vocab_size': 2,
            'initializer_range': 0.02,
        }, f)
    pretrained = build_transformer_model(
        config_path, model='albert', return_keras_model=False
    )
    pretrained.save_weights_as_checkpoint(checkpoint_path)


def load_data(filename):
    """One JSON object per line: (sentence, label id)."""
    D = []
    with open(filename, encoding='utf-8') as f:
        for l in f:
            l = json.loads(l)
            D.append((l['sentence'], int(l['label'])))
    return D


keras.utils.set_random_seed(1)  # before the stand-in checkpoint's random weights
write_corpus_and_model()
data = load_data('topics.json')
train_data, valid_data = data[:192], data[192:]

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


albert = build_transformer_model(
    config_path=config_path,
    checkpoint_path=checkpoint_path,
    model='albert',
    return_keras_model=False,
)

output = Lambda(lambda x: x[:, 0], name='CLS-token')(albert.model.output)
output = Dense(
    units=num_classes,
    activation='softmax',
    kernel_initializer=albert.initializer
)(output)

model = keras.models.Model(albert.model.input, output)
model.summary()

model.compile(
    loss='sparse_categorical_crossentropy',
    optimizer=Adam(1e-3),
    metrics=['sparse_categorical_accuracy'],
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
    """Keeps each epoch's loss and the best weights."""
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
