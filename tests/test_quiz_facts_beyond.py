"""Keys of lesson 09's and the beyond-autocast labs' quiz questions, checked against torch."""

import inspect
from concurrent.futures import ThreadPoolExecutor

import torch
from conftest import quiz_answers as _correct
from conftest import quiz_key as key


def test_bf16_lost_update_key_follows_round_to_nearest():
    one = torch.tensor(1.0, dtype=torch.bfloat16)
    lands = {
        "+0.001": (one.float() + 0.001).bfloat16() != one,
        "+0.005": (one.float() + 0.005).bfloat16() != one,
        "+0.01": (one.float() + 0.01).bfloat16() != one,
    }
    marks = key("09_beyond_autocast", "bf16-lost-update")
    for text, moved in lands.items():
        assert marks[text] is (not moved), text


def test_a_worker_thread_has_its_own_autocast_state():
    # labs thread-local: neither the enabled flag nor the dtype reaches a new thread.
    def state():
        return torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")

    with torch.autocast("cpu", dtype=torch.float16):
        with ThreadPoolExecutor(max_workers=1) as pool:
            enabled, dtype = pool.submit(state).result()
    assert not enabled and dtype != torch.float16
    assert _correct("labs_beyond_autocast", "thread-local")[0].startswith("fp32")


def test_parallel_apply_re_enters_only_the_enabled_flag():
    # What lab 4 and the thread-local explanation say of nn.DataParallel's workers.
    from torch.nn.parallel import parallel_apply

    source = inspect.getsource(parallel_apply)
    assert "torch.is_autocast_enabled()" in source
    assert "enabled=autocast_enabled" in source and "get_autocast_dtype" not in source
