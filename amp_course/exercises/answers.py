"""The learner's side of a verdict: reading what an answer did, judging results.

No registry and no references here: ``observe`` functions use these helpers in the learner's
kernel, and ``judge`` turns a ``compare`` into a status, for a check cell and the grader alike.
Calling the learner's code (the blank, each call's time limit) is ``calling``'s.
"""

from __future__ import annotations

import math
import numbers
import textwrap

import numpy
import torch

from ..display import error_text
from .calling import is_blank_text


class ExerciseFailed(AssertionError):
    """The learner's answer is wrong; the message says what is wrong in plain words.

    In a notebook the cell fails (Run All stops, papermill and nbval report an error), but IPython
    shows only the verdict and how to go on, not a traceback through the course's checking code.
    """

    def _render_traceback_(self) -> list[str]:
        return failure_lines(f"✗ {self}")


# What a failed check adds under its verdict: a learner who chose Run All finds every cell below
# back at [ ] and needs to know why, and how to go on.
RUN_ALL_NOTE = (
    "Run All stops at this failed check; the cells below it do not run. To go on, fix the "
    "exercise cell above, run it and run this check again; or skip it for now: select the next "
    "cell and choose Run > Run Selected Cell and All Below (in Colab, with this cell selected: "
    "Runtime > Run after)."
)
# Notebook front ends show error text in a box that breaks lines anywhere, mid-word included
# (JupyterLab: word-break: break-all). Lines this short fit the box (about 70 columns in
# JupyterLab beside its file browser in a window 1,000 pixels wide), so they break only here.
WRAP_COLUMNS = 64


def failure_lines(verdict: str) -> list[str]:
    """A failed check as a notebook shows it: the verdict, then ``RUN_ALL_NOTE``, wrapped at
    words to ``WRAP_COLUMNS`` (the verdict's continuation lines indented)."""

    def wrap(text: str, indent: str) -> list[str]:  # line by line (a message may hold several)
        return [
            wrapped
            for line in text.splitlines()
            for wrapped in textwrap.wrap(
                line,
                WRAP_COLUMNS,
                subsequent_indent=indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
            or [""]
        ]

    return [*wrap(verdict, "  "), "", *wrap(RUN_ALL_NOTE, "")]


class Verdict:
    """What a check returns: true when the answer passed, false while it is not done.

    It displays nothing (the check has printed its line), so a check cell shows no ``Out:``.
    """

    __slots__ = ("status",)

    def __init__(self, status: str):
        self.status = status  # "passed" or "not done"

    def __bool__(self) -> bool:
        return self.status == "passed"

    def __eq__(self, other) -> bool:
        if isinstance(other, bool):
            return bool(self) is other
        return isinstance(other, Verdict) and other.status == self.status

    __hash__ = None

    def __repr__(self) -> str:
        return f"Verdict({self.status!r})"

    def _ipython_display_(self) -> None:
        """Nothing to show: the verdict is already printed."""


class ExerciseNotDone(ExerciseFailed):
    """The learner has not answered yet (the blank still raises NotImplementedError)."""


def scaler_record(scaler, warned: list[str]) -> dict:
    """A GradScaler as plain data: enabled, the device it was built for, as given (its repr: a
    name, or a torch.device), and what torch warned while it was built (a 'cuda' scaler on a
    machine without CUDA disables itself, warning)."""
    return {
        "enabled": bool(scaler.is_enabled()),
        "device": repr(getattr(scaler, "_device", "")),
        "warned": [w for w in warned if "GradScaler" in w][:1],
    }


def _device_shown(device: str) -> str:
    """A ``scaler_record``'s device in a sentence: "device 'cuda'", or "device(type='cuda')"."""
    return device if device.startswith("device(") else f"device {device}"


def scaler_built(got: dict, want: dict) -> str | None:
    """What differs between two ``scaler_record``s' devices, or between their enabled flags (two
    disabled scalers do the same whatever device each was given: scale() returns the loss)."""
    if not got["enabled"] and not want["enabled"]:
        return None
    if got["device"] != want["device"]:
        warned = f" (torch warned: {got['warned'][0]!r})" if got["warned"] else ""
        # GradScaler compares the device it keeps with names ('cuda' disables itself without a
        # GPU; update(new_scale) checks the tensor's device.type): a torch.device equals none.
        given, (mine, theirs) = "", (_device_shown(r["device"]) for r in (got, want))
        if got["device"].startswith("device(") and not want["device"].startswith("device("):
            given = (
                ", a torch.device where the reference passes a name (GradScaler compares the "
                "device it is given with names such as 'cuda')"
            )
        return f"the scaler is built for {mine}{warned}{given}; the reference's for {theirs}."
    if got["enabled"] != want["enabled"]:
        state = {True: "enabled", False: "disabled"}
        return (
            f"the scaler is {state[got['enabled']]}; the reference's is {state[want['enabled']]}."
        )
    return None


def as_number(got) -> float | None:
    """``got`` as a float if it is a real number (not a bool): a Python or numpy number, or a
    0-dim tensor of a floating or integer dtype (what ``torch.tensor(values).median()`` or a sum
    of integer counts gives); else None."""
    if isinstance(got, torch.Tensor):
        real = got.dim() == 0 and got.dtype != torch.bool and not got.is_complex()
        return float(got) if real else None
    if isinstance(got, numbers.Real) and not isinstance(got, (bool, numpy.bool_)):
        return float(got)
    return None


def as_whole(got) -> int | None:
    """``got`` as an int if it is an integer (not a bool): a Python or numpy integer, or a 0-dim
    integer tensor; else None (a float, even 48.0, stays a float to be named as such)."""
    if isinstance(got, torch.Tensor):
        integral = got.dim() == 0 and not got.is_floating_point() and got.dtype != torch.bool
        return int(got) if integral else None
    if isinstance(got, numbers.Integral) and not isinstance(got, (bool, numpy.bool_)):
        return int(got)
    return None


def telling_digits(a: float, b: float, fewest: int = 6, most: int = 17) -> int:
    """The significant digits, from ``fewest`` up to ``most``, that print ``a`` and ``b`` apart
    ('1.224' against '1.224' says nothing)."""
    digits = fewest
    while f"{a:.{digits}g}" == f"{b:.{digits}g}" and digits < most:
        digits += 1
    return digits


def apart(got: float, want: float) -> str:
    """'G, expected W' with 6 significant digits, more where 6 would print them alike."""
    digits = telling_digits(got, want)
    return f"{got:.{digits}g}, expected {want:.{digits}g}"


def input_changed(given: torch.Tensor, original: torch.Tensor) -> float | None:
    """The largest change an answer made to the tensor it was given, a copy of ``original``
    (None: none; inf: its shape or dtype changed)."""
    if given.shape != original.shape or given.dtype != original.dtype:
        return math.inf
    return None if torch.equal(given, original) else float((given - original).abs().max())


def fail_on_input_changed(changed: float | None, where: str) -> None:
    """Raise the verdict for an answer that changed the tensor it was given (``input_changed``)."""
    if changed is not None:
        raise ExerciseFailed(
            f"{where} the x your code was given changed during the call (by up to "
            f"{changed:.3g}); the reference leaves the caller's tensor as it was."
        )


def paired(mine: list, reference: list, key: str, what: str) -> list[tuple[dict, dict]]:
    """The answer's runs beside the reference's, run by run, refused where their ``key``s differ.
    What a comparison decides by is read from the reference's run (computed where the check runs,
    or by the grader), never from the answer's observation alone: a kernel that replaced the
    observation could make it agree with itself, or skip every case."""
    if [run.get(key) for run in mine] != [run[key] for run in reference]:
        raise ExerciseFailed(
            f"the observation of your {what} does not hold the check's {key}s: the check's code "
            "was changed in this kernel (restart it and run the lesson's cells)."
        )
    return list(zip(mine, reference, strict=True))


def fail_on_error(error: str | None, call: str) -> None:
    """Raise the verdict for an error ``observe`` recorded while running ``call``."""
    if error is None:
        return
    if is_blank_text(error):
        raise ExerciseNotDone(f"{call} still raises NotImplementedError.")
    raise ExerciseFailed(f"{call} {what_happened(error)}")


def what_happened(error: str) -> str:
    """An observed error as the end of a sentence about the learner's call: "raised TypeError: ..."
    for what their code raised, "returned None; ..." where a lab's kit found the value it returned
    unusable (``labs.failure_cases.Returned``, whose text begins so)."""
    return error if error.startswith("returned ") else f"raised {error}"


def judge(item, mine, reference, seed: int, not_done: bool = False) -> tuple[str, str]:
    """("passed" | "failed" | "not done", message): ``compare`` turned into a verdict.

    ``mine`` may be anything (it comes from the learner's process): a compare that trips over it
    is a failed answer, never a crashed checker.
    """
    try:
        item.compare(mine, reference, seed)
    except ExerciseNotDone as failure:
        return "not done", str(failure)
    except ExerciseFailed as failure:
        if not_done:
            return "not done", "the exercise cell still raises NotImplementedError."
        return "failed", str(failure)
    except Exception as error:  # malformed observations: the answer returned something odd
        return "failed", f"the check could not read your answer's results ({error_text(error)})."
    return "passed", ""


def compare_params(mine, ref, what, rtol=1e-5, atol=1e-7) -> None:
    """Raise ExerciseFailed unless every tensor in ``mine`` is finite and close to ``ref``."""
    if len(mine) != len(ref):
        raise ExerciseFailed(f"{what}: {len(mine)} parameter tensors, expected {len(ref)}.")
    for index, (a, b) in enumerate(zip(mine, ref, strict=True)):
        if not torch.isfinite(a).all():
            finite = (
                "the reference's is finite"
                if torch.isfinite(b).all()
                else "so does the reference's"
            )
            raise ExerciseFailed(f"{what}: tensor {index} holds inf/NaN ({finite}).")
        if a.shape != b.shape or not torch.allclose(a.to(b.dtype), b, rtol=rtol, atol=atol):
            off = (a.to(b.dtype) - b).abs().max().item() if a.shape == b.shape else float("inf")
            raise ExerciseFailed(
                f"{what}: tensor {index} is off by up to "
                f"{off:.3g} (tolerance {atol:g} + {rtol:g} x |value|)."
            )


def params_close(mine, ref, rtol=1e-5, atol=1e-7) -> bool:
    """Whether ``compare_params`` accepts ``mine``, for checks that explain a mismatch their way."""
    try:
        compare_params(mine, ref, "weights", rtol, atol)
    except ExerciseFailed:
        return False
    return True
