#! -*- coding: utf-8 -*-
# Reading comprehension as masked language modelling: the answer is read off the MLM
# head at a row of [MASK] tokens placed before the question and the passage.
# Input: [CLS][MASK]...[MASK][SEP]question[SEP]passage[SEP]   Output: the answer.

import json
import os

import numpy as np
from kerasbert.backend import K, keras
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer, load_vocab
from keras.layers import Lambda
from keras.models import Model

max_p_len = 20
max_q_len = 8
max_a_len = 3
batch_size = 16
epochs = 6

config_path = 'chinese_tiny/bert_config.json'
checkpoint_path = 'chinese_tiny/bert_model.ckpt'
dict_path = 'chinese_tiny/vocab.txt'

# Who lives where: each passage places three people in three cities, the question asks
# for one of them.
people = ['小明', '小红', '老王', '阿强', '大刘']
cities = ['北京', '上海', '广州', '成都', '西安', '武汉']


def write_corpus_and_model():
    """The data, and a stand-in for a downloaded Chinese BERT: a random one saved as a
    Google checkpoint, its vocabulary holding more than this task uses."""
    os.makedirs('chinese_tiny', exist_ok=True)
    rng = np.random.RandomState(5)
    samples = []
    for i in range(224):
        who = rng.choice(len(people), 3, replace=False)
        where = rng.choice(len(cities), 3, replace=False)
        passage = u''.join(u'%s住%s。' % (people[p], cities[c]) for p, c in zip(who, where))
        k = rng.randint(3)
        samples.append({
            'id': i,
            'question': u'%s住哪里' % people[who[k]],
            'passages': [{'passage': passage, 'answer': cities[where[k]]}],
        })
    with open('qa.json', 'w', encoding='utf-8') as f:
        json.dump(samples, f, ensure_ascii=False)
    chars = sorted(set(u''.join(people + cities) + u'住哪里。'))
    tokens = ['[PAD]'] + ['[unused%d]' % i for i in range(1, 6)]
    tokens += ['[UNK]', '[CLS]', '[SEP]', '[MASK]'] + chars + ['##' + c for c in chars]
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
            'hidden_dropout_prob': 0,
            'attention_probs_dropout_prob': 0,
            'max_position_embeddings': 64,
            'type_vocab_size': 2,
            'initializer_range': 0.02,
        }, f)
    pretrained = build_transformer_model(
        config_path, with_mlm=True, return_keras_model=False
    )
    pretrained.save_weights_as_checkpoint(checkpoint_path)


keras.utils.set_random_seed(2)  # before the stand-in checkpoint's random weights
write_corpus_and_model()
data = json.load(open('qa.json', encoding='utf-8'))
train_data, valid_data = data[:192], data[192:]

# Keep only the tokens the tokenizer can produce: a smaller embedding and MLM head.
token_dict, keep_tokens = load_vocab(
    dict_path=dict_path,
    simplified=True,
    startswith=['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'],
)
tokenizer = Tokenizer(token_dict, do_lower_case=True)


def sample_inputs(question, passage):
    q_token_ids, _ = tokenizer.encode(question, maxlen=max_q_len + 1)
    p_token_ids, _ = tokenizer.encode(passage, maxlen=max_p_len + 1)
    token_ids = [tokenizer._token_start_id]
    token_ids += [tokenizer._token_mask_id] * max_a_len
    token_ids += [tokenizer._token_end_id]
    token_ids += q_token_ids[1:] + p_token_ids[1:]
    return token_ids, [0] * len(token_ids)


class data_generator(DataGenerator):
    """Masked inputs, and the answer's token ids (ended by [SEP]) as targets."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids, batch_a_token_ids = [], [], []
        for is_end, D in self.sample(random):
            passage = D['passages'][0]
            token_ids, segment_ids = sample_inputs(D['question'], passage['passage'])
            a_token_ids, _ = tokenizer.encode(passage['answer'], maxlen=max_a_len + 1)
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            batch_a_token_ids.append(a_token_ids[1:])
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                batch_a_token_ids = sequence_padding(batch_a_token_ids, max_a_len)
                yield [batch_token_ids, batch_segment_ids], batch_a_token_ids
                batch_token_ids, batch_segment_ids, batch_a_token_ids = [], [], []


model = build_transformer_model(
    config_path,
    checkpoint_path,
    with_mlm=True,
    keep_tokens=keep_tokens,
)
output = Lambda(lambda x: x[:, 1:max_a_len + 1])(model.output)
model = Model(model.input, output)
model.summary()


def masked_cross_entropy(y_true, y_pred):
    """Cross entropy over the answer's tokens, the padding left out."""
    y_true = K.reshape(y_true, [K.shape(y_true)[0], -1])
    y_mask = K.cast(K.not_equal(y_true, 0), K.floatx())
    cross_entropy = K.sparse_categorical_crossentropy(y_true, y_pred)
    cross_entropy = K.sum(cross_entropy * y_mask) / K.sum(y_mask)
    return cross_entropy


model.compile(loss=masked_cross_entropy, optimizer=Adam(2e-3))


def gen_answer(question, passage):
    """Greedy reading of the masked positions, up to the first [SEP]."""
    token_ids, segment_ids = sample_inputs(question, passage)
    probas = model.predict([np.array([token_ids]), np.array([segment_ids])], verbose=0)[0]
    answer = []
    for i in probas.argmax(axis=1):
        if i == tokenizer._token_end_id:
            break
        answer.append(i)
    return tokenizer.decode(answer)


def evaluate(data):
    right = 0.
    for d in data:
        passage = d['passages'][0]
        right += gen_answer(d['question'], passage['passage']) == passage['answer']
    return right / len(data)


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

    model.load_weights('./best_model.weights.h5')
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'vocab_size': len(token_dict),
        'exact_match': evaluate(valid_data),
    }))
