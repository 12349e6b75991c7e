#! -*- coding: utf-8 -*-
# A language model from BERT (application='lm': each position sees only those before
# it), trained on short sentences and sampled from with nucleus sampling.

import json
import os

import numpy as np
from kerasbert.backend import K, keras
from kerasbert.layers import Loss
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import AutoRegressiveDecoder, DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer, load_vocab
from keras.models import Model

maxlen = 24
batch_size = 16
steps_per_epoch = 12
epochs = 8

config_path = 'chinese_tiny/bert_config.json'
checkpoint_path = 'chinese_tiny/bert_model.ckpt'
dict_path = 'chinese_tiny/vocab.txt'

# Sentences of a small grammar: who, does what, to what, and a full stop.
subjects = [u'小猫', u'小狗', u'妈妈', u'老师']
verbs = [u'喜欢', u'看见', u'想要']
objects = [u'苹果', u'大海', u'月亮', u'书本']


def write_corpus_and_model():
    """The novel, and a stand-in for a downloaded BERT saved as a Google checkpoint."""
    os.makedirs('chinese_tiny', exist_ok=True)
    rng = np.random.RandomState(8)
    with open('novel.txt', 'w', encoding='utf-8') as f:
        for _ in range(400):
            f.write(u'%s%s%s。\n' % (subjects[rng.randint(4)], verbs[rng.randint(3)],
                                    objects[rng.randint(4)]))
    chars = sorted(set(u''.join(subjects + verbs + objects) + u'。'))
    tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '[unused1]'] + chars
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
            'hidden_dropout_prob': 0.1,
            'attention_probs_dropout_prob': 0.1,
            'max_position_embeddings': 64,
            'type_vocab_size': 2,
            'initializer_range': 0.02,
        }, f)
    build_transformer_model(
        config_path, with_mlm=True, return_keras_model=False
    ).save_weights_as_checkpoint(checkpoint_path)


keras.utils.set_random_seed(6)  # before the stand-in checkpoint's random weights
write_corpus_and_model()

# Two or three sentences to a sample.
sentences = [l.strip() for l in open('novel.txt', encoding='utf-8')]
data = [u''.join(sentences[i:i + 2 + i % 2]) for i in range(0, len(sentences) - 3, 3)]

token_dict, keep_tokens = load_vocab(
    dict_path=dict_path,
    simplified=True,
    startswith=['[PAD]', '[UNK]', '[CLS]', '[SEP]'],
)
tokenizer = Tokenizer(token_dict, do_lower_case=True)


class data_generator(DataGenerator):
    """Token ids of each text; no targets (the loss is in the model)."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids = [], []
        for is_end, text in self.sample(random):
            token_ids, segment_ids = tokenizer.encode(text, maxlen=maxlen)
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                yield [batch_token_ids, batch_segment_ids], None
                batch_token_ids, batch_segment_ids = [], []


class CrossEntropy(Loss):
    """Cross entropy of the next token, the padding left out."""
    def compute_loss(self, inputs, mask=None):
        y_true, y_pred = inputs
        if mask[1] is None:
            y_mask = 1.0
        else:
            y_mask = K.cast(mask[1], K.floatx())[:, 1:]
        y_true = y_true[:, 1:]  # the token each position should predict
        y_pred = y_pred[:, :-1]  # predictions, one step behind
        loss = K.sparse_categorical_crossentropy(y_true, y_pred)
        loss = K.sum(loss * y_mask) / K.sum(y_mask)
        return loss


model = build_transformer_model(
    config_path,
    checkpoint_path,
    application='lm',
    keep_tokens=keep_tokens,
)

output = CrossEntropy(1)([model.inputs[0], model.outputs[0]])

model = Model(model.inputs, output)
model.compile(optimizer=Adam(2e-3))
model.summary()


class StoryCompletion(AutoRegressiveDecoder):
    """Continues a text by nucleus sampling."""
    @AutoRegressiveDecoder.wraps(default_rtype='probas')
    def predict(self, inputs, output_ids, states):
        token_ids = inputs[0]
        token_ids = np.concatenate([token_ids, output_ids], 1)
        segment_ids = np.zeros_like(token_ids)
        return self.last_token(model).predict([token_ids, segment_ids], verbose=0)

    def generate(self, text, n=1, topp=0.95):
        token_ids, _ = tokenizer.encode(text)
        results = self.random_sample([token_ids[:-1]], n, topp=topp)
        return [text + tokenizer.decode(ids) for ids in results]


story_completion = StoryCompletion(
    start_id=None, end_id=tokenizer._token_end_id, maxlen=8
)


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
    train_generator = data_generator(data, batch_size)

    model.fit(
        train_generator.forfit(),
        steps_per_epoch=steps_per_epoch,
        epochs=epochs,
        callbacks=[evaluator],
        verbose=2,
    )

    completions = story_completion.generate(u'小猫喜欢', n=4)
    print(u'\n'.join(completions))
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'vocab_size': len(token_dict),
        'completions': completions,
    }, ensure_ascii=False))
