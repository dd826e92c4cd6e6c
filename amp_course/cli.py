"""The ``amp-course`` command: hardware info, data checks and the precision benchmark."""

from __future__ import annotations

import argparse
import sys


def _info(args) -> int:
    from .device import dtype_name, pick_autocast_dtype, pick_device
    from .lesson import describe_hardware

    device = pick_device(args.device)
    print(describe_hardware(device))
    print(f"autocast dtype for this device: {dtype_name(pick_autocast_dtype(device))}")
    return 0


def _check_data(args) -> int:
    from .data import DataIntegrityError, load_mnist_subset

    try:
        images, labels = load_mnist_subset(args.path)
    except DataIntegrityError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"ok: {len(labels)} digits, {images.shape[1]}x{images.shape[2]}, SHA-256 verified")
    return 0


def _bench(args) -> int:
    from .bench import BenchConfig, format_report, run, slug, write_report
    from .device import pick_device

    device = pick_device(args.device)
    smoke = args.smoke if args.smoke is not None else device.type != "cuda"
    changes = {"compile": args.compile, "fused": args.fused}
    for key in ("precisions", "workloads"):
        if getattr(args, key):
            changes[key] = tuple(getattr(args, key).split(","))
    if args.rounds is not None:
        changes["rounds"] = args.rounds
    config = (BenchConfig.smoke_config if smoke else BenchConfig.full)(**changes)
    try:
        config.validate()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report = run(config, device)
    print(format_report(report))
    out = args.out or f"reports/{slug(report['device'])}{'-smoke' if smoke else ''}"
    paths = write_report(report, out)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="amp-course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="describe this machine's device and its AMP dtype")
    info.add_argument("--device", default="auto", help="auto, cpu or cuda")
    info.set_defaults(func=_info)
    check = sub.add_parser("check-data", help="verify the shipped MNIST subset's checksum")
    check.add_argument("path", nargs="?", default=None, help="file to check (default: data/)")
    check.set_defaults(func=_check_data)
    bench = sub.add_parser("bench",
                           help="time fp32/TF32/fp16/bf16 on matmuls, the MNIST CNN and ViTs")
    bench.add_argument("--device", default="auto", help="auto, cpu or cuda")
    size = bench.add_mutually_exclusive_group()
    size.add_argument("--smoke", dest="smoke", action="store_true", default=None,
                      help="tiny sizes (the default on a CPU)")
    size.add_argument("--full", dest="smoke", action="store_false", help="full sizes (GPU default)")
    bench.add_argument("--precisions", help="comma-separated subset of fp32,tf32,fp16,bf16")
    bench.add_argument("--workloads", help="comma-separated subset of "
                       "matmul,mnist_cnn,vit_b16,vit_l16,max_batch")
    bench.add_argument("--compile", action="store_true",
                       help="add a torch.compile variant per precision")
    bench.add_argument("--fused", action="store_true",
                       help="add a fused-AdamW variant per precision")
    bench.add_argument("--rounds", type=int, help="round-robin passes over the modes")
    bench.add_argument("--out", help="folder for bench.json/.txt/.png (default: reports/<device>)")
    bench.set_defaults(func=_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
