"""The TF32 flags of the modern-stack labs' lab 2: the ways a script sets them, the cases a check
runs (each from torch's defaults), and putting every flag back at its default afterwards."""

from __future__ import annotations

import torch

from .failure_cases import attempt, seeded

# Each statement sets a TF32 flag one way; a case runs a few of them, in order, from the defaults.
TF32_SETTERS = (
    "torch.backends.cuda.matmul.allow_tf32 = True",
    "torch.backends.cuda.matmul.allow_tf32 = False",
    "torch.backends.cudnn.allow_tf32 = False",
    "torch.backends.cudnn.allow_tf32 = True",
    'torch.set_float32_matmul_precision("high")',
    'torch.set_float32_matmul_precision("highest")',
    'torch.backends.cuda.matmul.fp32_precision = "tf32"',
    'torch.backends.cuda.matmul.fp32_precision = "ieee"',
    'torch.backends.cudnn.conv.fp32_precision = "tf32"',
    'torch.backends.cudnn.conv.fp32_precision = "ieee"',
    'torch.backends.fp32_precision = "tf32"',
    'torch.backends.fp32_precision = "ieee"',
)
# The global setting and a leaf that says otherwise: which one wins (a leaf that was set, unless
# it is "none"), in both directions. Every seed's cases hold them.
GLOBAL_AND_LEAF = (
    (
        'torch.backends.fp32_precision = "tf32"',
        'torch.backends.cuda.matmul.fp32_precision = "ieee"',
    ),
    ('torch.backends.fp32_precision = "ieee"',),  # cuDNN's leaves, set to "tf32", stay "tf32"
)
# cuDNN's conv leaf against the levels above it, both ways: an answer that read the cuDNN-wide
# or the global setting for convolutions passed seed 0's cases and most others.
CONV_LEAF = (
    ('torch.backends.cudnn.conv.fp32_precision = "ieee"', 'torch.backends.fp32_precision = "tf32"'),
    (
        "torch.backends.cudnn.allow_tf32 = False",
        'torch.backends.cudnn.conv.fp32_precision = "tf32"',
    ),
)
TF32_CASES = (  # seed 0's: the defaults, each API alone, then mixed
    (),
    ("torch.backends.cuda.matmul.allow_tf32 = True",),
    ('torch.backends.cuda.matmul.fp32_precision = "tf32"',),
    ('torch.backends.cudnn.conv.fp32_precision = "ieee"',),
    ('torch.backends.fp32_precision = "tf32"',),
    ('torch.set_float32_matmul_precision("high")', "torch.backends.cudnn.allow_tf32 = False"),
    (
        "torch.backends.cuda.matmul.allow_tf32 = True",
        'torch.backends.cuda.matmul.fp32_precision = "ieee"',
    ),
    GLOBAL_AND_LEAF[0],
    *CONV_LEAF,
    GLOBAL_AND_LEAF[1],  # last: the lab's text points at the global "ieee" case
)


def reset_tf32() -> None:
    """Every TF32 flag back to its default value (fp32 matmuls in full fp32, cuDNN in TF32).

    One default of a fresh process cannot come back: its cuDNN conv and RNN flags start unset (an
    internal DEFAULT in ATen's Context.h) and follow a global or cuDNN-wide setting until a setter
    or the legacy ``cudnn.allow_tf32`` sets them, and no setting unsets them again. Here they are
    set to "tf32", their default value, so a later global "ieee" leaves them at "tf32", where in a
    fresh process it would switch them to "ieee". The lab's text says so.
    """
    torch.backends.fp32_precision = "none"
    torch.backends.cudnn.fp32_precision = "none"
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.fp32_precision = "none"
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.conv.fp32_precision = "tf32"
    torch.backends.cudnn.rnn.fp32_precision = "tf32"
    mkldnn = torch.backends.mkldnn
    for backend in (mkldnn, mkldnn.matmul, mkldnn.conv, mkldnn.rnn):
        backend.fp32_precision = "none"


def tf32_cases(seed: int = 0) -> tuple[tuple[str, ...], ...]:
    """The setter sequences a check runs: TF32_CASES for seed 0, drawn from TF32_SETTERS else."""
    if seed == 0:
        return TF32_CASES
    generator = seeded(seed)
    # TF32 on, and off, through the new API alone (where a legacy read raises: an answer that
    # takes an error for either answer meets the other), a legacy setting the new API then
    # overrides (what get_float32_matmul_precision still reports), and the global setting against
    # a leaf, whatever else the seed draws. The legacy cuDNN switch turned off leaves the conv
    # flag reading "none", TF32 off: an answer that takes "none" for on met it at some seeds only.
    cases = [
        (),
        ('torch.backends.cuda.matmul.fp32_precision = "tf32"',),
        ('torch.backends.cudnn.conv.fp32_precision = "ieee"',),
        ("torch.backends.cudnn.allow_tf32 = False",),
        TF32_CASES[6],
        *GLOBAL_AND_LEAF,
        *CONV_LEAF,
    ]
    for _ in range(8):
        count = int(torch.randint(1, 4, (), generator=generator))
        picks = torch.randint(0, len(TF32_SETTERS), (count,), generator=generator)
        cases.append(tuple(TF32_SETTERS[int(i)] for i in picks))
    return tuple(cases)


def run_tf32(fn, seed: int = 0) -> list[dict]:
    """For each case: from the defaults, run its setters, then ``fn()``; what it returned or
    raised. The flags are back at their defaults afterwards."""
    observed = []
    try:
        for setters in tf32_cases(seed):
            reset_tf32()
            for statement in setters:
                exec(statement, {"torch": torch})
            state, error = attempt(fn)
            observed.append({"setters": list(setters), "error": error, "state": state})
    finally:
        reset_tf32()
    return observed
