#! -*- coding: utf-8 -*-
# Named entity recognition with GlobalPointer (every span scored per entity type), the
# optimizer keeping an exponential moving average of the weights: the averaged weights
# are swapped in to evaluate and save, and the training weights swapped back after.

import json

import numpy as np
from kerasbert.backend import K, keras, multilabel_categorical_crossentropy
from kerasbert.layers import GlobalPointer
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam, extend_with_exponential_moving_average
from kerasbert.snippets import DataGenerator, open, sequence_padding, to_array
from kerasbert.tokenizers import Tokenizer
from keras.models import Model

maxlen = 32
epochs = 10
batch_size = 16
learning_rate = 3e-3
categories = set()

config_path = 'bert_config.json'
dict_path = 'vocab.txt'

# Dishes (FOOD) and the shops (SHOP) that sell them.
foods = [u'面条', u'饺子', u'包子', u'米饭']
shops = [u'老街店', u'东门馆', u'小王家']
fillers = list(u'我昨天在吃了很好的还想去买一些')


def write_corpus():
    """One sample per line: text, then each entity as start, end and type."""
    rng = np.random.RandomState(29)
    with open('ner.jsonl', 'w', encoding='utf-8') as f:
        for _ in range(224):
            text, entities = u'', []
            for _ in range(rng.randint(2, 4)):
                text += u''.join(rng.choice(fillers, rng.randint(1, 4)))
                if rng.rand() < 0.5:
                    word, label = foods[rng.randint(4)], 'FOOD'
                else:
                    word, label = shops[rng.randint(3)], 'SHOP'
                entities.append([len(text), len(text) + len(word) - 1, label])
                text += word
            f.write(json.dumps([text] + entities, ensure_ascii=False) + '\n')
    chars = sorted(set(u''.join(foods + shops + fillers)))
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
    """One sample: [text, (start, end, label), ...]."""
    D = []
    with open(filename, encoding='utf-8') as f:
        for l in f:
            d = json.loads(l)
            for entity in d[1:]:
                categories.add(entity[2])
            D.append(d)
    return D


write_corpus()
keras.utils.set_random_seed(10)
data = load_data('ner.jsonl')
train_data, valid_data = data[:192], data[192:]
categories = list(sorted(categories))

tokenizer = Tokenizer(dict_path, do_lower_case=True)


class data_generator(DataGenerator):
    """Token ids, and per type a (length, length) grid marking each entity's span."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids, batch_labels = [], [], []
        for is_end, d in self.sample(random):
            tokens = tokenizer.tokenize(d[0], maxlen=maxlen)
            mapping = tokenizer.rematch(d[0], tokens)
            start_mapping = {j[0]: i for i, j in enumerate(mapping) if j}
            end_mapping = {j[-1]: i for i, j in enumerate(mapping) if j}
            token_ids = tokenizer.tokens_to_ids(tokens)
            segment_ids = [0] * len(token_ids)
            labels = np.zeros((len(categories), maxlen, maxlen))
            for start, end, label in d[1:]:
                if start in start_mapping and end in end_mapping:
                    start = start_mapping[start]
                    end = end_mapping[end]
                    label = categories.index(label)
                    labels[label, start, end] = 1
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            batch_labels.append(labels[:, :len(token_ids), :len(token_ids)])
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                batch_labels = sequence_padding(batch_labels, seq_dims=3)
                yield [batch_token_ids, batch_segment_ids], batch_labels
                batch_token_ids, batch_segment_ids, batch_labels = [], [], []


def global_pointer_crossentropy(y_true, y_pred):
    """Multi-label cross entropy over every (start, end) of every type."""
    bh = K.prod(K.shape(y_pred)[:2])
    y_true = K.reshape(y_true, (bh, -1))
    y_pred = K.reshape(y_pred, (bh, -1))
    return K.mean(multilabel_categorical_crossentropy(y_true, y_pred))


model = build_transformer_model(config_path)
output = GlobalPointer(len(categories), 16)(model.output)

model = Model(model.input, output)
model.summary()

AdamEMA = extend_with_exponential_moving_average(Adam, name='AdamEMA')
optimizer = AdamEMA(learning_rate=learning_rate, ema_momentum=0.9)
model.compile(loss=global_pointer_crossentropy, optimizer=optimizer)


class NamedEntityRecognizer(object):
    """Spans scored above zero are entities."""
    def recognize(self, text, threshold=0):
        tokens = tokenizer.tokenize(text, maxlen=maxlen)
        mapping = tokenizer.rematch(text, tokens)
        token_ids = tokenizer.tokens_to_ids(tokens)
        segment_ids = [0] * len(token_ids)
        token_ids, segment_ids = to_array([token_ids], [segment_ids])
        scores = model.predict([token_ids, segment_ids], verbose=0)[0]
        scores[:, [0, -1]] -= np.inf
        scores[:, :, [0, -1]] -= np.inf
        entities = []
        for l, start, end in zip(*np.where(scores > threshold)):
            entities.append((mapping[start][0], mapping[end][-1], categories[l]))
        return entities


NER = NamedEntityRecognizer()


def evaluate(data):
    X, Y, Z = 1e-10, 1e-10, 1e-10
    for d in data:
        R = set(NER.recognize(d[0]))
        T = set([tuple(i) for i in d[1:]])
        X += len(R & T)
        Y += len(R)
        Z += len(T)
    return 2 * X / (Y + Z), X / Y, X / Z


class Evaluator(keras.callbacks.Callback):
    """Evaluates and saves with the averaged weights; each epoch's loss."""
    def __init__(self):
        self.best_val_f1 = 0
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs['loss']))
        if epoch + 1 < epochs:
            return  # the average needs some updates: evaluate at the end only
        optimizer.apply_ema_weights()
        f1, precision, recall = evaluate(valid_data)
        if f1 >= self.best_val_f1:
            self.best_val_f1 = f1
            model.save_weights('./best_model.weights.h5')  # Keras 3: the name must end .weights.h5
        optimizer.reset_old_weights()
        print('valid:  f1: %.5f, precision: %.5f, recall: %.5f' % (f1, precision, recall))


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

    trained = [w.copy() for w in model.get_weights()]
    model.load_weights('./best_model.weights.h5')
    averaged = model.get_weights()
    moved = any(np.abs(a - b).max() > 0 for a, b in zip(averaged, trained))
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'f1': evaluator.best_val_f1,
        'check_averaged_weights_differ': moved,
    }))
