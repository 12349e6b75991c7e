#! -*- coding: utf-8 -*-
# Named entity recognition with a CRF on top of BERT: BIO tags per character, trained
# with the CRF's own loss, decoded with Viterbi over the learned transitions.

import json

import numpy as np
from kerasbert.backend import K, keras
from kerasbert.layers import ConditionalRandomField
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import DataGenerator, ViterbiDecoder, open, sequence_padding, to_array
from kerasbert.tokenizers import Tokenizer
from keras.layers import Dense
from keras.models import Model

maxlen = 32
epochs = 5
batch_size = 16
bert_layers = 2
learning_rate = 2e-3
crf_lr_multiplier = 10  # the CRF's transitions learn faster than the rest
categories = set()

config_path = 'bert_config.json'
dict_path = 'vocab.txt'

# Short news sentences naming people (PER) and places (LOC) among other words.
persons = [u'张三', u'李四', u'王五', u'赵六']
places = [u'北京', u'上海', u'南京', u'西安']
fillers = list(u'昨天今日去了在和见到一起开会说很好的')


def write_corpus():
    """One character and its tag per line, a blank line between sentences."""
    rng = np.random.RandomState(13)
    for name, size in [('train', 192), ('dev', 24)]:
        with open('ner.%s' % name, 'w', encoding='utf-8') as f:
            for _ in range(size):
                lines = []
                for _ in range(rng.randint(2, 4)):
                    for c in rng.choice(fillers, rng.randint(1, 4)):
                        lines.append(u'%s O' % c)
                    if rng.rand() < 0.5:
                        word, label = persons[rng.randint(4)], 'PER'
                    else:
                        word, label = places[rng.randint(4)], 'LOC'
                    for i, c in enumerate(word):
                        lines.append(u'%s %s-%s' % (c, 'B' if i == 0 else 'I', label))
                f.write(u'\n'.join(lines) + u'\n\n')
    chars = sorted(set(u''.join(persons + places + fillers)))
    with open(dict_path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + chars) + '\n')
    with open(config_path, 'w') as f:
        json.dump({
            'vocab_size': 5 + len(chars),
            'hidden_size': 32,
            'num_hidden_layers': bert_layers,
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
    """One sample: [text, (start, end, label), ...], text[start:end + 1] being an entity
    of type label."""
    D = []
    with open(filename, encoding='utf-8') as f:
        f = f.read()
        for l in f.split('\n\n'):
            if not l:
                continue
            d = ['']
            for i, c in enumerate(l.split('\n')):
                char, flag = c.split(' ')
                d[0] += char
                if flag[0] == 'B':
                    d.append([i, i, flag[2:]])
                    categories.add(flag[2:])
                elif flag[0] == 'I':
                    d[-1][1] = i
            D.append(d)
    return D


write_corpus()
keras.utils.set_random_seed(3)
train_data = load_data('ner.train')
valid_data = load_data('ner.dev')
categories = list(sorted(categories))

tokenizer = Tokenizer(dict_path, do_lower_case=True)


class data_generator(DataGenerator):
    """Token ids and one tag id per token: 0 outside, 2k+1 begins and 2k+2 continues an
    entity of category k."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids, batch_labels = [], [], []
        for is_end, d in self.sample(random):
            tokens = tokenizer.tokenize(d[0], maxlen=maxlen)
            mapping = tokenizer.rematch(d[0], tokens)
            start_mapping = {j[0]: i for i, j in enumerate(mapping) if j}
            end_mapping = {j[-1]: i for i, j in enumerate(mapping) if j}
            token_ids = tokenizer.tokens_to_ids(tokens)
            segment_ids = [0] * len(token_ids)
            labels = np.zeros(len(token_ids))
            for start, end, label in d[1:]:
                if start in start_mapping and end in end_mapping:
                    start = start_mapping[start]
                    end = end_mapping[end]
                    labels[start] = categories.index(label) * 2 + 1
                    labels[start + 1:end + 1] = categories.index(label) * 2 + 2
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            batch_labels.append(labels)
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                batch_labels = sequence_padding(batch_labels)
                yield [batch_token_ids, batch_segment_ids], batch_labels
                batch_token_ids, batch_segment_ids, batch_labels = [], [], []


model = build_transformer_model(config_path)

output_layer = 'Transformer-%s-FeedForward-Norm' % (bert_layers - 1)
output = model.get_layer(output_layer).output
output = Dense(len(categories) * 2 + 1)(output)
CRF = ConditionalRandomField(lr_multiplier=crf_lr_multiplier)
output = CRF(output)

model = Model(model.input, output)
model.summary()

model.compile(
    loss=CRF.sparse_loss,
    optimizer=Adam(learning_rate),
    metrics=[CRF.sparse_accuracy]
)


class NamedEntityRecognizer(ViterbiDecoder):
    """Entities of a text, from the best tag path."""
    def recognize(self, text):
        tokens = tokenizer.tokenize(text, maxlen=maxlen)
        mapping = tokenizer.rematch(text, tokens)
        token_ids = tokenizer.tokens_to_ids(tokens)
        segment_ids = [0] * len(token_ids)
        token_ids, segment_ids = to_array([token_ids], [segment_ids])
        nodes = model.predict([token_ids, segment_ids], verbose=0)[0]
        labels = self.decode(nodes)
        entities, starting = [], False
        for i, label in enumerate(labels):
            if label > 0:
                if label % 2 == 1:
                    starting = True
                    entities.append([[i], categories[(label - 1) // 2]])
                elif starting:
                    entities[-1][0].append(i)
                else:
                    starting = False
            else:
                starting = False
        return [(mapping[w[0]][0], mapping[w[-1]][-1], l) for w, l in entities]


NER = NamedEntityRecognizer(trans=K.eval(CRF.trans), starts=[0], ends=[0])


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
    """Each epoch's loss; the transitions handed to the decoder."""
    def __init__(self):
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs['loss']))
        NER.trans = K.eval(CRF.trans)
        model.save_weights('./last_model.weights.h5')  # Keras 3: the name must end .weights.h5


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

    f1, precision, recall = evaluate(valid_data)
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'f1': f1,
    }))
