"""Shared fixtures: repository paths and a GPU marker that skips without CUDA."""

import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# Every machine runs the tests on the same shipped digits, with no download attempt.
os.environ.setdefault("AMP_COURSE_OFFLINE", "1")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def root():
    return ROOT
