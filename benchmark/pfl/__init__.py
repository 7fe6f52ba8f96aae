"""Personalised federated learning from scratch (fedbabu: Oh et al., ICLR 2022): the CIFAR networks, the shards
and Dirichlet partitions with per-client test sets, FedAvg / FedBABU and their personalised-FL baselines,
per-client evaluation and personalisation (fine-tuning each client's copy). ``docs/fedbabu.md`` says what each
module reproduces and where it departs from the reference code (``jhoon-oh/FedBABU``)."""
