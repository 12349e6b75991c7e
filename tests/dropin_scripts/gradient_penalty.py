#! -*- coding:utf-8 -*-
# Intent classification with a gradient penalty: the loss adds the squared gradient of
# the cross entropy on the token embeddings, which favours flat minima.

import json
import os

import numpy as np
from kerasbert.backend import keras, search_layer, K
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import DataGenerator, sequence_padding
from kerasbert.tokenizers import Tokenizer
from keras.layers import Dense, Lambda

num_classes = 3
maxlen = 32
batch_size = 16
epochs = 6

config_path = 'chinese_tiny/bert_config.json'
checkpoint_path = 'chinese_tiny/bert_model.ckpt'
dict_path = 'chinese_tiny/vocab.txt'

# What a customer asks for: a refund, a delivery date or an invoice.
intents = [list(u'退款钱还'), list(u'快递送到'), list(u'发票开税')]
fillers = list(u'请问我的订单什么时候可以帮忙一下谢谢')


def write_corpus_and_model():
    """The data, and a stand-in for a downloaded BERT saved as a Google checkpoint."""
    os.makedirs('chinese_tiny', exist_ok=True)
    rng = np.random.RandomState(19)
    with open('intents.json', 'w', encoding='utf-8') as f:
        for _ in range(192):
            label = rng.randint(num_classes)
            words = list(rng.choice(fillers, rng.randint(6, 14)))
            for _ in range(2):
                words.insert(rng.randint(len(words) + 1), rng.choice(intents[label]))
            f.write(json.dumps({'sentence': u''.join(words), 'label': int(label)},
                               ensure_ascii=False) + '\n')
    chars = sorted(set(sum(intents, []) + fillers))
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
    build_transformer_model(
        config_path, return_keras_model=False
    ).save_weights_as_checkpoint(checkpoint_path)


def load_data(filename):
    """One JSON object per line: (sentence, label id)."""
    D = []
    with open(filename, encoding='utf-8') as f:
        for l in f:
            l = json.loads(l)
            D.append((l['sentence'], int(l['label'])))
    return D


keras.utils.set_random_seed(8)  # before the stand-in checkpoint's random weights
write_corpus_and_model()
train_data = load_data('intents.json')

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

bert = build_transformer_model(
    config_path=config_path,
    checkpoint_path=checkpoint_path,
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


# The penalty's weight is below base BERT's 1: a tiny model's gradients per token are larger.
def loss_with_gradient_penalty(y_true, y_pred, epsilon=0.1):
    """The cross entropy plus the squared gradient of it on each token's embedding."""
    loss = K.mean(K.sparse_categorical_crossentropy(y_true, y_pred))
    embeddings = search_layer(y_pred, 'Embedding-Token').embeddings
    gp = K.sum(K.gradients(loss, [embeddings])[0].values**2)
    return loss + 0.5 * epsilon * gp


model.compile(
    loss=loss_with_gradient_penalty,
    optimizer=Adam(2e-3),
    metrics=['sparse_categorical_accuracy'],
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
        'accuracy': history.history['sparse_categorical_accuracy'][-1],
    }))
