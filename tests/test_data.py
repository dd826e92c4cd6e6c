import shutil

import pytest
import torch

from amp_course import data


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
    with pytest.raises(data.DataIntegrityError, match="Refusing to use.*SHA-256.*git checkout"):
        data.load_mnist_subset(bad)


def test_missing_data_folder_says_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("AMP_COURSE_DATA", str(tmp_path))
    monkeypatch.setattr(data, "course_dir", lambda name: tmp_path / "pkg" / name)
    with pytest.raises(data.DataIntegrityError, match="pip install .*AMP_COURSE_DATA"):
        data.data_dir()


def test_offline_falls_back_to_shipped_subset(tmp_path):
    mnist = data.load_mnist(root=tmp_path, download=False)
    assert "shipped MNIST subset" in mnist.source
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
    with pytest.raises(ValueError, match="auto, torchvision, subset"):
        data.load_mnist(source="kaggle")


def test_loaders_cut_and_batch():
    train, test = data.mnist_loaders(batch_size=32, num_train=256, num_test=64, source="subset")
    images, labels = next(iter(train))
    assert images.shape == (32, 1, 28, 28) and labels.shape == (32,)
    assert len(train.dataset) == 256 and len(test.dataset) == 64


def test_synthetic_images_are_imagenet_shaped_and_seeded():
    x1, y1 = data.synthetic_images(4, seed=1)
    x2, y2 = data.synthetic_images(4, seed=1)
    assert x1.shape == (4, 3, 224, 224) and y1.max() < 1000
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
