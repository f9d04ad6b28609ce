"""What each arm answered: the capability answers its shims changed, attested by the shims' own
status files, in the profiles' notation.

The bench shows them next to the path llama.cpp took (:mod:`capshim.bench.attest`): on a CPU
device that pair is the result (issue 28). Each run's status file records one ``changed`` event per
answer a shim changed (``key``, ``stock``, ``reported``; :mod:`capshim.status` keeps them per shim
as ``answered``). With two Vulkan roles the app role sits above the device role
(``--profile`` over ``--simulate``): the application sees the app role's answer where it changed
one, else the device role's; the stock value is the one below both.
"""

from __future__ import annotations

from capshim.profiles.catalog import KEYS
from capshim.profiles.model import format_answer

__all__ = ["arm_answers", "LAYER_ORDER"]

#: Shims in the order they sit, nearest the driver first: a later one sees what an earlier one answers.
LAYER_ORDER = ("VK_LAYER_CAPSHIM_device", "VK_LAYER_CAPSHIM_app")


def _api(spec: dict, key: str) -> str:
    for role in ("profile", "simulate"):
        api = ((spec or {}).get(role) or {}).get("api")
        if api and key in KEYS.get(api, {}):
            return api
    return next((a for a, keys in KEYS.items() if key in keys), "")


def arm_answers(runs: list[dict], spec: dict | None = None) -> dict[str, dict[str, object]]:
    """The answers one arm's shims changed, as the application saw them.

    Args:
        runs: the arm's run entries (summary.json ``arms[NAME]["runs"]``): each ``shims`` entry
            ``{shim: {"state", "answered": {key: [stock, reported]}}}`` (:class:`capshim.status.ShimState`).
        spec: the arm's ``spec`` (its profiles' ``api``), for the notation of each key.

    Returns:
        ``{key: {"stock": value, "answer": value}}`` in the profiles' notation (``"7.5"``,
        ``true``/``false`` as text, versions ``"1.3.280"``), from the first run whose shims
        changed an answer; ``{}`` when none did (no shim, or an A/A arm answering the stock values).
    """
    for run in runs or []:
        shims = run.get("shims") if isinstance(run, dict) else None
        if not isinstance(shims, dict):
            continue
        order = sorted(shims, key=lambda n: LAYER_ORDER.index(n) if n in LAYER_ORDER else len(LAYER_ORDER))
        seen: dict[str, list] = {}
        for name in order:
            answered = (shims.get(name) or {}).get("answered") or {}
            for key, pair in answered.items():
                if isinstance(pair, list) and len(pair) == 2:
                    seen.setdefault(key, [pair[0], pair[1]])[1] = pair[1]
        if seen:
            return {k: {"stock": format_answer(_api(spec or {}, k), k, s),
                        "answer": format_answer(_api(spec or {}, k), k, r)} for k, (s, r) in seen.items()}
    return {}
