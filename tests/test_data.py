import hashlib
import re
import shutil
import tarfile

import pytest
import torch

from amp_course import data

# The canonical MD5s of the four original MNIST files once unpacked, as public loaders list them
# (for example secml's CDataLoaderMNIST, which checks them after unpacking the .gz downloads).
IDX_MD5 = {
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
# Digits per class in MNIST's training and test sets, as the canonical files above give them.
TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_subset_checksum_and_contents():
    images, labels = data.load_mnist_subset()
    assert images.shape == (5000, 28, 28) and images.dtype == torch.uint8
    assert torch.bincount(labels).tolist() == [500] * 10
    assert images.max() == 255 and images.min() == 0


def test_corrupt_file_is_refused(tmp_path):
    bad = tmp_path / data.SUBSET_FILE
    shutil.copy(data.data_dir() / data.SUBSET_FILE, bad)
    raw = bytearray(bad.read_bytes())
    raw[1000] ^= 0xFF
    bad.write_bytes(bytes(raw))
    with pytest.raises(data.DataIntegrityError, match="Refusing to use.*SHA-256.*course's own is"):
        data.load_mnist_subset(bad)


def test_a_damaged_file_of_the_courses_data_folder_is_restored_by_git(tmp_path, monkeypatch):
    """Only the course's own copy can come back with `git checkout`; a copy elsewhere is pointed
    to the course's data folder instead (test_corrupt_file_is_refused)."""
    bad = tmp_path / data.SUBSET_FILE
    bad.write_bytes(b"not the digits")
    monkeypatch.setattr(data, "course_dir", lambda name: tmp_path)
    with pytest.raises(data.DataIntegrityError, match=r"git checkout -- data/mnist_5k\.csv\.gz"):
        data.load_mnist_subset(bad)


def test_missing_data_folder_says_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("AMP_COURSE_DATA", str(tmp_path))
    monkeypatch.setattr(data, "course_dir", lambda name: tmp_path / "pkg" / name)
    with pytest.raises(data.DataIntegrityError, match="pip install .*AMP_COURSE_DATA"):
        data.data_dir()


def test_smoke_mode_uses_the_shipped_subset(tmp_path):
    mnist = data.load_mnist(root=tmp_path, download=False, smoke=True)
    assert mnist.source.startswith("shipped MNIST subset, smoke mode")
    assert len(mnist.train) == 4000 and len(mnist.test) == 1000
    x, y = mnist.train[0]
    assert x.shape == (1, 28, 28) and x.dtype == torch.float32
    # Stratified split: every digit has 100 test images.
    assert torch.bincount(mnist.test.tensors[1]).tolist() == [100] * 10
    # Normalised with MNIST's mean and std.
    assert abs(mnist.train.tensors[0].mean().item()) < 0.1


def test_train_and_test_do_not_overlap():
    mnist = data.load_mnist(source="subset")
    train = {tuple(t.flatten()[::7].tolist()) for t in mnist.train.tensors[0][:500]}
    test = {tuple(t.flatten()[::7].tolist()) for t in mnist.test.tensors[0]}
    assert not train & test


def test_torchvision_source_without_files_raises_clearly(tmp_path):
    with pytest.raises(RuntimeError, match="torchvision MNIST unavailable"):
        data.load_mnist(source="torchvision", root=tmp_path, download=False)


def test_unknown_source():
    with pytest.raises(ValueError, match="auto, full, torchvision, subset"):
        data.load_mnist(source="kaggle")


def test_loaders_cut_and_batch():
    train, test = data.mnist_loaders(batch_size=32, num_train=256, num_test=64, source="subset")
    images, labels = next(iter(train))
    assert images.shape == (32, 1, 28, 28) and labels.shape == (32,)
    assert len(train.dataset) == 256 and len(test.dataset) == 64


def test_fewer_digits_than_one_batch_are_refused_before_a_run_of_no_steps():
    """The train loader drops a partial batch: lesson 00 with NUM_TRAIN=100 and batches of 128
    printed '0 steps per run', then OneCycleLR refused total_steps=0."""
    with pytest.raises(ValueError, match="^100 training digits make no whole batch of 128"):
        data.mnist_loaders(128, num_train=100)


def test_synthetic_images_are_imagenet_shaped_and_seeded():
    x1, y1 = data.synthetic_images(4, seed=1)
    x2, y2 = data.synthetic_images(4, seed=1)
    assert x1.shape == (4, 3, 224, 224) and y1.max() < 1000
    assert torch.equal(x1, x2) and torch.equal(y1, y2)


def test_full_archive_holds_the_canonical_idx_files():
    with tarfile.open(data.data_dir() / data.FULL_FILE, "r:xz") as archive:
        assert archive.getnames() == list(data.FULL_MEMBERS)
        for name, md5 in IDX_MD5.items():
            assert hashlib.md5(archive.extractfile(name).read()).hexdigest() == md5, name


def test_full_mnist_shapes_and_label_counts():
    (train_x, train_y), (test_x, test_y) = data.load_mnist_full()
    assert train_x.shape == (60000, 28, 28) and test_x.shape == (10000, 28, 28)
    assert train_x.dtype == torch.uint8 and train_y.dtype == torch.int64
    assert torch.bincount(train_y).tolist() == TRAIN_COUNTS
    assert torch.bincount(test_y).tolist() == TEST_COUNTS


def test_subset_digits_are_full_mnist_digits():
    """Provenance: every digit of the shipped subset, with its label, is one of MNIST's 70,000."""
    (train_x, train_y), (test_x, test_y) = data.load_mnist_full()
    full = {
        (bytes(image.numpy()), int(label))
        for images, labels in ((train_x, train_y), (test_x, test_y))
        for image, label in zip(images, labels, strict=True)
    }
    images, labels = data.load_mnist_subset()
    missing = [
        i for i in range(len(labels)) if (bytes(images[i].numpy()), int(labels[i])) not in full
    ]
    assert not missing, f"{len(missing)} subset digits are not in full MNIST, e.g. {missing[:5]}"


def test_damaged_full_archive_is_refused(tmp_path):
    bad = tmp_path / data.FULL_FILE
    raw = bytearray((data.data_dir() / data.FULL_FILE).read_bytes())
    raw[len(raw) // 2] ^= 0x01
    bad.write_bytes(bytes(raw))
    with pytest.raises(data.DataIntegrityError, match="Refusing to use.*SHA-256.*course's own is"):
        data.load_mnist_full(bad)


def test_read_idx_refuses_what_is_not_idx():
    header = bytes([0, 0, 8, 1]) + (3).to_bytes(4, "big")
    assert data.read_idx(header + bytes([1, 2, 3])).tolist() == [1, 2, 3]
    with pytest.raises(data.DataIntegrityError, match="header says"):
        data.read_idx(header + bytes([1, 2]))
    with pytest.raises(data.DataIntegrityError, match="not an IDX file"):
        data.read_idx(b"\x1f\x8b\x08\x00" + header)  # a gzip header: still compressed


def test_full_mode_loads_all_of_mnist_offline(tmp_path):
    mnist = data.load_mnist(root=tmp_path, download=False, smoke=False)
    assert mnist.source == "full MNIST, mnist_full.tar.xz verified (60000 train / 10000 test)"
    assert len(mnist.train) == 60000 and len(mnist.test) == 10000
    assert data.load_mnist("full", root=tmp_path).source == mnist.source  # whatever the mode


def test_full_mode_without_the_archive_warns_and_uses_the_subset(tmp_path, monkeypatch):
    shutil.copy(data.data_dir() / data.SUBSET_FILE, tmp_path / data.SUBSET_FILE)
    monkeypatch.setenv("AMP_COURSE_DATA", str(tmp_path))
    with pytest.warns(data.ShortDataWarning, match="neither mnist_full.tar.xz nor torchvision"):
        mnist = data.load_mnist(root=tmp_path, download=False, smoke=False)
    assert mnist.source == "shipped MNIST subset (4000 train / 1000 test)"
    with pytest.raises(data.DataIntegrityError, match="not found"):
        data.load_mnist("full", root=tmp_path, download=False)


def test_asking_for_more_digits_than_the_data_holds_warns_and_uses_them_all():
    mnist = data.load_mnist("subset")
    with pytest.warns(data.ShortDataWarning, match="Asked for 9000 training digits.* 62 batches"):
        train, _ = data.mnist_loaders(64, num_train=9000, data=mnist)
    assert len(train.dataset) == 4000 and len(train) == 62


def test_without_the_data_folder_full_mode_downloads_or_says_what_is_missing(tmp_path, monkeypatch):
    """An installation without data/ (no subset, no archive): "auto" in full mode takes
    torchvision's MNIST (downloaded), "full" names the missing folder."""

    def no_folder():
        raise data.DataIntegrityError("Cannot find the course's data folder")

    digits = (torch.zeros(6, 28, 28, dtype=torch.uint8), torch.arange(6))
    fetched = []
    monkeypatch.setattr(data, "data_dir", no_folder)
    monkeypatch.setattr(
        data, "_torchvision_mnist", lambda root, download: fetched.append(download) or (digits,) * 2
    )
    found = data.load_mnist("auto", root=tmp_path, download=True, smoke=False)
    assert found.source.startswith("torchvision's MNIST files") and fetched == [True]
    with pytest.raises(data.DataIntegrityError, match="data folder"):
        data.load_mnist("full", root=tmp_path, smoke=False)


def test_a_lesson_settings_flag_picks_the_data(tmp_path):
    from types import SimpleNamespace

    assert data.load_mnist(SimpleNamespace(smoke=True)).source.startswith("shipped MNIST subset")
    full = data.load_mnist(SimpleNamespace(smoke=False), root=tmp_path, download=False)
    assert full.source.startswith("full MNIST") and len(full.train) == 60000


def test_every_lesson_gets_its_data_one_way():
    import nbformat
    from conftest import NOTEBOOKS

    calls = {
        (path.name, call)
        for path in NOTEBOOKS
        for cell in nbformat.read(path, as_version=4).cells
        for call in re.findall(r"load_mnist\([^)]*\)", cell.source)
    }
    assert calls and all(call == "load_mnist(settings)" for _, call in calls), sorted(calls)
