"""The six training workloads of the Zeus power traces (NSDI'23, ``../shared/data/zeus-power/``)
as perfcast models — callables for ``module:`` specs (``perfcast.zoo.zeus:<name>``), so their
graphs, FLOPs and bytes feed the power model (:mod:`perfcast.energy`) like any other model's.

The traces name a network and a dataset, not code; each model is written to its paper's
description (and the common PyTorch implementation of it), on float inputs of the shape
perfcast gives a ``module:`` model (``--input-size``); integer inputs (token ids, user / item
ids) are made from them inside the model (``abs().long() % size``: a cast and a remainder,
nothing a graph would count):

=========================  ===========================================================  ==========
Zeus (dataset, network)    perfcast spec, input per sample                              what it is
=========================  ===========================================================  ==========
cifar100, shufflenetv2     ``perfcast.zoo.zeus:shufflenetv2_cifar100``, ``3,32,32``      torchvision ShuffleNetV2 1.0× with the CIFAR stem of the
                                                                                        common CIFAR-100 code (3×3 stride-1 conv, no max-pool), 100 classes
imagenet, resnet50         ``torchvision:resnet50``, ``3,224,224``                      torchvision ResNet-50
librispeech, deepspeech2   ``perfcast.zoo.zeus:deepspeech2``, ``1,161,1270``            DeepSpeech2 (Amodei et al. 2016) as deepspeech.pytorch: two
                                                                                        convs, 5 bidirectional LSTM layers of 1024, 29 characters;
                                                                                        161 spectrogram bins, 1,270 frames = the mean utterance of
                                                                                        LibriSpeech train-clean-100 (12.7 s at a 10 ms hop)
movielens-1m, ncf          ``perfcast.zoo.zeus:ncf_movielens``, ``1,2``                 NeuMF (He et al. 2017): GMF + MLP, 32 factors, 3 MLP layers,
                                                                                        6,040 users × 3,706 items
squad, bert_base_uncased   ``perfcast.zoo.zeus:bert_base_squad``, ``1,384``             BERT-base uncased with the question-answering head, 384 tokens
sentiment140, bert_base…   ``perfcast.zoo.zeus:bert_base_sentiment140``, ``1,128``      BERT-base uncased with a 2-class sequence-classification head,
                                                                                        128 tokens
=========================  ===========================================================  ==========

:data:`ZEUS_WORKLOADS` holds that table with each dataset's samples per epoch (how a trace's
time per epoch becomes a time per step).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ZeusWorkload:
    """One Zeus workload: its ``dataset`` / ``network`` as the traces name them, the perfcast
    ``spec`` and per-sample ``input_size`` (or ``seq_len`` for ``hf``-style token models built
    here), ``samples_per_epoch`` (training samples one epoch visits) and where that number
    comes from (``samples_source``), and ``description``."""

    dataset: str
    network: str
    spec: str
    input_size: tuple[int, ...]
    samples_per_epoch: int
    samples_source: str
    description: str

    @property
    def name(self) -> str:
        return f"{self.network}/{self.dataset}"


ZEUS_WORKLOADS: tuple[ZeusWorkload, ...] = (
    ZeusWorkload("cifar100", "shufflenetv2", "perfcast.zoo.zeus:shufflenetv2_cifar100",
                 (3, 32, 32), 50_000, "CIFAR-100 training set",
                 "ShuffleNetV2 1.0x, CIFAR stem (3x3 stride-1 conv, no max-pool), 100 classes"),
    ZeusWorkload("imagenet", "resnet50", "torchvision:resnet50", (3, 224, 224), 1_281_167,
                 "ImageNet-1k training set", "torchvision ResNet-50"),
    ZeusWorkload("librispeech", "deepspeech2", "perfcast.zoo.zeus:deepspeech2", (1, 161, 1270),
                 28_539, "LibriSpeech train-clean-100 utterances (the epoch times imply the "
                 "100-hour subset, not the 960-hour one)",
                 "DeepSpeech2: 2 convs, 5 bidirectional LSTM(1024), 29 characters"),
    ZeusWorkload("movielens-1m", "ncf", "perfcast.zoo.zeus:ncf_movielens", (1, 2), 4_970_845,
                 "MovieLens-1M: 994,169 training ratings + 4 sampled negatives each (NCF's "
                 "protocol)", "NeuMF: GMF + 3-layer MLP, 32 factors"),
    ZeusWorkload("squad", "bert_base_uncased", "perfcast.zoo.zeus:bert_base_squad", (1, 384),
                 88_524, "SQuAD v1.1 training features at 384 tokens, stride 128 (Hugging "
                 "Face run_qa with bert-base-uncased)", "BERT-base uncased, QA head, 384 tokens"),
    ZeusWorkload("sentiment140", "bert_base_uncased", "perfcast.zoo.zeus:bert_base_sentiment140",
                 (1, 128), 1_600_000, "Sentiment140 training tweets",
                 "BERT-base uncased, 2-class head, 128 tokens"),
)


def zeus_workload(dataset: str, network: str) -> ZeusWorkload:
    """The :class:`ZeusWorkload` of a trace row (``KeyError`` for an unknown pair)."""
    for w in ZEUS_WORKLOADS:
        if (w.dataset, w.network) == (dataset, network):
            return w
    raise KeyError(f"no Zeus workload for {dataset}/{network}")


# --------------------------------------------------------------------------- models
def _ids(x: torch.Tensor, size: int) -> torch.Tensor:
    """Integer ids in ``[0, size)`` from a float input (the inputs a ``module:`` model gets)."""
    return x.abs().long() % size


def shufflenetv2_cifar100() -> nn.Module:
    """torchvision's ShuffleNetV2 1.0× for 32×32 CIFAR-100 images: the first conv 3×3 stride 1
    and no max-pool (as the CIFAR code Zeus trains), 100 classes."""
    import torchvision

    m = torchvision.models.shufflenet_v2_x1_0(weights=None, num_classes=100)
    m.conv1[0] = nn.Conv2d(3, 24, kernel_size=3, stride=1, padding=1, bias=False)
    m.maxpool = nn.Identity()
    return m


class _BatchRNN(nn.Module):
    def __init__(self, inp: int, hidden: int, norm: bool):
        super().__init__()
        self.norm = nn.BatchNorm1d(inp) if norm else None
        self.rnn = nn.LSTM(inp, hidden, bidirectional=True, batch_first=True)
        self.hidden = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, T, C)
        if self.norm is not None:
            x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        x, _ = self.rnn(x)
        return x[..., :self.hidden] + x[..., self.hidden:]  # sum the two directions


class DeepSpeech2(nn.Module):
    """DeepSpeech2 as deepspeech.pytorch builds it: Conv2d(1→32, 41×11, stride 2×2) and
    Conv2d(32→32, 21×11, stride 2×1), each + BatchNorm + Hardtanh(0, 20); five bidirectional
    LSTM layers of ``hidden`` units (directions summed, BatchNorm before all but the first);
    BatchNorm + a bias-free linear layer to ``classes`` characters. Input ``(N, 1, 161, T)``:
    161 spectrogram bins (20 ms window at 16 kHz), T frames."""

    def __init__(self, freq: int = 161, hidden: int = 1024, layers: int = 5, classes: int = 29):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, (41, 11), stride=(2, 2), padding=(20, 5)), nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(32, 32, (21, 11), stride=(2, 1), padding=(10, 5)), nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True))
        f = (freq + 2 * 20 - 41) // 2 + 1
        f = (f + 2 * 10 - 21) // 2 + 1
        self.rnns = nn.ModuleList([_BatchRNN(32 * f if i == 0 else hidden, hidden, i > 0)
                                   for i in range(layers)])
        self.norm = nn.BatchNorm1d(hidden)
        self.fc = nn.Linear(hidden, classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)  # (N, 32, F', T')
        n, c, f, t = x.shape
        x = x.reshape(n, c * f, t).transpose(1, 2)  # (N, T', C·F')
        for rnn in self.rnns:
            x = rnn(x)
        x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        return self.fc(x)  # (N, T', classes); CTC loss in training


def deepspeech2() -> nn.Module:
    return DeepSpeech2()


class NeuMF(nn.Module):
    """NeuMF (He et al., WWW'17): GMF (element-wise product of ``factors``-wide user and item
    embeddings) beside an MLP on concatenated ``factors·2^(layers-1)``-wide embeddings
    (``layers`` halving Linear+ReLU layers), concatenated into one logit. Input ``(N, 2)``: user
    and item ids (as floats, see the module docstring; ``(N, 1, 2)`` too, what ``--input-size
    1,2`` gives)."""

    def __init__(self, users: int = 6040, items: int = 3706, factors: int = 32, layers: int = 3):
        super().__init__()
        self.users, self.items = users, items
        width = factors * 2 ** (layers - 1)
        self.gmf_user, self.gmf_item = nn.Embedding(users, factors), nn.Embedding(items, factors)
        self.mlp_user, self.mlp_item = nn.Embedding(users, width), nn.Embedding(items, width)
        mlp: list[nn.Module] = []
        size = 2 * width
        for _ in range(layers):
            mlp += [nn.Dropout(0.0), nn.Linear(size, size // 2), nn.ReLU()]
            size //= 2
        self.mlp = nn.Sequential(*mlp)
        self.predict = nn.Linear(factors + size, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], -1)
        u, i = _ids(x[:, 0], self.users), _ids(x[:, 1], self.items)
        gmf = self.gmf_user(u) * self.gmf_item(i)
        mlp = self.mlp(torch.cat([self.mlp_user(u), self.mlp_item(i)], dim=-1))
        return self.predict(torch.cat([gmf, mlp], dim=-1)).squeeze(-1)


def ncf_movielens() -> nn.Module:
    return NeuMF()


class _TokenModel(nn.Module):
    """A transformers model called on token ids made from a float ``(N, seq_len)`` or
    ``(N, 1, seq_len)`` input (``--input-size 1,384`` on the command line), returning its
    logits."""

    def __init__(self, model: nn.Module, vocab: int):
        super().__init__()
        self.model, self.vocab = model, vocab

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ids = _ids(x.reshape(x.shape[0], -1), self.vocab)
        out = self.model(input_ids=ids, return_dict=True)
        if getattr(out, "start_logits", None) is not None:
            return torch.stack([out.start_logits, out.end_logits], dim=-1)
        return out.logits


def _bert(head: str, **config) -> nn.Module:
    import transformers

    from perfcast.zoo.hf_config import resolve_hf_config

    cfg, _ = resolve_hf_config("bert-base-uncased")  # the shipped public config, offline
    for k, v in config.items():
        setattr(cfg, k, v)
    cfg.architectures = [head]
    model = getattr(transformers, head)._from_config(cfg, attn_implementation="sdpa")
    return _TokenModel(model, int(cfg.vocab_size))


def bert_base_squad() -> nn.Module:
    """BERT-base uncased with the extractive question-answering head (start/end logits)."""
    return _bert("BertForQuestionAnswering")


def bert_base_sentiment140() -> nn.Module:
    """BERT-base uncased with a 2-class sequence-classification head (tweet sentiment)."""
    return _bert("BertForSequenceClassification", num_labels=2)


__all__ = ["ZEUS_WORKLOADS", "DeepSpeech2", "NeuMF", "ZeusWorkload", "bert_base_sentiment140",
           "bert_base_squad", "deepspeech2", "ncf_movielens", "shufflenetv2_cifar100",
           "zeus_workload"]
