#! -*- coding: utf-8 -*-
# SimBERT: one UniLM BERT both generates a paraphrase of a question (seq2seq) and, from
# its pooled [CLS] vector, retrieves the paraphrase among the batch (cosine similarity).
# A batch holds each pair twice, as (a, b) and (b, a), side by side.

import json

import numpy as np
from kerasbert.backend import K, keras
from kerasbert.layers import Loss
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam, extend_with_weight_decay
from kerasbert.snippets import AutoRegressiveDecoder, DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer

maxlen = 24
batch_size = 16
steps_per_epoch = 12
epochs = 10
config_path = 'bert_config.json'
dict_path = 'vocab.txt'

# Questions asking the same thing in different words.
groups = [
    [u'苹果多少钱', u'苹果怎么卖', u'苹果什么价'],
    [u'明天下雨吗', u'明天有雨吗', u'明天会下雨'],
    [u'车站在哪里', u'车站怎么走', u'去车站的路'],
    [u'你叫什么名', u'你的名字是', u'怎么称呼你'],
    [u'几点开门呢', u'什么时候开', u'开门时间是'],
    [u'能便宜点吗', u'可以打折吗', u'有优惠没有'],
]


def write_corpus():
    rng = np.random.RandomState(37)
    with open('synonyms.json', 'w', encoding='utf-8') as f:
        for _ in range(192):
            group = groups[rng.randint(len(groups))]
            a, b = rng.choice(len(group), 2, replace=False)
            f.write(json.dumps({'text': group[a], 'synonyms': [group[b]]},
                               ensure_ascii=False) + '\n')
    chars = sorted(set(u''.join(sum(groups, []))))
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


def read_corpus():
    while True:
        with open('synonyms.json', encoding='utf-8') as f:
            for l in f:
                yield json.loads(l)


write_corpus()
keras.utils.set_random_seed(12)
tokenizer = Tokenizer(dict_path, do_lower_case=True)


class data_generator(DataGenerator):
    """Each pair as (text, synonym) then (synonym, text); no targets."""
    def __iter__(self, random=False):
        batch_token_ids, batch_segment_ids = [], []
        for is_end, d in self.sample(random):
            text, synonym = d['text'], np.random.choice(d['synonyms'])
            token_ids, segment_ids = tokenizer.encode(text, synonym, maxlen=maxlen)
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            token_ids, segment_ids = tokenizer.encode(synonym, text, maxlen=maxlen)
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                yield [batch_token_ids, batch_segment_ids], None
                batch_token_ids, batch_segment_ids = [], []


class TotalLoss(Loss):
    """The seq2seq loss plus the similarity loss."""
    def compute_loss(self, inputs, mask=None):
        loss1 = self.compute_loss_of_seq2seq(inputs, mask)
        loss2 = self.compute_loss_of_similarity(inputs, mask)
        # Keras 3: layers have no add_metric; the two parts are not logged apart
        return loss1 + loss2

    def compute_loss_of_seq2seq(self, inputs, mask=None):
        y_true, y_mask, _, y_pred = inputs
        y_true = y_true[:, 1:]  # the token each position should predict
        y_mask = y_mask[:, 1:]  # segment ids: 1 on the part to generate
        y_pred = y_pred[:, :-1]  # predictions, one step behind
        loss = K.sparse_categorical_crossentropy(y_true, y_pred)
        loss = K.sum(loss * y_mask) / K.sum(y_mask)
        return loss

    def compute_loss_of_similarity(self, inputs, mask=None):
        _, _, y_pred, _ = inputs
        y_true = self.get_labels_of_similarity(y_pred)  # the other sample of the pair
        y_pred = K.l2_normalize(y_pred, axis=1)
        similarities = K.dot(y_pred, K.transpose(y_pred))
        similarities = similarities - K.eye(K.shape(y_pred)[0]) * 1e12  # not itself
        similarities = similarities * 20  # scale
        loss = K.categorical_crossentropy(y_true, similarities, from_logits=True)
        return loss

    def get_labels_of_similarity(self, y_pred):
        idxs = K.arange(0, K.shape(y_pred)[0])
        idxs_1 = idxs[None, :]
        idxs_2 = (idxs + 1 - idxs % 2 * 2)[:, None]
        labels = K.equal(idxs_1, idxs_2)
        labels = K.cast(labels, K.floatx())
        return labels


bert = build_transformer_model(
    config_path,
    with_pool='linear',
    application='unilm',
    return_keras_model=False,
)

encoder = keras.models.Model(bert.model.inputs, bert.model.outputs[0])
seq2seq = keras.models.Model(bert.model.inputs, bert.model.outputs[1])

outputs = TotalLoss([2, 3])(bert.model.inputs + bert.model.outputs)
model = keras.models.Model(bert.model.inputs, outputs)

AdamW = extend_with_weight_decay(Adam, 'AdamW')
optimizer = AdamW(learning_rate=2e-3, weight_decay_rate=0.01)
model.compile(optimizer=optimizer)
model.summary()


class SynonymsGenerator(AutoRegressiveDecoder):
    """Paraphrases by sampling."""
    @AutoRegressiveDecoder.wraps(default_rtype='probas')
    def predict(self, inputs, output_ids, states):
        token_ids, segment_ids = inputs
        token_ids = np.concatenate([token_ids, output_ids], 1)
        segment_ids = np.concatenate([segment_ids, np.ones_like(output_ids)], 1)
        return self.last_token(seq2seq).predict([token_ids, segment_ids], verbose=0)

    def generate(self, text, n=1, topp=0.95):
        token_ids, segment_ids = tokenizer.encode(text, maxlen=maxlen)
        output_ids = self.random_sample([token_ids, segment_ids], n, topp=topp)
        return [tokenizer.decode(ids) for ids in output_ids]


synonyms_generator = SynonymsGenerator(
    start_id=None, end_id=tokenizer._token_end_id, maxlen=8
)


def most_similar(text, candidates):
    """candidates sorted by the cosine of their encoding with text's."""
    X, S = [], []
    for t in [text] + candidates:
        x, s = tokenizer.encode(t)
        X.append(x)
        S.append(s)
    X = sequence_padding(X)
    S = sequence_padding(S)
    Z = encoder.predict([X, S], verbose=0)
    Z /= (Z**2).sum(axis=1, keepdims=True)**0.5
    argsort = np.dot(Z[1:], -Z[0]).argsort()
    return [candidates[i] for i in argsort]


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

    train_generator = data_generator(read_corpus(), batch_size)
    evaluator = Evaluator()

    model.fit(
        train_generator.forfit(),
        steps_per_epoch=steps_per_epoch,
        epochs=epochs,
        callbacks=[evaluator],
        verbose=2,
    )

    print(synonyms_generator.generate(u'苹果多少钱', n=3))
    # Retrieval: is a question's nearest other question one of its group?
    questions = sum(groups, [])
    right = 0.
    for i, q in enumerate(questions):
        nearest = most_similar(q, questions[:i] + questions[i + 1:])[0]
        right += any(q in g and nearest in g for g in groups)
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'retrieval_accuracy': right / len(questions),
    }))
