"""Job-level FL entry point (``flb fl-run``, :mod:`benchmark.fl.jobs`), protocols and curve plots, on small
synthetic feature caches written exactly like ``flb extract`` writes them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark.apps.plots import mean_curve, plot_curves
from benchmark.cli import main as cli_main
from benchmark.closed_form import paper_protocol_options, run_method
from benchmark.data.partition import PartitionData, make_partition
from benchmark.errors import ConfigError, UnknownNameError
from benchmark.fl.jobs import CURVE_COLUMNS, fl_run_step, load_inputs, read_curve, run_fl_job
from benchmark.fl.protocols import get_protocol, list_protocols
from benchmark.io import sha256_file
from benchmark.tidy import TIDY_COLUMNS

D = 16


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def write_cache(
    folder: Path, *, dataset: str, classes: int, n: int = 2000, n_test: int = 500, seed: int = 0,
    preprocess: str = "legate2023_cifar", backbone: str = "squeezenet1_1",
) -> tuple[Path, Path, np.ndarray]:  # fmt: skip
    """Train/test pointers over class-mean + noise features (non-negative like pooled ReLU features)."""
    from safetensors.numpy import save_file

    g = np.random.default_rng(seed)
    means = np.abs(g.standard_normal((classes, D))) * 1.5
    out = []
    for split, size in (("train", n), ("test", n_test)):
        y = np.arange(size) % classes
        x = np.abs(means[y] + 0.8 * g.standard_normal((size, D))).astype(np.float32)
        path = folder / f"{dataset}-{split}.safetensors"
        save_file({"features": x, "labels": y.astype(np.int64)}, str(path))
        ptr = {
            "dataset": dataset, "split": split, "subset": "all", "backbone": backbone,
            "num_samples": size, "feature_dim": D, "num_classes": classes, "key_digest": f"synthetic-{split}",
            "tensors": str(path), "metadata": "", "file_sha256": sha256_file(path), "data_checksum": "synthetic",
            "weights": {"source": "substitute", "name": "synthetic", "sha256": "0" * 64},
            "preprocess": {"name": preprocess}, "precision": "fp32",
        }  # fmt: skip
        pp = folder / f"{dataset}-{split}.json"
        pp.write_text(json.dumps(ptr))
        out.append(pp)
        if split == "train":
            labels = y
    return out[0], out[1], labels


def write_partition(
    folder: Path, labels: np.ndarray, *, clients: int = 100, alpha: float = 0.1, scheme: str = "dirichlet",
    dataset: str = "cifar10",
) -> Path:  # fmt: skip
    """A partition of the train split ``write_cache`` wrote, recording that split as ``flb partition`` does."""
    part = make_partition(scheme, labels, 0, num_clients=clients, alpha=alpha)
    part = part.with_data(PartitionData(dataset, "all", "train", len(labels), "synthetic"))
    path = folder / f"part-{clients}-{alpha}.json"
    part.to_json(path)
    return path


@pytest.fixture(scope="module")
def cifar10_like(tmp_path_factory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("c10")
    tr, te, y = write_cache(folder, dataset="cifar10", classes=10)
    return tr, te, write_partition(folder, y)


@pytest.fixture(scope="module")
def cifar100_like(tmp_path_factory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("c100")
    tr, te, y = write_cache(folder, dataset="cifar100", classes=100, n=3000, preprocess="fedcof_cifar")
    # the fedcof protocol's sharder
    return tr, te, write_partition(folder, y, scheme="dirichlet_fedcof", dataset="cifar100")


# ------------------------------------------------------------------------------------------------ protocols
def test_protocol_registry_and_rounds_unit() -> None:
    assert {"legate2023_cifar10", "fedcof_cifar100_lp"} <= set(list_protocols())
    p = get_protocol("legate2023_cifar10")
    # K = 100, m = 30: an FLSim epoch is ceil(100/30) = 4 rounds (papers-code.md §1.6)
    assert (p.clients_per_round, p.flsim_epoch_rounds) == (30, 4)
    assert p.real_rounds("lp") == 800 and p.eval_interval() == 4
    r = p.with_overrides("lp", {"rounds_unit": "rounds", "eval_every": 1})
    assert r.real_rounds("lp") == 200 and r.eval_interval() == 1
    cfg = p.fl_config("lp", seed=3, device="cpu", progress=False)
    assert (cfg.rounds, cfg.eval_every, cfg.participation, cfg.batch_size, cfg.selection) == (
        800, 4, 0.3, 64, "best_on_test",
    )  # fmt: skip
    assert cfg.client_momentum == 0.0 and cfg.server_opt == "fedavg" and cfg.server_lr == 1.0
    f = get_protocol("fedcof_cifar100_lp")
    # fedcof App. J / K learning rates
    assert {m: f.method(m).client_lr for m in f.methods} == {
        "fed_lp": 0.01, "fedncm_lp": 0.01, "fed3r_lp": 0.001, "fedcof_lp": 0.001,
    }  # fmt: skip
    assert f.fl_config("fedcof_lp", seed=0, progress=False).method == "head_lp"
    assert get_protocol("legate2023_cifar10").method("mlp_head").head == "mlp"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"learning_rate": 0.1}, "learning_rate"),
        ({"client_lr": 0.0}, "client_lr"),
        ({"rounds_unit": "epochs"}, "rounds_unit"),
        ({"eval_every": 0}, "eval_every"),
        ({"participation": 1.5}, "participation"),
        ({"init": "fedavg"}, "init"),
    ],
)
def test_protocol_overrides_name_the_bad_field(overrides: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        get_protocol("legate2023_cifar10").with_overrides("lp", overrides)


def test_unknown_protocol_and_method() -> None:
    with pytest.raises(UnknownNameError, match="legate2023_cifar10"):
        get_protocol("legate2023")
    with pytest.raises(UnknownNameError, match="mlp_head"):
        get_protocol("legate2023_cifar10").method("ft")


# ------------------------------------------------------------------------------------------------ the job
def test_cli_fl_run_writes_tidy_rows_and_curve(cifar10_like, tmp_path, capsys) -> None:
    tr, te, part = cifar10_like
    out, curve, record = tmp_path / "run.csv", tmp_path / "curve.csv", tmp_path / "rec.json"
    rc = cli_main([
        "fl-run", "--protocol", "legate2023_cifar10", "--method", "lp", "--train", str(tr), "--test", str(te),
        "--partition", str(part), "--seed", "1", "--out", str(out), "--curve", str(curve),
        "--record", str(record), "--set", "rounds=3", "--set", "client_lr=0.05", "--device", "cpu",
        "--no-progress",
    ])  # fmt: skip
    assert rc == 0 and "accuracy" in capsys.readouterr().out
    rows = pd.read_csv(out)
    assert list(rows.columns) == list(TIDY_COLUMNS)
    got = dict(zip(rows["metric"], rows["value"], strict=True))
    assert set(got) == {
        "accuracy", "accuracy_best", "accuracy_last", "uplink_bytes", "downlink_bytes", "compute_f", "rounds",
        "best_round",
    }  # fmt: skip
    assert set(rows["method"]) == {"lp"} and set(rows["seed"]) == {1} and set(rows["clients"]) == {100}
    assert rows["paper"].isna().all() and rows["cell"].isna().all()  # the caller's to fill
    c = read_curve(curve)
    assert list(c.columns) == list(CURVE_COLUMNS)
    # 3 FLSim epochs = 12 rounds, evaluated once per FLSim epoch (every 4 rounds) and at round 0
    assert list(c["round"]) == list(range(13)) and got["rounds"] == 12
    evaluated = c[~c["accuracy"].isna()]
    assert list(evaluated["round"]) == [0, 4, 8, 12]
    # reported accuracy = best on test over the evaluations after round 0 (first maximum wins)
    trained = evaluated[evaluated["round"] > 0]
    best = trained.loc[trained["accuracy"].idxmax()]
    assert got["accuracy"] == pytest.approx(best["accuracy"], abs=1e-4) == got["accuracy_best"]
    assert got["best_round"] == best["round"]
    assert got["accuracy_last"] == pytest.approx(trained["accuracy"].iloc[-1], abs=1e-4)
    # costs: head = 10 x 16 + 10 floats, 30 clients x 12 rounds both ways, 20 samples per client (1F each)
    assert got["uplink_bytes"] == got["downlink_bytes"] == c["uplink_bytes"].iloc[-1] == 4 * 170 * 30 * 12
    assert got["compute_f"] == c["compute_f"].iloc[-1] == 30 * 12 * 20
    rec = json.loads(record.read_text())
    assert rec["overrides"] == {"rounds": 3, "client_lr": 0.05} and rec["config"]["rounds"] == 12
    assert rec["inputs"]["partition"]["scheme"] == "dirichlet"


def test_selection_last_is_an_explicit_option(cifar10_like, tmp_path) -> None:
    tr, te, part = cifar10_like
    proto = get_protocol("legate2023_cifar10")
    inputs = load_inputs(tr, te, part, proto)
    kw = {"rounds": 4, "client_lr": 0.3}
    best = run_fl_job(proto, "lp", inputs, seed=0, overrides=kw, device="cpu", progress=False)
    last = run_fl_job(
        proto, "lp", inputs, seed=0, overrides={**kw, "selection": "last"}, device="cpu", progress=False
    )
    accs = [[r.test_acc for r in j.result.history if r.round > 0] for j in (best, last)]
    np.testing.assert_array_equal(*accs)  # same run, different reported number
    assert best.result.reported_acc == best.result.best_acc
    assert last.result.reported_acc == last.result.last_acc
    # (that the two rules pick different rounds on a non-monotone history: test_fl_engine selection test)
    got = {r["metric"]: r["value"] for r in last.rows}
    assert got["accuracy"] == round(100 * last.result.last_acc, 4)


def test_same_seed_same_curve_other_seed_differs(cifar10_like, tmp_path) -> None:
    tr, te, part = cifar10_like
    curves = []
    for i, seed in enumerate((4, 4, 5)):
        fl_run_step(
            protocol="legate2023_cifar10", method="lp", train=tr, test=te, partition=part, seed=seed,
            out=tmp_path / f"r{i}.csv", curve=tmp_path / f"c{i}.csv", overrides={"rounds": 2},
            device="cpu", progress=False,
        )  # fmt: skip
        curves.append(read_curve(tmp_path / f"c{i}.csv").drop(columns=["wall_s", "seed"]))
    pd.testing.assert_frame_equal(curves[0], curves[1])
    assert not curves[0]["train_loss"].equals(curves[2]["train_loss"])


def near_ties(head, x: np.ndarray, rel: float = 1e-4) -> int:
    """Samples whose top-2 logit margin is at most ``rel`` of their largest |logit|. A float32 dot product over
    d features moves by at most ~d * 2^-24 relative in another summation order (1e-6 for d = 16 here), so only
    these samples can be classified differently by two libraries evaluating the same head."""
    z = head.logits(x).astype(np.float64)
    top2 = np.sort(z, axis=1)[:, -2:]
    return int(np.sum(top2[:, 1] - top2[:, 0] <= rel * np.abs(z).max(axis=1)))


def test_two_stage_job_starts_from_exactly_the_closed_form_head(cifar100_like) -> None:
    tr, te, part = cifar100_like
    proto = get_protocol("fedcof_cifar100_lp")
    inputs = load_inputs(tr, te, part, proto)
    for method, init in (("fedncm_lp", "fedncm"), ("fedcof_lp", "fedcof")):
        job = run_fl_job(proto, method, inputs, seed=2, overrides={"rounds": 0}, device="cpu", progress=False)
        opts = paper_protocol_options(init, paper="fedcof-multiround", model_name="squeezenet1_1")
        if init == "fedcof":
            opts["seed"] = job.config.seeds.int_seed("init_noise")
        (x, y), (xt, yt) = inputs.train_np, inputs.test_np
        ref = run_method(
            init, x, y, xt, yt, list(inputs.features.client_indices), 100, participation=0.3,
            schedule_seed=job.init["schedule_seed"], **opts,
        )  # fmt: skip
        assert np.array_equal(job.result.head_state["weight"], ref.head.W.astype(np.float32))
        assert np.array_equal(job.result.head_state["bias"], ref.head.b.astype(np.float32))
        c = job.curve
        init_rows, lp_rows = c[c["stage"] == "init"], c[c["stage"] == "lp"]
        assert len(lp_rows) == 1 and job.config.rounds == 0  # rounds=0: the starting head only
        assert len(init_rows) == job.init["rounds"] >= 2  # multi-round initialisation, 30 % at a time
        assert job.init["all_clients_seen"]
        # the LP stage starts where the initialisation ended: same head, same accuracy, costs carried on
        assert lp_rows["round"].iloc[0] == init_rows["round"].iloc[-1]
        # the LP stage evaluates the same float32 head with torch, ref with numpy (another BLAS, another
        # summation order): only a test sample whose top-2 margin is within float32 rounding may differ
        flips = 100.0 * near_ties(ref.head, xt) / len(yt)
        assert lp_rows["accuracy"].iloc[0] == pytest.approx(ref.accuracy, abs=flips + 1e-9)
        assert init_rows["accuracy"].iloc[-1] == pytest.approx(ref.accuracy, abs=1e-9)  # same code path
        assert (
            lp_rows["uplink_bytes"].iloc[0]
            == init_rows["uplink_bytes"].iloc[-1]
            == 4 * ref.uplink_floats.sum()
        )
        assert init_rows["downlink_bytes"].eq(0).all() and init_rows["compute_f"].iloc[-1] == 3000


def test_two_stage_job_trains_from_the_init_and_counts_both_stages(cifar100_like) -> None:
    tr, te, part = cifar100_like
    proto = get_protocol("fedcof_cifar100_lp")
    inputs = load_inputs(tr, te, part, proto)
    job = run_fl_job(
        proto, "fedncm_lp", inputs, seed=0, overrides={"rounds": 2}, device="cpu", progress=False
    )
    c, res = job.curve, job.result
    n_init = job.init["rounds"]
    assert res.best_round > n_init  # selection ignores the init stage and the starting head
    head_floats = 100 * D + 100
    assert res.costs.uplink_bytes == job.init["uplink_bytes"] + 4 * head_floats * 30 * 8
    assert res.costs.downlink_bytes == 4 * head_floats * 30 * 8
    assert c["round"].is_monotonic_increasing and c["uplink_bytes"].is_monotonic_increasing


def test_load_inputs_names_the_mismatched_field(cifar10_like, cifar100_like, tmp_path) -> None:
    tr, te, part = cifar10_like
    tr100, te100, part100 = cifar100_like
    p = get_protocol("legate2023_cifar10")
    with pytest.raises(ConfigError, match="'split'"):
        load_inputs(te, te, part, p)
    with pytest.raises(ConfigError, match="'dataset'"):
        load_inputs(tr, te100, part, p)
    with pytest.raises(ConfigError, match="'dataset'"):
        load_inputs(tr100, te100, part100, p)
    y = np.arange(2000) % 10
    with pytest.raises(ConfigError, match="num_clients"):
        load_inputs(tr, te, write_partition(tmp_path, y, clients=50), p)
    with pytest.raises(ConfigError, match="alpha"):
        load_inputs(tr, te, write_partition(tmp_path, y, alpha=0.5), p)
    # the override makes the same inputs acceptable, and is what the error suggests
    load_inputs(tr, te, write_partition(tmp_path, y, alpha=0.5), p.with_overrides("lp", {"alpha": 0.5}))


def test_cli_error_is_one_line(cifar10_like, tmp_path, capsys) -> None:
    tr, te, part = cifar10_like
    rc = cli_main([
        "fl-run", "--protocol", "legate2023_cifar10", "--method", "lp", "--train", str(tr), "--test", str(te),
        "--partition", str(part), "--seed", "0", "--out", str(tmp_path / "x.csv"), "--set", "lr=0.1",
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "lr" in err and not (tmp_path / "x.csv").exists()


# ------------------------------------------------------------------------------------------------ plots
def test_plots_from_curve_files_average_seeds(cifar10_like, cifar100_like, tmp_path) -> None:
    tr, te, part = cifar10_like
    files = []
    for seed in (0, 1):
        f = tmp_path / f"c{seed}.csv"
        fl_run_step(
            protocol="legate2023_cifar10", method="lp", train=tr, test=te, partition=part, seed=seed,
            out=tmp_path / f"r{seed}.csv", curve=f, overrides={"rounds": 2}, device="cpu", progress=False,
        )  # fmt: skip
        files.append(f)
    tr1, te1, part1 = cifar100_like
    two = tmp_path / "two.csv"
    fl_run_step(
        protocol="fedcof_cifar100_lp", method="fedcof_lp", train=tr1, test=te1, partition=part1, seed=0,
        out=tmp_path / "r2.csv", curve=two, overrides={"rounds": 1}, device="cpu", progress=False,
    )  # fmt: skip
    stages = mean_curve(files, "round")
    a, b = (read_curve(f) for f in files)
    ev = ~a["accuracy"].isna()
    np.testing.assert_allclose(
        stages["lp"][1], (a["accuracy"][ev].to_numpy() + b["accuracy"][ev].to_numpy()) / 2
    )
    assert set(mean_curve([two], "communication")) == {"init", "lp"}
    png = plot_curves(
        {"LP": files, "FedCOF+LP": two},
        tmp_path / "fig.png",
        axes=("round", "communication", "compute", "wall"),
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from benchmark.apps.plots import main as plots_main

    assert plots_main(["--out", str(tmp_path / "cli.png"), f"LP={files[0]},{files[1]}"]) == 0
    assert (tmp_path / "cli.png").is_file()
    assert plots_main(["--out", str(tmp_path / "bad.png"), f"LP={tmp_path / 'missing.csv'}"]) == 2


# ------------------------------------------------------------------------------------------------ lr grid
def test_validation_split_is_stratified_disjoint_and_seeded() -> None:
    from benchmark.apps.tuning import validation_split

    y = np.repeat(np.arange(5), [30, 20, 10, 40, 9])
    tr, val = validation_split(y, 0.1, 0)
    assert np.intersect1d(tr, val).size == 0 and tr.size + val.size == y.size
    assert np.bincount(y[val], minlength=5).tolist() == [3, 2, 1, 4, 0]
    assert np.array_equal(val, validation_split(y, 0.1, 0)[1])
    assert not np.array_equal(val, validation_split(y, 0.1, 1)[1])
    with pytest.raises(ConfigError, match="val_fraction"):
        validation_split(y, 1.0, 0)


def test_lr_grid_search_selects_on_validation_split_of_train(cifar10_like, tmp_path) -> None:
    from benchmark.apps.tuning import lr_grid_search, main

    tr, te, _ = cifar10_like
    rec = lr_grid_search(
        "legate2023_cifar10",
        "lp",
        tr,
        grid=(1e-5, 0.5),
        overrides={"rounds": 2},
        device="cpu",
        progress=False,
    )
    assert rec["validation"]["val_rows"] == 200 and rec["validation"]["train_rows"] == 1800
    assert rec["partition"]["params"]["num_clients"] == 100 and rec["rounds"] == 8
    accs = {r["client_lr"]: r["val_selected"] for r in rec["results"]}
    assert accs[0.5] > accs[1e-5] and rec["chosen_client_lr"] == 0.5
    assert rec["grid_source"] == "custom" and rec["selection"] == "best_on_test"
    # the test split is never an input; a test pointer passed as --train is refused
    out = tmp_path / "grid.json"
    assert (
        main(["--protocol", "legate2023_cifar10", "--method", "lp", "--train", str(te), "--out", str(out)])
        == 2
    )
    assert not out.exists()


def test_protocol_learning_rates_match_their_grid_records() -> None:
    """A protocol lr taken from the validation grid must equal the choice recorded in benchmark/fl/lr_grid/,
    and the record must come from the protocol's own setting (rounds, selection, the legate2023 grid)."""
    from benchmark.apps.tuning import LEGATE2023_FEDAVG_GRID, LR_GRID_DIR

    checked = 0
    for name in list_protocols():
        proto = get_protocol(name)
        for method, spec in proto.methods.items():
            if "lr_grid/" not in spec.lr_source:
                continue
            path = LR_GRID_DIR / f"{name}-{method}.json"
            assert path.name in spec.lr_source and path.is_file(), path
            rec = json.loads(path.read_text())
            assert (rec["protocol"], rec["method"], rec["kind"]) == (name, method, "lr_grid")
            assert spec.client_lr == rec["chosen_client_lr"]
            best = max(rec["results"], key=lambda r: r["val_selected"])
            assert best["client_lr"] == rec["chosen_client_lr"]
            assert set(rec["grid"]) <= set(LEGATE2023_FEDAVG_GRID)
            assert rec["rounds"] == proto.real_rounds(method) and rec["selection"] == proto.selection
            assert rec["train_features"]["dataset"] == proto.dataset
            checked += 1
    assert checked >= 1


def test_mean_curve_aligns_stages_that_start_at_seed_dependent_rounds() -> None:
    def frame(start: int, accs: list[float], init_len: int) -> pd.DataFrame:
        rows = [(r + 1, "init", 40.0 + r) for r in range(init_len)]
        rows += [(start + 4 * i, "lp", a) for i, a in enumerate(accs)]
        return pd.DataFrame(
            [
                {
                    "round": r,
                    "stage": s,
                    "accuracy": a,
                    "uplink_bytes": 10 * r,
                    "downlink_bytes": 0,
                    "compute_f": r,
                }
                for r, s, a in rows
            ]
        )

    a, b = frame(10, [50.0, 52.0, 54.0], 10), frame(12, [51.0, 55.0, 56.0], 12)
    got = mean_curve([a, b], "round")
    np.testing.assert_allclose(got["lp"][0], [11.0, 15.0, 19.0])  # x averaged
    np.testing.assert_allclose(got["lp"][1], [50.5, 53.5, 55.0])  # mean
    np.testing.assert_allclose(got["lp"][2], [50.0, 52.0, 54.0])  # min
    assert len(got["init"][0]) == 10  # init lengths differ: the first run is drawn
    with pytest.raises(ConfigError, match="different rounds"):
        mean_curve([a, frame(12, [51.0, 55.0], 12)], "round")


def test_mean_curve_of_one_protocol_evaluated_at_other_rounds_is_at_the_rounds_every_run_evaluated() -> None:
    """A pfl seed recorded when every round was evaluated beside one evaluated at its last round only (fedbabu
    FedAvg s = 2, tau = 10, seeds 0 and 1, 2026-12-07): the same 32 rounds, averaged at the round both evaluated.
    Runs of other lengths still refuse to average."""

    def run(accs: dict[int, float], rounds: int = 32) -> pd.DataFrame:
        return pd.DataFrame([{"round": r, "stage": "fedavg", "accuracy": accs.get(r, np.nan), "uplink_bytes": r,
                              "downlink_bytes": 0, "compute_f": r} for r in range(1, rounds + 1)])  # fmt: skip

    every = run({r: float(r) for r in range(1, 33)})
    last = run({32: 40.0})
    got = mean_curve([every, last], "round")
    np.testing.assert_allclose(got["fedavg"][0], [32.0])
    np.testing.assert_allclose(got["fedavg"][1:], [[36.0], [32.0], [40.0]])
    with pytest.raises(ConfigError, match="different rounds"):
        mean_curve([every, run({30: 40.0}, rounds=30)], "round")
    with pytest.raises(ConfigError, match="different rounds"):
        mean_curve([run({31: 1.0}), last], "round")  # no round that both evaluated
