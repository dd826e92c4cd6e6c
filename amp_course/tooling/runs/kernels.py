"""The lessons' kernels talk to their runner over Unix sockets (ZeroMQ's ``ipc`` transport), never
over TCP ports.

Why: jupyter_client chooses a kernel's five TCP ports by binding port 0 and letting go of it, and
the kernel binds them a moment later. A runner in another process (the CUDA smoke pass runs six
lessons at a time, the tests two) can be handed the same free port in between. The kernel that
loses dies with "Address already in use", and ipykernel 7 then hangs in ZeroMQ's context shutdown
while holding its runner's output pipe: a lesson reported "failed" after the 480 s job limit with
none of its cells run. An ipc socket is a file named after the kernel's own connection file, so
no two kernels can be handed the same one. (The grader's sandboxed kernel uses ipc too, for its
own reason: ``tooling.grading.kernel``.)

Left to itself, jupyter_client names ipc sockets "kernel-ipc-<n>" in the working folder, which
every lesson run shares; each kernel here gets its own name instead. papermill takes the kernel
manager class as an argument; nbval has no such option, so this module is also a pytest plugin
(``-p amp_course.tooling.runs.kernels``) that hands nbval the same kind of manager. Windows keeps
TCP: ZeroMQ's ipc transport is for Unix sockets.
"""

from __future__ import annotations

import os
import tempfile
import uuid

from jupyter_client.manager import AsyncKernelManager, KernelManager

PLUGIN = __name__
IPC = os.name != "nt"


class _OwnSockets:
    """A kernel manager whose kernel listens on Unix sockets of its own, removed at shutdown."""

    def __init__(self, **kwargs):
        if IPC:
            name = os.path.join(tempfile.gettempdir(), f"amp-course-kernel-{uuid.uuid4().hex}")
            kwargs = {"transport": "ipc", "ip": name, **kwargs}
        super().__init__(**kwargs)


class IpcKernelManager(_OwnSockets, KernelManager):
    """What nbval starts its kernels with (``pytest_configure``)."""


class AsyncIpcKernelManager(_OwnSockets, AsyncKernelManager):
    """What papermill (nbclient) starts its kernels with (``execute.run_lesson``)."""


def pytest_configure(config):
    """nbval starts its kernels with ``nbval.kernel.KernelManager``: make it this module's."""
    import nbval.kernel

    nbval.kernel.KernelManager = IpcKernelManager
