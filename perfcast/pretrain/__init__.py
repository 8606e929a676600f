"""Self-supervised pre-training of graph encoders on the unlabeled corpus (TraPPM phase 1).

``pretrain(corpus_dir, out_dir, method="gae"|"graphmae", hidden=128, epochs=…)`` trains an
encoder (:mod:`perfcast.pretrain.models`) and checkpoints it after every epoch
(:mod:`perfcast.pretrain.checkpoint`: ``encoder.json`` + ``encoder.safetensors`` +
``optimizer.safetensors``, resumable); ``load_encoder(out_dir)`` returns the frozen encoder whose
``embed(x, edge_index, batch, num_graphs)`` gives sum-pooled graph embeddings — what the
``trappm`` predictor feeds its regressor. ``perfcast pretrain`` is the command line.

Importing this package imports torch and torch_geometric.
"""

from perfcast.pretrain.checkpoint import (PretrainedEncoder, load_encoder, message_edges,
                                          random_encoder)
from perfcast.pretrain.dataset import load_corpus, node_stats
from perfcast.pretrain.models import METHODS
from perfcast.pretrain.loop import PretrainResult, pretrain

__all__ = ["METHODS", "PretrainResult", "PretrainedEncoder", "load_corpus", "load_encoder",
           "message_edges", "node_stats", "pretrain", "random_encoder"]
