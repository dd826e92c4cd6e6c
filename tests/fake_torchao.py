"""A stand-in torchao package for the CPU suite (torchao is optional and not installed here): its
optimizers raise if built, so a test sees whether a lesson would have stepped (and compiled) one."""

import sys


def install(tmp_path, monkeypatch, init: str = "__version__ = '0.18.0'\n") -> None:
    package = tmp_path / "torchao"
    (package / "optim").mkdir(parents=True)
    (package / "__init__.py").write_text(init)
    (package / "optim" / "__init__.py").write_text(
        "class _Refused:\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        raise AssertionError(f'{type(self).__name__} built: its step would compile')\n"
        "class _AdamW(_Refused): pass\n"
        "class AdamW8bit(_Refused): pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("torchao", "torchao.optim"):
        # Absent now and absent again after the test (monkeypatch undoes both, in reverse), so
        # the stand-in imported during the test never leaks into the next one.
        monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.delitem(sys.modules, name)
