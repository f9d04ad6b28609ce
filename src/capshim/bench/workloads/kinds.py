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
        what: ``processes`` (``-r``), ``process_reps``, ``warmup``, the built-in workload's
            ``n_prompt`` / ``n_gen``, ``precision`` (the GPU targets) or ``process_s`` (seconds a
            process takes, as measured: not a ``[default: ...]``).
    """
    owners = [k for k in _registry().values() if k.name == k.defaults]
    if what == "process_s":
        return "; ".join(_duration(k) for k in owners if any(defaults_for(k.name, c).process_s for c in (False, True)))
    if what == "precision":
        gpu = [f"{k.label or k.name} +-{d.precision[0]:g} points, at most {d.precision[2]} processes an arm" for k in owners
               if (d := defaults_for(k.name, False)).precision]
        return "[default on a GPU: " + "; ".join(gpu) + "; none on a CPU device]"
    if what in ("n_prompt", "n_gen"):
        gpu, cpu = (getattr(defaults_for("builtin", c), what) for c in (False, True))
        return f"[default: {gpu}" + (f"; {cpu} on a CPU device" if cpu != gpu else "") + "]"
    parts = []
    for kind in owners:
        gpu, cpu = (getattr(defaults_for(kind.name, c), what) for c in (False, True))
        if gpu is None:
            continue
        parts.append(f"{kind.label or kind.name} {gpu}" + (f" ({cpu} on a CPU device)" if cpu != gpu else ""))
    return f"[default: {'; '.join(parts)}]"


def _duration(kind: Kind) -> str:
    """How long one process of ``kind`` takes on a GPU and on a CPU device, as its defaults rows record it."""
    def span(d) -> str | None:
        if not d.process_s:
            return None
        lo, hi = d.process_s
        return f"{lo:g}" + (f"-{hi:g}" if hi != lo else "") + " s"
    parts = [f"{s} on a {c}" for c, s in (("GPU", span(defaults_for(kind.name, False))),
                                          ("CPU device", span(defaults_for(kind.name, True)))) if s]
    return f"{kind.label or kind.name}: " + (", ".join(parts) if parts else "not measured")
