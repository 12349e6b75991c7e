#! -*- coding:utf-8 -*-
# Long-text classification (which app a review is about) with adversarial training:
# each batch's token embeddings are pushed along the loss's gradient (FGM) before the
# update, which makes the model steadier against small changes of its input.

import json

import numpy as np
from kerasbert.adversarial import adversarial_training  # Keras 3: no Keras 2 graph to patch
from kerasbert.backend import keras
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import DataGenerator, sequence_padding
from kerasbert.tokenizers import Tokenizer
from keras.layers import Dense, Lambda

num_classes = 4
maxlen = 32
batch_size = 16
epochs = 8

config_path = 'bert_config.json'
dict_path = 'vocab.txt'

# App reviews: the app's kind shows in a few of its words.
kinds = [list(u'游戏关卡玩'), list(u'地图导航路'), list(u'音乐歌曲听'), list(u'购物商品买')]
fillers = list(u'这个软件用起来非常不错就是有时候会卡')


def write_corpus():
    rng = np.random.RandomState(17)
    for name, size in [('train', 192), ('dev', 64)]:
        with open('%s.json' % name, 'w', encoding='utf-8') as f:
            for _ in range(size):
                label = rng.randint(num_classes)
                words = list(rng.choice(fillers, rng.randint(10, 20)))
                for _ in range(2):
                    words.insert(rng.randint(len(words) + 1), rng.choice(kinds[label]))
                f.write(json.dumps({'sentence': u''.join(words), 'label': str(label)},
                                   ensure_ascii=False) + '\n')
    chars = sorted(set(sum(kinds, []) + fillers))
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
    """One JSON object per line: (sentence, label id)."""
    D = []
    with open(filename) as f:
        for l in f:
            l = json.loads(l)
            text, label = l['sentence'], l['label']
            D.append((text, int(label)))
    return D


write_corpus()
keras.utils.set_random_seed(7)
train_data = load_data('train.json')
valid_data = load_data('dev.json')

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

model = keras.models.Model(bert.model.input, output)
model.summary()

model.compile(
    loss='sparse_categorical_crossentropy',
    optimizer=Adam(2e-3),
    metrics=['sparse_categorical_accuracy'],
)

# One line turns adversarial training on (after compile); the push is smaller than for a
# base-size BERT, whose embedding matrix is thousands of times larger.
adversarial_training(model, 'Embedding-Token', 0.05)


def evaluate(data):
    total, right = 0., 0.
    for x_true, y_true in data:
        y_pred = model.predict(x_true, verbose=0).argmax(axis=1)
        y_true = y_true[:, 0]
        total += len(y_true)
        right += (y_true == y_pred).sum()
    return right / total


class Evaluator(keras.callbacks.Callback):
    """Keeps the best weights, and each epoch's loss."""
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

    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'accuracy': evaluator.best_val_acc,
    }))
