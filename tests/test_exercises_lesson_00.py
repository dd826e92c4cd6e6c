"""Lesson 00's GPU-count exercise: the reference passes, the usual wrong accountings fail."""

import itertools
import math
import operator

import pytest

from amp_course import exercises
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_00 as lesson
from amp_course.exercises.solutions import lesson_00 as solutions

NAME = "00.gpus_for"
GIB = 2**30


def whole_job_over_one_gpu(num_params, activation, batch, gpu_gib, amp):
    total = (16 + 2 * amp) * num_params + activation * batch
    return math.ceil(total / (0.9 * gpu_gib * GIB))


def counting(
    bytes_per_param=16, copies=True, usable=0.9, gib_bytes=GIB, share=None, fits=operator.le
):
    """A gpus_for answer that searches the fewest GPUs with its own accounting; ``share(batch,
    gpus)`` is the images one GPU holds (right: rounded up)."""
    share = share or (lambda batch, gpus: -(-batch // gpus))

    def answer(num_params, activation, batch, gpu_gib, amp):
        state = (bytes_per_param + (2 if amp and copies else 0)) * num_params
        for gpus in range(1, batch + 1):
            if fits(state + activation * share(batch, gpus), usable * gpu_gib * gib_bytes):
                return gpus
        return None

    return answer


def zero_instead_of_none(num_params, activation, batch, gpu_gib, amp):
    return solutions.gpus_for(num_params, activation, batch, gpu_gib, amp) or 0


def one_too_many(*case):
    right = solutions.gpus_for(*case)
    return None if right is None else right + 1


def room_over_images(num_params, activation, batch, gpu_gib, amp):
    """Right, written differently: how many images fit on one GPU, then the GPUs they need."""
    room = 0.9 * gpu_gib * 2**30 - (18 if amp else 16) * num_params
    images = int(room // activation)
    return math.ceil(batch / images) if images >= 1 else None


def test_a_right_answer_written_differently_passes():
    for seed in (0, 1, 2):
        lesson.compare(
            lesson.observe(room_over_images, seed), lesson.observe(solutions.gpus_for, seed), seed
        )
    assert exercises.check(NAME, counting())


# Each message states the account at the count returned: the state, ceil(batch / GPUs) images,
# the total against the usable memory, so the learner sees which term differs from theirs.
@pytest.mark.parametrize(
    "wrong, message",
    [
        (whole_job_over_one_gpu, r"returned 8, expected 23: on 8 GPUs .* 128 image\(s\)"),
        (counting(bytes_per_param=4), r"returned 9, expected 23: on 9 GPUs each holds 14.901 GiB"),
        (
            counting(copies=False),
            r"returned 12, expected 14: on 12 GPUs each holds 25.146 GiB of state for "
            r"1_500_000_000 parameters under autocast",
        ),
        (counting(usable=1.0), r"returned 17, expected 23.*more than the 21.600 GiB usable"),
        (counting(gib_bytes=1e9), r"returned 30, expected 23: fewer GPUs suffice; on 23 GPUs"),
        (
            one_too_many,
            r"returned 24, expected 23: fewer GPUs suffice.*within the 21.600 GiB usable",
        ),
        (zero_instead_of_none, r"expected None: even with one image per GPU.*usable .*\)\.$"),
        (lambda *case: 23.5, "returned 23.5, expected 23, a whole number of GPUs."),
        (lambda *case: "23", r"returned '23' \(a str\), expected 23, a whole number of GPUs\.$"),
        (lambda *case: True, r"returned True \(a bool\), expected 23, a whole number of GPUs\.$"),
        (lambda *case: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_wrong_answers_fail_saying_what_differs(wrong, message):
    with pytest.raises(ExerciseFailed, match=message) as failure:
        exercises.check(NAME, wrong)
    assert "you " not in str(failure.value)  # the account, not a guess at the mistake
    assert "bytes x" not in str(failure.value)  # nor the bytes per parameter the lesson teaches


UNROUNDED = {
    "a fraction of an image": lambda batch, gpus: batch / gpus,
    "rounded down": lambda batch, gpus: batch // gpus,
}


@pytest.mark.parametrize("share", UNROUNDED.values(), ids=UNROUNDED)
def test_a_share_not_rounded_up_fails_at_every_seed(share):
    """0 parameters, 100 MiB per image, a global batch of 46 on 1 GiB GPUs: 46 / 5 = 9.2 images
    fit in 921.6 MiB, but a GPU holds whole images, ceil(46 / 5) = 10 of them: 6 GPUs, not 5."""
    wrong = counting(share=share)
    message = (
        r"gpus_for\(0, 100 \* 2\*\*20, 46, 1, amp=False\) returned 5, expected 6: on 5 GPUs .*"
        r"ceil\(46 / 5\) = 10 image\(s\) x 100.0 MiB = 1000.0 MiB .*more than the 921.6 MiB usable"
    )
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)
    for seed in (1, 2, 12345):
        with pytest.raises(ExerciseFailed, match="ceil"):
            lesson.compare(
                lesson.observe(wrong, seed), lesson.observe(solutions.gpus_for, seed), seed
            )


def test_inputs_vary_with_the_seed():
    seed0 = [row["result"] for row in lesson.observe(solutions.gpus_for, 0)["rows"]]

    answers = itertools.cycle(seed0)

    def hard_coded(*case):  # the seed-0 answers, whatever the case
        return next(answers)

    for seed in (1, 2):
        with pytest.raises(ExerciseFailed):
            lesson.compare(
                lesson.observe(hard_coded, seed), lesson.observe(solutions.gpus_for, seed), seed
            )
        lesson.compare(
            lesson.observe(solutions.gpus_for, seed), lesson.observe(solutions.gpus_for, seed), seed
        )


def test_observations_are_plain_data():
    observed = lesson.observe(lambda *case: 8.0, 0)
    assert {row["result"] for row in observed["rows"]} == {8}  # 8.0 counts as 8
    assert lesson.observe(lambda *case: "eight", 0)["rows"][0]["result"] == {
        "shown": "'eight' (a str)"
    }


# 00.largest_batch: the batch one GPU holds, for optimizers the lesson did not count.
BATCH = "00.largest_batch"
STATE = {"adamw": 8, "sgd_momentum": 4, "sgd": 0}


def batch_with(
    bytes_per_param, usable=0.9, gib_bytes=GIB, rounding=math.floor, clamp=True, nothing_fits=0
):
    """A largest_batch answer that counts ``bytes_per_param(optimizer, amp)`` per parameter and
    returns ``nothing_fits`` where no image fits (``clamp``; else the negative count)."""

    def answer(num_params, activation, gpu_gib, optimizer, amp):
        room = usable * gpu_gib * gib_bytes - bytes_per_param(optimizer, amp) * num_params
        count = int(rounding(room / activation))
        return count if count > 0 or not clamp else nothing_fits

    return answer


def right(optimizer, amp):
    return 8 + STATE[optimizer] + 2 * amp


def test_largest_batch_accepts_a_correct_answer_written_differently():
    assert exercises.check(BATCH, batch_with(right))


def test_largest_batch_right_answers_at_the_graders_seeds():
    def by_bytes_per_parameter(num_params, activation, gpu_gib, optimizer, amp):
        per_param = {"adamw": 16, "sgd_momentum": 12, "sgd": 8}[optimizer] + (2 if amp else 0)
        room = int(0.9 * gpu_gib * 2**30) - per_param * num_params
        return room // activation if room >= activation else 0

    for seed in (0, 12345, 987654321):
        for answer in (batch_with(right), by_bytes_per_parameter):
            assert exercises.verdict(BATCH, answer, seed) == ("passed", "")


# The seed-0 cases: 300 M parameters, 100 MiB an image, 24 GiB, AdamW in fp32 (175 images);
# 500 M, 60 MiB, 24 GiB, SGD with momentum under AMP (257); 2,500 M under AMP on 40 GiB (0).
STATE_300M = (
    r"16 bytes \(fp32 weights 4, gradients 4, adamw state 8\) x 300_000_000 parameters = "
    r"4.470 GiB of state"
)
STATE_500M = (
    r"14 bytes \(fp32 weights 4, gradients 4, sgd_momentum state 4, autocast's copies 2\) x "
    r"500_000_000 parameters = 6.519 GiB of state"
)
USABLE_24 = r"the 21.600 GiB usable \(90% of 24 GiB\)"


# Each message gives the memory at the batch returned (too many) or expected (too few): the
# state per parameter, the activations, the total against the usable memory.
@pytest.mark.parametrize(
    "wrong, message",
    [
        (  # AdamW's state whatever the optimizer
            batch_with(lambda opt, amp: 16 + 2 * amp),
            r"'sgd_momentum', amp=True\) returned 225, expected 257: more images fit; with 257 "
            rf"image\(s\) the GPU holds {STATE_500M} and 257 x 60.0 MiB = 15.059 GiB of "
            rf"activations, 21.578 GiB in all: within {USABLE_24}\.$",
        ),
        (  # no gradients
            batch_with(lambda opt, amp: 4 + STATE[opt] + 2 * amp),
            rf"returned 186, expected 175: with 186 image\(s\) the GPU holds {STATE_300M} and "
            rf"186 x 100.0 MiB = 18.164 GiB of activations, 22.634 GiB in all: more than "
            rf"{USABLE_24}",
        ),
        (  # no autocast copies
            batch_with(lambda opt, amp: 8 + STATE[opt]),
            rf"returned 273, expected 257: with 273 image\(s\) the GPU holds {STATE_500M}.* "
            r"22.515 GiB in all: more than",
        ),
        (  # the fp32 state halved under AMP
            batch_with(lambda opt, amp: (8 + STATE[opt]) / (2 if amp else 1)),
            r"returned 320, expected 257: .* 25.269 GiB in all: more than",
        ),
        (  # the whole GPU
            batch_with(right, usable=1.0),
            r"returned 199, expected 175: .*23.904 GiB in all: more than the 21.600 GiB usable",
        ),
        (  # a GiB of 10**9 bytes
            batch_with(right, gib_bytes=1e9),
            r"returned 160, expected 175: more images fit; with 175 image\(s\) .* 21.560 GiB in "
            "all: within",
        ),
        (  # rounded up
            batch_with(right, rounding=math.ceil),
            r"returned 176, expected 175: .* 176 x 100.0 MiB = 17.188 GiB of activations, 21.658 "
            r"GiB in all: more than",
        ),
        (  # negative when nothing fits
            batch_with(right, clamp=False),
            r"\(2_500_000_000, 50 \* 2\*\*20, 40, 'adamw', amp=True\) returned -122, expected 0: "
            r"not even one image fits; with 1 image\(s\) .* = 41.910 GiB of state .* more than "
            r"the 36.000 GiB usable \(90% of 40 GiB\)",
        ),
        (  # None when nothing fits: the account, as for -122
            batch_with(right, nothing_fits=None),
            r"amp=True\) returned None, expected 0: not even one image fits; with 1 image\(s\) .* "
            r"more than the 36.000 GiB usable",
        ),
        (lambda *case: 2.5, "returned 2.5, expected 175: a batch is a whole number of images"),
        (lambda *case: "175", r"returned '175' \(a str\), expected 175: a batch is a whole"),
        (lambda *case: {}["adamw"], "raised KeyError"),
    ],
)
def test_largest_batch_wrong_answers_fail_saying_what_differs(wrong, message):
    with pytest.raises(ExerciseFailed, match=message) as failure:
        exercises.check(BATCH, wrong)
    said = str(failure.value)
    assert "you " not in said  # the account, not a guess at the mistake
    for guess in ("left out", "rounded up", "keep 10% free", "halved", "whatever the optimizer"):
        assert guess not in said


def test_largest_batch_inputs_vary_with_the_seed():
    reference = solutions.largest_batch
    seed0 = [row["result"] for row in lesson.observe_batch(reference, 0)["rows"]]
    answers = itertools.cycle(seed0)
    for seed in (1, 2):
        observed = lesson.observe_batch(lambda *case: next(answers), seed)
        with pytest.raises(ExerciseFailed):
            lesson.compare_batch(observed, lesson.observe_batch(reference, seed), seed)
        cases = lesson.observe_batch(reference, seed)["rows"]
        assert {row["case"][3] for row in cases} == set(STATE)  # every optimizer, every seed
        assert 0 in {row["result"] for row in cases}  # and a job that does not fit


def images_then_one_more(num_params, activation, batch, gpu_gib, amp):
    """Off by one where the images one GPU holds divide the batch: batch // images + 1."""
    room = 0.9 * gpu_gib * GIB - (16 + 2 * amp) * num_params
    images = int(room // activation)
    return batch // images + 1 if images >= 1 else None


def search_short_of_the_batch(num_params, activation, batch, gpu_gib, amp):
    """Tries 1 to batch - 1 GPUs: never one image per GPU, so None where that is the answer."""
    static, usable = (16 + 2 * amp) * num_params, 0.9 * gpu_gib * GIB
    return next(
        (g for g in range(1, batch) if static + -(-batch // g) * activation <= usable), None
    )


# Seed 0 is the learner's check cell; the others stand for the grader's secret seed. A wrong
# answer the check cell passes would pass in the notebook and then fail at grading.
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 12345])
@pytest.mark.parametrize(
    "wrong", [images_then_one_more, zero_instead_of_none, search_short_of_the_batch]
)
def test_an_answer_wrong_for_some_jobs_fails_at_every_seed(wrong, seed):
    with pytest.raises(ExerciseFailed, match="returned"):
        lesson.compare(lesson.observe(wrong, seed), lesson.observe(solutions.gpus_for, seed), seed)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 12345])
def test_largest_batch_rounded_to_nearest_fails_at_every_seed(seed):
    wrong = batch_with(right, rounding=round)
    with pytest.raises(ExerciseFailed, match=r"returned (\d+), expected \d+: with \1 image"):
        lesson.compare_batch(
            lesson.observe_batch(wrong, seed),
            lesson.observe_batch(solutions.largest_batch, seed),
            seed,
        )


def _halved_under_amp(num_params, activation, batch, gpu_gib, amp):
    """Autocast's activations counted at half their bytes: the case gives them as they are."""
    return counting()(num_params, activation // 2 if amp else activation, batch, gpu_gib, amp)


def _four_byte_copies(num_params, activation, batch, gpu_gib, amp):
    return counting(bytes_per_param=16 + 2 * amp, copies=True)(
        num_params, activation, batch, gpu_gib, amp
    )


# Each passed some grader seeds (up to 17 of 200) where no drawn case had autocast's copies, or a
# byte count of the optimizer, decide the answer; every seed now draws such cases.
SLIPS = {
    "00.gpus_for": [counting(copies=False), _four_byte_copies, _halved_under_amp],
    "00.largest_batch": [
        batch_with(lambda optimizer, amp: right(optimizer, amp) - 4 * (optimizer == "adamw")),
        batch_with(
            lambda optimizer, amp: right(optimizer, amp) + 4 * (optimizer == "sgd_momentum")
        ),
        batch_with(lambda optimizer, amp: right(optimizer, amp) + 2 * amp),
        batch_with(right, usable=1 / 1.1),
        batch_with(right, rounding=round),
    ],
}


# Every seed has a job that fills the usable memory to the byte at the right answer: "fits" read
# as < rather than <= asks for a GPU more or an image fewer there (it passed every seed before).
STRICT = {
    NAME: (counting(fits=operator.lt), "72.000 GiB in all: within the 72.000 GiB usable"),
    BATCH: (
        batch_with(right, rounding=lambda images: math.ceil(images) - 1),
        "36.000 GiB in all: within the 36.000 GiB usable",
    ),
}


@pytest.mark.parametrize("name", STRICT)
def test_fitting_read_as_strictly_less_fails_at_every_seed(name):
    wrong, full = STRICT[name]
    status, message = exercises.verdict(name, wrong, 0)
    assert status == "failed" and full in message, message  # the total equals the usable memory
    for seed in (1, 2, 3, 12345, 987654321):
        assert exercises.verdict(name, wrong, seed)[0] == "failed", seed


@pytest.mark.parametrize(
    "name, wrong", [(name, wrong) for name, slips in SLIPS.items() for wrong in slips]
)
def test_a_slip_in_one_byte_count_or_rule_fails_at_every_seed(name, wrong):
    for seed in range(41):
        assert exercises.verdict(name, wrong, seed)[0] == "failed", seed
