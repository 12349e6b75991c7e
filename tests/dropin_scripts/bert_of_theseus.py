#! -*- coding:utf-8 -*-
# BERT-of-Theseus: a 4-layer predecessor is fine-tuned for news topics, then a 2-layer
# successor takes its place module by module: during training each module (the embeddings,
# then each pair of predecessor layers) is at random the predecessor's, frozen, or the
# successor's one layer. Both models come from one checkpoint, told apart by their prefix.

import json
import os

import numpy as np
from kerasbert.backend import K, keras
from kerasbert.layers import Input, Lambda, Layer
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer
from keras.layers import Dense
from keras.models import Model

num_classes = 3
maxlen = 32
batch_size = 16
config_path = 'chinese_tiny/bert_config.json'
checkpoint_path = 'chinese_tiny/bert_model.ckpt'
dict_path = 'chinese_tiny/vocab.txt'

# Headlines of three topics, each with words of its own among common ones.
topics = [list(u'球赛队员冠军'), list(u'股价银行涨跌'), list(u'雨雪风晴冷热')]
fillers = list(u'今日我们他的了在是有这那一个新闻报道')


def write_corpus_and_model():
    """The data, and a stand-in for a downloaded BERT saved as a Google checkpoint."""
    os.makedirs('chinese_tiny', exist_ok=True)
    rng = np.random.RandomState(11)
    for name, size in [('train', 192), ('valid', 64)]:
        with open('news.%s.json' % name, 'w', encoding='utf-8') as f:
            for _ in range(size):
                label = rng.randint(num_classes)
                words = list(rng.choice(fillers, rng.randint(6, 14)))
                for _ in range(3):
                    words.insert(rng.randint(len(words) + 1), rng.choice(topics[label]))
                f.write(json.dumps({'sentence': u''.join(words), 'label': int(label)},
                                   ensure_ascii=False) + '\n')
    chars = sorted(set(sum(topics, []) + fillers))
    with open(dict_path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + chars) + '\n')
    with open(config_path, 'w') as f:
        json.dump({
            'vocab_size': 5 + len(chars),
            'hidden_size': 32,
            'num_hidden_layers': 4,
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
            D.append((l['sentence'], l['label']))
    return D


write_corpus_and_model()
np.random.seed(42)
keras.utils.set_random_seed(42)
train_data = load_data('news.train.json')
valid_data = load_data('news.valid.json')

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


class BinaryRandomChoice(Layer):
    """In training, the first input or the second at random (one draw per batch); in
    prediction the second (the successor's)."""
    def __init__(self, **kwargs):
        super(BinaryRandomChoice, self).__init__(**kwargs)
        self.supports_masking = True
        # Keras 3: a seed generator draws anew at each step of the compiled train step
        self.seed_generator = keras.random.SeedGenerator(7)

    def compute_mask(self, inputs, mask=None):
        if mask is not None:
            return mask[1]

    def call(self, inputs):
        source, target = inputs
        mask = K.random_binomial(shape=[1], p=0.5, seed=self.seed_generator)
        output = mask * source + (1 - mask) * target
        return K.in_train_phase(output, target)

    def compute_output_shape(self, input_shape):
        return input_shape[1]


def bert_of_theseus(predecessor, successor, classfier):
    """The predecessor's modules, each replaced at random by the successor's."""
    inputs = predecessor.inputs
    # The trained predecessor and classifier stay as they are.
    for layer in predecessor.model.layers:
        layer.trainable = False
    classfier.trainable = False
    # The embeddings
    predecessor_outputs = predecessor.apply_embeddings(inputs)
    successor_outputs = successor.apply_embeddings(inputs)
    outputs = BinaryRandomChoice()([predecessor_outputs, successor_outputs])
    # The transformer layers: layers_per_module of the predecessor's for one successor's
    layers_per_module = predecessor.num_hidden_layers // successor.num_hidden_layers
    for index in range(successor.num_hidden_layers):
        predecessor_outputs = outputs
        for sub_index in range(layers_per_module):
            predecessor_outputs = predecessor.apply_main_layers(
                predecessor_outputs, layers_per_module * index + sub_index
            )
        successor_outputs = successor.apply_main_layers(outputs, index)
        outputs = BinaryRandomChoice()([predecessor_outputs, successor_outputs])
    # The classifier on top
    outputs = classfier(outputs)
    model = Model(inputs, outputs)
    return model


def evaluate(model, data):
    total, right = 0., 0.
    for x_true, y_true in data:
        y_pred = model.predict(x_true, verbose=0).argmax(axis=1)
        y_true = y_true[:, 0]
        total += len(y_true)
        right += (y_true == y_pred).sum()
    return right / total


def train(model, epochs):
    """Fits ``model``, returning each epoch's loss."""
    model.compile(
        loss='sparse_categorical_crossentropy',
        optimizer=Adam(1e-3),
        metrics=['accuracy'],
    )
    history = model.fit(
        train_generator.forfit(),
        steps_per_epoch=len(train_generator),
        epochs=epochs,
        verbose=2,
    )
    return [float(loss) for loss in history.history['loss']]


# The predecessor: the checkpoint's 4 layers, every name prefixed 'Predecessor-'
predecessor = build_transformer_model(
    config_path=config_path,
    checkpoint_path=checkpoint_path,
    return_keras_model=False,
    prefix='Predecessor-',
)

# The successor: its first 2 layers, prefixed 'Successor-'
successor = build_transformer_model(
    config_path=config_path,
    checkpoint_path=checkpoint_path,
    return_keras_model=False,
    num_hidden_layers=2,
    prefix='Successor-',
)

# The classifier, on either model's sequence output
x_in = Input(shape=K.int_shape(predecessor.output)[1:])
x = Lambda(lambda x: x[:, 0])(x_in)
x = Dense(units=num_classes, activation='softmax')(x)
classifier = Model(x_in, x)

predecessor_model = Model(predecessor.inputs, classifier(predecessor.output))
successor_model = Model(successor.inputs, classifier(successor.output))


if __name__ == '__main__':

    predecessor_losses = train(predecessor_model, 4)
    predecessor_accuracy = evaluate(predecessor_model, valid_generator)
    # Keras 3: made after the predecessor's training, which its frozen layers would stop
    theseus_model = bert_of_theseus(predecessor, successor, classifier)
    theseus_losses = train(theseus_model, 4)
    successor_accuracy = evaluate(successor_model, valid_generator)
    # The successor alone on the training data: Theseus's epochs mix the two models' layers
    # at random, and their losses go up and down with the draws.
    successor_model.compile(loss='sparse_categorical_crossentropy')
    successor_loss = successor_model.evaluate(
        train_generator.forfit(), steps=len(train_generator), verbose=0)
    print(json.dumps({
        'first_loss': predecessor_losses[0],
        'last_loss': float(successor_loss),
        'predecessor_losses': predecessor_losses,
        'theseus_losses': theseus_losses,
        'predecessor_accuracy': float(predecessor_accuracy),
        'successor_accuracy': float(successor_accuracy),
        'check_predecessor_learns': bool(predecessor_losses[-1] < 0.75 * predecessor_losses[0]),
        # three topics: chance is 1/3; runs measured 0.80 to 1.0
        'check_successor_learns': bool(successor_accuracy > 0.6),
        'check_names_prefixed': all(
            layer.name.startswith('Successor-') for layer in successor.model.layers
        ),
    }))
