"""``capshim ablate``: what each capability group of a lowering profile is worth.

Given a lowering profile P (default ``vulkan-paravirt``), the bench measures,
in ONE interleaved bench (one evidence bundle):

* ``native`` (the stock device; the baseline and host), ``aa`` (the bench's A/A
  arm: the app layer active, answering the stock values: the harness's own
  bias) and ``sim`` (``simulate:P``);
* leave-one-out ``loo-G``: native with only group G lowered as P lowers it
  (``simulate:P|G``): what losing G costs;
* leave-one-in ``loi-G``: the simulated GPU with only group G raised back
  (``simulate:P`` + an app-role raise of G's stock values): what G alone buys;
* the cumulative path ``cum-K-G``: the simulated GPU with the first K groups
  raised (group order: :data:`GROUP_ORDER`); the last one raises all of them.

The smallest raise profile is the raise over P with the fewest groups (then the
fewest keys) whose ratio to native passes :func:`passes` (see
:data:`RECOVER` and :data:`LOWER_BOUND`); it is written as a profile file.

Groups whose keys P does not lower, or whose stock value is already at or below
P's answer on this device, are skipped (nothing to measure) and listed as such.

A profile of an API whose shim has no device role (CUDA: lower-only; ``Backend.can_simulate``
False) is ablated with lower profiles alone, on the built-in workload of that API
(:func:`capshim.studies.common.study_workload`: ``torch-sdpa``): ``sim`` is ``profile:P``,
``loo-U`` lowers only U, ``loi-U`` lowers everything P lowers but U (U left at the device's
value: what U alone buys back), ``cum-K-U`` leaves the first K units at the device's values;
the "smallest raise" is then the arm with the fewest units left unlowered, written as that
lower profile (``smallest-restore.toml``). Such a profile's keys belong to no group of
:data:`~capshim.studies.common.GROUPS`: ``--by group`` gives one unit (``other``), ``--by key``
one per key (``computeCapability`` is one key).

All bench runs go through :func:`capshim.studies.common.run_arms` (the one
seam to the bench API) and all numbers are read from the bundle's summary
through :func:`capshim.studies.common.ratios` (one place): no statistics are
computed here. The bench's own warnings about each arm (too few processes,
unstable, contaminated, failed runs...) are read from the summary too and
shown short in each row (:func:`~capshim.studies.common.arm_flags`); why an
arm failed is the bench's reason (:func:`~capshim.studies.common.why`); when
the A/A arm's interval excludes 1.00x in any test, the first note says so
(:func:`~capshim.studies.common.aa_warning`).
"""

from __future__ import annotations

import io
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from capshim import backends, profiles
from capshim.bench.workloads import torch_sdpa
from capshim.contracts import names, signals
from capshim.contracts.suggest import did_you_mean
from capshim.errors import UsageError
from capshim.profiles import Profile
from capshim.contracts.names import device_label
from capshim.profiles.catalog import KEYS
from capshim.profiles.ondevice import restore_profile
from capshim.studies import common
from capshim.studies.common import GROUP_ORDER, GROUPS, Ratio, fmt_ratio

OTHER = "other"

#: Selection rule for the smallest raise profile: the arm's median ratio to
#: native is at least RECOVER (99% of native) AND its 95% interval's lower
#: bound is at least LOWER_BOUND. 0.97 because the bench's intervals on the
#: H200 are about +-3-4 points wide today (evidence/h200-tinyllama-r10): a
#: lower bound of 0.99 would reject even native against itself. Tighten it
#: with --lower-bound once the bench reaches its +-2 point target.
RECOVER = 0.99
LOWER_BOUND = 0.97


def group_of(key: str) -> str:
    """The group (a key of :data:`GROUPS`, or :data:`OTHER`) of a capability key or extension name."""
    for name, g in GROUPS.items():
        if key in g["caps"] or key in g["exts"]:
            return name
    return OTHER


def _written(profile: Profile) -> tuple[dict, dict]:
    """A profile's capabilities and extensions as a profile file writes them."""
    d = profile.to_dict()
    exts = {k: (v if v else False) for k, v in d["extensions"].items()}
    return d["capabilities"], exts


def restore_for(stock: dict, lowering: Profile) -> Profile:
    """The raise profile answering the stock values ``lowering`` lowers (the bench's ``profile:restore``),
    named ``unlock-<P>`` cut to a valid name (a 64-character P is a valid profile name)."""
    return restore_profile(stock, lowering, name=names.label_for(f"unlock-{lowering.name}"))


def _lowers(stock: dict, key: str, low, api: str) -> bool:
    """Whether answering ``low`` for ``key`` (a key of ``api``) changes what this device (stock probe) answers."""
    real = stock.get("capabilities", {}).get(key)
    if real is None:
        return False
    kind = KEYS[api][key]
    if kind == "bool":
        return real is True and low is False
    if kind == "version":
        return profiles.parse_version(low) < profiles.parse_version(real)
    if kind == "flags":
        return bool(int(real) & ~int(low))
    try:
        return int(low) < int(real)
    except (TypeError, ValueError):  # another written form ("7.5"): compare as the profile language reads it
        return _resolved(api, key, low) < _resolved(api, key, real)


def _resolved(api: str, key: str, value) -> int:
    """``value`` of ``key`` as a profile of ``api`` resolves it (the number the shim answers)."""
    doc = {"name": "probe-value", "api": api, "direction": "lower", "version": 1, "description": "a value",
           "capabilities": {key: value}}
    return profiles.parse(tomli_w.dumps(doc), "generated:probe-value").capabilities[key]


def device_role(api: str) -> bool:
    """Whether ``api``'s shim has a device role (``--simulate``): then the simulated-GPU arms; else lower profiles."""
    return backends.get(api).can_simulate


@dataclass
class Unit:
    """One ablation unit (a group, or one key with ``--by key``).

    Attributes:
        name: group name or key name.
        lower_caps / lower_exts: what P answers for this unit (profile-file values).
        raise_caps / raise_exts: the stock values restoring it.
        skipped: why the unit is not measured, or None.
    """

    name: str
    lower_caps: dict = field(default_factory=dict)
    lower_exts: dict = field(default_factory=dict)
    raise_caps: dict = field(default_factory=dict)
    raise_exts: dict = field(default_factory=dict)
    skipped: str | None = None

    @property
    def keys(self) -> list[str]:
        """Capability keys and extension names of the unit."""
        return [*self.lower_caps, *self.lower_exts]


def units(lowering: Profile, stock: dict, by: str = "group") -> list[Unit]:
    """Split a lowering profile into units, in :data:`GROUP_ORDER` (keys: profile order).

    Args:
        lowering: a ``lower`` profile.
        stock: a stock probe of the device the bench runs on.
        by: "group" or "key".

    Raises:
        UsageError: the profile is not a lowering profile.
    """
    if lowering.direction != "lower":
        raise UsageError(f"--profile {lowering.source}: ablate needs a 'lower' profile "
                         f"(this one is {lowering.api}, {lowering.direction})")
    low_caps, low_exts = _written(lowering)
    if device_role(lowering.api):
        up_caps, up_exts = _written(restore_for(stock, lowering))
    else:  # no raise profile: the device's own values say what there is to restore
        answers = stock.get("capabilities", {})
        up_caps, up_exts = {k: answers[k] for k in low_caps if answers.get(k) is not None}, {}
    out: dict[str, Unit] = {}
    for key in [*low_caps, *low_exts]:
        name = key if by == "key" else group_of(key)
        u = out.setdefault(name, Unit(name))
        if key in low_caps:
            u.lower_caps[key] = low_caps[key]
            if key in up_caps and _lowers(stock, key, low_caps[key], lowering.api):
                u.raise_caps[key] = up_caps[key]
        else:
            u.lower_exts[key] = low_exts[key]
            if key in up_exts:
                u.raise_exts[key] = up_exts[key]
    for u in out.values():
        if not u.raise_caps and not u.raise_exts:
            u.skipped = "this device does not have more than the profile answers: nothing to measure"
    if by == "group":
        for g in common.groups_for(lowering.api):
            out.setdefault(g, Unit(g, skipped=f"{lowering.name} does not lower it: nothing to measure"))
    order = {g: i for i, g in enumerate((*GROUP_ORDER, OTHER))}
    result = list(out.values())
    if by == "group":
        result.sort(key=lambda u: order[u.name])
    return result


@dataclass
class ArmInfo:
    """One ablation arm: its bench name, kind (native/sim/loo/loi/cum), units and raise profile."""

    name: str
    kind: str
    units: list[str]
    spec: str
    raise_keys: int = 0
    raise_profile: Path | None = None


def build_arms(lowering: Profile, stock: dict, folder: Path, by: str = "group") -> tuple[list[ArmInfo], list[Unit]]:
    """Write the arms' profiles into ``folder`` and return the arms (``--arm`` specs) and units.

    Arm and profile names are valid names (:mod:`capshim.contracts.names`): ``loo-G``, ``loi-G``,
    ``cum-K-G`` with G a group, or ``k00``, ``k01`` ... with ``by="key"``.

    Raises:
        UsageError: not a lowering profile, or nothing to measure on this device.
    """
    us = units(lowering, stock, by)
    live = [u for u in us if not u.skipped]
    if not live:
        raise UsageError(f"--profile {lowering.source}: this device already answers at or below every value "
                         "the profile lowers; nothing to ablate")
    api = lowering.api
    sim_path = folder / "sim.toml"
    common.write_profile(sim_path, common.profile_data(lowering.name, "lower", lowering.description,
                                                       *_written(lowering), api=api))
    role = "simulate" if device_role(api) else "profile"  # a lower-only shim lowers through its profile
    arms = [ArmInfo("native", "native", [], "native="), ArmInfo("aa", "aa", [], "aa=identity"),
            ArmInfo("sim", "sim", [], f"sim={role}:{sim_path}")]
    labels = [u.name if by == "group" else f"k{i:02d}" for i, u in enumerate(live)]
    for label, u in zip(labels, live):
        name = names.check(f"loo-{label}", "arm")
        p = folder / f"{name}.toml"
        common.write_profile(p, common.profile_data(name.lower(), "lower", f"Only {u.name} lowered as "
                                                    f"{lowering.name} lowers it", u.lower_caps, u.lower_exts, api=api))
        arms.append(ArmInfo(name, "loo", [u.name], f"{name}={role}:{p}"))
    back = _raise_arm if device_role(api) else _restore_arm
    for label, u in zip(labels, live):
        arms.append(back(folder, sim_path, lowering, "loi", f"loi-{label}", [u], us))
    for k in range(2, len(live) + 1):
        arms.append(back(folder, sim_path, lowering, "cum", f"cum-{k}-{labels[k - 1]}", live[:k], us))
    return arms, us


def _restore_arm(folder: Path, sim_path: Path, lowering: Profile, kind: str, name: str, chosen: list[Unit],
                 us: list[Unit]) -> ArmInfo:
    """A loi/cum arm of a lower-only shim: everything P lowers but the ``chosen`` units (left at the
    device's values), as one lower profile (written)."""
    names.check(name, "arm")
    keep = {u.name for u in chosen}
    caps = {k: v for u in us if u.name not in keep for k, v in u.lower_caps.items()}
    exts = {k: v for u in us if u.name not in keep for k, v in u.lower_exts.items()}
    p = folder / f"{name}.toml"
    common.write_profile(p, common.profile_data(name.lower(), "lower", f"{lowering.name} without "
                                                f"{', '.join(u.name for u in chosen)} (left at this device's values)",
                                                caps, exts, api=lowering.api))
    restored = sum(len(u.raise_caps) + len(u.raise_exts) for u in chosen)
    return ArmInfo(name, kind, [u.name for u in chosen], f"{name}=profile:{p}", raise_keys=restored, raise_profile=p)


def _raise_arm(folder: Path, sim_path: Path, lowering: Profile, kind: str, name: str, chosen: list[Unit],
               us: list[Unit] | None = None) -> ArmInfo:
    """A loi/cum arm: the simulated device with the ``chosen`` units raised back (its profile written)."""
    names.check(name, "arm")
    caps = {k: v for u in chosen for k, v in u.raise_caps.items()}
    exts = {k: v for u in chosen for k, v in u.raise_exts.items()}
    p = folder / f"{name}.toml"
    common.write_profile(p, common.profile_data(name.lower(), "raise", f"Raise {', '.join(u.name for u in chosen)} "
                                                f"over {lowering.name} to this device's values", caps, exts))
    return ArmInfo(name, kind, [u.name for u in chosen], f"{name}=simulate:{sim_path},profile:{p}",
                   raise_keys=len(caps) + len(exts), raise_profile=p)


def passes(r: Ratio, recover: float = RECOVER, lower_bound: float = LOWER_BOUND) -> bool:
    """The selection rule: a result, median >= ``recover`` and interval lower bound >= ``lower_bound``.

    An arm without an interval (fewer than 5 processes a side) never passes, nor one that the one
    verdict rule's gate stops (a side mostly contaminated: :func:`capshim.contracts.verdict.gate`).
    """
    return r.ok and r.lo is not None and r.gate is None and r.value >= recover and r.lo >= lower_bound


def smallest(arms: list[ArmInfo], rs: dict[str, Ratio], recover: float = RECOVER,
             lower_bound: float = LOWER_BOUND) -> ArmInfo | None:
    """The raise arm (loi/cum) with the fewest units, then fewest keys, then highest median, that passes."""
    cands = [a for a in arms if a.kind in ("loi", "cum") and a.name in rs and passes(rs[a.name], recover, lower_bound)]
    if not cands:
        return None
    return min(cands, key=lambda a: (len(a.units), a.raise_keys, -rs[a.name].value))


# --- output -------------------------------------------------------------------

def answers_text(a: ArmInfo) -> str:
    """What the arm answers, short: ``native``, ``P``, ``native − fp16``, ``P + fp16 + shmem``."""
    if a.kind == "native":
        return "native"
    if a.kind == "aa":
        return "native, app layer active (A/A)"
    if a.kind == "sim":
        return "P"
    if a.kind == "loo":
        return "native − " + a.units[0]
    return "P + " + " + ".join(a.units)


def table_rows(arms: list[ArmInfo], summary: dict) -> list[dict]:
    """One row per arm: ``arm``, ``answers``, then per test the ratio to native text, then ``state``
    and ``flags`` (the bench's warnings about the arm, short: :func:`arm_flags`)."""
    rows = []
    for a in arms:
        row = {"arm": a.name, "answers": answers_text(a)}
        for t, rs in common.per_test(summary).items():
            row[f"{t} vs native"] = fmt_ratio(rs.get(a.name))
        row["state"] = summary["arms"].get(a.name, {}).get("state", "—")
        row["flags"] = ", ".join(common.arm_flags(summary, a.name))
        rows.append(row)
    return rows


def chart(arms: list[ArmInfo], summary: dict, test: str, path: Path, title: str) -> Path:
    """Horizontal bars of each arm's ratio to native for ``test``, with 95% intervals (matplotlib, Agg)."""
    import matplotlib  # heavy optional library: imported only when a chart is drawn

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rs = common.ratios(summary, test)
    shown = [a for a in arms if a.name in rs and not math.isnan(rs[a.name].value)]
    colors = {"native": "#555555", "aa": "#777777", "sim": "#999999", "loo": "#d62728", "loi": "#2ca02c", "cum": "#1f77b4"}
    fig, ax = plt.subplots(figsize=(7.5, 0.4 * len(shown) + 1.5))
    for i, a in enumerate(shown):
        r = rs[a.name]
        err = [[r.value - r.lo], [r.hi - r.value]] if r.lo is not None else None
        ax.barh(i, r.value, xerr=err, color=colors[a.kind], hatch=None if r.ok else "//", capsize=3,
                edgecolor="black", linewidth=0.4)
    ax.set_yticks(range(len(shown)), [answers_text(a) for a in shown], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axvline(RECOVER, color="black", linewidth=0.6, linestyle=":")
    ax.set_xlabel(f"{test}: ratio to native (median, 95% interval)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()  # written by the output rule (common.write_output): whole, never through a link
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    common.write_output(path, buf.getvalue())
    return path


def lowering_builtins() -> list[str]:
    """The built-in profiles ablate takes: ``lower`` profiles (of any API)."""
    return [n for n in profiles.builtin_names() if profiles.load(n).direction == "lower"]


def load_lowering(ref: str) -> Profile:
    """``--profile``: a built-in name or a file, which must be a lowering profile.

    Raises:
        UsageError: unknown name (the message lists the built-ins ablate takes), a folder,
            an invalid profile, or a raise profile (Metal's are all raise: not ablated yet).
    """
    looks_like_file = Path(ref).exists() or "/" in ref or ref.endswith(".toml")
    common.refuse_targets(ref)
    if not looks_like_file and ref not in profiles.builtin_names():
        raise UsageError(f"--profile {ref}: no such profile file or built-in lowering profile"
                         f"{did_you_mean(ref, lowering_builtins())} (built-in: {', '.join(lowering_builtins())})")
    prof = common.load_profile(ref, "ablate measures lowering profiles")
    if prof.direction != "lower":
        raise UsageError(f"--profile {ref}: ablate measures lowering profiles; this one is a {prof.api} "
                         f"{prof.direction} profile")
    return prof


def ablate(profile_ref: str = "vulkan-paravirt", by: str | None = None, out: Path | None = None,
           model: str | None = None, repetitions: int | None = None, warmup: int | None = None,
           n_prompt: int | None = None, n_gen: int | None = None, test: str | None = None,
           shape: str | None = None, recover: float = RECOVER, lower_bound: float = LOWER_BOUND, timeout: float = 900.0) -> dict:
    """Run the whole ablation into ``out`` and return its result (also written as ``ablation.json``).

    Files in ``out`` (a new folder: :func:`capshim.studies.common.study_folder`; default
    ``./capshim-ablate-DATE-TIME[-N]``): ``profiles/`` (every arm's profile), ``bench/`` (the
    evidence bundle), ``ablation.md`` (the table), ``ablation.png`` (the chart),
    ``smallest-raise.toml`` (when an arm passes), ``ablation.json``; last, the study seal
    (``study.json``, ``SHA256SUMS``: :mod:`capshim.evidence.study`), also after an error or a stop
    signal once files were written.

    ``shape``: the torch-sdpa problem of a CUDA profile (BxHxSxD; the workload's default when None).
    ``by``: "group" or "key"; None: groups for the API that has them
    (:data:`capshim.studies.common.GROUPS_API`), key by key for the others.

    Raises:
        UsageError: bad profile, ``--by``, ``--test`` or ``--shape`` (a shape for a Vulkan profile), or an
            ``out`` that is not new or empty or lies inside a sealed folder (exit 2, nothing written).
        CapshimError: no driver for the profile's API; the bench was stopped by a signal (exit 128+N, sealed).
    """
    t0 = time.monotonic()
    if by not in (None, "group", "key"):
        raise UsageError(f"--by {by}: expected group or key")
    lowering = load_lowering(profile_ref)
    if by is None:
        by = "group" if lowering.api == common.GROUPS_API else "key"
    if shape is not None:  # before the folder: a bad --shape is exit 2 with nothing written
        if common.study_workload(lowering.api) != "torch-sdpa":
            raise UsageError(f"--shape is for a CUDA profile (the torch-sdpa workload); {profile_ref} is "
                             f"{lowering.api}")
        torch_sdpa.shape_dims(shape)
    with common.study_folder(out, "ablate") as (out, guard):
        workload = common.study_workload(lowering.api)
        stock, device = common.stock_probe(lowering.api)
        d = common.defaults("ablate", device)
        n_prompt, n_gen = n_prompt or d["n_prompt"], n_gen or d["n_gen"]
        if workload is None:  # the llama.cpp workload's tests are known before it runs
            common.check_test(test, common.builtin_tests(n_prompt, n_gen))
        arms, us = build_arms(lowering, stock, out / "profiles", by)
        m = common.run_arms([a.spec for a in arms], out / "bench", repetitions=repetitions or d["repetitions"],
                            warmup=d["warmup"] if warmup is None else warmup, model=model, n_prompt=n_prompt,
                            n_gen=n_gen, timeout=timeout, guard=guard, workload=workload, shape=shape)
        t = common.main_test(m.summary, test)
        rs = common.ratios(m.summary, t)
        best = smallest(arms, rs, recover, lower_bound)
        notes = _notes(lowering, us, m, t, recover, lower_bound, device)
        smallest_path = None
        if best is not None:
            name = "smallest-raise.toml" if device_role(lowering.api) else "smallest-restore.toml"
            smallest_path = _write_smallest(out / name, best, lowering, recover, t, device)
            notes.append(f"smallest raise profile: {best.name} ({' + '.join(best.units)}), "
                         f"{fmt_ratio(rs[best.name])} -> {smallest_path}")
        else:
            notes.append("no raise arm met the rule; no profile written (more runs, -r, give tighter intervals)")
        rows = table_rows(arms, m.summary)
        title = f"capshim ablate {lowering.name} — {device_label(device) or '?'}"  # a stand-in says so
        drawn = _chart_unless_stopped(guard, arms, m.summary, t, out / "ablation.png", title, notes)
        common.write_output(out / "ablation.md", f"# {title}\n\n" + common.markdown(rows, notes)
                                         + ("\n![chart](ablation.png)\n" if drawn else ""))
        result = {
            "schema": "capshim-ablation/1", "profile": lowering.source, "by": by, "device": device,
            "cpu_device": common.is_cpu(device), "test": t, "rule": {"recover": recover, "lower_bound": lower_bound},
            "units": [{"name": u.name, "keys": u.keys, "skipped": u.skipped} for u in us],
            "arms": [_arm_json(a, m.summary) for a in arms],
            "rows": rows, "notes": notes, "warnings": common.bench_warnings(m.summary), "bundle": str(m.bundle),
            "smallest": None if best is None else {"arm": best.name, "units": best.units, "profile": str(smallest_path)},
            "failed_runs": m.failed_runs, "elapsed_s": round(time.monotonic() - t0, 1),
        }
        common.write_output(out / "ablation.json", json.dumps(result, indent=2) + "\n")
        return result


def _chart_unless_stopped(guard: signals.SealGuard, arms: list[ArmInfo], summary: dict, test: str, path: Path,
                          title: str, notes: list[str]) -> bool:
    """Draw the chart as a slow, optional step: a second stop signal (or the seal guard's wait after the
    first) skips it, never the seal; then a note says so and False is returned."""
    try:
        with guard.abortable():
            chart(arms, summary, test, path, title)
        return True
    except signals.StepInterrupted as stop:
        path.unlink(missing_ok=True)
        notes.append(f"chart not drawn: interrupted by {stop.signal_name}")
        return False


def _notes(lowering: Profile, us: list[Unit], m: common.Measured, t: str, recover: float, lower_bound: float,
           device: dict | None) -> list[str]:
    """ablation.md's notes before the smallest-raise one: warnings first, then what the table says."""
    notes = common.aa_warning(common.per_test(m.summary)) + common.env_notes(m.summary)
    notes += [f"P = {lowering.source}; ratios to native (median, 95% interval) from {m.bundle / 'summary.json'}; "
              f"flags: the bench's own warnings (whole in {m.bundle / 'report.md'})",
              f"smallest raise: fewest groups, then keys, whose {t} median >= {recover:.2f}x of native and "
              f"interval lower bound >= {lower_bound:.2f}x"]
    notes += [f"{u.name}: skipped: {u.skipped}" for u in us if u.skipped]
    notes += common.why_notes(m.summary)
    if common.is_cpu(device):
        notes.append(common.CPU_NOTE)
    return notes


def _write_smallest(path: Path, best: ArmInfo, lowering: Profile, recover: float, t: str,
                    device: dict | None) -> Path:
    """Write the smallest raise profile (the ``best`` arm's raise, named after P, cut to a valid name); for a
    lower-only shim the ``best`` arm's lower profile (P without the units it leaves at the device's values)."""
    caps, exts = _written(profiles.load(str(best.raise_profile)))
    raise_ = device_role(lowering.api)
    common.write_profile(path, common.profile_data(
        names.label_for(f"smallest-{'raise' if raise_ else 'restore'}-{lowering.name}"), "raise" if raise_ else "lower",
        f"Smallest {'raise over' if raise_ else 'restore of'} {lowering.name} recovering {recover:.0%} of native {t} "
        f"on {(device or {}).get('name', 'this device')} (capshim ablate)", caps, exts, api=lowering.api))
    return path


def _arm_json(a: ArmInfo, summary: dict) -> dict:
    """One arm in ablation.json: what it is, its state, the bench's flags and why it failed."""
    arm = summary["arms"].get(a.name, {})
    return {"name": a.name, "kind": a.kind, "units": a.units, "spec": a.spec,
            "raise_profile": str(a.raise_profile) if a.raise_profile else None, "state": arm.get("state"),
            "flags": common.arm_flags(summary, a.name), "why": common.why(arm)}
