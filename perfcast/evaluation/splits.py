"""Train / validation / test splits of a feature set, always **grouped by model**.

Every record of one model — all its batch sizes, input sizes, modes and precisions — lands in
the same part, so no model is seen in training and tested (a predictor cannot score by
remembering a model's time at another batch size). A "model" here is a *group*
(:func:`model_groups`): records with the same architecture (``arch``: the timm name without its
pretrained tag — ``resnet50.a1_in1k`` and ``resnet50.tv_in1k`` have one graph and one run time)
and, beyond that, models whose graphs are identical (same nodes, edges, MACs, parameters,
activations, op-category counts at the same input) are merged into one group: timm registers the
same network under several names — ``deit_base_patch16_224`` (family ``deit``) *is*
``vit_base_patch16_224`` (``vision_transformer``), ``legacy_senet154`` is ``senet154`` — and
without the merge a leave-family-out split would test a graph it trained on. For
``unseen-family`` such a cross-family group's records are left out of the training and
validation parts of the folds that test it.

Splits (``make_splits``):

``random``         DIPPM §4.3: models split at random 70 / 15 / 15 % into train / validation /
                   test, one split per seed.
``family-mc``      TraPPM §V-D: Monte Carlo, per family: within each family 70 % of its models
                   train and 30 % test (a family with a single model goes to training), one split
                   per seed (TraPPM: 1337–1341); validation = 15 % of the training models.
``unseen-family``  DNNPerf RQ2 (unseen models), as leave-family-out K-fold: the families are
                   partitioned into K folds (balanced by record count, deterministic by seed);
                   fold k tests the families of fold k and trains on the others, so every family
                   is tested exactly once and never trained on when tested. Validation = whole
                   families (≈ 15 % of the training records) held out of the training part.
``unseen-device``  leave-one-device-out: fold d tests every record of device d and trains on
                   the other devices (the same models may be trained on elsewhere: the question
                   is a new GPU, NeuSight's protocol); validation = 15 % of the training
                   (device, model) pairs. Needs at least 2 devices.

The validation part always comes out of the training part only. Every :class:`Fold` checks on
construction that test, train and validation are disjoint (by record and by group).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.errors import PerfcastError, unknown_choice

SPLITS: dict[str, str] = {
    "random": "random 70/15/15 % split of the models into train/validation/test (DIPPM §4.3)",
    "family-mc": "per-family Monte Carlo 70/30 % train/test split of each family's models, "
                 "validation = 15 % of the training models (TraPPM §V-D)",
    "unseen-family": "leave-family-out K-fold: each family tested once by a predictor trained "
                     "without it, validation = held-out training families (DNNPerf RQ2, "
                     "unseen models)",
    "unseen-device": "leave-one-device-out: each device tested once by a predictor trained on the "
                     "other devices, validation = 15 % of the training (device, model) pairs "
                     "(NeuSight's protocol: unseen GPUs)",
}
#: Seeds used when none are given: TraPPM's five Monte Carlo seeds; one K-fold partition for
#: ``unseen-family`` (each family is already tested once).
DEFAULT_SEEDS: dict[str, tuple[int, ...]] = {
    "random": (1337, 1338, 1339, 1340, 1341),
    "family-mc": (1337, 1338, 1339, 1340, 1341),
    "unseen-family": (1337,),
    "unseen-device": (1337,),
}


@dataclass(frozen=True)
class Fold:
    """Record indices of one train / validation / test split."""

    name: str
    seed: int
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    groups: np.ndarray | None = None  # group id per record of the whole set (for checks)

    def __post_init__(self) -> None:
        check_disjoint(self.train, self.valid, self.test, self.groups)


def check_disjoint(train, valid, test, groups=None) -> None:
    """Raise ``AssertionError`` when parts share a record or (with ``groups``) a model group."""
    tr, va, te = (set(np.asarray(a, dtype=np.int64).tolist()) for a in (train, valid, test))
    _require(not (te & tr), "test records intersect training records")
    _require(not (te & va), "test records intersect validation records")
    _require(not (tr & va), "validation records intersect training records")
    if groups is not None:
        g = np.asarray(groups)
        gt, gtr, gva = (set(g[np.asarray(sorted(s), dtype=np.int64)].tolist()) for s in (te, tr, va))
        _require(not (gt & gtr), "a model is both in training and test")
        _require(not (gt & gva), "a model is both in validation and test")
        _require(not (gtr & gva), "a model is both in training and validation")


def _require(ok: bool, msg: str) -> None:
    if not ok:  # not an ``assert``: must hold under ``python -O`` too
        raise AssertionError(msg)


def model_groups(rows: pd.DataFrame, summaries: list | None = None,
                 graph_index: np.ndarray | None = None) -> np.ndarray:
    """Group id (int) per record: same ``arch`` (else ``model``) → same group; with
    ``summaries`` / ``graph_index`` (a FeatureSet's), models whose graph summaries are identical
    at the same input are merged too (union-find)."""
    key = rows["arch"] if "arch" in rows.columns else rows["model"]
    key = key.where(key.notna(), rows["model"]).astype(str).to_numpy()
    names = sorted(set(key.tolist()))
    idx = {n: i for i, n in enumerate(names)}
    parent = list(range(len(names)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    if summaries is not None and graph_index is not None and len(summaries):
        first: dict = {}
        for k, gi in zip(key, np.asarray(graph_index).tolist()):
            s = summaries[gi]
            sig = (s.nodes, s.edges, round(s.macs), round(s.params), round(s.activation_bytes),
                   round(s.input_elements), s.batch, s.conv, s.dense, s.relu, s.attention, s.norm)
            a = idx[k]
            if sig in first:
                ra, rb = find(a), find(first[sig])
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
            else:
                first[sig] = a
    roots = np.array([find(idx[k]) for k in key], dtype=np.int64)
    # renumber 0..G-1 in order of first appearance of the sorted names (deterministic)
    _, out = np.unique(roots, return_inverse=True)
    return out.astype(np.int64)


def _families_of_groups(groups: np.ndarray, families: np.ndarray) -> dict[int, str]:
    """Family of each group (a group spanning families takes its most common one)."""
    df = pd.DataFrame({"g": groups, "f": families})
    return {int(g): str(s.value_counts().index[0]) for g, s in df.groupby("g")["f"]}


def _records(groups: np.ndarray, chosen) -> np.ndarray:
    return np.flatnonzero(np.isin(groups, np.asarray(sorted(chosen), dtype=np.int64)))


def _carve_valid(train_groups: list[int], frac: float, rng: np.random.Generator) -> tuple[list, list]:
    """Split training groups into (train, valid) with ``frac`` of them validating (≥ 1 when
    there are at least 4 groups, none otherwise)."""
    tg = sorted(train_groups)
    n_val = int(round(frac * len(tg))) if len(tg) >= 4 else 0
    if frac > 0 and len(tg) >= 4:
        n_val = max(1, n_val)
    perm = rng.permutation(len(tg))
    val = {tg[i] for i in perm[:n_val]}
    return [g for g in tg if g not in val], sorted(val)


def random_split(groups: np.ndarray, seed: int, fractions=(0.70, 0.15, 0.15)) -> Fold:
    """DIPPM: groups shuffled and cut at ``fractions`` (train, valid, test)."""
    ug = np.unique(groups)
    rng = np.random.default_rng(seed)
    perm = ug[rng.permutation(len(ug))]
    n_test = int(round(fractions[2] * len(ug)))
    n_val = int(round(fractions[1] * len(ug)))
    if len(ug) >= 3:
        n_test = max(1, n_test)
        n_val = max(1, n_val) if fractions[1] > 0 else 0
    test, val, train = perm[:n_test], perm[n_test:n_test + n_val], perm[n_test + n_val:]
    return Fold(f"seed{seed}", seed, _records(groups, train), _records(groups, val),
                _records(groups, test), groups)


def family_mc_split(groups: np.ndarray, families: np.ndarray, seed: int, test_frac: float = 0.30,
                    valid_frac: float = 0.15) -> Fold:
    """TraPPM: per family, ``test_frac`` of its models test (≥ 1 when it has ≥ 2 models; a
    single-model family trains), the rest train; ``valid_frac`` of the training models validate."""
    fam = _families_of_groups(groups, families)
    rng = np.random.default_rng(seed)
    train, test = [], []
    for f in sorted(set(fam.values())):
        gs = sorted(g for g, ff in fam.items() if ff == f)
        if len(gs) < 2:
            train += gs
            continue
        n_test = min(len(gs) - 1, max(1, int(round(test_frac * len(gs)))))
        perm = rng.permutation(len(gs))
        test += [gs[i] for i in perm[:n_test]]
        train += [gs[i] for i in perm[n_test:]]
    train, val = _carve_valid(train, valid_frac, rng)
    return Fold(f"seed{seed}", seed, _records(groups, train), _records(groups, val),
                _records(groups, test), groups)


def family_folds(families: np.ndarray, k: int, seed: int) -> dict[str, int]:
    """Family → fold (0..k-1): families shuffled by ``seed``, then assigned largest first to
    the fold with the fewest records (GroupKFold's balancing, made seed-dependent)."""
    counts = pd.Series(families).astype(str).value_counts()
    names = sorted(counts.index)
    rng = np.random.default_rng(seed)
    names = [names[i] for i in rng.permutation(len(names))]
    names.sort(key=lambda f: -int(counts[f]))  # stable: ties keep the shuffled order
    load = [0] * k
    out = {}
    for f in names:
        j = min(range(k), key=lambda i: (load[i], i))
        out[f] = j
        load[j] += int(counts[f])
    return out


def unseen_family_split(groups: np.ndarray, families: np.ndarray, seed: int, k: int = 5,
                        valid_frac: float = 0.15) -> list[Fold]:
    """DNNPerf RQ2: leave-family-out K-fold (see module doc); ``k`` folds."""
    families = np.asarray(families).astype(str)
    nfam = len(set(families.tolist()))
    if nfam < 2:
        raise PerfcastError(f"unseen-family needs at least 2 families, the data has {nfam}")
    k = min(k, nfam)
    f2k = family_folds(families, k, seed)
    rng = np.random.default_rng(seed + 7919)
    folds = []
    for j in range(k):
        test_f = {f for f, i in f2k.items() if i == j}
        train_f = sorted(f for f, i in f2k.items() if i != j)
        # validation: whole training families in a seeded order until ≥ valid_frac of the
        # training records; families larger than that share alone are taken only when the
        # smaller ones do not suffice (several small families make a steadier early stop)
        n_train = int(np.isin(families, train_f).sum())
        val_f: set[str] = set()
        if valid_frac > 0 and len(train_f) >= 3:
            want = valid_frac * n_train
            order = [train_f[i] for i in rng.permutation(len(train_f))]
            size = {f: int((families == f).sum()) for f in order}
            got = 0
            for f in [f for f in order if size[f] <= want] + [f for f in order if size[f] > want]:
                if got >= want:
                    break
                if got + size[f] > 0.5 * n_train and val_f:  # never starve the training part
                    continue
                val_f.add(f)
                got += size[f]
        te = np.flatnonzero(np.isin(families, sorted(test_f)))
        va = np.flatnonzero(np.isin(families, sorted(val_f)))
        tr = np.flatnonzero(~np.isin(families, sorted(test_f | val_f)))
        # a model group spanning families must not straddle parts: move its records to test
        bad = set(groups[te].tolist())
        tr = tr[~np.isin(groups[tr], list(bad))]
        va = va[~np.isin(groups[va], list(bad))]
        badv = set(groups[va].tolist())
        tr = tr[~np.isin(groups[tr], list(badv))]
        folds.append(Fold(f"seed{seed}-fold{j}", seed, tr, va, te, groups))
    return folds


def unseen_device_split(groups: np.ndarray, devices: np.ndarray, seed: int,
                        valid_frac: float = 0.15) -> list[Fold]:
    """Leave-one-device-out (see the module doc): one fold per device."""
    devices = np.asarray(devices).astype(str)
    names = sorted(set(devices.tolist()))
    _require(len(names) >= 2, f"unseen-device split needs at least 2 devices, the data has "
                              f"{len(names)}")
    rng = np.random.default_rng(seed)
    # (device, model) pairs: validation takes whole pairs, so a model's batch sizes stay together
    pair = np.unique(np.stack([np.unique(devices, return_inverse=True)[1], groups]), axis=1,
                     return_inverse=True)[1].reshape(-1)
    folds = []
    for d in names:
        te = np.flatnonzero(devices == d)
        rest = np.flatnonzero(devices != d)
        pairs = np.unique(pair[rest])
        n_val = int(round(valid_frac * len(pairs)))
        val_pairs = set(rng.choice(pairs, n_val, replace=False).tolist()) if n_val else set()
        in_val = np.isin(pair[rest], list(val_pairs))
        folds.append(Fold(f"seed{seed}-{d}", seed, rest[~in_val], rest[in_val], te, None))
    return folds


def make_splits(split: str, groups: np.ndarray, families: np.ndarray, seeds=None, *, k: int = 5,
                valid_frac: float = 0.15, devices: np.ndarray | None = None) -> list[Fold]:
    """All folds of ``split`` for ``seeds`` (default :data:`DEFAULT_SEEDS`); ``devices`` (one per
    record) for ``unseen-device``."""
    if split not in SPLITS:
        raise unknown_choice("split", split, SPLITS)
    seeds = list(seeds) if seeds else list(DEFAULT_SEEDS[split])
    groups = np.asarray(groups, dtype=np.int64)
    families = np.asarray(families).astype(str)
    if len(np.unique(groups)) < 3:
        raise PerfcastError(f"{split} split needs at least 3 models, the data has "
                            f"{len(np.unique(groups))}")
    out: list[Fold] = []
    for s in seeds:
        if split == "random":
            out.append(random_split(groups, s, (1 - 0.15 - 0.15, 0.15, 0.15)))
        elif split == "family-mc":
            out.append(family_mc_split(groups, families, s, valid_frac=valid_frac))
        elif split == "unseen-device":
            if devices is None:
                raise PerfcastError("the unseen-device split needs the records' devices")
            out += unseen_device_split(groups, devices, s, valid_frac=valid_frac)
        else:
            out += unseen_family_split(groups, families, s, k=k, valid_frac=valid_frac)
    for f in out:
        if len(f.test) == 0:
            raise PerfcastError(f"{split} split {f.name}: empty test part (too few models)")
        if len(f.train) == 0:
            raise PerfcastError(f"{split} split {f.name}: empty training part (too few models)")
    return out
