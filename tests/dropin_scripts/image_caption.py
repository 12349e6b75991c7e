#! -*- coding: utf-8 -*-
# Image captions: the features a small CNN computes from an image steer every layer norm of
# a BERT language model (layer_norm_cond, through a hidden dense layer of the condition),
# which writes the caption; CNN and BERT are trained together. The images are tiny
# synthetic pictures of a coloured shape, the captions say which.

import json
import os

import numpy as np
from kerasbert.backend import K, keras
from kerasbert.layers import Loss
from kerasbert.models import build_transformer_model
from kerasbert.optimizers import Adam
from kerasbert.snippets import AutoRegressiveDecoder, DataGenerator, open, sequence_padding
from kerasbert.tokenizers import Tokenizer, load_vocab
from keras.layers import Conv2D, GlobalAveragePooling2D, Input, MaxPooling2D
from keras.models import Model

maxlen = 16
batch_size = 16
steps_per_epoch = 12
epochs = 16
img_size = 16

config_path = 'chinese_tiny/bert_config.json'
checkpoint_path = 'chinese_tiny/bert_model.ckpt'
dict_path = 'chinese_tiny/vocab.txt'

colors = {u'红': (1.0, 0.1, 0.1), u'绿': (0.1, 0.9, 0.2), u'蓝': (0.1, 0.3, 1.0)}
shapes = [u'方块', u'横线', u'竖线']


def draw(color, shape, rng):
    """A noisy dark picture with one shape of one colour, somewhere."""
    image = rng.uniform(0, 0.2, (img_size, img_size, 3))
    top, left = rng.randint(2, 7), rng.randint(2, 7)
    if shape == u'方块':
        rows, cols = slice(top, top + 7), slice(left, left + 7)
    elif shape == u'横线':
        rows, cols = slice(top + 3, top + 5), slice(1, img_size - 1)
    else:
        rows, cols = slice(1, img_size - 1), slice(left + 3, left + 5)
    image[rows, cols] = colors[color]
    return image.astype('float32')


def caption(color, shape):
    return u'一个%s色的%s' % (color, shape)


def write_data_and_model():
    """Pictures with their captions, and a stand-in for a downloaded BERT saved as a Google
    checkpoint."""
    os.makedirs('chinese_tiny', exist_ok=True)
    rng = np.random.RandomState(3)
    pairs = [(c, s) for c in sorted(colors) for s in shapes]
    # The last three: held out, each colour and shape once.
    picked = [pairs[i] for i in rng.randint(len(pairs), size=240)] + pairs[::4]
    images = np.stack([draw(c, s, rng) for c, s in picked])
    np.save('images.npy', images)
    with open('captions.txt', 'w', encoding='utf-8') as f:
        f.write(u'\n'.join(caption(c, s) for c, s in picked) + u'\n')
    chars = sorted(set(u''.join(caption(c, s) for c, s in pairs)))
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


keras.utils.set_random_seed(4)  # before the stand-in checkpoint's random weights
write_data_and_model()

images = np.load('images.npy')
captions = [l.strip() for l in open('captions.txt', encoding='utf-8')]
train_data = list(zip(images[:-3], captions[:-3]))
valid_data = list(zip(images[-3:], captions[-3:]))

token_dict, keep_tokens = load_vocab(
    dict_path=dict_path,
    simplified=True,
    startswith=['[PAD]', '[UNK]', '[CLS]', '[SEP]'],
)
tokenizer = Tokenizer(token_dict, do_lower_case=True)


class data_generator(DataGenerator):
    """Caption token ids and the picture; no targets (the loss is in the model)."""
    def __iter__(self, random=False):
        batch_images, batch_token_ids, batch_segment_ids = [], [], []
        for is_end, (image, text) in self.sample(random):
            token_ids, segment_ids = tokenizer.encode(text, maxlen=maxlen)
            batch_images.append(image)
            batch_token_ids.append(token_ids)
            batch_segment_ids.append(segment_ids)
            if len(batch_token_ids) == self.batch_size or is_end:
                batch_images = np.array(batch_images)
                batch_token_ids = sequence_padding(batch_token_ids)
                batch_segment_ids = sequence_padding(batch_segment_ids)
                yield [batch_token_ids, batch_segment_ids, batch_images], None
                batch_images, batch_token_ids, batch_segment_ids = [], [], []


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


# The image model: a small CNN in place of a pretrained one (MobileNetV2 in the original).
image_in = Input(shape=(img_size, img_size, 3))
x = Conv2D(16, 3, padding='same', activation='relu')(image_in)
x = MaxPooling2D()(x)
x = Conv2D(16, 3, padding='same', activation='relu')(x)
image_features = GlobalAveragePooling2D()(x)
image_model = Model(image_in, image_features)

# The BERT: the image's features steer every LayerNormalization.
model = build_transformer_model(
    config_path,
    checkpoint_path,
    application='lm',
    keep_tokens=keep_tokens,
    layer_norm_cond=image_model.output,
    layer_norm_cond_hidden_size=16,
    layer_norm_cond_hidden_act='swish',
    additional_input_layers=image_model.input,
)

output = CrossEntropy(1)([model.inputs[0], model.outputs[0]])

model = Model(model.inputs, output)
model.compile(optimizer=Adam(5e-3))
model.summary()


class AutoCaption(AutoRegressiveDecoder):
    """Beam search over the caption, token by token."""
    @AutoRegressiveDecoder.wraps(default_rtype='probas')
    def predict(self, inputs, output_ids, states):
        image = inputs[0]
        token_ids = output_ids
        segment_ids = np.zeros_like(token_ids)
        return self.last_token(model).predict([token_ids, segment_ids, image], verbose=0)

    def generate(self, image, topk=1):
        output_ids = self.beam_search([image], topk=topk)
        return tokenizer.decode(output_ids)


autocaption = AutoCaption(
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
    train_generator = data_generator(train_data, batch_size)

    model.fit(
        train_generator.forfit(),
        steps_per_epoch=steps_per_epoch,
        epochs=epochs,
        callbacks=[evaluator],
        verbose=2,
    )

    right = 0.
    for image, text in valid_data:
        generated = autocaption.generate(image, topk=2)
        print(u'%s -> %s' % (text, generated))
        right += generated == text
    # The same caption prefix on two pictures (a red square, a blue vertical line): the
    # picture steers the next token.
    token_ids, _ = tokenizer.encode(u'一个')
    token_ids = np.array([token_ids[:-1]] * 2)
    pictures = np.stack([valid_data[0][0], valid_data[-1][0]])
    probas = model.predict([token_ids, np.zeros_like(token_ids), pictures], verbose=0)
    print(json.dumps({
        'first_loss': evaluator.losses[0],
        'last_loss': evaluator.losses[-1],
        'vocab_size': len(token_dict),
        'exact_match': right / len(valid_data),
        'check_the_picture_steers_the_model': float(np.abs(probas[0] - probas[1]).max()) > 1e-3,
    }, ensure_ascii=False))
