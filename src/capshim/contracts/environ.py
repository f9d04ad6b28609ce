"""Environment variables whose names or values are not UTF-8.

POSIX environments are bytes. Python decodes them with surrogate escapes, so a
value such as ``b"caf\\xe9"`` reaches capshim as ``"caf\\udce9"``, which JSON
encoders and UTF-8 writers refuse. capshim carries such variables unchanged to
the workload (``os.environb``) and records them escaped, never fails on them.
"""

from __future__ import annotations

import os


def is_clean(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogates from undecodable bytes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def recordable(text: str) -> str:
    """``text`` safe to write as UTF-8 JSON: undecodable bytes shown as ``\\xNN``."""
    if is_clean(text):
        return text
    raw = os.fsencode(text)
    return raw.decode("utf-8", errors="backslashreplace")


def record(environ: dict[str, str]) -> dict[str, str]:
    """A copy of ``environ`` with every name and value made :func:`recordable`."""
    return {recordable(k): recordable(v) for k, v in environ.items()}


#: The variable that makes a worker a process template: the number of its socket descriptor
#: (:mod:`capshim.bench.workloads.template`; ``native/cuda/cuda_shim.c`` TEMPLATE_VAR: a process
#: loaded with it set keeps the CUDA shim stock). Only the bench sets it, for its own templates.
TEMPLATE_FD_VAR = "CAPSHIM_TEMPLATE_FD"

#: capshim's per-launch variables that a launched process never takes from capshim's own
#: environment (a stray value would retarget, re-scope or silence its shims): each launch
#: (``capshim run``, ``capshim probe``, every bench run) sets what it needs afresh.
NOT_INHERITED = ("CAPSHIM_TARGET_PID", "CAPSHIM_INHERIT", "CAPSHIM_VK_APP_CONFIG", "CAPSHIM_VK_DEVICE_CONFIG",
                 "CAPSHIM_CUDA_CONFIG", TEMPLATE_FD_VAR)


def child_base(environ: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``environ`` (default ``os.environ``) without :data:`NOT_INHERITED`: the base of
    every launched process's environment, to which the launch adds its own variables."""
    return {k: v for k, v in (os.environ if environ is None else environ).items() if k not in NOT_INHERITED}
