"""Data: real MNIST (torchvision's, or the subset shipped in data/) and synthetic ImageNet-shaped
batches."""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from .paths import course_dir

SUBSET_FILE = "mnist_5k.csv.gz"
SUBSET_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"
SUBSET_TEST_PER_CLASS = 100  # of the 500 digits per class, the last 100 are the test split
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


class DataIntegrityError(ValueError):
    """A shipped data file is missing, damaged or not the file the course was built with."""


@dataclass
class MnistData:
    """Train and test splits of MNIST as normalised float tensors, with where they came from."""

    train: TensorDataset
    test: TensorDataset
    source: str


def data_dir() -> Path:
    """The course's data folder: $AMP_COURSE_DATA, else the one shipped with the package."""
    candidates = [Path(os.environ["AMP_COURSE_DATA"])] if os.environ.get("AMP_COURSE_DATA") else []
    candidates.append(course_dir("data"))
    for path in candidates:
        if (path / SUBSET_FILE).exists():
            return path
    raise DataIntegrityError(
        f"Cannot find the course's data folder with {SUBSET_FILE} (looked in: "
        + ", ".join(str(p) for p in candidates)
        + "). Reinstall the course (pip install .), or set AMP_COURSE_DATA to the repository's "
        "data/ folder."
    )


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_mnist_subset(path: Path | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The shipped 5,000-digit subset as uint8 images [N, 28, 28] and int64 labels.

    Checks the file's SHA-256 first.
    """
    path = Path(path) if path is not None else data_dir() / SUBSET_FILE
    if not path.exists():
        raise DataIntegrityError(f"MNIST subset not found at {path}.")
    digest = sha256_of(path)
    if digest != SUBSET_SHA256:
        raise DataIntegrityError(
            f"Refusing to use {path}: its SHA-256 is {digest}, expected {SUBSET_SHA256} "
            "(see data/README.md). The file is damaged or was replaced; restore it with "
            f"`git checkout -- data/{SUBSET_FILE}` or download the course again."
        )
    return _parse_subset(str(path))


@lru_cache(maxsize=2)
def _parse_subset(path: str) -> tuple[torch.Tensor, torch.Tensor]:
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.uint8)
    images = torch.from_numpy(table[:, :784].reshape(-1, 28, 28).copy())
    labels = torch.from_numpy(table[:, 784].astype(np.int64))
    return images, labels


def _normalise(images_uint8: torch.Tensor) -> torch.Tensor:
    return ((images_uint8.float() / 255.0 - MNIST_MEAN) / MNIST_STD).unsqueeze(1)


def _split_subset(images: torch.Tensor, labels: torch.Tensor):
    # Stratified and fixed: within each class, the last SUBSET_TEST_PER_CLASS digits are test.
    test_mask = torch.zeros(len(labels), dtype=torch.bool)
    for digit in range(10):
        where = (labels == digit).nonzero().flatten()
        test_mask[where[-SUBSET_TEST_PER_CLASS:]] = True
    return (images[~test_mask], labels[~test_mask]), (images[test_mask], labels[test_mask])


def _torchvision_mnist(root: Path, download: bool):
    from torchvision.datasets import MNIST

    train = MNIST(str(root), train=True, download=download)
    test = MNIST(str(root), train=False, download=download)
    return (train.data, train.targets), (test.data, test.targets)


def load_mnist(
    source: str = "auto", root: Path | str | None = None, download: bool | None = None
) -> MnistData:
    """Real MNIST digits, normalised, as train/test TensorDatasets.

    source: ``"torchvision"`` (the full 60k/10k set, downloading if allowed), ``"subset"`` (the
    5k digits shipped in data/), or ``"auto"``: torchvision's when present or downloadable, else the
    subset. download: None means try unless AMP_COURSE_OFFLINE=1 (set it where a download would
    hang rather than fail; the test suite sets it so every machine uses the same digits).
    """
    if source not in ("auto", "torchvision", "subset"):
        raise ValueError(f"Unknown MNIST source {source!r}. Valid: auto, torchvision, subset.")
    if download is None:
        download = os.environ.get("AMP_COURSE_OFFLINE") != "1"
    reason = "asked for"
    if source in ("auto", "torchvision"):
        if root is None:
            try:
                root = data_dir()
            except DataIntegrityError:
                root = Path.cwd() / "data"
        try:
            if not download and not (Path(root) / "MNIST" / "raw").is_dir():
                # Nothing on disk and no download allowed: skip importing torchvision.datasets.
                raise FileNotFoundError(f"no MNIST files under {Path(root) / 'MNIST' / 'raw'}")
            (xtr, ytr), (xte, yte) = _torchvision_mnist(Path(root), download)
            return MnistData(
                TensorDataset(_normalise(xtr), ytr),
                TensorDataset(_normalise(xte), yte),
                source=f"torchvision MNIST ({len(ytr)} train / {len(yte)} test)",
            )
        except Exception as error:  # noqa: BLE001 - any failure here means "use the shipped subset"
            if source == "torchvision":
                raise RuntimeError(
                    f"torchvision MNIST unavailable under {root}: {error}"
                ) from error
            reason = "full MNIST not present" + (" and download failed" if download else "")
    images, labels = load_mnist_subset()
    (xtr, ytr), (xte, yte) = _split_subset(images, labels)
    return MnistData(
        TensorDataset(_normalise(xtr), ytr),
        TensorDataset(_normalise(xte), yte),
        source=f"shipped MNIST subset ({len(ytr)} train / {len(yte)} test; {reason})",
    )


def mnist_loaders(
    batch_size: int = 64,
    num_train: int | None = None,
    num_test: int | None = None,
    seed: int = 0,
    data: MnistData | None = None,
    **load_kwargs,
):
    """Train and test DataLoaders over MNIST, optionally cut to ``num_train``/``num_test``
    digits."""
    data = data if data is not None else load_mnist(**load_kwargs)
    generator = torch.Generator().manual_seed(seed)

    def cut(dataset: TensorDataset, n: int | None) -> TensorDataset:
        if n is None or n >= len(dataset):
            return dataset
        index = torch.randperm(len(dataset), generator=generator)[:n]
        return TensorDataset(*(t[index] for t in dataset.tensors))

    train = cut(data.train, num_train)
    test = cut(data.test, num_test)
    train_loader = DataLoader(
        train, batch_size=batch_size, shuffle=True, generator=generator, drop_last=True
    )
    test_loader = DataLoader(test, batch_size=batch_size * 2)
    return train_loader, test_loader


def synthetic_images(
    batch_size: int,
    image_size: int = 224,
    channels: int = 3,
    num_classes: int = 1000,
    device=None,
    seed: int = 0,
):
    """An ImageNet-shaped batch (random pixels and labels) for speed and memory work."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(batch_size, channels, image_size, image_size, generator=generator)
    labels = torch.randint(0, num_classes, (batch_size,), generator=generator)
    return images.to(device), labels.to(device)
