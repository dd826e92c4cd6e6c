"""torchao, the optional library of lessons 09 and 11 (``pip install amp-course[fp8]``): importing
it with what its import logs explained, and where its optimizers' compiled steps can run.

torchao 0.18 loads its prebuilt kernel libraries (``torchao/_C*.so``) when imported and logs a
warning, "Failed to load <file>: ...", for each that does not load with this torch, Python or GPU
(``torchao/__init__.py``); with a torch older than it was built for it skips them all and logs
why. ``torchao.float8`` and ``torchao.optim``, all the lessons use, call none of those libraries:
they run through torch.compile and torch's own FP8 GEMM (``torch._scaled_mm``).

torchao's optimizers compile their update with ``torch.compile(single_param_adam,
fullgraph=True, dynamic=False)`` (``torchao/optim/adam.py``): one compile per parameter shape,
with inductor's C++ backend on a CPU and with Triton on a GPU.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging

import torch

from . import gpus

KERNEL_LIBRARIES_NOTE = (
    "torchao loads its prebuilt kernel libraries (torchao/_C*.so) at import and logs a warning "
    "for each that does not load with this torch, Python or GPU; torchao.float8 and "
    "torchao.optim, all this lesson uses, call none of them"
)


class _Kept(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def load() -> tuple[object | None, str]:
    """Import torchao; ``(torchao or None, a line saying what happened)``.

    The warnings torchao logs while importing are kept from the output and summed up in the line
    with what they mean (``KERNEL_LIBRARIES_NOTE``).
    """
    if importlib.util.find_spec("torchao") is None:
        return None, "torchao not installed (pip install amp-course[fp8] adds it)"
    logger = logging.getLogger("torchao")
    kept, propagate = _Kept(), logger.propagate
    logger.addHandler(kept)
    logger.propagate = False  # the root's handlers (a learner's basicConfig) would print them
    try:
        module = importlib.import_module("torchao")
    except Exception as error:  # noqa: BLE001 - built for another torch, a broken install...
        return None, f"torchao cannot be imported here ({type(error).__name__}: {error})"
    finally:
        logger.removeHandler(kept)
        logger.propagate = propagate
    version = getattr(module, "__version__", "unknown")
    if not kept.messages:
        return module, f"torchao {version} installed"
    first = kept.messages[0].splitlines()[0][:160]
    more = f" (and {len(kept.messages) - 1} more)" if len(kept.messages) > 1 else ""
    return module, (
        f"torchao {version} installed; its import logged: {first!r}{more}. {KERNEL_LIBRARIES_NOTE}."
    )


def compiled_step_problem(device, capability=None, *, bf16: bool = False) -> str | None:
    """Why a torchao optimizer should not step here (None: it can): ``device`` where its
    parameters live, ``capability`` the GPU's (a rehearsed GPU's under ``ac.emulation``),
    ``bf16``: bf16 parameters with ``bf16_stochastic_round=True``."""
    if torch.device(device).type != "cuda":
        return (
            "on a CPU torchao compiles its optimizer step with inductor's C++ backend, once for "
            "each parameter shape: a C++ build per shape before the first step"
        )
    # Triton's bf16 code needs sm_80, the first compute capability with bf16 tensor cores.
    if bf16 and capability is not None and not gpus.has_tensor_cores(capability, "bf16"):
        first = gpus.format_capability(gpus.tensor_cores_from("bf16"))
        return (
            f"compute capability {gpus.format_capability(capability)}: its bf16 stochastic "
            f"rounding compiles bf16 code with Triton, which needs {first} or later "
            "(pytorch/pytorch#118122: \"Feature '.bf16' requires .target sm_80\", on a T4)"
        )
    return None
