"""Gradient-boosted trees saved in XGBoost's JSON format, evaluated with numpy.

The tree predictors (``xgboost``, the ``kernelsum`` and ``crossdevice`` corrections, the kernel
models) train with XGBoost and save each booster as XGBoost's own JSON (``save_raw("json")``).
Predicting from those files needs no XGBoost: a booster is a list of binary trees whose leaves
are summed. :class:`TreeEnsemble` reads the JSON once into flat arrays and walks every tree for
every row at once — so a cold ``perfcast predict`` with a tree model imports neither XGBoost
(≈ 1 s: it imports scikit-learn and scipy) nor torch.

Semantics are XGBoost's (``gbtree``, numerical splits): features and split conditions are
float32; a row goes left when ``x < condition``, a missing value (NaN) where ``default_left``
says; the margin is ``base_score`` (or the ``base_margin`` given instead) plus the leaves'
values, accumulated in float32 from the base margin in tree order as XGBoost's CPU predictor
does — bit for bit the same answers (``tests/test_predictors_tabular.py`` checks it against
``Booster.inplace_predict`` on every shipped booster). Anything else — categorical splits, vector leaves, ``dart`` or
``gblinear`` boosters — is refused with :class:`UnsupportedModel` and the caller falls back to
XGBoost itself.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

#: Objectives whose prediction is the margin itself (identity link).
IDENTITY_OBJECTIVES = ("reg:squarederror", "reg:linear", "reg:absoluteerror",
                       "reg:pseudohubererror", "reg:quantileerror")


#: Rows × trees evaluated at once (bounds the temporary arrays to a few tens of MB).
CHUNK_CELLS = 1 << 21


class UnsupportedModel(ValueError):
    """A booster this evaluator does not implement (the caller uses XGBoost instead)."""


class TreeEnsemble:
    """One XGBoost booster (JSON) as arrays ``[trees, nodes]``: children (``-1`` at a leaf),
    split feature, split condition / leaf value (float32) and the missing-value direction."""

    def __init__(self, left, right, feature, value, default_left, depth: int, base_score: float,
                 num_feature: int, raw: bytes) -> None:
        self.left, self.right, self.feature = left, right, feature
        self.value, self.default_left = value, default_left
        self.depth, self.base_score, self.num_feature = depth, base_score, num_feature
        #: the JSON it was read from (what ``save_raw("json")`` gives; saved back unchanged)
        self.raw = raw

    @classmethod
    def from_json(cls, raw: bytes | bytearray | np.ndarray) -> TreeEnsemble:
        """Read ``save_raw("json")`` or ``save_raw("ubj")`` bytes (or the uint8 array they are
        stored as)."""
        if isinstance(raw, np.ndarray):
            raw = raw.tobytes()
        raw = bytes(raw)
        try:
            doc = json.loads(raw) if raw[1:2] in (b'"', b" ", b"\n") else _ubjson(raw)
            learner = doc["learner"]
            gb = learner["gradient_booster"]
        except (ValueError, KeyError, TypeError) as exc:
            raise UnsupportedModel(f"not an XGBoost JSON model ({exc})") from None
        if gb.get("name") != "gbtree":
            raise UnsupportedModel(f"booster {gb.get('name')!r} (only gbtree)")
        obj = learner.get("objective", {}).get("name")
        if obj not in IDENTITY_OBJECTIVES:
            raise UnsupportedModel(f"objective {obj!r}")
        param = learner["learner_model_param"]
        if int(param.get("num_class", 0) or 0) > 1 or int(param.get("num_target", 1) or 1) != 1:
            raise UnsupportedModel("more than one output")
        base = str(param.get("base_score", "0")).strip("[]").split(",")
        if len(base) != 1:
            raise UnsupportedModel("more than one base score")
        model = gb["model"]
        if int(model.get("gbtree_model_param", {}).get("num_parallel_tree", 1)) != 1:
            raise UnsupportedModel("random-forest boosters (num_parallel_tree > 1)")
        trees = model["trees"]
        n = max([int(t["tree_param"]["num_nodes"]) for t in trees] or [1])
        T = max(1, len(trees))
        left = np.full((T, n), -1, np.int32)
        right = np.full((T, n), -1, np.int32)
        feature = np.zeros((T, n), np.int32)
        value = np.zeros((T, n), np.float32)
        dleft = np.zeros((T, n), bool)
        depth = 0
        for i, t in enumerate(trees):
            if int(t["tree_param"].get("size_leaf_vector", 1) or 1) > 1:
                raise UnsupportedModel("vector leaves")
            if any(int(s) != 0 for s in t.get("split_type", [])):
                raise UnsupportedModel("categorical splits")
            k = int(t["tree_param"]["num_nodes"])
            left[i, :k] = t["left_children"]
            right[i, :k] = t["right_children"]
            feature[i, :k] = t["split_indices"]
            value[i, :k] = np.asarray(t["split_conditions"], dtype=np.float32)
            dleft[i, :k] = np.asarray(t["default_left"], dtype=bool)
            depth = max(depth, _depth(left[i, :k], right[i, :k]))
        if not trees:
            value[:] = 0.0
        return cls(left, right, feature, value, dleft, depth, float(np.float32(base[0])),
                   int(param.get("num_feature", 0) or 0), raw)

    @property
    def num_trees(self) -> int:
        return int(self.left.shape[0])

    def predict(self, x: Any, base_margin: Any = None) -> np.ndarray:
        """Margins ``[rows]`` (float32) of the rows of ``x`` (``[rows, features]``; NaN =
        missing) — ``base_margin`` per row instead of the model's base score."""
        x = np.asarray(x, dtype=np.float32)
        if x.ndim == 1:
            x = x[None, :]
        if x.shape[1] < self.num_feature:
            raise ValueError(f"model has {self.num_feature} features, got {x.shape[1]}")
        step = max(1, CHUNK_CELLS // max(1, self.num_trees))
        if x.shape[0] > step:  # bounded memory: [rows, trees] arrays of at most CHUNK_CELLS
            bm = None if base_margin is None else np.asarray(base_margin).reshape(-1)
            return np.concatenate([self._predict(x[i:i + step],
                                                 None if bm is None else bm[i:i + step])
                                   for i in range(0, x.shape[0], step)])
        return self._predict(x, base_margin)

    def _flat(self):
        """The trees as flat arrays over all nodes: children as absolute indices (a leaf is its
        own child, so a walk stays there), split feature, condition / leaf value, default
        direction; and each tree's root."""
        if getattr(self, "_flat_cache", None) is None:
            T, n = self.left.shape
            off = (np.arange(T, dtype=np.int64) * n)[:, None]
            me = off + np.arange(n, dtype=np.int64)[None, :]
            leaf = self.left < 0
            left = np.where(leaf, me, off + self.left).ravel()
            right = np.where(leaf, me, off + self.right).ravel()
            #: XGBoost allocates a node's children next to each other: right = left + 1
            adjacent = bool(np.all(right[~leaf.ravel()] == left[~leaf.ravel()] + 1))
            self._flat_cache = (left, right, self.feature.astype(np.int64).ravel(),
                                self.value.ravel(), self.default_left.ravel(), off.ravel(),
                                adjacent)
        return self._flat_cache

    def _predict(self, x: np.ndarray, base_margin: Any) -> np.ndarray:
        n, nf = x.shape
        T = self.num_trees
        left, right, feature, value, dleft, roots, adjacent = self._flat()
        idx = np.broadcast_to(roots[None, :], (n, T)).copy()  # [rows, trees] flat node index
        row = (np.arange(n, dtype=np.int64) * nf)[:, None]
        xs = x.ravel()
        missing = bool(np.isnan(xs).any())
        for _ in range(self.depth):
            xv = xs.take(row + feature.take(idx))
            go = xv < value.take(idx)
            if missing:  # NaN compares False: it goes where default_left says
                go |= np.isnan(xv) & dleft.take(idx)
            lc = left.take(idx)
            if adjacent:  # right = left + 1; a leaf (its own left child) stays
                idx = lc + (~go & (lc != idx))
            else:
                idx = np.where(go, lc, right.take(idx))
        # XGBoost's order and precision: the base margin, then each tree's leaf, summed in
        # float32 one tree after the other (cumsum is sequential, unlike sum)
        base = (np.full(n, self.base_score, np.float32) if base_margin is None
                else np.array(base_margin, dtype=np.float32).reshape(n))
        terms = np.empty((n, T + 1), np.float32)
        terms[:, 0] = base
        terms[:, 1:] = value.take(idx)
        return np.cumsum(terms, axis=1, dtype=np.float32)[:, -1].copy()

    # XGBoost's Booster names, so code written for a Booster reads either
    def inplace_predict(self, x: Any, base_margin: Any = None,
                        validate_features: bool = True) -> np.ndarray:
        """``Booster.inplace_predict`` (the features are positional here: nothing to
        validate)."""
        return self.predict(x, base_margin=base_margin)

    def num_boosted_rounds(self) -> int:
        return self.num_trees

    def save_model(self, fname) -> None:
        """``Booster.save_model``: XGBoost's JSON (``.json``) or UBJSON (``.ubj``) file."""
        fmt = "ubj" if str(fname).endswith(".ubj") else "json"
        with open(fname, "wb") as f:
            f.write(bytes(self.save_raw(fmt)))

    def set_param(self, *_a, **_k) -> None:
        """(XGBoost's thread settings: nothing to set here.)"""

    def save_raw(self, raw_format: str = "json") -> bytearray:
        """The model bytes in ``raw_format`` (``json`` or ``ubj``): the bytes it was read from
        when the format is theirs, else XGBoost's conversion."""
        mine = "json" if self.raw[1:2] in (b'"', b" ", b"\n") else "ubj"
        if raw_format == mine:
            return bytearray(self.raw)
        return as_xgboost(self).save_raw(raw_format)


#: UBJSON scalar markers (XGBoost writes big-endian) → numpy dtype.
_UBJ_TYPES = {b"i": ">i1", b"U": ">u1", b"I": ">i2", b"l": ">i4", b"L": ">i8", b"d": ">f4",
              b"D": ">f8"}
_UBJ_STRUCTS = {ord(k): struct.Struct(v.replace("i1", "b").replace("u1", "B")
                                      .replace("i2", "h").replace("i4", "i").replace("i8", "q")
                                      .replace("f4", "f").replace("f8", "d"))
                for k, v in _UBJ_TYPES.items()}


def _ubjson(buf: bytes):
    """Decode the UBJSON XGBoost writes (``save_raw("ubj")``): objects, arrays (typed ones as
    numpy arrays), strings, numbers, booleans and null."""
    pos = 0
    n_buf = len(buf)

    def number(marker: int):
        nonlocal pos
        st = _UBJ_STRUCTS[marker]
        v = st.unpack_from(buf, pos)[0]
        pos += st.size
        return v

    def marker() -> int:
        nonlocal pos
        if pos >= n_buf:
            raise ValueError("truncated UBJSON")
        pos += 1
        return buf[pos - 1]

    def text(n: int) -> str:
        nonlocal pos
        if pos + n > n_buf:
            raise ValueError("truncated UBJSON")
        pos += n
        return buf[pos - n:pos].decode()

    def value(m: int):
        nonlocal pos
        if m in _UBJ_STRUCTS:
            return number(m)
        if m == 0x53:  # S
            return text(number(marker()))
        if m == 0x54:  # T
            return True
        if m == 0x46:  # F
            return False
        if m == 0x5A:  # Z
            return None
        if m == 0x7B:  # {
            obj = {}
            while True:
                k = marker()
                if k == 0x7D:  # }
                    return obj
                key = text(number(k))
                obj[key] = value(marker())
        if m == 0x5B:  # [
            k = marker()
            typ = None
            if k == 0x24:  # $ (typed)
                typ = marker()
                k = marker()
            if k == 0x23:  # # (count)
                n = number(marker())
                if typ is not None and typ in _UBJ_STRUCTS:
                    dt = np.dtype(_UBJ_TYPES[bytes([typ])])
                    if pos + n * dt.itemsize > n_buf:
                        raise ValueError("truncated UBJSON")
                    arr = np.frombuffer(buf, dt, count=n, offset=pos)  # big-endian view
                    pos += n * dt.itemsize
                    return arr
                return [value(typ if typ is not None else marker()) for _ in range(n)]
            items = []
            while k != 0x5D:  # ]
                items.append(value(k))
                k = marker()
            return items
        raise ValueError(f"UBJSON marker {bytes([m])!r} at byte {pos - 1}")

    return value(marker())


def _depth(left: np.ndarray, right: np.ndarray) -> int:
    """Edges on the longest root-to-leaf path."""
    depth, frontier = 0, np.array([0])
    while True:
        inner = frontier[left[frontier] >= 0]
        if not len(inner):
            return depth
        depth += 1
        frontier = np.concatenate([left[inner], right[inner]])


def load_booster(raw: bytes | bytearray | np.ndarray):
    """A predictor for XGBoost JSON bytes: a :class:`TreeEnsemble` (numpy; no XGBoost import),
    or — for a model it does not implement — an ``xgboost.Booster``. Both answer
    ``inplace_predict(x, base_margin=None)``."""
    try:
        return TreeEnsemble.from_json(raw)
    except UnsupportedModel:
        import xgboost as xgb

        bst = xgb.Booster()
        bst.load_model(bytearray(raw.tobytes() if isinstance(raw, np.ndarray) else raw))
        return bst


def as_xgboost(booster):
    """An ``xgboost.Booster`` for ``booster`` (a :class:`TreeEnsemble` is read back from its
    JSON) — what continued training (``xgb.train(..., xgb_model=…)``) needs."""
    if isinstance(booster, TreeEnsemble):
        import xgboost as xgb

        bst = xgb.Booster()
        bst.load_model(bytearray(booster.raw))
        return bst
    return booster


__all__ = ["IDENTITY_OBJECTIVES", "TreeEnsemble", "UnsupportedModel", "as_xgboost",
           "load_booster"]
