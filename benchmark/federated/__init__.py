"""The one federated training core that every family is a plug-in of.

* :mod:`~benchmark.federated.loop` - :func:`run_rounds`, the round loop; :class:`RoundTrainer`, what an
  algorithm overrides; :class:`RoundPlan`, one stage's rounds, sampler, lr schedule and evaluation cadence.
* :mod:`~benchmark.federated.history` - the one history format: :class:`Costs`, :class:`RoundRecord`,
  :class:`RoundStats`.
* :mod:`~benchmark.federated.sampling` - client samplers.
* :mod:`~benchmark.federated.server_opt` - weighted delta averaging and the server optimisers, registered by
  name.
* :mod:`~benchmark.federated.checkpoint` - one checkpoint / resume format.
* :mod:`~benchmark.federated.progress` - progress bars and log lines.
* :mod:`~benchmark.federated.vectorised` - :class:`LockstepSGD`, the one lock-step executor: many clients'
  local SGD at once with ``torch.func`` (the ``client_exec="vectorised"`` of :mod:`benchmark.fl` and
  :mod:`benchmark.pfl`).
* :mod:`~benchmark.federated.images` - the one on-device image store (:class:`DeviceImages`) and fedbabu's
  augmentation.
* :mod:`~benchmark.federated.precision` - the one precision policy (:class:`Precision`, :func:`precision_from`).

The families: :mod:`benchmark.fl` (legate2023: FedAvg / FedProx / FedAdam with FT, LP, Random, two-stage),
:mod:`benchmark.pfl` (fedbabu: FedBABU and the personalised baselines), :mod:`benchmark.zo` (bernier2024:
MeZO, FedMeZO, DistMeZO, SLoRA). docs/extending.md shows how to add an algorithm.
"""
