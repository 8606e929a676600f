"""The architectures of ``benchmarks/frameworks_report.py`` that a framework's own model zoo does
not provide, written with that framework's standard layers (random init, nothing downloaded):

* **JAX / Flax NNX** has no model zoo: :func:`flax_resnet50` (torchvision's ResNet-50, v1.5:
  stride on the 3×3 convolution), :func:`flax_mobilenet_v2` (torchvision's MobileNetV2) and
  :func:`flax_bert_base` (Hugging Face's ``BertModel`` for bert-base-uncased: embeddings, 12
  post-norm encoder layers with ``nnx.MultiHeadAttention``, exact GELU, the pooler);
* **Keras** ships no BERT in ``keras.applications``: :func:`keras_bert_base` (the same encoder
  with ``keras.layers.MultiHeadAttention``);
* **PaddlePaddle** ships its encoder as ``paddle.nn.TransformerEncoder``:
  :func:`paddle_bert_base` puts BERT's embeddings and pooler around it;
* **PyTorch**: :func:`torch_resnet50_v1` is torchvision's ResNet-50 with the stride moved to the
  first 1×1 convolution of each stage (ResNet-50 v1, the layout of
  ``keras.applications.ResNet50``), to compare Keras with the same architecture.

Image models take ``N,C,H,W`` (the Flax ones transpose to Flax's ``N,H,W,C`` inside); BERT
models take token ids ``N,L`` and return ``(last_hidden_state, pooler_output)`` like
``BertModel``. Sizes are bert-base-uncased's (vocabulary 30522, 512 positions, 2 token types,
hidden 768, 12 layers, 12 heads, intermediate 3072).
"""

from __future__ import annotations

#: bert-base-uncased's sizes.
BERT = {"vocab": 30522, "positions": 512, "types": 2, "hidden": 768, "layers": 12, "heads": 12,
        "intermediate": 3072}

#: torchvision's MobileNetV2 inverted-residual settings: (expansion, channels, repeats, stride).
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))


# ---------------------------------------------------------------------------------- PyTorch


def torch_resnet50_v1(device: str = "meta"):
    """torchvision's ResNet-50 with each stage's stride on the first 1×1 convolution (v1)."""
    import torch
    import torchvision

    with torch.device(device):
        model = torchvision.models.resnet50(weights=None)
    for layer in (model.layer1, model.layer2, model.layer3, model.layer4):
        block = layer[0]
        block.conv1.stride, block.conv2.stride = block.conv2.stride, (1, 1)
    return model.eval()


# ---------------------------------------------------------------------------------- Flax


def _flax():
    import jax
    import jax.numpy as jnp
    from flax import nnx

    return jax, jnp, nnx


def flax_resnet50(batch: int = 1, side: int = 224):
    """``(model, example_inputs)``: ResNet-50 v1.5 in Flax NNX, BatchNorm in inference mode."""
    jax, jnp, nnx = _flax()

    def bn(c, rngs):
        return nnx.BatchNorm(c, use_running_average=True, rngs=rngs)

    class Bottleneck(nnx.Module):
        def __init__(self, cin, width, stride, rngs):
            self.conv1 = nnx.Conv(cin, width, (1, 1), use_bias=False, rngs=rngs)
            self.bn1 = bn(width, rngs)
            self.conv2 = nnx.Conv(width, width, (3, 3), strides=stride, padding=((1, 1), (1, 1)),
                                  use_bias=False, rngs=rngs)
            self.bn2 = bn(width, rngs)
            self.conv3 = nnx.Conv(width, width * 4, (1, 1), use_bias=False, rngs=rngs)
            self.bn3 = bn(width * 4, rngs)
            self.has_down = stride != 1 or cin != width * 4
            if self.has_down:
                self.down = nnx.Conv(cin, width * 4, (1, 1), strides=stride, use_bias=False,
                                     rngs=rngs)
                self.down_bn = bn(width * 4, rngs)

        def __call__(self, x):
            y = nnx.relu(self.bn1(self.conv1(x)))
            y = nnx.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            short = self.down_bn(self.down(x)) if self.has_down else x
            return nnx.relu(y + short)

    class ResNet50(nnx.Module):
        def __init__(self, rngs):
            self.stem = nnx.Conv(3, 64, (7, 7), strides=2, padding=((3, 3), (3, 3)),
                                 use_bias=False, rngs=rngs)
            self.stem_bn = bn(64, rngs)
            blocks, cin = [], 64
            for width, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(n):
                    blocks.append(Bottleneck(cin, width, stride if i == 0 else 1, rngs))
                    cin = width * 4
            self.blocks = nnx.List(blocks)
            self.fc = nnx.Linear(2048, 1000, rngs=rngs)

        def __call__(self, x):
            x = jnp.transpose(x, (0, 2, 3, 1))
            x = nnx.relu(self.stem_bn(self.stem(x)))
            # SAME: the 56×56 of torchvision's padding 1 (jax2onnx takes string paddings)
            x = nnx.max_pool(x, window_shape=(3, 3), strides=(2, 2), padding="SAME")
            for block in self.blocks:
                x = block(x)
            return self.fc(jnp.mean(x, axis=(1, 2)))

    return ResNet50(nnx.Rngs(0)), (jax.ShapeDtypeStruct((batch, 3, side, side), jnp.float32),)


def flax_mobilenet_v2(batch: int = 1, side: int = 224):
    """``(model, example_inputs)``: torchvision's MobileNetV2 in Flax NNX (inference mode)."""
    jax, jnp, nnx = _flax()

    def conv_bn(cin, cout, k, stride, groups, rngs):
        pad = (k - 1) // 2
        return nnx.List([nnx.Conv(cin, cout, (k, k), strides=stride,
                                  padding=((pad, pad), (pad, pad)), feature_group_count=groups,
                                  use_bias=False, rngs=rngs),
                         nnx.BatchNorm(cout, use_running_average=True, rngs=rngs)])

    class Inverted(nnx.Module):
        def __init__(self, cin, cout, stride, expand, rngs):
            hidden = cin * expand
            self.has_expand = expand != 1
            if self.has_expand:
                self.expand = conv_bn(cin, hidden, 1, 1, 1, rngs)
            self.dw = conv_bn(hidden, hidden, 3, stride, hidden, rngs)
            self.project = conv_bn(hidden, cout, 1, 1, 1, rngs)
            self.residual = stride == 1 and cin == cout

        def __call__(self, x):
            y = x
            if self.has_expand:
                y = nnx.relu6(self.expand[1](self.expand[0](y)))
            y = nnx.relu6(self.dw[1](self.dw[0](y)))
            y = self.project[1](self.project[0](y))
            return x + y if self.residual else y

    class MobileNetV2(nnx.Module):
        def __init__(self, rngs):
            self.stem = conv_bn(3, 32, 3, 2, 1, rngs)
            blocks, cin = [], 32
            for t, c, n, s in MOBILENET_V2:
                for i in range(n):
                    blocks.append(Inverted(cin, c, s if i == 0 else 1, t, rngs))
                    cin = c
            self.blocks = nnx.List(blocks)
            self.last = conv_bn(cin, 1280, 1, 1, 1, rngs)
            self.fc = nnx.Linear(1280, 1000, rngs=rngs)

        def __call__(self, x):
            x = jnp.transpose(x, (0, 2, 3, 1))
            x = nnx.relu6(self.stem[1](self.stem[0](x)))
            for block in self.blocks:
                x = block(x)
            x = nnx.relu6(self.last[1](self.last[0](x)))
            return self.fc(jnp.mean(x, axis=(1, 2)))

    return MobileNetV2(nnx.Rngs(0)), (jax.ShapeDtypeStruct((batch, 3, side, side), jnp.float32),)


def flax_bert_base(batch: int = 1, seq_len: int = 128):
    """``(model, example_inputs)``: a bert-base encoder (``BertModel``) in Flax NNX."""
    jax, jnp, nnx = _flax()
    b = BERT

    def gelu(x):
        return jax.nn.gelu(x, approximate=False)  # BERT's exact (erf) GELU

    class Layer(nnx.Module):
        def __init__(self, rngs):
            h = b["hidden"]
            self.attn = nnx.MultiHeadAttention(b["heads"], h, h, h, decode=False,
                                               deterministic=True, rngs=rngs)
            self.ln1 = nnx.LayerNorm(h, epsilon=1e-12, rngs=rngs)
            self.fc1 = nnx.Linear(h, b["intermediate"], rngs=rngs)
            self.fc2 = nnx.Linear(b["intermediate"], h, rngs=rngs)
            self.ln2 = nnx.LayerNorm(h, epsilon=1e-12, rngs=rngs)

        def __call__(self, x):
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.fc2(gelu(self.fc1(x))))

    class Bert(nnx.Module):
        def __init__(self, rngs):
            h = b["hidden"]
            self.word = nnx.Embed(b["vocab"], h, rngs=rngs)
            self.position = nnx.Embed(b["positions"], h, rngs=rngs)
            self.token_type = nnx.Embed(b["types"], h, rngs=rngs)
            self.ln = nnx.LayerNorm(h, epsilon=1e-12, rngs=rngs)
            self.layers = nnx.List([Layer(rngs) for _ in range(b["layers"])])
            self.pooler = nnx.Linear(h, h, rngs=rngs)

        def __call__(self, ids):
            n = ids.shape[1]
            x = self.word(ids) + self.position(jnp.arange(n)[None, :]) \
                + self.token_type(jnp.zeros_like(ids))
            x = self.ln(x)
            for layer in self.layers:
                x = layer(x)
            return x, jnp.tanh(self.pooler(x[:, 0]))

    return Bert(nnx.Rngs(0)), (jax.ShapeDtypeStruct((batch, seq_len), jnp.int32),)


# ---------------------------------------------------------------------------------- Keras


def keras_bert_base(keras, seq_len: int = 128):
    """A functional Keras bert-base encoder (``BertModel``): ``keras.layers.MultiHeadAttention``,
    exact GELU, post-norm; token ids in, ``[last_hidden_state, pooler_output]`` out."""
    b = BERT
    h = b["hidden"]

    class Embeddings(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.word = keras.layers.Embedding(b["vocab"], h)
            self.position = keras.layers.Embedding(b["positions"], h)
            self.token_type = keras.layers.Embedding(b["types"], h)

        def call(self, ids):
            positions = keras.ops.arange(keras.ops.shape(ids)[1])[None, :]
            return self.word(ids) + self.position(positions) \
                + self.token_type(keras.ops.zeros_like(ids))

    ids = keras.Input((seq_len,), dtype="int32", name="input_ids")
    x = keras.layers.LayerNormalization(epsilon=1e-12)(Embeddings()(ids))
    for _ in range(b["layers"]):
        a = keras.layers.MultiHeadAttention(b["heads"], h // b["heads"])(x, x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + a)
        f = keras.layers.Dense(b["intermediate"], activation="gelu")(x)
        f = keras.layers.Dense(h)(f)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + f)
    pooled = keras.layers.Dense(h, activation="tanh")(x[:, 0])
    return keras.Model(ids, [x, pooled], name="bert_base")


# ---------------------------------------------------------------------------------- Paddle


def paddle_bert_base(paddle):
    """A bert-base encoder (``BertModel``) around ``paddle.nn.TransformerEncoder`` (post-norm,
    exact GELU): token ids in, ``(last_hidden_state, pooler_output)`` out."""
    b = BERT
    nn = paddle.nn

    class Bert(nn.Layer):
        def __init__(self):
            super().__init__()
            h = b["hidden"]
            self.word = nn.Embedding(b["vocab"], h)
            self.position = nn.Embedding(b["positions"], h)
            self.token_type = nn.Embedding(b["types"], h)
            self.ln = nn.LayerNorm(h, epsilon=1e-12)
            layer = nn.TransformerEncoderLayer(h, b["heads"], b["intermediate"], dropout=0.1,
                                               activation="gelu", normalize_before=False)
            self.encoder = nn.TransformerEncoder(layer, b["layers"])
            self.pooler = nn.Linear(h, h)

        def forward(self, ids):
            positions = paddle.arange(ids.shape[1]).unsqueeze(0)
            x = self.word(ids) + self.position(positions) + self.token_type(
                paddle.zeros_like(ids))
            x = self.encoder(self.ln(x))
            return x, paddle.tanh(self.pooler(x[:, 0]))

    return Bert()
