"""``amp-course check-data``: the shipped MNIST files against their SHA-256 (data/README.md): the
default data folder, another folder holding both, or one file under any name, checked as whichever
of the two it holds."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import env_vars
from .cli import _parser


def main(argv: list[str]) -> int:
    """``amp-course check-data [PATH]``."""
    parser = _parser("check-data")
    parser.add_argument(
        "path", nargs="?", default=None, help="a file, or a folder of both (default: data/)"
    )
    args = parser.parse_args(argv)

    from .data import (
        FULL_FILE,
        FULL_SHA256,
        SUBSET_FILE,
        SUBSET_SHA256,
        DataIntegrityError,
        data_dir,
        load_mnist_subset,
        sha256_of,
        verify_file,
    )

    try:
        folder = Path(args.path) if args.path else data_dir()
        given = os.environ.get(env_vars.DATA)
        if args.path is None and given and Path(given).resolve() != folder.resolve():
            print(f"note: ${env_vars.DATA} ({given}) holds no {SUBSET_FILE}; checking {folder}")
        paths = [folder / SUBSET_FILE, folder / FULL_FILE] if folder.is_dir() else [folder]
        for path in paths:
            full, digest = path.name == FULL_FILE, None
            if path.name != SUBSET_FILE and not full and path.is_file():
                digest = sha256_of(path)  # another name: whichever of the two it holds
                if digest not in (SUBSET_SHA256, FULL_SHA256):
                    raise DataIntegrityError(
                        f"{path} is neither of the course's MNIST files ({SUBSET_FILE}, "
                        f"{FULL_FILE}): its SHA-256 is {digest}"
                    )
                full = digest == FULL_SHA256
            if full:
                if digest is None:  # known by its name: its content not read yet
                    verify_file(path, FULL_SHA256)
                print(f"ok: full MNIST archive, SHA-256 verified ({path})")
                continue
            images, labels = load_mnist_subset(path)
            print(
                f"ok: {len(labels)} digits, {images.shape[1]}x{images.shape[2]}, "
                f"SHA-256 verified ({path})"
            )
    except DataIntegrityError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
