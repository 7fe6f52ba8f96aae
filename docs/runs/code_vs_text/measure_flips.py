"""Issue 26 point 3 (helper hO): the CI-tier closed-form cells under flip_stream run_seed vs fixed, and the
FedNCM bias options, CIFAR-10, SqueezeNet substitute, full splits. One extra 50k pass: the opposite orientation
of the cached fixed-flip train features, so both orientations of every image are known."""
import json, sys, time
from dataclasses import replace
import numpy as np, torch
from benchmark.data.registry import load_dataset, DatasetSplit
from benchmark.features.cache import FeatureCache
from benchmark.features.extract import extract_features
from benchmark.features.preprocess import get_preprocess
from benchmark.closed_form import run_methods
from benchmark.closed_form.protocols import protocol_options
from benchmark.data.partition import make_partition

torch.set_num_threads(1)
ds, preset, proto, seeds, scheme = sys.argv[1], sys.argv[2], sys.argv[3], [int(s) for s in sys.argv[4].split(",")], sys.argv[5]
out = sys.argv[6]; per_class = int(sys.argv[7])
root, wdir = "$FLB_DATA_ROOT", "$FLB_WEIGHTS_DIR"
ro, mine = FeatureCache("$FLB_CACHE_DIR"), FeatureCache("$SCRATCH/cache")
from benchmark.data.subsets import stratified_indices
tr, te = load_dataset(ds, "train", root), load_dataset(ds, "test", root)
tr = tr.subset(stratified_indices(tr.labels, per_class, 0), f"stratified{per_class}/seed0")
fixed_pre = get_preprocess(preset)
f_fixed = extract_features(tr, "squeezenet1_1", "substitute", fixed_pre, cache=mine, weights_dir=wdir, progress=False)
f_te = extract_features(te, "squeezenet1_1", "substitute", fixed_pre, cache=ro, weights_dir=wdir, progress=False)
assert f_fixed.cache_hit and f_te.cache_hit, (f_fixed.cache_hit, f_te.cache_hit)
mask = fixed_pre.flip_mask(len(tr), "train")
opp_imgs = np.where((~mask)[:, None, None, None], tr.images[:, :, ::-1, :], tr.images)
opp = DatasetSplit(tr.name, "train", tr.labels, tr.class_names, tr.checksum + "/opposite-of-fixed-flip0", images=np.ascontiguousarray(opp_imgs))
t0 = time.time()
f_opp = extract_features(opp, "squeezenet1_1", "substitute", replace(fixed_pre, flip="none"), cache=mine, weights_dir=wdir, progress=True, progress_every_s=120)
print("opposite pass", round(time.time() - t0), "s", flush=True)
plain = np.where(mask[:, None], f_opp.features, f_fixed.features)
mirr = np.where(mask[:, None], f_fixed.features, f_opp.features)
res = {"dataset": ds, "preset": preset, "protocol": proto, "seeds": seeds, "opposite_pass_s": round(time.time() - t0)}
params = dict(alpha=0.1, num_clients=100)
res["train_images"] = len(tr.labels)
for s in seeds:
    part = make_partition(scheme, tr.labels, s, **params)
    for stream, m in (("fixed", mask), ("run_seed", get_preprocess(f"{preset}@flip{s}").flip_mask(len(tr), "train"))):
        feats = np.where(m[:, None], mirr, plain)
        assert stream != "fixed" or np.array_equal(feats, f_fixed.features)
        for p in (proto, "legate2023-code") if proto == "legate2023" else (proto,):
            opts = protocol_options(p, "squeezenet1_1", seed=s)
            r = run_methods({k: dict(v) for k, v in opts.items()}, feats, tr.labels, f_te.features, te.labels, list(part.clients), tr.num_classes)
            for k, v in r.items():
                res[f"{p}/{k}/{stream}/seed{s}"] = round(float(v.accuracy), 4)
        print(s, stream, {k: v for k, v in res.items() if f"/seed{s}" in k and stream in k}, flush=True)
json.dump(res, open(out, "w"), indent=1)
