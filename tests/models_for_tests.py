"""Tiny models used by tests through the ``module.path:callable`` spec."""

from torch import nn


def tiny_cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2))


def linear_4096() -> nn.Module:
    """One ``nn.Linear(4096, 4096)`` (32 MiB of fp16 weights)."""
    return nn.Linear(4096, 4096)
