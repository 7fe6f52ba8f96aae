"""Several small jobs on one GPU (issue 28: "several small training jobs share one GPU when memory allows (a
gpu_slots-style resource, measured aggregate gain)").

Every GPU job's rule asks for the Snakemake resource ``gpu_slots`` besides ``gpu: 1`` (which the SLURM plug-in
turns into ``--gpus=1``: a cluster job keeps a GPU of its own). The local and default profiles offer
``gpu_slots=4`` (:data:`SLOTS_PER_GPU`): a job that fills a GPU asks for all four and runs alone, a job of a small
network asks for one, so four of them share the GPU. On a CPU build a job asks for none (no GPU to share).

What shares, from the measurements on a lent H100 (``benchmark/fl/measured/``, ``docs/performance.md``):

* the pfl runner's 4convNet (fedbabu's CIFAR-10 network, 0.3 GiB a job): the training loop's images/s summed
  over the copies were 1.80x one job's with 2 copies and 2.63x with 4 (whole processes, start-up included: 2.22x
  and 3.23x). Its jobs ask for one slot.
* SqueezeNet FT at 224 px (legate2023): 2 copies summed to 0.95x one job's loop (the GPU is already busy) and
  their centralised steps ran out of memory: FT jobs, feature extraction and every network not measured ask for
  the whole GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Slots of one GPU: the profiles' ``gpu_slots`` and what a whole-GPU job asks for (4 copies measured).
SLOTS_PER_GPU = 4
#: Networks measured to share a GPU well (one slot each).
SHARING_MODELS = frozenset({"4convnet"})


#: Device nodes of the drivers through which torch reaches a GPU (NVIDIA, NVIDIA under WSL, AMD ROCm): with none
#: of them, CUDA is not available, known without importing torch (seconds per Snakemake start on a CPU machine).
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg", "/dev/kfd")


def uses_gpu(device: Any) -> bool:
    """Whether a build with config ``device`` runs its training on a GPU (``null``: CUDA when available)."""
    if device is None:
        if not any(Path(node).exists() for node in GPU_DEVICE_NODES):
            return False
        import torch

        return torch.cuda.is_available()
    return str(device).startswith("cuda")


def job_gpu_slots(job: Any, device: Any) -> int:
    """The ``gpu_slots`` a job asks for: 0 on a CPU build, 1 for a pfl job of a network in
    :data:`SHARING_MODELS`, else the whole GPU (:data:`SLOTS_PER_GPU`)."""
    if not uses_gpu(device):
        return 0
    if str(getattr(job, "KIND", "")).startswith("pfl") and getattr(job, "model", None) in SHARING_MODELS:
        return 1
    return SLOTS_PER_GPU
