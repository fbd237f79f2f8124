"""Sharding the recompute across processes started by `torchrun --nproc-per-node N`.

Every rank reads the inputs, recomputes its share of the records (longest first, dealt round-robin so
the shares have similar token counts), and sends its scores to rank 0, which alone measures and writes
the reports. Without torchrun's environment (WORLD_SIZE unset or 1) nothing here touches torch.distributed.
"""

from __future__ import annotations

import os

from .records import RolloutRecord


def world() -> tuple[int, int]:
    """(rank, world size) from torchrun's environment; (0, 1) when not started by torchrun."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def init(device: str) -> tuple[int, int]:
    """Join the process group when started under torchrun (nccl on GPUs, gloo on CPU)."""
    rank, size = world()
    if size <= 1:
        return rank, size
    import torch.distributed as dist

    if not dist.is_initialized():
        if device.startswith("cuda"):
            import torch

            torch.cuda.set_device(torch.device(device))
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    return dist.get_rank(), dist.get_world_size()


def shard(records: list[RolloutRecord], rank: int, size: int) -> list[int]:
    """The record indices this rank recomputes."""
    order = sorted(range(len(records)), key=lambda i: -records[i].n_context)
    return order[rank::size]


def gather(local: dict, rank: int, size: int) -> dict | None:
    """Merge every rank's {record index: scores} on rank 0; other ranks get None."""
    if size <= 1:
        return local
    import torch.distributed as dist

    parts = [None] * size if rank == 0 else None
    dist.gather_object(local, parts, dst=0)
    if rank != 0:
        return None
    merged: dict = {}
    for part in parts:
        merged.update(part)
    return merged


def finish(size: int, *, wait: bool = True) -> None:
    """Leave the process group (after a barrier when every rank got this far without an error)."""
    if size > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            if wait:
                dist.barrier()
            dist.destroy_process_group()
