"""Data-parallel AMP training under torchrun: DDP (one GradScaler per process) or FSDP2.

Run it with two CPU processes (gloo) or one process per GPU (NCCL)::

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m amp_course.dist_train \\
        --strategy ddp --dtype fp16 --steps 5 --out runs/ddp

Each rank trains the tiny ViT on its own shard of real MNIST and, with ``--out``, writes
``rank<R>.json`` holding a checksum of every parameter (gathered: under FSDP every rank gathers
the same one model, so only DDP's can differ) and of what the rank itself holds (under FSDP its
shards), so a test can check that DDP's ranks end with identical weights, and rank 0 writes
``params.pt`` (every parameter, gathered) so a test can compare them with ``reference_state``:
one process trained on the ranks' batches concatenated.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from . import precisions
from .data import load_mnist
from .device_index import cuda_index
from .lesson import rehearse, seed_everything
from .models import build_vit
from .recipe import AmpRecipe
from .training import amp_step

STRATEGIES = ("ddp", "fsdp")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m amp_course.dist_train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--strategy", choices=STRATEGIES, default="ddp")
    parser.add_argument("--dtype", default="fp16", help="fp32, fp16 or bf16 (the AMP dtype)")
    parser.add_argument("--steps", type=int, default=5, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=32, help="per-process batch size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument(
        "--optimizer",
        choices=("adamw", "sgd"),
        default="adamw",
        help="sgd makes the step proportional to the gradient, so a test can "
        "tell averaged from summed gradients (AdamW's step hides a factor)",
    )
    parser.add_argument("--out", default=None, help="folder for each rank's parameter checksum")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be >= 1")
    args.precision = precisions.get(args.dtype)  # read once: the recipes below carry it
    return args


def setup() -> tuple[int, int, torch.device]:
    """Join the process group torchrun describes: NCCL with one GPU per rank, else gloo on CPU."""
    if "RANK" not in os.environ:
        raise RuntimeError(
            "Launch this module with torchrun: python -m torch.distributed.run "
            "--standalone --nproc_per_node=2 -m amp_course.dist_train ..."
        )
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(cuda_index(device))
        rehearse(device)  # a rehearsed T4's cap, kernels and TF32, as in the lesson's kernel
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), device


def mixed_precision_policy(recipe: AmpRecipe):
    """FSDP2's MixedPrecisionPolicy for training with ``recipe`` (an ``ac.recipe.AmpRecipe``)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    # FSDP2 casts the sharded fp32 parameters to param_dtype when it gathers them, and reduces
    # gradients in reduce_dtype: an fp32 reduction sums many small gradients more accurately than
    # a bf16 one (not exactly: fp32 rounds too). param_dtype=None: fp32 training, no cast.
    low = recipe.autocast_dtype if recipe.enabled else None
    return MixedPrecisionPolicy(param_dtype=low, reduce_dtype=torch.float32)


def wrap_model(model: torch.nn.Module, strategy: str, recipe: AmpRecipe) -> torch.nn.Module:
    """DDP, or FSDP2 with the recipe's MixedPrecisionPolicy, on the recipe's device."""
    device = recipe.device
    if strategy == "ddp":
        return torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    try:  # FSDP2 is public from torch 2.6; it runs on CPU with gloo as well as on NCCL GPUs
        from torch.distributed.fsdp import fully_shard
    except ImportError as error:
        raise RuntimeError(
            f"FSDP2 (fully_shard) needs torch >= 2.6; this is {torch.__version__}. "
            "Use --strategy ddp."
        ) from error

    policy = mixed_precision_policy(recipe)
    for layer in model.encoder.layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    # param_dtype alone would run every op in the low dtype, layer_norm and the loss included.
    # Autocast on top runs the ops on its fp32 list in fp32: the loss on every device, and on CUDA
    # layer_norm too (CPU autocast's fp32 list leaves it out); this ViT's attention is one SDPA
    # kernel, on the 16-bit list, so no softmax of its own runs.
    return model


def make_scaler(strategy: str, recipe: AmpRecipe):
    """One torch.amp.GradScaler per process, enabled only for fp16, for DDP and FSDP2 alike.

    DDP all-reduces the gradients before ``scaler.step``, so every rank finds the same infs.
    FSDP2 keeps gradients as DTensor shards, and GradScaler's inf check on DTensors runs through
    DTensor's dispatcher, which all-reduces the found-inf flag over the mesh
    (pytorch/pytorch#132816): every rank skips together. FSDP1 (the FullyShardedDataParallel
    wrapper, plain-tensor shards) is the case that needs ShardedGradScaler instead.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy!r}. Valid choices: {', '.join(STRATEGIES)}.")
    return recipe.scaler()


def full_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter as a full CPU fp32 tensor (gathering FSDP shards)."""
    return _state(model, "full_tensor")


def local_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter as this rank holds it: its FSDP2 shard, or (DDP) the whole tensor."""
    return _state(model, "to_local")


def _state(model: torch.nn.Module, view: str) -> dict[str, torch.Tensor]:
    """Every parameter as a CPU fp32 tensor, an FSDP2 DTensor through its method ``view``."""
    state = {}
    for name, param in model.named_parameters():
        tensor = param.detach()
        if hasattr(tensor, view):  # an FSDP2 DTensor
            tensor = getattr(tensor, view)()
        state[name.removeprefix("module.")] = tensor.float().cpu()
    return state


def checksum(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 over every parameter's bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def make_optimizer(args: argparse.Namespace, model: torch.nn.Module) -> torch.optim.Optimizer:
    if args.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=args.lr)
    return torch.optim.AdamW(model.parameters(), lr=args.lr)


def shard_loader(train_set, args: argparse.Namespace, rank: int, world_size: int):
    """Rank ``rank``'s batches: its own shard of a seeded shuffle of the training set."""
    sampler = torch.utils.data.DistributedSampler(
        train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed
    )
    return torch.utils.data.DataLoader(
        train_set, batch_size=args.batch_size, sampler=sampler, drop_last=True
    )


def reference_state(args: argparse.Namespace, world_size: int = 2) -> dict[str, torch.Tensor]:
    """Parameters after training in ONE process, no DDP/FSDP, on the CPU.

    Each step trains on the batches the ``world_size`` ranks would see, concatenated. The mean
    loss over the concatenated batch has exactly the average of the ranks' gradients, so a
    correct data-parallel run ends with these parameters up to floating-point rounding.
    """
    recipe = AmpRecipe("cpu", args.precision)
    seed_everything(args.seed)
    model = build_vit("tiny").to(recipe.device)
    optimizer = make_optimizer(args, model)
    scaler = recipe.scaler()
    train_set = load_mnist().train
    shards = [iter(shard_loader(train_set, args, rank, world_size)) for rank in range(world_size)]
    for _ in range(args.steps):
        batches = [next(shard) for shard in shards]
        images = torch.cat([images for images, _ in batches])
        labels = torch.cat([labels for _, labels in batches])
        amp_step(model, optimizer, scaler, recipe, (images, labels))
    return full_state(model)


def train(args: argparse.Namespace) -> dict:
    """Join torchrun's process group, ``run`` the training ``args`` describe, leave the group."""
    rank, world_size, device = setup()
    try:
        return run(args, rank, world_size, device)
    finally:
        dist.destroy_process_group()


def run(args: argparse.Namespace, rank: int, world_size: int, device: torch.device) -> dict:
    """Train as ``args`` says in the process group this rank has joined; its report (also written
    to ``args.out``, with rank 0's full parameters)."""
    # Each rank reads its own interleaved shard: rank r takes samples r, r + W, r + 2W, ...
    loader = shard_loader(load_mnist().train, args, rank, world_size)
    if args.steps > len(loader):  # next() would end in a bare StopIteration, after the build
        raise ValueError(
            f"{args.steps} steps need {args.steps} batches on each of {world_size} ranks; a "
            f"rank's share of the digits here holds {len(loader)}: fewer steps, or more digits"
        )
    seed_everything(args.seed)  # the same seed everywhere: every rank starts from equal weights
    recipe = AmpRecipe(device, args.precision)
    model = wrap_model(build_vit("tiny").to(device), args.strategy, recipe)
    optimizer = make_optimizer(args, model)
    scaler = make_scaler(args.strategy, recipe)

    losses, skipped = [], 0
    batches = iter(loader)
    for _ in range(args.steps):
        batch = tuple(t.to(device) for t in next(batches))
        step = amp_step(model, optimizer, scaler, recipe, batch)  # one rank's step
        losses.append(step.loss.item())
        skipped += step.skipped

    state = full_state(model)
    report = {
        "rank": rank,
        "world_size": world_size,
        "strategy": args.strategy,
        "dtype": args.dtype,
        "device": str(device),
        "backend": dist.get_backend(),
        "losses": losses,
        "skipped_steps": skipped,
        "scale": scaler.get_scale() if scaler.is_enabled() else None,
        "checksum": checksum(state),  # of the gathered parameters: one model under FSDP
        "local_checksum": checksum(local_state(model)),  # of what this rank holds
        "param_sums": {name: float(t.double().sum()) for name, t in sorted(state.items())},
    }
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"rank{rank}.json").write_text(json.dumps(report, indent=1))
        if rank == 0:
            torch.save(state, out / "params.pt")
    print(
        f"[rank {rank}/{world_size} {report['backend']} {args.strategy} {args.dtype}] "
        f"losses {' '.join(f'{x:.3f}' for x in losses)} | skipped {skipped} | "
        f"gathered checksum {report['checksum'][:12]}, of its own part "
        f"{report['local_checksum'][:12]}",
        flush=True,
    )
    return report


def main(argv: list[str] | None = None) -> int:
    train(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
