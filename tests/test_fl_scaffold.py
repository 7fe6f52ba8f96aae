"""SCAFFOLD, the plug-in of docs/extending.md: one file (benchmark/fl/scaffold.py) on the one round loop.

What it must do: be FedAvg bit for bit where its correction vanishes (one client, full participation), keep the
server's control variate the mean of the clients' under full participation (Karimireddy et al. 2020, Alg. 1),
move differently from FedAvg on heterogeneous clients, and resume from the engine's checkpoint bit-identically.
"""

from __future__ import annotations

import pytest
import torch
from test_fl_engine import cfg_for, make_data, make_model

from benchmark.federated.checkpoint import CheckpointSpec
from benchmark.fl.engine import FL_TRAINERS, run_federated
from benchmark.fl.scaffold import ScaffoldTrainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(algorithm: str, num_clients: int, **kw):
    model = make_model()
    clients, test = make_data(num_clients)
    cfg = cfg_for(num_clients=num_clients, **kw)
    res = run_federated(model, clients, test, cfg, train_part="all", method="ft", algorithm=algorithm)
    return model, res


def test_scaffold_is_registered_by_name() -> None:
    assert FL_TRAINERS.get("scaffold") is ScaffoldTrainer


def test_scaffold_with_one_client_is_fedavg_bit_for_bit() -> None:
    fed, res_f = _run("fedavg", 1, participation=1.0, rounds=3, client_momentum=0.5)
    sca, res_s = _run("scaffold", 1, participation=1.0, rounds=3, client_momentum=0.5)
    for (n, a), (_, b) in zip(fed.state_dict().items(), sca.state_dict().items(), strict=True):
        assert torch.equal(a, b), n
    assert [r.test_acc for r in res_f.history] == [r.test_acc for r in res_s.history]
    assert res_s.costs.uplink_bytes == 2 * res_f.costs.uplink_bytes  # control variates travel too


def test_scaffold_differs_from_fedavg_and_keeps_c_the_mean_of_the_clients() -> None:
    fed, _ = _run("fedavg", 4, participation=1.0, rounds=2)
    model = make_model()
    clients, test = make_data(4)
    trainer = ScaffoldTrainer(model, clients, test, cfg_for(participation=1.0, rounds=2), train_part="all")
    for r in range(2):
        trainer.train_round(r, torch.arange(4).numpy(), 0.1)
    assert not torch.equal(fed.head.weight, model.head.weight)
    for n, c in trainer.c.items():
        mean = torch.stack([trainer.c_client[k][n] for k in range(4)]).mean(0)
        torch.testing.assert_close(c, mean, rtol=1e-12, atol=1e-12)


def test_scaffold_resumes_bit_identically_from_the_engine_checkpoint(tmp_path) -> None:
    clients, test = make_data(4)
    cfg = cfg_for(rounds=4, participation=0.75)
    whole = make_model()
    run_federated(whole, clients, test, cfg, train_part="all", method="ft", algorithm="scaffold")
    spec = CheckpointSpec(tmp_path / "run.ckpt", every=1)
    first = make_model()
    stop = {}

    def interrupt(r: int) -> None:
        if r == 2 and not stop:
            stop["at"] = r
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_federated(first, clients, test, cfg, train_part="all", method="ft", algorithm="scaffold",
                      checkpoint=spec, on_round_end=interrupt)  # fmt: skip
    resumed = make_model()
    run_federated(
        resumed, clients, test, cfg, train_part="all", method="ft", algorithm="scaffold", checkpoint=spec
    )
    for (n, a), (_, b) in zip(whole.state_dict().items(), resumed.state_dict().items(), strict=True):
        assert torch.equal(a, b), n
    assert stop == {"at": 2}
