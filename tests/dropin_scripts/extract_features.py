#! -*- coding: utf-8 -*-
# Feature extraction: a BERT loaded from a Google checkpoint encodes sentences; the
# model is saved and loaded back; a small classifier is then trained on the frozen
# sentence features (the mean of the token vectors).

import json
import os

import numpy as np
from kerasbert.backend import keras
from kerasbert.models import build_transformer_model
from kerasbert.snippets import sequence_padding, to_array
from kerasbert.tokenizers import Tokenizer

config_path = 'chinese_tiny/bert_config.json'
checkpoint_path = 'chinese_tiny/bert_model.ckpt'
dict_path = 'chinese_tiny/vocab.txt'

# Sentences about animals or about food, to tell apart from their features.
animals = list('猫狗鸟鱼马牛羊')
foods = list('饭面米菜肉汤饼')
others = list('我你他看吃有很多小大')


def write_model():
    """A stand-in for a downloaded Chinese BERT: a random one saved as a checkpoint."""
    os.makedirs('chinese_tiny', exist_ok=True)
    chars = sorted(set(animals + foods + others))
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
    keras.utils.set_random_seed(0)
    build_transformer_model(
        config_path, return_keras_model=False
    ).save_weights_as_checkpoint(checkpoint_path)


write_model()
tokenizer = Tokenizer(dict_path, do_lower_case=True)
model = build_transformer_model(config_path, checkpoint_path)

token_ids, segment_ids = tokenizer.encode(u'我看小猫吃鱼')
token_ids, segment_ids = to_array([token_ids], [segment_ids])
features = model.predict([token_ids, segment_ids])
print(features)

model.save('test.keras')  # Keras 3: a whole model is saved to a .keras file
del model
model = keras.models.load_model('test.keras')
reloaded = model.predict([token_ids, segment_ids])
print(np.abs(reloaded - features).max())

# Frozen features of a small labelled set, and a logistic regression on top of them.
rng = np.random.RandomState(9)
texts, labels = [], []
for _ in range(128):
    label = rng.randint(2)
    words = list(rng.choice(others, rng.randint(3, 8)))
    words.insert(rng.randint(len(words) + 1), rng.choice(foods if label else animals))
    texts.append(u''.join(words))
    labels.append(label)
X, S = [], []
for text in texts:
    x, s = tokenizer.encode(text)
    X.append(x)
    S.append(s)
X = sequence_padding(X)
S = sequence_padding(S)
mask = (X > 0)[:, :, None]
sentence_features = (model.predict([X, S], verbose=0) * mask).sum(axis=1) / mask.sum(axis=1)

classifier = keras.models.Sequential([
    keras.layers.Input(shape=(sentence_features.shape[1],)),
    keras.layers.Dense(1, activation='sigmoid'),
])
classifier.compile(loss='binary_crossentropy', optimizer=keras.optimizers.Adam(0.05),
                   metrics=['accuracy'])
history = classifier.fit(sentence_features, np.array(labels), epochs=60, batch_size=32, verbose=0)

print(json.dumps({
    'first_loss': float(history.history['loss'][0]),
    'last_loss': float(history.history['loss'][-1]),
    'accuracy': float(history.history['accuracy'][-1]),
    'reload_max_abs_diff': float(np.abs(reloaded - features).max()),
}))
