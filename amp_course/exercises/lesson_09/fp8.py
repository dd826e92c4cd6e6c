"""Lesson 09's FP8 checks (the package's ``__init__`` registers them): a cast with delayed scaling
(the scale from a history of amaxes) and with one scale per row."""

from __future__ import annotations

import math
import numbers

import torch

from ...display import kind_of
from .. import ExerciseFailed
from ..answers import error_text, fail_on_input_changed, input_changed
from ..calling import call_answer

AMAX_EPS = 1e-12  # torchao's floor for amax, so an all-zero tensor gets a finite FP8 scale
# Elements of a case (2,048) whose FP8 value may differ from the reference's at the same scale.
# x * scale in float32, or x / (1 / scale), or in float64 then cast, gives the reference's values
# exactly; a scale that is off by 1e-5 moves about one element across a rounding boundary; the
# product taken in bf16, or at a scale 0.1% off, moves 10 to 130.
VALUES_DIFFERING = 3
# The same for a rowwise case (32 to 512 elements): right answers written five ways moved none
# at 100 seeds; x rounded to bf16 before a float32 product moved 3 or more in one case at every
# seed of 200, the product taken in bf16 22 or more.
ROWWISE_VALUES_DIFFERING = 1


def _not_a_pair(result, shape: torch.Size | None = None) -> str | None:
    """What the learner's function returned, in words, unless it is a pair whose first item is a
    tensor (of ``shape``, if given: x_fp8) and whose second is a tensor or a number (the scale or
    scales)."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return kind_of(result) if not isinstance(result, (tuple, list)) else f"{len(result)} items"
    described = [
        f"a Tensor of shape {tuple(item.shape)}"
        if isinstance(item, torch.Tensor)
        else kind_of(item)
        for item in result
    ]
    first, second = result
    if not isinstance(first, torch.Tensor) or shape not in (None, first.shape):
        return f"the pair ({', '.join(described)})"
    # A number of any kind: a Python or NumPy float or int (np.float32 is no float subclass).
    if not isinstance(second, (torch.Tensor, numbers.Real)) or isinstance(second, bool):
        return f"the pair ({', '.join(described)})"
    return None


# ---- 09.to_float8: delayed scaling, the scale from a history of amaxes (transfer) ---------------

# name: (magnitude of x, its amax history in multiples of x's own amax, fp8 dtype)
FP8_CASES = {
    "activations near 1, a history like them (e4m3)": (1.0, (0.9, 1.1, 0.95), torch.float8_e4m3fn),
    "gradients near 1e-6, grown past their history (e5m2)": (1e-6, (0.3, 0.5), torch.float8_e5m2),
    "weights near 1e-2, below their history (e4m3)": (1e-2, (2.0, 1.5), torch.float8_e4m3fn),
    "values near 1e4, grown past their history (e4m3)": (1e4, (0.25, 0.2), torch.float8_e4m3fn),
    "an all-zero tensor, an all-zero history (e5m2)": (0.0, (0.0, 0.0), torch.float8_e5m2),
}


def fp8_cases(seed: int) -> dict[str, tuple[torch.Tensor, list[float], torch.dtype]]:
    """The check's tensors and amax histories: FP8_CASES at seed 0, other magnitudes elsewhere."""
    generator = torch.Generator().manual_seed(seed)

    def factor(low: float, high: float) -> float:
        return 1.0 if seed == 0 else float(torch.empty(()).uniform_(low, high, generator=generator))

    cases = {}
    for name, (magnitude, history, fp8_dtype) in FP8_CASES.items():
        x = torch.randn(64, 32, generator=generator) * magnitude * factor(0.3, 3.0)
        amax = float(x.abs().max()) * factor(0.8, 1.25)
        # One factor for the whole history keeps its largest entry where FP8_CASES puts it (one
        # per entry let the last entry pass for the largest at 6 grader seeds of 3000).
        cases[name] = (x, [h * amax for h in history], fp8_dtype)
    return cases


def observe_to_float8(fn, seed: int) -> dict:
    """Run fn(x, fp8_dtype, amax_history) on each case; record its cast, scale and round trip."""
    observed = {}
    for name, (x, history, fp8_dtype) in fp8_cases(seed).items():
        given = x.clone()
        result, error = call_answer(fn, given, fp8_dtype, list(history))
        if error is not None:
            observed[name] = {"error": error}
            continue
        returned = _not_a_pair(result, x.shape)
        scale = torch.as_tensor(result[1], dtype=torch.float32) if returned is None else None
        if scale is not None and scale.numel() != 1:
            returned = f"a scale of shape {tuple(scale.shape)}"
        if returned is not None:
            observed[name] = {"returned": returned, "max": torch.finfo(fp8_dtype).max}
            continue
        quantized, scale = result[0].detach(), scale.detach().reshape(())
        observed[name] = {
            "changed": input_changed(given, x),
            "dtype": str(quantized.dtype),
            "scale": float(scale),
            "values": quantized.float(),
            "roundtrip": quantized.float() / scale,
            "largest": float(quantized.float().abs().max()),
            "x": x,
            "history": list(history),
            "max": torch.finfo(fp8_dtype).max,
        }
    return observed


def _fail_on_error_or_dtype(name: str, got: dict, ref: dict, scale: str) -> None:
    if "error" in got:
        raise ExerciseFailed(f"for {name} your code raised {got['error']}")
    if "returned" in got:
        raise ExerciseFailed(
            f"for {name} your function returned {got['returned']}; the reference returns the "
            f"pair (x_fp8, {scale}): a {ref['dtype']} tensor shaped like x, "
            f"{tuple(ref['x'].shape)}, then {'its scale' if scale == 'scale' else 'one per row'}."
        )
    fail_on_input_changed(got["changed"], f"for {name}")
    if got["dtype"] != ref["dtype"]:
        raise ExerciseFailed(
            f"for {name} you returned {got['dtype']}; the reference returns the requested "
            f"{ref['dtype']}."
        )


def compare_to_float8(mine: dict, reference: dict, seed: int) -> None:
    for name, ref in reference.items():
        got, x, fp8_max = mine[name], ref["x"], ref["max"]
        _fail_on_error_or_dtype(name, got, ref, "scale")
        history = ", ".join(f"{h:.3g}" for h in ref["history"])
        if not abs(got["scale"] - ref["scale"]) <= 1e-5 * ref["scale"]:  # inf and NaN too
            raise ExerciseFailed(
                f"for {name} your scale is {got['scale']:.6g}, the reference's {ref['scale']:.6g} "
                f"(the history [{history}], x's own amax {x.abs().max():.3g}, the format's max "
                f"{fp8_max:g}){_implied_amax(got['scale'], fp8_max, x, ref['history'])}."
            )
        bad = int((~torch.isfinite(got["roundtrip"])).sum())
        if bad:
            product = x * torch.tensor(ref["scale"], dtype=torch.float32)
            fp8_dtype = FP8_CASES[name][2]  # the case's format, as the function was given it
            overflow = int((~torch.isfinite(product.to(fp8_dtype))).sum())
            reaches = float(product.abs().max())
            raise ExerciseFailed(
                f"for {name} x_fp8 holds {bad} inf or NaN values where the reference's holds none; "
                f"x * scale in float32 reaches {reaches:.4g}, and cast unclipped "
                f"to {ref['dtype']} (largest finite {fp8_max:g}) it holds {overflow} of them."
            )
        mine_error, ref_error = (float(_relative_errors(x, r)) for r in (got, ref))
        if mine_error > 1.05 * ref_error + 1e-6:
            raise ExerciseFailed(
                f"for {name} x_fp8.float() / scale is off from x by {mine_error:.3g} (relative), "
                f"the reference's by {ref_error:.3g}, with the same scale; your largest |x_fp8| "
                f"is {got['largest']:g}, the reference's {ref['largest']:g}."
            )
        differ = (got["values"] != ref["values"]).flatten().nonzero().flatten()
        if len(differ) > VALUES_DIFFERING:
            at = int(differ[0])
            product = float(x.flatten()[at] * torch.tensor(ref["scale"], dtype=torch.float32))
            value = float(x.flatten()[at])
            raise ExerciseFailed(
                f"for {name} x_fp8 differs from the reference's in {len(differ)} of {x.numel()} "
                f"elements, with the same scale: element {at} of x is {value:.6g}, "
                f"x * scale in float32 is {product:.6g}, your x_fp8 holds "
                f"{float(got['values'].flatten()[at]):g} there, the reference's "
                f"{float(ref['values'].flatten()[at]):g}."
            )


def _implied_amax(scale: float, fp8_max: float, x: torch.Tensor, history: list) -> str:
    """The amax a scale maps onto the format's max, and which of the inputs' amaxes it is."""
    if not 0 < scale < math.inf:
        return ""
    implied = fp8_max / scale
    named = {
        "x's own amax": float(x.abs().max()),
        "the history's last entry": history[-1] if history else None,
        "the history's first entry": history[0] if history else None,
        "the history's smallest entry": min(history) if history else None,
        "the history's mean": sum(history) / len(history) if history else None,
    }
    # Every name it matches: the smallest entry can also be the first (it was named first alone).
    same = [n for n, v in named.items() if v and math.isclose(implied, v, rel_tol=1e-5)]
    return f": yours maps {implied:.4g} onto the format's max" + "".join(f", {n}" for n in same)


# ---- 09.to_float8_rowwise: one scale per row (transfer) ------------------------------------------

ROWWISE_CASES = {  # name: (magnitude of the smallest row, of the largest, rows, fp8 dtype)
    "rows from 1e-4 to 1e2 (e4m3)": (1e-4, 1e2, 16, torch.float8_e4m3fn),
    "gradient rows from 1e-9 to 1e-3 (e5m2)": (1e-9, 1e-3, 12, torch.float8_e5m2),
    "rows near 1 with one all-zero row (e4m3)": (1.0, 1.0, 8, torch.float8_e4m3fn),
    "a single row (e4m3)": (1e-2, 1e-2, 1, torch.float8_e4m3fn),
}


def rowwise_inputs(seed: int) -> dict[str, tuple[torch.Tensor, torch.dtype]]:
    """The check's tensors: rows spanning orders of magnitude, in a random order."""
    generator = torch.Generator().manual_seed(seed)
    cases = {}
    for name, (low, high, rows, fp8_dtype) in ROWWISE_CASES.items():
        magnitudes = torch.logspace(torch.tensor(low).log10(), torch.tensor(high).log10(), rows)
        magnitudes = magnitudes[torch.randperm(rows, generator=generator)]
        x = torch.randn(rows, 32, generator=generator) * magnitudes[:, None]
        if "all-zero" in name:
            x[int(torch.randint(rows, (), generator=generator))] = 0.0
        cases[name] = (x, fp8_dtype)
    return cases


def observe_to_float8_rowwise(fn, seed: int) -> dict:
    """Run fn on each case; record the dtype, the scales and the round trip x_fp8 / scales."""
    observed = {}
    for name, (x, fp8_dtype) in rowwise_inputs(seed).items():
        argument = x.clone()
        result, error = call_answer(fn, argument, fp8_dtype)
        returned = None if error else _not_a_pair(result)  # shapes: compare says what differs
        if error or returned:
            observed[name] = {"error": error} if error else {"returned": returned}
            continue
        try:
            quantized, scales = result
            given = str(scales.dtype) if isinstance(scales, torch.Tensor) else type(scales).__name__
            scales = torch.as_tensor(scales, dtype=torch.float32).detach()
            entry = {
                "changed": input_changed(argument, x),
                "dtype": str(quantized.dtype),
                "scales_dtype": given,
                "max": torch.finfo(fp8_dtype).max,
                "scales_shape": list(scales.shape),
                "scales": scales.flatten(),
                "x_fp8_shape": list(quantized.shape),
                "x": x,
            }
            if tuple(scales.shape) == (x.shape[0], 1) and quantized.shape == x.shape:
                entry["values"] = quantized.detach().float()
                entry["roundtrip"] = entry["values"] / scales
            observed[name] = entry
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed[name] = {"error": error_text(error)}
    return observed


def _relative_errors(x: torch.Tensor, observed: dict, dim=None) -> torch.Tensor:
    """|x - round trip| / |x|, over the whole tensor or along ``dim`` (0 where x is zero)."""
    return (x - observed["roundtrip"]).norm(dim=dim) / x.norm(dim=dim).clamp(min=AMAX_EPS)


def compare_to_float8_rowwise(mine: dict, reference: dict, seed: int) -> None:
    for name, ref in reference.items():
        got, x = mine[name], ref["x"]
        rows, cols = x.shape
        _fail_on_error_or_dtype(name, got, ref, "scales")
        shape = tuple(got["scales_shape"])
        if "roundtrip" not in got:
            raise ExerciseFailed(
                f"for {name} (x of shape {tuple(x.shape)}) you returned scales of shape {shape} "
                f"and x_fp8 of shape {tuple(got['x_fp8_shape'])}; the reference returns scales of "
                f"shape ({rows}, 1) and x_fp8 shaped like x."
            )
        roundtrip = got["roundtrip"]
        if not torch.isfinite(roundtrip).all() or not torch.isfinite(got["scales"]).all():
            bad = (~torch.isfinite(roundtrip).all(1) | ~torch.isfinite(got["scales"])).nonzero()
            row = int(bad[0])
            raise ExerciseFailed(
                f"for {name}, row {row} (amax {x[row].abs().max():.3g}) has the scale "
                f"{got['scales'][row]:.4g} and comes back holding inf or NaN; the reference's "
                f"scale there is {ref['scales'][row]:.4g}, its round trip finite."
            )
        if rows > 1 and bool((got["scales"] == got["scales"][0]).all()):
            raise ExerciseFailed(
                f"for {name} every row got the same scale, {got['scales'][0]:.4g}; the "
                f"reference's scales run from {ref['scales'].min():.4g} to "
                f"{ref['scales'].max():.4g}."
            )
        # The scales themselves, not only the round trip: FP8 keeps the same relative precision
        # over its normal range, so a scale off by a power of two (another format's max, half
        # the max) round-trips as well as the right one.
        off = ~torch.isclose(got["scales"], ref["scales"], rtol=1e-5, atol=0)
        if off.any():
            row, fp8_max = int(off.nonzero()[0]), ref["max"]
            scale = float(got["scales"][row])
            raise ExerciseFailed(
                f"for {name}, row {row} (amax {x[row].abs().max():.4g}) has the scale "
                f"{scale:.6g}, the reference's {float(ref['scales'][row]):.6g}: yours maps "
                f"{fp8_max / scale:.4g} onto {ref['dtype']}'s max, {fp8_max:g}."
            )
        if got["scales_dtype"] != "torch.float32":
            raise ExerciseFailed(
                f"for {name} your scales are {got['scales_dtype']}; the reference's are "
                f"torch.float32, of shape ({rows}, 1)."
            )
        mine_errors, ref_errors = (_relative_errors(x, r, dim=1) for r in (got, ref))
        worse = (mine_errors > 1.05 * ref_errors + 1e-6).nonzero().flatten().tolist()
        if worse:
            row = worse[0]
            raise ExerciseFailed(
                f"for {name}, row {row} (amax {x[row].abs().max():.3g}) comes back off by "
                f"{mine_errors[row]:.3g} (relative), the reference's by {ref_errors[row]:.3g}, "
                f"with the reference's scale ({got['scales'][row]:.4g}, checked above): the "
                "values cast to fp8 differ."
            )
        # As 09.to_float8 holds its values: a product taken in bf16, or x rounded to bf16 first,
        # passed the error per row (within 5% of the reference's) at most seeds.
        differ = (got["values"] != ref["values"]).nonzero().tolist()
        if len(differ) > ROWWISE_VALUES_DIFFERING:
            at = tuple(differ[0])
            value, product = float(x[at]), float(x[at] * ref["scales"][at[0]])
            raise ExerciseFailed(
                f"for {name} x_fp8 differs from the reference's in {len(differ)} of {x.numel()} "
                f"elements, with the same scales: x{list(at)} is {value:.6g}, x * scale in "
                f"float32 is {product:.6g}, your x_fp8 holds {float(got['values'][at]):g} there, "
                f"the reference's {float(ref['values'][at]):g}."
            )
