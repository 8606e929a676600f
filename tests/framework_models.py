"""Tiny JAX / Flax models for the exporter-frontend tests, through the ``jax:module:callable``
spec (each callable returns ``(function, example_inputs)``). Imported only when the jax extra
is installed."""

from __future__ import annotations


def tiny_flax_cnn():
    """Conv(3→4, 3×3, SAME) → ReLU → global mean → Dense(4→2), on 2 images of 3×8×8 (NCHW in,
    transposed to Flax's NHWC inside)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    class Net(nnx.Module):
        def __init__(self, rngs: nnx.Rngs):
            self.conv = nnx.Conv(3, 4, kernel_size=(3, 3), padding="SAME", rngs=rngs)
            self.fc = nnx.Linear(4, 2, rngs=rngs)

        def __call__(self, x):
            x = jnp.transpose(x, (0, 2, 3, 1))
            x = nnx.relu(self.conv(x))
            return self.fc(jnp.mean(x, axis=(1, 2)))

    return Net(nnx.Rngs(0)), (jax.ShapeDtypeStruct((2, 3, 8, 8), jnp.float32),)


def tiny_jax_mlp():
    """A plain JAX function (no Flax) closing over its weights: x @ W1 → tanh → @ W2."""
    import jax
    import jax.numpy as jnp

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    w1, w2 = jax.random.normal(k1, (16, 32)), jax.random.normal(k2, (32, 4))

    def mlp(x):
        return jnp.tanh(x @ w1) @ w2

    return mlp, ((3, 16),)


def not_a_pair():
    """A broken factory (returns one thing): the spec error test."""
    return 42
