#! -*- coding:utf-8 -*-
# Triple extraction (subject, predicate, object) GPLinker style: one EfficientGlobalPointer
# finds subject and object spans, two more link their heads and their tails per
# predicate; trained with the sparse multi-label cross entropy, and AdamW.

import json

import numpy as np
from kerasbert.backend import K, keras, sparse_multilabel_categorical_crossentropy
from kerasbert.layers import EfficientGlobalPointer as GlobalPointer
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam, extend_with_weight_decay
from kerasbert.snippets import DataGenerator, open, sequence_padding, to_array
from kerasbert.tokenizers import Tokenizer

maxlen = 32
batch_size = 16
epochs = 6
config_path = 'bert_config.json'
dict_path = 'vocab.txt'

# Who was born where, and who works for which company.
persons = [u'张伟', u'李娜', u'王强', u'刘洋']
places = [u'杭州', u'重庆', u'天津', u'长沙']
companies = [u'华星', u'云海', u'金桥', u'蓝天']


def write_corpus():
    rng = np.random.RandomState(23)
    with open('train_data.json', 'w', encoding='utf-8') as f:
        for _ in range(208):
            p, c, co = persons[rng.randint(4)], places[rng.randint(4)], companies[rng.randint(4)]
            form = rng.randint(3)
            if form == 0:
                text, spo_list = u'%s生于%s。' % (p, c), [(p, u'出生地', c)]
            elif form == 1:
                text, spo_list = u'%s在%s公司上班。' % (p, co), [(p, u'就职于', co)]
            else:
                text = u'%s生于%s，现在%s公司上班。' % (p, c, co)
                spo_list = [(p, u'出生地', c), (p, u'就职于', co)]
            f.write(json.dumps({
                'text': text,
                'spo_list': [{'subject': s, 'predicate': pr, 'object': o}
                             for s, pr, o in spo_list]
            }, ensure_ascii=False) + '\n')
    with open('all_50_schemas', 'w', encoding='utf-8') as f:
        for predicate in [u'出生地', u'就职于']:
            f.write(json.dumps({'predicate': predicate}, ensure_ascii=False) + '\n')
    chars = sorted(set(u''.join(persons + places + companies) + u'生于在公司上班。，现'))
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
    """One JSON object per line: {'text': text, 'spo_list': [(s, p, o)]}."""
    D = []
    with open(filename, encoding='utf-8') as f:
        for l in f:
            l = json.loads(l)
            D.append({
                'text': l['text'],
                'spo_list': [(spo['subject'], spo['predicate'], spo['object'])
                             for spo in l['spo_list']]
            })
    return D


write_corpus()
keras.utils.set_random_seed(9)
data = load_data('train_data.json')
train_data, valid_data = data[:192], data[192:]
predicate2id, id2predicate = {}, {}

with open('all_50_schemas', encoding='utf-8') as f:
    for l in f:
        l = json.loads(l)
        if l['predicate'] not in predicate2id:
            id2predicate[len(predicate2id)] = l['predicate']
            predicate2id[l['predicate']] = len(predicate2id)

tokenizer = Tokenizer(dict_path, do_lower_case=True)


def search(pattern, sequence):
    """The first index of the sub-list pattern in sequence, or -1."""
    n = len(pattern)
    for i in range(len(sequence)):
        if sequence[i:i + n] == pattern:
            return i
    return -1


class data_generator(DataGenerator):
    """Token ids, and the spans each pointer should mark."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids = [], []
        batch_entity_labels, batch_head_labels, batch_tail_labels = [], [], []
        for is_end, d in self.sample(random):
            token_ids, segment_ids = tokenizer.encode(d['text'], maxlen=maxlen)
            spoes = set()
            for s, p, o in d['spo_list']:
                s = tokenizer.encode(s)[0][1:-1]
                p = predicate2id[p]
                o = tokenizer.encode(o)[0][1:-1]
                sh = search(s, token_ids)
                oh = search(o, token_ids)
                if sh != -1 and oh != -1:
                    spoes.add((sh, sh + len(s) - 1, p, oh, oh + len(o) - 1))
            entity_labels = [set() for _ in range(2)]
            head_labels = [set() for _ in range(len(predicate2id))]
            tail_labels = [set() for _ in range(len(predicate2id))]
            for sh, st, p, oh, ot in spoes:
                entity_labels[0].add((sh, st))
                entity_labels[1].add((oh, ot))
                head_labels[p].add((sh, oh))
                tail_labels[p].add((st, ot))
            for label in entity_labels + head_labels + tail_labels:
                if not label:  # every pointer gets one span at least: (0, 0) if none
                    label.add((0, 0))
            entity_labels = sequence_padding([list(l) for l in entity_labels])
            head_labels = sequence_padding([list(l) for l in head_labels])
            tail_labels = sequence_padding([list(l) for l in tail_labels])
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            batch_entity_labels.append(entity_labels)
            batch_head_labels.append(head_labels)
            batch_tail_labels.append(tail_labels)
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                batch_entity_labels = sequence_padding(batch_entity_labels, seq_dims=2)
                batch_head_labels = sequence_padding(batch_head_labels, seq_dims=2)
                batch_tail_labels = sequence_padding(batch_tail_labels, seq_dims=2)
                yield [batch_token_ids, batch_segment_ids], [
                    batch_entity_labels, batch_head_labels, batch_tail_labels
                ]
                batch_token_ids, batch_segment_ids = [], []
                batch_entity_labels, batch_head_labels, batch_tail_labels = [], [], []


def globalpointer_crossentropy(y_true, y_pred):
    """The sparse multi-label cross entropy over a pointer's (head, tail) grid."""
    shape = K.shape(y_pred)
    y_true = y_true[..., 0] * K.cast(shape[2], K.floatx()) + y_true[..., 1]
    y_pred = K.reshape(y_pred, (shape[0], -1, K.prod(shape[2:])))
    loss = sparse_multilabel_categorical_crossentropy(y_true, y_pred, True)
    return K.mean(K.sum(loss, axis=1))


base = build_transformer_model(
    config_path=config_path,
    return_keras_model=False
)

entity_output = GlobalPointer(heads=2, head_size=16)(base.model.output)
head_output = GlobalPointer(
    heads=len(predicate2id), head_size=16, RoPE=False, tril_mask=False
)(base.model.output)
tail_output = GlobalPointer(
    heads=len(predicate2id), head_size=16, RoPE=False, tril_mask=False
)(base.model.output)
outputs = [entity_output, head_output, tail_output]

AdamW = extend_with_weight_decay(Adam, name='AdamW')
optimizer = AdamW(learning_rate=3e-3, weight_decay_rate=0.01,
                  exclude_from_weight_decay=['Norm', 'bias'])
model = keras.models.Model(base.model.inputs, outputs)
model.compile(loss=globalpointer_crossentropy, optimizer=optimizer)
model.summary()


def extract_spoes(text, threshold=0):
    """The triples of text."""
    tokens = tokenizer.tokenize(text, maxlen=maxlen)
    mapping = tokenizer.rematch(text, tokens)
    token_ids, segment_ids = tokenizer.encode(text, maxlen=maxlen)
    token_ids, segment_ids = to_array([token_ids], [segment_ids])
    outputs = model.predict([token_ids, segment_ids], verbose=0)
    outputs = [o[0] for o in outputs]
    subjects, objects = set(), set()
    outputs[0][:, [0, -1]] -= np.inf
    outputs[0][:, :, [0, -1]] -= np.inf
    for l, h, t in zip(*np.where(outputs[0] > threshold)):
        if l == 0:
            subjects.add((h, t))
        else:
            objects.add((h, t))
    spoes = set()
    for sh, st in subjects:
        for oh, ot in objects:
            p1s = np.where(outputs[1][:, sh, oh] > threshold)[0]
            p2s = np.where(outputs[2][:, st, ot] > threshold)[0]
            ps = set(p1s) & set(p2s)
            for p in ps:
                spoes.add((
                    text[mapping[sh][0]:mapping[st][-1] + 1], id2predicate[p],
                    text[mapping[oh][0]:mapping[ot][-1] + 1]
                ))
    return list(spoes)


def evaluate(data):
    X, Y, Z = 1e-10, 1e-10, 1e-10
    for d in data:
        R = set(extract_spoes(d['text']))
        T = set(d['spo_list'])
        X += len(R & T)
        Y += len(R)
        Z += len(T)
    return 2 * X / (Y + Z), X / Y, X / Z


class Evaluator(keras.callbacks.Callback):
    """Each epoch's loss."""
    def __init__(self):
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs['loss']))


if __name__ == '__main__':

    train_generator = data_generator(train_data, batch_size)
    evaluator = Evaluator()

    model.fit(
        train_generator.forfit(),
        steps_per_epoch=len(train_generator),
        epochs=epochs,
        callbacks=[evaluator],
        verbose=2,
    )

    f1, precision, recall = evaluate(valid_data)
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'f1': f1,
    }))
