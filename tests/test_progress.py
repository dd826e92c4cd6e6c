"""Progress bars: on in a live run, off where the course's executor runs a lesson (a saved copy
would keep a bar's first frame, "0%", as the text a viewer without widgets shows)."""

from amp_course import display, env_vars


def test_a_bar_is_off_where_the_executor_says(monkeypatch):
    monkeypatch.delenv(env_vars.PROGRESS, raising=False)
    assert not display.progress(range(3)).disable
    assert display.progress(range(3), disable=True).disable  # the caller's wish stands
    monkeypatch.setenv(env_vars.PROGRESS, "0")
    bar = display.progress(range(3), desc="epoch 1", leave=False)
    assert bar.disable and list(bar) == [0, 1, 2]  # it still iterates
