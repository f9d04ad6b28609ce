"""The workload registry, like the backends' (:mod:`capshim.backends`): one :class:`Kind` per
workload module, declared there (``KIND``, a :class:`capshim.bench.workloads.base.Kind`), looked up here by the plan, the runner and the CLI.

A new kind of workload is one module in this package that declares its ``KIND`` and one entry in
:data:`_MODULES`; its defaults rows stay in :data:`capshim.bench.request.DEFAULTS` (the one table
``capshim bench --help`` reads) under :attr:`Kind.defaults`.
"""

from __future__ import annotations

from capshim.bench.request import defaults_for
from capshim.bench.workloads import builtin, command, llama_bench, ncnn, torch_sdpa
from capshim.bench.workloads.base import Kind

__all__ = ["Kind", "get", "selectable", "attested", "llama_cpp", "help_default"]


#: The workload modules, in the order ``--workload`` lists its choices; each declares ``KIND``.
_MODULES = (builtin, llama_bench, command, ncnn, torch_sdpa)


def _registry() -> dict[str, Kind]:
    return {m.KIND.name: m.KIND for m in _MODULES}


def get(name: str) -> Kind | None:
    """The kind named ``name``, or None."""
    return _registry().get(name)


def selectable() -> dict[str, Kind]:
    """``{name: Kind}`` of the kinds ``--workload`` chooses, in registry order."""
    return {n: k for n, k in _registry().items() if k.selectable}


def attested(name: str) -> bool:
    """Whether runs of kind ``name`` must show the device they ran on (an unknown kind: no)."""
    k = get(name)
    return bool(k and k.attested)


def llama_cpp(name: str) -> bool:
    """Whether llama.cpp runs workloads of kind ``name``."""
    k = get(name)
    return bool(k and k.llama_cpp)


def help_default(what: str) -> str:
    """``[default: ...]`` text of a ``capshim bench`` option, read from
    :data:`capshim.bench.request.DEFAULTS` for each kind of the registry that owns a row (its
    name is its ``defaults`` row), named by its :attr:`Kind.label`, in registry order.

    Args:
        what: ``processes`` (``-r``), ``process_reps``, ``warmup``, or the built-in workload's
            ``n_prompt`` / ``n_gen``.
    """
    if what in ("n_prompt", "n_gen"):
        gpu, cpu = (getattr(defaults_for("builtin", c), what) for c in (False, True))
        return f"[default: {gpu}" + (f"; {cpu} on a CPU device" if cpu != gpu else "") + "]"
    parts = []
    for kind in _registry().values():
        if kind.name != kind.defaults:
            continue
        gpu, cpu = (getattr(defaults_for(kind.name, c), what) for c in (False, True))
        if gpu is None:
            continue
        parts.append(f"{kind.label or kind.name} {gpu}" + (f" ({cpu} on a CPU device)" if cpu != gpu else ""))
    return f"[default: {'; '.join(parts)}]"
