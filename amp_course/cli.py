"""The ``amp-course`` command: hardware info and data checks (more subcommands join as lessons grow)."""

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


def _inspect(args) -> int:
    from .inspector import INSPECTED_FORMATS, describe, inspect

    unknown = [name for name in args.format if name not in INSPECTED_FORMATS]
    if unknown:
        print(f"error: unknown format {', '.join(unknown)}; choose from {', '.join(INSPECTED_FORMATS)}",
              file=sys.stderr)
        return 2
    for fields in inspect(args.value, args.format or INSPECTED_FORMATS):
        print(describe(fields))
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
    bits = sub.add_parser("inspect", help="show a number's bits in fp32, tf32, fp16, bf16 and fp8")
    bits.add_argument("value", type=float, help="the number, e.g. 0.1, 65520 or inf")
    bits.add_argument("--format", action="append", default=[],
                      help="a format to show (repeatable; default: all), e.g. --format fp16")
    bits.set_defaults(func=_inspect)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
