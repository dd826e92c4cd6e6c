"""Shared fixtures: repository paths and a GPU marker that skips without CUDA."""

import os
import socket
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Debian's chromium drives the browser tests (Playwright never downloads a browser here).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Every machine runs the tests on the same shipped digits, with no download attempt.
os.environ.setdefault("AMP_COURSE_OFFLINE", "1")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def require(condition: bool, message: str) -> None:
    """Skip when ``condition`` is false; under CI (which installs everything) fail instead."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_chromium() -> None:
    require(Path(CHROMIUM).exists(), "Debian's chromium is missing (apt-get install chromium)")


def broken_versions(notebook: Path, namespace: dict) -> dict:
    """{lab name: the broken function exactly as a labs notebook shows it} (cells tagged broken)."""
    import nbformat

    found = {}
    for cell in nbformat.read(notebook, as_version=4).cells:
        if "broken" in cell.metadata.get("tags", []):
            scope = dict(namespace)
            exec(compile(cell.source, str(notebook), "exec"), scope)
            found[cell.metadata["lab"]["name"]] = scope[cell.metadata["lab"]["symbol"]]
    return found


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def root():
    return ROOT
