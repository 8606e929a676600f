"""perfcast.evaluation: model-grouped splits, metrics, the runner's report files and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from perfcast.errors import PerfcastError
from perfcast.evaluation import (
    SPLITS,
    TASKS,
    acc_within,
    evaluate,
    get_task,
    kendall_tau,
    make_splits,
    mape,
    metrics_by_group,
    model_groups,
    regression_metrics,
    rmse,
)
from perfcast.evaluation.splits import check_disjoint, family_folds
from perfcast.predictors import register_predictor
from perfcast.predictors.base import Predictor
from perfcast.features.records import FeatureSet


# -- a tiny predictor, registered under a test-only name -------------------------------------------

@register_predictor
class _LogLinear(Predictor):
    """log(y) = a + b·log1p_macs + c·mode=train, least squares on the training records; fakes a
    loss history so the convergence plot is exercised."""

    name = "test-loglinear"

    @classmethod
    def default_params(cls):
        return {"epochs": 3}

    def _x(self, fs: FeatureSet) -> np.ndarray:
        cols = [fs.static_names.index(c) for c in ("log1p_macs", "mode=train", "log1p_batch")]
        return np.column_stack([np.ones(len(fs)), fs.static[:, cols].astype(np.float64)])

    def _fit(self, train, valid, progress):
        x = self._x(train)
        self.coef_ = {}
        for t in self.targets_:
            y = train.target(t)
            ok = np.isfinite(y)
            self.coef_[t] = np.linalg.lstsq(x[ok], np.log(y[ok]), rcond=None)[0]
        for ep in range(self.p("epochs")):
            rec = {"epoch": ep + 1, "train_loss": 1.0 / (ep + 1)}
            if valid is not None:
                rec["valid_loss"] = 1.5 / (ep + 1)
            self.history_.append(rec)
            if progress:
                progress(ep + 1, self.p("epochs"))

    def _predict(self, data):
        x = self._x(data)
        return np.column_stack([np.exp(x @ self.coef_[t]) for t in self.targets_])


@register_predictor
class _Broken(_LogLinear):
    name = "test-broken"

    def _fit(self, train, valid, progress):
        raise RuntimeError("diverged")


# -- splits -------------------------------------------------------------------------------------------

def _synthetic(n_fam=12, seed=0):
    """Families of 1..9 models, each model with 3 batch sizes × 2 input sizes (6 records)."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in range(n_fam):
        for m in range(1 + f % 9):
            for b in (1, 8, 32):
                for s in ("3,224,224", "3,288,288"):
                    rows.append({"model": f"timm:f{f}_m{m}.tag{rng.integers(2)}",
                                 "arch": f"f{f}_m{m}", "family": f"fam{f}", "batch_size": b,
                                 "input_size": s})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("split", [s for s in SPLITS if s != "unseen-device"])
def test_splits_grouped_by_model_and_disjoint(split):
    df = _synthetic()
    groups = model_groups(df)
    # pretrained tags do not split a model: one group per arch
    assert len(np.unique(groups)) == df["arch"].nunique()
    folds = make_splits(split, groups, df["family"].to_numpy(), seeds=[1337, 1338])
    for f in folds:
        parts = [set(f.train.tolist()), set(f.valid.tolist()), set(f.test.tolist())]
        assert not (parts[0] & parts[2]) and not (parts[1] & parts[2]) and not (parts[0] & parts[1])
        gparts = [set(groups[list(p)].tolist()) for p in parts]
        assert not (gparts[0] & gparts[2]) and not (gparts[1] & gparts[2]) and not (gparts[0] & gparts[1])
        # every record of a tested model is tested (all its batch and input sizes)
        assert set(np.flatnonzero(np.isin(groups, list(gparts[2]))).tolist()) == parts[2]
        assert len(f.test) and len(f.train)


def test_unseen_device_split_leaves_each_device_out_once():
    df = _synthetic()
    groups = model_groups(df)
    devices = np.array(["a100", "v100", "t4"] * len(df))[:len(df)]
    folds = make_splits("unseen-device", groups, df["family"].to_numpy(), devices=devices)
    assert [f.name for f in folds] == ["seed1337-a100", "seed1337-t4", "seed1337-v100"]
    tested = np.concatenate([f.test for f in folds])
    assert sorted(tested.tolist()) == list(range(len(df)))  # every record tested exactly once
    for f in folds:
        d = set(devices[f.test])
        assert len(d) == 1 and not d & set(devices[np.concatenate([f.train, f.valid])])
        assert not set(f.train.tolist()) & set(f.valid.tolist()) and len(f.valid)
    with pytest.raises(PerfcastError, match="devices"):
        make_splits("unseen-device", groups, df["family"].to_numpy())


def test_random_split_proportions_and_seeds():
    df = _synthetic(n_fam=30)
    groups = model_groups(df)
    g = len(np.unique(groups))
    a, b = make_splits("random", groups, df["family"].to_numpy(), seeds=[1, 2])
    for f in (a, b):
        assert len(np.unique(groups[f.test])) == round(0.15 * g)
        assert len(np.unique(groups[f.valid])) == round(0.15 * g)
    assert set(a.test.tolist()) != set(b.test.tolist())  # seeds differ
    again = make_splits("random", groups, df["family"].to_numpy(), seeds=[1])[0]
    assert np.array_equal(again.test, a.test)  # deterministic


def test_family_mc_proportions():
    df = _synthetic()
    groups = model_groups(df)
    fam = df["family"].to_numpy()
    folds = make_splits("family-mc", groups, fam, seeds=None)
    assert [f.seed for f in folds] == [1337, 1338, 1339, 1340, 1341]
    for f in folds:
        for fname in sorted(set(fam)):
            models = set(groups[fam == fname].tolist())
            tested = models & set(groups[f.test].tolist())
            if len(models) == 1:
                assert not tested  # a single-model family trains
            else:
                assert len(tested) == min(len(models) - 1, max(1, round(0.3 * len(models))))
        # validation: ~15 % of the training models, from the training part only
        n_tr = len(np.unique(groups[f.train])) + len(np.unique(groups[f.valid]))
        assert len(np.unique(groups[f.valid])) == max(1, round(0.15 * n_tr))


def test_unseen_family_each_family_tested_once():
    df = _synthetic()
    groups = model_groups(df)
    fam = df["family"].to_numpy()
    folds = make_splits("unseen-family", groups, fam, seeds=[7], k=5)
    assert len(folds) == 5
    tested = []
    for f in folds:
        test_f = set(fam[f.test].tolist())
        assert not test_f & set(fam[f.train].tolist())
        assert not test_f & set(fam[f.valid].tolist())
        # the validation part holds out whole families
        assert not set(fam[f.valid].tolist()) & set(fam[f.train].tolist())
        # a tested family is tested with all its records
        assert set(f.test.tolist()) == set(np.flatnonzero(np.isin(fam, list(test_f))).tolist())
        tested += sorted(test_f)
    assert sorted(tested) == sorted(set(fam))  # each family exactly once
    assert len(tested) == len(set(tested))
    # every record is tested exactly once over the K folds
    allt = np.concatenate([f.test for f in folds])
    assert sorted(allt.tolist()) == list(range(len(df)))
    # deterministic by seed, different across seeds
    assert family_folds(fam, 5, 7) == family_folds(fam, 5, 7)
    assert family_folds(fam, 5, 7) != family_folds(fam, 5, 8)


def test_identical_graphs_are_one_group(tiny_feature_set):
    fs = tiny_feature_set
    g = model_groups(fs.rows, fs.summaries, fs.graph_index)
    # six distinct models in the tiny set: six groups, all records of a model in one group
    assert len(np.unique(g)) == fs.rows["model"].nunique()
    for m, sub in fs.rows.groupby("model"):
        assert len(set(g[sub.index].tolist())) == 1
    # a duplicated model under another name (same graph) joins its group
    rows = pd.concat([fs.rows, fs.rows.iloc[:2].assign(model="timm:copy_of_first", arch="copy")],
                     ignore_index=True)
    gi = np.concatenate([fs.graph_index, fs.graph_index[:2]])
    g2 = model_groups(rows, fs.summaries, gi)
    assert g2[-1] == g2[0]


def test_check_disjoint_asserts():
    with pytest.raises(AssertionError):
        check_disjoint([0, 1], [2], [1, 3])
    with pytest.raises(AssertionError, match="model"):
        check_disjoint([0], [], [1], groups=np.array([5, 5]))


def test_unknown_split():
    with pytest.raises(PerfcastError, match="unknown split"):
        make_splits("bogus", np.arange(5), np.array(["a"] * 5))


# -- metrics ---------------------------------------------------------------------------------------

def test_metrics_hand_computed():
    y = np.array([100.0, 200.0, 50.0, np.nan, 10.0])
    yh = np.array([110.0, 190.0, 50.0, 7.0, 60.0])
    # relative errors: 0.10, 0.05, 0.0, (NaN label: skipped), 5.0
    assert mape(y, yh) == pytest.approx((10 + 5 + 0 + 500) / 4)
    assert rmse(y, yh) == pytest.approx(math.sqrt((100 + 100 + 0 + 2500) / 4))
    assert acc_within(y, yh, 0.05) == pytest.approx(50.0)  # 0.05 and 0.0
    assert acc_within(y, yh, 0.10) == pytest.approx(75.0)
    # 6 pairs; only (y=10, y=50) is discordant (predicted 60 > 50)
    assert kendall_tau(y, yh) == pytest.approx((5 - 1) / 6)
    m = regression_metrics(y, yh)
    assert m["n"] == 4 and m["n_missing"] == 0
    m = regression_metrics([1.0, 2.0, 3.0], [1.0, np.nan, 3.0])
    assert m["n"] == 2 and m["n_missing"] == 1 and m["mape"] == 0.0
    assert math.isnan(kendall_tau([1.0], [1.0]))
    by = metrics_by_group(y, yh, ["a", "a", "b", "b", "b"])
    assert by["a"]["mape"] == pytest.approx(7.5) and by["b"]["n"] == 2
    assert by["b"]["mape"] == pytest.approx(250.0)


# -- tasks ------------------------------------------------------------------------------------------

def test_task_registry():
    assert {"a", "b", "b-pt291", "rtx3090-infer", "c-i9", "c-i7", "d", "e"} <= set(TASKS)
    with pytest.raises(PerfcastError, match="unknown task"):
        get_task("zzz")
    e = get_task("e")
    assert e.memsim and e.drop_impossible and e.targets == ("memory_mb",)
    assert "memsim" in e.default_predictors
    pubs = {(p.paper, p.method, p.targets[0]): p.mape for p in get_task("a").published}
    assert pubs[("TraPPM", "TraPPM", "time_ms")] == 9.51
    assert pubs[("TraPPM", "NNLQP", "time_ms")] == 14.47
    assert pubs[("DNNPerf", "DNNPerf", "time_ms")] in (7.4, 7.7)
    pubs_e = {(p.paper, p.method, p.protocol): p.mape for p in e.published}
    assert pubs_e[("TraPPM", "TraPPM", "family-mc")] == 4.92
    assert pubs_e[("TraPPM", "NNLQP", "family-mc")] == 8.29
    assert pubs_e[("DNNPerf", "DNNPerf", "random")] == 13.7
    assert any(p.mape == 1.9 for p in get_task("b").published)


@pytest.mark.shared_data("gpumemnet-timm-train-memory-a100.csv")
def test_task_selection_counts():
    from perfcast.datasets import load_all

    df = load_all()
    for name, task in TASKS.items():
        if task.loader != "all" or len(task.sources) > 1:
            continue  # multi-source tasks (e.g. "gpu") are checked in test_crossdevice
        sel = task.frame(df=df)
        assert sel["source"].nunique() == 1, name
        assert len(sel) == int((df["source"] == sel["source"].iloc[0]).sum())


def test_impossible_mask_and_memsim_predictor(tiny_feature_set):
    from perfcast.evaluation.tasks import impossible_mask, simulated_mb
    from perfcast.predictors import create_predictor

    fs = tiny_feature_set.subset(np.arange(4))
    fs.rows["device"] = "a100-40gb"
    i, h = fs.static_names.index("log1p_memsim_mb"), fs.static_names.index("has_memsim")
    fs.static = fs.static.copy()
    fs.static[:, i] = np.log1p([50_000.0, 50_000.0, 1_000.0, 0.0])
    fs.static[:, h] = [1, 1, 1, 0]
    fs.y = fs.y.copy()
    mem = fs.target_names.index("memory_mb")
    fs.y[:, mem] = [30_000.0, 41_000.0, 2_000.0, 2_000.0]
    # 50 GB simulated but recorded 30 GB on a 40 GiB card: impossible; 41,000 ≥ 40,960: not
    assert impossible_mask(fs).tolist() == [True, False, False, False]
    assert np.allclose(simulated_mb(fs)[:3], [50_000, 50_000, 1_000], rtol=1e-4)
    p = create_predictor("memsim").fit(fs)
    assert p.targets_ == ["memory_mb"] and not p.learns
    out = p.predict(fs)
    assert out.shape == (4, 1)
    assert np.allclose(out[:3, 0], [50_000, 50_000, 1_000], rtol=1e-4) and np.isnan(out[3, 0])
    with pytest.raises(PerfcastError, match="simulation"):
        create_predictor("memsim").fit(tiny_feature_set)


# -- runner + report --------------------------------------------------------------------------------

REPORT_FILES = ("summary.md", "metrics.csv", "per_family.csv", "per_family.md", "predictions.csv",
                "seeds.csv", "fits.csv", "folds.csv", "run.json")


def test_evaluate_end_to_end(tiny_feature_set, tmp_path):
    fs = tiny_feature_set
    stages = []
    res = evaluate(fs, "unseen-family", ["test-loglinear", "roofline"],
                   seeds=[1337], out_dir=tmp_path, k=3, task_name="tiny",
                   progress=lambda s, i, n: stages.append(s.split()[0]))
    out = tmp_path / "tiny" / "unseen-family"
    assert res.out_dir == out
    for f in REPORT_FILES:
        assert (out / f).is_file(), f
    assert (out / "pred_vs_actual_test-loglinear_time_ms.png").is_file()
    assert (out / "pred_vs_actual_test-loglinear_memory_mb.png").is_file()
    assert (out / "pred_vs_actual_roofline_time_ms.png").is_file()
    assert (out / "loss_test-loglinear.png").is_file()
    assert not (out / "loss_roofline.png").exists()
    assert not [p for p in tmp_path.glob("tiny/.*")]  # no temporary directory left
    assert {"fits", "epochs"} <= set(stages)

    m = pd.read_csv(out / "metrics.csv")
    assert set(m.columns) == {"predictor", "target", "metric", "mean", "std", "seeds"}
    assert {"mape", "rmse", "kendall", "acc5", "acc10", "mape_macro", "n"} <= set(m.metric)
    assert set(m.predictor) == {"test-loglinear", "roofline"}
    assert set(m[m.predictor == "roofline"].target) == {"time_ms"}  # roofline: time only
    pred = pd.read_csv(out / "predictions.csv")
    for c in ("model", "family", "batch_size", "target", "actual", "predicted", "predictor", "fold"):
        assert c in pred.columns
    # unseen-family pools the K folds: every record tested once per predictor × target
    sub = pred[(pred.predictor == "test-loglinear") & (pred.target == "time_ms")]
    assert sorted(sub["record"]) == list(range(len(fs)))
    n = m[(m.predictor == "test-loglinear") & (m.target == "time_ms") & (m.metric == "n")]["mean"]
    assert int(n.iloc[0]) == int(np.isfinite(fs.target("time_ms")).sum())
    # the metrics are those of the predictions file
    ours = mape(sub["actual"], sub["predicted"])
    got = m[(m.predictor == "test-loglinear") & (m.target == "time_ms") & (m.metric == "mape")]
    assert got["mean"].iloc[0] == pytest.approx(ours, rel=1e-5)
    # families are tested in the fold that does not train on them
    for fold, g in pred.groupby("fold"):
        f = next(x for x in res.folds if x.name == fold)
        assert not set(g["family"]) & set(fs.families()[f.train])

    pf = pd.read_csv(out / "per_family.csv")
    assert set(pf.family) == set(fs.families())
    summary = (out / "summary.md").read_text()
    assert "grouped by model" in summary and "Regenerate:" in summary
    assert "Wall time per predictor fit" in summary and "test-loglinear" in summary
    fam_md = (out / "per_family.md").read_text()
    assert "fam-avg" in fam_md and "`roofline`" in fam_md
    js = json.loads((out / "run.json").read_text())
    assert js["split"] == "unseen-family" and len(js["folds"]) == 3
    assert {d["predictor"] for d in js["metrics"]} == {"test-loglinear", "roofline"}

    # a second run replaces the report as a whole
    evaluate(fs, "random", ["test-loglinear"], seeds=[1, 2], out_dir=tmp_path, task_name="tiny",
             plots=False)
    rnd = tmp_path / "tiny" / "random"
    m2 = pd.read_csv(rnd / "metrics.csv")
    assert set(m2.seeds) == {2}
    assert not list(rnd.glob("*.png"))


def test_evaluate_failure_and_bad_params(tiny_feature_set, tmp_path):
    with pytest.raises(PerfcastError, match="unknown hyper-parameter"):
        evaluate(tiny_feature_set, "random", [("test-loglinear", {"nope": 1})], out_dir=None)
    with pytest.raises(PerfcastError, match="unknown predictor"):
        evaluate(tiny_feature_set, "random", ["no-such-predictor"], out_dir=None)
    with pytest.raises(PerfcastError, match="unknown split"):
        evaluate(tiny_feature_set, "sideways", ["test-loglinear"], out_dir=None)
    with pytest.raises(PerfcastError, match="given twice"):
        evaluate(tiny_feature_set, "random", ["test-loglinear", "test-loglinear"], out_dir=None)
    # a failing predictor is reported, the others are kept
    res = evaluate(tiny_feature_set, "random", ["test-loglinear", "test-broken"], seeds=[3],
                   out_dir=tmp_path, task_name="tiny", plots=False)
    assert "test-broken" in res.failures and "RuntimeError" in res.failures["test-broken"]
    assert set(res.metrics.predictor) == {"test-loglinear"}
    assert "`test-broken` failed" in (tmp_path / "tiny" / "random" / "summary.md").read_text()


def test_interrupt_leaves_previous_report(tiny_feature_set, tmp_path):
    evaluate(tiny_feature_set, "random", ["test-loglinear"], seeds=[1], out_dir=tmp_path,
             task_name="tiny", plots=False)
    out = tmp_path / "tiny" / "random"
    before = (out / "metrics.csv").read_text()

    def interrupt(stage, i, n):
        if stage.startswith("epochs"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate(tiny_feature_set, "random", ["test-loglinear"], seeds=[2], out_dir=tmp_path,
                 task_name="tiny", progress=interrupt)
    assert (out / "metrics.csv").read_text() == before
    assert sorted(p.name for p in (tmp_path / "tiny").iterdir()) == ["random"]


# -- CLI ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["evaluate", "--task", "zzz", "--split", "random"], "unknown task"),
    (["evaluate", "--task", "a", "--split", "sideways"], "unknown split"),
    (["evaluate", "--task", "a", "--split", "random", "--predictors", "nosuch"], "unknown predictor"),
    (["evaluate", "--task", "a", "--split", "random", "--predictors", "xgboost",
      "--param", "mlp.epochs=3"], "mlp"),
    (["evaluate", "--task", "a", "--split", "random", "--param", "epochs"], "--param"),
    (["evaluate", "--task", "a", "--split", "random", "--seeds", "x"], "bad list"),
])
def test_cli_errors_one_line(args, needle, capsys):
    from perfcast.faces.cli import main

    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error:") and needle in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_cli_json_end_to_end(tiny_feature_set, tmp_path, monkeypatch, capsys):
    from perfcast.faces.cli import main
    from perfcast.evaluation.tasks import Task, TaskData

    # task d's records, served from the tiny feature set (no graph building in a unit test)
    monkeypatch.setattr(Task, "load", lambda self, **kw: TaskData(
        fs=tiny_feature_set, drops={"no graph": 0}, info={"source records": len(tiny_feature_set)}))
    code = main(["evaluate", "--task", "d", "--split", "family-mc", "--predictors",
                 "test-loglinear,roofline", "--seeds", "1,2", "--param", "test-loglinear.epochs=2",
                 "--out", str(tmp_path), "--json", "--no-plots"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    d = json.loads(captured.out)
    assert d["task"] == "d" and d["split"] == "family-mc" and d["seeds"] == [1, 2]
    rows = {(m["predictor"], m["target"]): m for m in d["metrics"]}
    assert set(rows) == {("test-loglinear", "time_ms"), ("test-loglinear", "memory_mb"),
                         ("roofline", "time_ms")}
    assert rows[("test-loglinear", "time_ms")]["mape"] > 0
    summary = (tmp_path / "d" / "family-mc" / "summary.md").read_text()
    assert ("Regenerate: `perfcast evaluate --task d --split family-mc --predictors "
            "test-loglinear,roofline --seeds 1,2") in summary
    assert "--param test-loglinear.epochs=2" in summary
    assert "TraPPM" in summary and "9.51" in summary  # published numbers beside ours
    fits = pd.read_csv(tmp_path / "d" / "family-mc" / "fits.csv")
    assert (fits[fits.predictor == "test-loglinear"]["epochs"] == 2).all()


def test_cli_interrupt_exit_130(monkeypatch, capsys):
    import perfcast.evaluation
    from perfcast.faces.cli import main

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(perfcast.evaluation, "evaluate", interrupted)
    assert main(["evaluate", "--task", "d", "--split", "random", "--predictors", "roofline"]) == 130
    assert "interrupted" in capsys.readouterr().err
