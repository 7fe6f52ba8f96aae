"""Issue 26 point 4 (helper hO): effect of the 224 px resize implementation (float vs PIL uint8) on
legate2023's closed-form CIFAR-10 cells, SqueezeNet substitute. Lives outside the repository (a measurement)."""
import json, sys, time
import numpy as np, torch
from benchmark.data.registry import load_dataset
from benchmark.data.subsets import stratified_indices
from benchmark.features.cache import FeatureCache
from benchmark.features.extract import extract_features
from benchmark.features.preprocess import get_preprocess
from benchmark.closed_form.registry import get_method
from benchmark.closed_form import run_methods
from benchmark.data.partition import make_partition

torch.set_num_threads(1)
per_class = int(sys.argv[1]); test_n = int(sys.argv[2]); out = sys.argv[3]
root, wdir = "$FLB_DATA_ROOT", "$FLB_WEIGHTS_DIR"
cache = FeatureCache("$SCRATCH/cache")
tr = load_dataset("cifar10", "train", root); te = load_dataset("cifar10", "test", root)
tr = tr.subset(stratified_indices(tr.labels, per_class, 0), f"stratified{per_class}/seed0")
if test_n < len(te.labels):
    te = te.subset(stratified_indices(te.labels, test_n // 10, 0), f"stratified{test_n//10}/seed0")
res = {"train": len(tr.labels), "test": len(te.labels)}
feats = {}
for impl in ("float", "pil"):
    name = "legate2023_cifar" if impl == "float" else "legate2023_cifar@pil"
    for split, d in (("train", tr), ("test", te)):
        t0 = time.time()
        fs = extract_features(d, "squeezenet1_1", "substitute", get_preprocess(name), cache=cache, weights_dir=wdir, progress=False)
        feats[impl, split] = fs
        res[f"wall_{impl}_{split}"] = round(time.time() - t0, 1)
        print(impl, split, res[f"wall_{impl}_{split}"], flush=True)
ftr, fte = feats["float", "test"].features, feats["pil", "test"].features
res["feature_rel_change_test"] = float(np.median(np.linalg.norm(ftr - fte, axis=1) / np.linalg.norm(ftr, axis=1)))
part = make_partition("dirichlet", tr.labels, 0, alpha=0.1, num_clients=100)
methods = {"fedncm": {"bias": "zero", "solver": "pinv32"}, "fed3r_fedcof": {"lam": 0.01, "solver": "pinv32"},
           "centralised_ridge": {"lam": 0.01, "solver": "pinv32"}}
heads = {}
for impl in ("float", "pil"):
    r = run_methods({m: dict(o) for m, o in methods.items()}, feats[impl, "train"].features, tr.labels,
                    feats[impl, "test"].features, te.labels, list(part.clients), 10)
    for m, rr in r.items():
        res[f"acc_{m}_{impl}"] = round(float(rr.accuracy), 3)
        heads[m, impl] = rr
for m in methods:  # fixed head (fitted on float train features), test predictions under float vs pil
    h = heads[m, "float"].head if hasattr(heads[m, "float"], "head") else None
    if h is None:
        continue
    pf = h.predict(ftr) if hasattr(h, "predict") else (ftr @ h.weight.T + h.bias).argmax(1)
    pp = h.predict(fte) if hasattr(h, "predict") else (fte @ h.weight.T + h.bias).argmax(1)
    res[f"pred_changed_{m}"] = round(100 * float(np.mean(np.asarray(pf) != np.asarray(pp))), 3)
    res[f"acc_fixedhead_{m}_float_test"] = round(100 * float(np.mean(np.asarray(pf) == te.labels)), 3)
    res[f"acc_fixedhead_{m}_pil_test"] = round(100 * float(np.mean(np.asarray(pp) == te.labels)), 3)
json.dump(res, open(out, "w"), indent=1); print(json.dumps(res, indent=1))
