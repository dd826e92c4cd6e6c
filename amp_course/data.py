"""Data: real MNIST (the full set and a 5,000-digit subset, both shipped in data/, or torchvision's
files) and synthetic ImageNet-shaped batches."""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from . import env_vars
from .paths import DATA, course_dir

if TYPE_CHECKING:
    from .lesson import LessonSettings

SUBSET_FILE = "mnist_5k.csv.gz"
SUBSET_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"
SUBSET_TEST_PER_CLASS = 100  # of the 500 digits per class, the last 100 are the test split
FULL_FILE = "mnist_full.tar.xz"  # the four original IDX files, uncompressed, in one xz tar
FULL_SHA256 = "26238404fded0c41ced4202c8e24fe9305db15fcdb9d059f6669c2e7792b7491"
FULL_MEMBERS = {  # the IDX files in FULL_FILE and the shapes they hold
    "train-images-idx3-ubyte": (60000, 28, 28),
    "train-labels-idx1-ubyte": (60000,),
    "t10k-images-idx3-ubyte": (10000, 28, 28),
    "t10k-labels-idx1-ubyte": (10000,),
}
SOURCES = ("auto", "full", "torchvision", "subset")
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


class DataIntegrityError(ValueError):
    """A shipped data file is missing, damaged or not the file the course was built with."""


class ShortDataWarning(UserWarning):
    """A loader was asked for more digits or batches than the data holds."""


@dataclass
class MnistData:
    """Train and test splits of MNIST as normalised float tensors, with where they came from."""

    train: TensorDataset
    test: TensorDataset
    source: str


def data_dir() -> Path:
    """The course's data folder: $AMP_COURSE_DATA, else the one shipped with the package."""
    candidates = [Path(os.environ[env_vars.DATA])] if os.environ.get(env_vars.DATA) else []
    candidates.append(course_dir(DATA))
    for path in candidates:
        if (path / SUBSET_FILE).exists():
            return path
    raise DataIntegrityError(
        f"Cannot find the course's data folder with {SUBSET_FILE} (looked in: "
        + ", ".join(str(p) for p in candidates)
        + f"). Reinstall the course (pip install .), or set {env_vars.DATA} to the repository's "
        "data/ folder."
    )


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_file(path: Path, expected: str) -> str:
    """``path`` as a string once its SHA-256 is ``expected``; a clear error otherwise."""
    name = path.name
    if not path.exists():
        raise DataIntegrityError(f"MNIST file {name} not found at {path}.")
    digest = sha256_of(path)
    if digest != expected:
        mend = (  # git restores the course's own copy only
            f"restore it with `git checkout -- data/{name}` or download the course again"
            if path.resolve().parent == course_dir(DATA).resolve()
            else f"the course's own is in {course_dir(DATA)}"
        )
        raise DataIntegrityError(
            f"Refusing to use {path}: its SHA-256 is {digest}, expected {expected} "
            f"(see data/README.md). The file is damaged or was replaced; {mend}."
        )
    return str(path)


def load_mnist_subset(path: Path | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The shipped 5,000-digit subset as uint8 images [N, 28, 28] and int64 labels (SHA checked)."""
    path = Path(path) if path is not None else data_dir() / SUBSET_FILE
    return _parse_subset(verify_file(path, SUBSET_SHA256))


@lru_cache(maxsize=2)
def _parse_subset(path: str) -> tuple[torch.Tensor, torch.Tensor]:
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.uint8)
    images = torch.from_numpy(table[:, :784].reshape(-1, 28, 28).copy())
    labels = torch.from_numpy(table[:, 784].astype(np.int64))
    return images, labels


def read_idx(raw: bytes) -> np.ndarray:
    """An IDX file of unsigned bytes (MNIST's format) as a numpy array of its shape."""
    if len(raw) < 4 or raw[:3] != b"\x00\x00\x08":
        raise DataIntegrityError("not an IDX file of unsigned bytes (magic 0x0000 08 nn)")
    ndim = raw[3]
    shape = tuple(int(n) for n in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise DataIntegrityError(f"IDX header says {shape}, but {data.size} bytes follow")
    return data.reshape(shape)


def load_mnist_full(path: Path | str | None = None):
    """Full MNIST from the shipped archive: ((train images, labels), (test images, labels)).

    Images are uint8 [N, 28, 28], labels int64; 60,000 train and 10,000 test digits. Checks the
    archive's SHA-256 first.
    """
    path = Path(path) if path is not None else data_dir() / FULL_FILE
    return _parse_full(verify_file(path, FULL_SHA256))


@lru_cache(maxsize=1)
def _parse_full(path: str):
    with tarfile.open(path, "r:xz") as archive:
        arrays = {name: read_idx(archive.extractfile(name).read()) for name in FULL_MEMBERS}
    for name, shape in FULL_MEMBERS.items():
        if arrays[name].shape != shape:
            raise DataIntegrityError(f"{name} in {path} holds {arrays[name].shape}, not {shape}")

    def split(prefix: str):
        images = torch.from_numpy(arrays[f"{prefix}-images-idx3-ubyte"].copy())
        labels = torch.from_numpy(arrays[f"{prefix}-labels-idx1-ubyte"].astype(np.int64))
        return images, labels

    return split("train"), split("t10k")


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


def _mnist_data(train, test, source: str) -> MnistData:
    sizes = f"{source} ({len(train[1])} train / {len(test[1])} test)"
    return MnistData(*(TensorDataset(_normalise(x), y) for x, y in (train, test)), source=sizes)


def _subset_data(why: str | None = None) -> MnistData:
    label = "shipped MNIST subset" + (f", {why}" if why else "")
    return _mnist_data(*_split_subset(*load_mnist_subset()), label)


def _default_smoke() -> bool:
    """Outside a lesson (no settings): the lessons' rule on the device a lesson would pick."""
    from .device import pick_device
    from .lesson import resolve_smoke

    return resolve_smoke(None, pick_device("auto"))


def load_mnist(
    source: str | LessonSettings = "auto",
    root: Path | str | None = None,
    download: bool | None = None,
    *,
    smoke: bool | None = None,
) -> MnistData:
    """Real MNIST digits, normalised, as train/test TensorDatasets.

    A lesson calls ``load_mnist(settings)``: its settings' smoke flag (decided once, by
    ``ac.lesson.resolve_smoke`` on the lesson's device) picks the subset or full MNIST.
    source: ``"subset"`` (the 5,000 digits shipped in data/, split 4,000 / 1,000), ``"full"``
    (all 60,000 + 10,000: torchvision's files under ``root`` when present, else the shipped
    data/mnist_full.tar.xz), ``"torchvision"`` (torchvision's files, downloaded if allowed), or
    ``"auto"``: the subset in smoke mode, full MNIST otherwise. smoke: the lesson's flag
    (``settings.smoke``); None decides as a lesson does (smoke on a CPU, or when
    AMP_COURSE_SMOKE=1). download: None means allowed unless AMP_COURSE_OFFLINE=1; it is
    tried only for ``"torchvision"``, or in full mode when the shipped archive is missing.
    """
    if not isinstance(source, str):  # a lesson's settings: its smoke flag decides
        source, smoke = "auto", source.smoke
    if source not in SOURCES:
        raise ValueError(f"Unknown MNIST source {source!r}. Valid: {', '.join(SOURCES)}.")
    if source == "subset" or (source == "auto" and (_default_smoke() if smoke is None else smoke)):
        return _subset_data("smoke mode" if source == "auto" else "asked for")
    if download is None:
        download = os.environ.get(env_vars.OFFLINE) != "1"
    try:
        shipped, missing = data_dir(), None
    except DataIntegrityError as error:  # an installation without the course's data folder
        shipped, missing = None, error
    root = Path(root if root is not None else shipped or Path.cwd() / "data")
    has_files = (root / "MNIST" / "raw").is_dir()
    if source in ("auto", "full"):
        if has_files:  # torchvision's copy, from an earlier download: the same digits
            try:
                return _mnist_data(*_torchvision_mnist(root, False), "torchvision's MNIST files")
            except Exception:  # noqa: BLE001 - incomplete: the shipped archive follows
                pass
        if shipped is None and source == "full":
            raise missing
        archive = None if shipped is None else shipped / FULL_FILE
        if archive is not None and (archive.exists() or source == "full"):
            return _mnist_data(*load_mnist_full(archive), f"full MNIST, {FULL_FILE} verified")
    try:  # "torchvision", or "auto" in an installation without the archive
        if not download and not has_files:
            # Nothing on disk and no download allowed: skip importing torchvision.datasets.
            raise FileNotFoundError(f"no MNIST files under {root / 'MNIST' / 'raw'}")
        return _mnist_data(*_torchvision_mnist(root, download), "torchvision's MNIST files")
    except Exception as error:  # noqa: BLE001 - any failure here means "use the shipped subset"
        if source != "auto":
            raise RuntimeError(f"torchvision MNIST unavailable under {root}: {error}") from error
        subset = _subset_data()
        _warn_short(
            f"Full mode asked for full MNIST, but neither {FULL_FILE} nor torchvision's files "
            f"are here ({error}): using the {subset.source}."
        )
        return subset


def _warn_short(message: str) -> None:
    """Warn in the cell's output every time, not only the first time a line warns."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", ShortDataWarning)
        warnings.warn(message, ShortDataWarning, stacklevel=3)


def mnist_loaders(
    batch_size: int = 64,
    num_train: int | None = None,
    num_test: int | None = None,
    seed: int = 0,
    data: MnistData | None = None,
    **load_kwargs,
):
    """Train and test DataLoaders over MNIST, optionally cut to ``num_train``/``num_test`` digits.

    Asked for more digits than the data holds, it warns and uses them all; ``len(train_loader)``
    is then the number of batches a pass gives (the train loader drops a last partial batch).
    """
    data = data if data is not None else load_mnist(**load_kwargs)
    generator = torch.Generator().manual_seed(seed)

    def cut(dataset: TensorDataset, n: int | None, split: str) -> TensorDataset:
        if n is None or n == len(dataset):
            return dataset
        if n > len(dataset):
            batches = f": a pass gives {len(dataset) // batch_size} batches of {batch_size}"
            _warn_short(
                f"Asked for {n} {split} digits, but the {data.source} holds {len(dataset)}; "
                f"using all {len(dataset)}" + (batches if split == "training" else ".")
            )
            return dataset
        index = torch.randperm(len(dataset), generator=generator)[:n]
        return TensorDataset(*(t[index] for t in dataset.tensors))

    train = cut(data.train, num_train, "training")
    if len(train) < batch_size:  # the loader drops a partial batch: not one step would run
        raise ValueError(
            f"{len(train)} training digits make no whole batch of {batch_size}: use more digits "
            "(num_train) or a smaller batch size."
        )
    test = cut(data.test, num_test, "test")
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
