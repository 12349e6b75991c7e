#! -*- coding: utf-8 -*-
# Further pretraining of a BERT checkpoint with masked language modelling, built as the
# library's own pretraining script does: the MLM head's logits, the loss and the
# accuracy as layers of a training model, LAMB (Adam with weight decay and layer
# adaptation) under a warm-up schedule; the result is saved as a Google checkpoint again.

import json
import os

import numpy as np
from kerasbert.backend import K, keras
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import (
    Adam,
    extend_with_layer_adaptation,
    extend_with_piecewise_linear_lr,
    extend_with_weight_decay,
)
from kerasbert.snippets import DataGenerator, open, sequence_padding, to_array
from kerasbert.tokenizers import Tokenizer
from keras.layers import Input, Lambda
from keras.models import Model

sequence_length = 24
batch_size = 16
steps_per_epoch = 12
epochs = 12
learning_rate = 0.01
weight_decay_rate = 0.01
exclude_from_weight_decay = ['Norm', 'bias']
exclude_from_layer_adaptation = ['Norm', 'bias']
lr_schedule = {
    steps_per_epoch: 1.0,
    steps_per_epoch * epochs: 0.2,
}
floatx = K.floatx()

config_path = 'chinese_tiny/bert_config.json'
checkpoint_path = 'chinese_tiny/bert_model.ckpt'
dict_path = 'chinese_tiny/vocab.txt'
model_saved_path = 'pretrained/bert_model.ckpt'

# The corpus: sentences in which each thing comes with its own colour, so a masked
# colour can be told from the thing and the other way round.
pairs = [(u'红', u'苹果'), (u'黄', u'香蕉'), (u'绿', u'西瓜'), (u'紫', u'葡萄')]
starts = [u'我看见', u'他买了', u'桌上有', u'妈妈洗']


def write_corpus_and_model():
    """The corpus, and the checkpoint to start from (a random BERT stands in for it)."""
    os.makedirs('chinese_tiny', exist_ok=True)
    rng = np.random.RandomState(41)
    with open('corpus.txt', 'w', encoding='utf-8') as f:
        for _ in range(400):
            colour, thing = pairs[rng.randint(len(pairs))]
            f.write(u'%s%s色的%s。\n' % (starts[rng.randint(len(starts))], colour, thing))
    chars = sorted(set(u''.join(sum(map(list, pairs), []) + starts) + u'色的。'))
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
        config_path, with_mlm=True, return_keras_model=False
    ).save_weights_as_checkpoint(checkpoint_path)


keras.utils.set_random_seed(13)  # before the stand-in checkpoint's random weights
write_corpus_and_model()
corpus = [l.strip() for l in open('corpus.txt', encoding='utf-8')]
tokenizer = Tokenizer(dict_path, do_lower_case=True)


class data_generator(DataGenerator):
    """Masked token ids, segment ids, the original ids and where the masks are."""
    def __iter__(self, random=False):
        batch_masked_ids, batch_segment_ids, batch_token_ids, batch_is_masked = [], [], [], []
        for is_end, text in self.sample(random):
            token_ids, segment_ids = tokenizer.encode(text, maxlen=sequence_length)
            is_masked = np.random.rand(len(token_ids)) < 0.15
            is_masked[[0, -1]] = False
            masked_ids = np.where(is_masked, tokenizer._token_mask_id, token_ids)
            batch_masked_ids.append(masked_ids)
            batch_segment_ids.append(segment_ids)
            batch_token_ids.append(token_ids)
            batch_is_masked.append(is_masked.astype(floatx))
            if len(batch_masked_ids) == self.batch_size or is_end:
                batch_masked_ids = sequence_padding(batch_masked_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_is_masked = sequence_padding(batch_is_masked)
                dummy = np.zeros(len(batch_masked_ids))
                yield [batch_masked_ids, batch_segment_ids, batch_token_ids,
                       batch_is_masked], [dummy, dummy]
                batch_masked_ids, batch_segment_ids = [], []
                batch_token_ids, batch_is_masked = [], []


def build_transformer_model_with_mlm():
    """BERT with its MLM head (logits), and a training model around it."""
    bert = build_transformer_model(
        config_path, with_mlm='linear', return_keras_model=False
    )
    proba = bert.model.output

    token_ids = Input(shape=(None,), dtype='int64', name='token_ids')  # the targets
    is_masked = Input(shape=(None,), dtype=floatx, name='is_masked')  # where to predict

    def mlm_loss(inputs):
        y_true, y_pred, mask = inputs
        loss = K.sparse_categorical_crossentropy(
            y_true, y_pred, from_logits=True
        )
        loss = K.sum(loss * mask) / (K.sum(mask) + K.epsilon())
        return K.ones_like(mask[:, 0]) * loss  # Keras 3: a model's output needs a batch axis

    def mlm_acc(inputs):
        y_true, y_pred, mask = inputs
        y_true = K.cast(y_true, floatx)
        acc = keras.metrics.sparse_categorical_accuracy(y_true, y_pred)
        acc = K.sum(acc * mask) / (K.sum(mask) + K.epsilon())
        return K.ones_like(mask[:, 0]) * acc  # Keras 3: a model's output needs a batch axis

    mlm_loss = Lambda(mlm_loss, name='mlm_loss')([token_ids, proba, is_masked])
    mlm_acc = Lambda(mlm_acc, name='mlm_acc')([token_ids, proba, is_masked])

    train_model = Model(
        bert.model.inputs + [token_ids, is_masked], [mlm_loss, mlm_acc]
    )

    loss = {
        'mlm_loss': lambda y_true, y_pred: y_pred,
        'mlm_acc': lambda y_true, y_pred: K.stop_gradient(y_pred),
    }

    return bert, train_model, loss


bert, train_model, loss = build_transformer_model_with_mlm()

optimizer = extend_with_weight_decay(Adam)
optimizer = extend_with_layer_adaptation(optimizer)
optimizer = extend_with_piecewise_linear_lr(optimizer)
optimizer = optimizer(
    learning_rate=learning_rate,
    lr_schedule=lr_schedule,
    weight_decay_rate=weight_decay_rate,
    exclude_from_weight_decay=exclude_from_weight_decay,
    exclude_from_layer_adaptation=exclude_from_layer_adaptation,
    bias_correction=False,
)

train_model.compile(loss=loss, optimizer=optimizer)
bert.load_weights_from_checkpoint(checkpoint_path)
train_model.summary()


class Recorder(keras.callbacks.Callback):
    """Each epoch's MLM loss; the BERT weights saved as a checkpoint."""
    def __init__(self):
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs['mlm_loss_loss']))
        bert.save_weights_as_checkpoint(model_saved_path)


if __name__ == '__main__':

    recorder = Recorder()
    train_generator = data_generator(corpus, batch_size)

    train_model.fit(
        train_generator.forfit(),
        steps_per_epoch=steps_per_epoch,
        epochs=epochs,
        callbacks=[recorder],
        verbose=2,
    )

    # The saved checkpoint fills in a colour from the thing.
    mlm = build_transformer_model(config_path, model_saved_path, with_mlm=True)
    token_ids, segment_ids = tokenizer.encode(u'桌上有黄色的香蕉。')
    token_ids[4] = tokenizer._token_mask_id
    token_ids, segment_ids = to_array([token_ids], [segment_ids])
    probas = mlm.predict([token_ids, segment_ids], verbose=0)[0]
    logits = bert.model.predict([token_ids, segment_ids], verbose=0)[0]
    print(json.dumps({
        'first_loss': recorder.losses[0],
        'last_loss': recorder.losses[-1],
        'vocab_size': tokenizer._vocab_size,
        'filled_in': tokenizer.decode(probas[4:5].argmax(axis=1)),
        'check_checkpoint_keeps_the_weights': bool(
            np.allclose(probas, np.exp(logits) / np.exp(logits).sum(-1, keepdims=True),
                        atol=1e-5)),
    }, ensure_ascii=False))
