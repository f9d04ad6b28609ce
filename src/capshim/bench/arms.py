"""Benchmark arms: a name plus the shims one run of the workload gets.

Spelling (``--arm NAME=SPEC``)::

    native=                      nothing: the stock process (also: native=stock, or just native)
    t4-class                     short for t4-class=profile:t4-class (a built-in profile or a .toml file)
    vm-stock=simulate:vulkan-paravirt
    vm-unlocked=simulate:vulkan-paravirt,profile:restore
    shimmed=profile:metal-apple9
    mine=profile:./my-profile.toml
    khr=simulate:roadmap.json#VP_KHR_roadmap_2022   a Khronos Vulkan Profiles file (below)
    aa=identity                  A/A: the app layer active, answering exactly the stock values
    t4-on-1=profile:t4-class@1   on device 1 only (PROFILE@DEVICE[,DEVICE], index or UUID: docs/multi-gpu.md)
    mixed=profile:t4-class@0,profile:a100-class@1   one profile per device

``profile:restore`` is resolved after a stock probe: a raise profile that
answers the stock values the simulated profile lowered
(:func:`capshim.profiles.ondevice.restore_profile`). ``identity`` is resolved
the same way, without a simulated device: the app layer answers, for every
key ``vulkan-paravirt`` touches, the value the device already reports, so
the arm measures what loading the layer alone costs (``capshim bench --aa``).
For an API whose shim has no device role (CUDA: lower-only), the A/A arm's
profile answers the stock value of every key the bench's other profiles of
that API set (:func:`identity_profile`). Every API question goes through its
backend (:func:`capshim.backends.get`): nothing here tests an API's name.

Profiles load through the one loader of ``run`` and ``probe``
(:func:`capshim.profiles.roles.place_all`). A Khronos Vulkan Profiles file
(``FILE.json[#NAME]``, required profiles from its folder) is read at once and
split per answer against the device after the stock probe
(:func:`resolve_pending`): its lower part simulates, its raise part (if any)
is the arm's profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tomli_w

from capshim import backends, profiles
from capshim.contracts import names
from capshim.contracts.suggest import closest
from capshim.errors import UsageError
from capshim.profiles import Profile, khronos, ondevice, roles, targets
from capshim.profiles.catalog import KEYS

RESTORE = "restore"
IDENTITY = "identity"
#: The name ``capshim bench --aa`` gives its A/A arm.
AA_NAME = "aa"


@dataclass
class Arm:
    """One arm.

    Attributes:
        name: the arm's name (names files in the bundle).
        profile: the shim profile (Vulkan app role or Metal), or None.
        simulate: the Vulkan device-role profile, or None.
        restore: True when the profile is ``restore`` and still to be resolved.
        identity: True for an A/A arm (app layer answering the stock values); its
            profile is resolved from a stock probe.
        pending: role -> reference, when a Khronos file is among them: placed after the stock
            probe (:func:`resolve_pending`); None otherwise.
        placements: the arm's profiles placed on devices (``profile:P@1``,
            :func:`capshim.profiles.roles.place_targeted`), checked against the devices when the
            arm is parsed; None for an arm without device targets (``profile``/``simulate`` are
            then the first placed of each role).
    """

    name: str
    profile: Profile | None = None
    simulate: Profile | None = None
    restore: bool = False
    identity: bool = False
    pending: dict | None = None
    placements: list | None = None

    @property
    def shimmed(self) -> bool:
        """Whether any shim is asked for."""
        return (self.profile is not None or self.simulate is not None or self.restore or self.identity
                or bool(self.pending))

    def spec(self) -> dict:
        """What the arm runs with, for metadata.json and summary.json."""
        def desc(p: Profile | None):
            if p is None:
                return None
            return {"name": p.name, "source": p.source, "sha256": p.sha256, "direction": p.direction,
                    "api": p.api, "text": p.text}
        out = {"profile": desc(self.profile), "simulate": desc(self.simulate)}
        if self.placements:
            out["targets"] = [{"role": p.role, "ref": f"{p.flag}:{p.text}", "profile": desc(p.profile),
                               "devices": [{"index": d.index, "uuid": targets.uuid_text(d.uuid) if d.uuid else None,
                                            "name": d.name} for d in p.devices]} for p in self.placements]
        if self.identity:
            out["identity"] = True
        return out


def parse(option: str) -> Arm:
    """Parse one ``--arm NAME=SPEC``.

    Raises:
        UsageError: naming the option and what is wrong (bad name, unknown
            item, a profile that fails to load, the same role twice).
    """
    if "=" not in option:  # short forms: --arm native, --arm t4-class (a built-in profile or a file, as its name)
        if option in ("native", "stock"):
            option += "="
        elif option in profiles.builtin_names() or (option.endswith(".toml") and Path(option).is_file()):
            option = f"{Path(option).stem}=profile:{option}"
        else:
            raise UsageError(f"--arm {option!r}: expected NAME=SPEC (e.g. vm-stock=simulate:vulkan-paravirt), "
                             "native, or a profile's name")
    name, spec = option.split("=", 1)
    names.check(name, f"--arm {option!r}: arm name")
    arm = Arm(name)
    if spec.strip() in ("", "stock", "native"):
        return arm
    if spec.strip() == IDENTITY:
        arm.identity = True
        return arm
    items = _items(spec)
    if _targeted(items):
        return _parse_targeted(arm, items, option)
    refs: dict[str, str] = {}
    for item in items:
        role, sep, ref = item.partition(":")
        if not sep or role not in roles.ROLES or not ref:
            hint = closest(role, roles.ROLES) if sep and ref else None
            hint = f" (did you mean '{hint}:{ref}'?)" if hint else ""
            raise UsageError(f"--arm {option!r}: item {item!r} is not profile:P or simulate:P{hint}")
        if role in refs or (role == "profile" and arm.restore):
            raise UsageError(f"--arm {option!r}: {role} given twice")
        if role == "profile" and ref == RESTORE:
            arm.restore = True
            continue
        refs[role] = ref
    if any(khronos.is_khronos_ref(r) for r in refs.values()):
        for role, ref in refs.items():  # read now: a bad file is exit 2 before any probe
            try:
                khronos.read(ref) if khronos.is_khronos_ref(ref) else profiles.load(ref)
            except profiles.ProfileError as exc:
                raise UsageError(f"--arm {option!r}: {role}: {exc}") from None
        arm.pending = refs
        return arm
    slots, _ = _place(arm.name, refs, option, _no_device)
    arm.profile, arm.simulate = slots["profile"], slots["simulate"]
    if arm.restore and arm.simulate is None:
        raise UsageError(f"--arm {option!r}: profile:restore needs simulate:P (it restores what P lowers)")
    if arm.simulate is not None and not backends.get(arm.simulate.api).can_simulate:
        raise UsageError(f"--arm {option!r}: simulate:{arm.simulate.source} is a {arm.simulate.api} profile; "
                         + backends.cannot_simulate(arm.simulate, "profile:"))
    if arm.profile is not None and arm.simulate is not None and arm.profile.api != arm.simulate.api:
        raise UsageError(f"--arm {option!r}: profile and simulate are for different APIs")
    return arm


def _items(spec: str) -> list[str]:
    """The arm's ``role:P`` items; a piece without ':' after a targeted one continues its device
    list (``profile:t4-class@0,1`` is one item)."""
    out: list[str] = []
    for piece in spec.split(","):
        if out and ":" not in piece and "@" in out[-1]:
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


def _targeted(items: list[str]) -> bool:
    """Whether the arm names devices (a ``P@DEV`` reference, or a role given twice)."""
    refs: dict[str, list[str]] = {}
    for item in items:
        role, sep, ref = item.partition(":")
        if sep and role in roles.ROLES and ref and ref != RESTORE:
            refs.setdefault(role, []).append(ref)
    return roles.is_targeted(refs)


def _parse_targeted(arm: Arm, items: list[str], option: str) -> Arm:
    """An arm with device targets: every reference placed on its devices, checked against the
    devices of its API now (one line naming the arm and the reference, exit 2)."""
    refs: dict[str, list[str]] = {r: [] for r in roles.ROLES}
    for item in items:
        role, sep, ref = item.partition(":")
        if not sep or role not in roles.ROLES or not ref or ref == RESTORE:
            raise UsageError(f"--arm {option!r}: item {item!r} is not profile:P[@DEV] or simulate:P[@DEV] "
                             "(profile:restore and identity take no device target)")
        refs[role].append(ref)
    # each message starts with the arm and the reference: --arm b=simulate:vulkan-paravirt@01: ...
    firsts, placed = roles.place_targeted(refs, {"profile": "profile:", "simulate": "simulate:"},
                                          profiles.load, backends.target_devices, context=f"--arm {arm.name}=")
    try:
        backends.for_profiles(firsts["profile"], firsts["simulate"])
    except UsageError as exc:
        raise UsageError(f"--arm {option!r}: {exc}") from None
    arm.profile, arm.simulate, arm.placements = firsts["profile"], firsts["simulate"], placed
    return arm


def _no_device(ref: str, spelling: str) -> dict:
    raise AssertionError(f"{spelling}{ref}: a TOML profile needs no device")  # place_all asks only for Khronos


def _place(name: str, refs: dict, option: str, stock) -> tuple[dict, list[str]]:
    """The one loader (:func:`capshim.profiles.roles.place_all`) for one arm's references."""
    try:
        return roles.place_all(refs, {"profile": "profile:", "simulate": "simulate:"}, stock, profiles.load)
    except roles.RoleError as exc:
        raise UsageError(f"--arm {option!r}: {exc}") from None


def resolve_pending(arm: Arm, stock: dict) -> list[str]:
    """Place an arm's references that include a Khronos file, against the device's stock answers
    (``capshim probe --json`` form); returns the lines for stderr (where each part went, what the
    layer does not answer).

    Raises:
        UsageError: a file that needs both roles while the arm gives the other; ``profile:restore``
            over a Khronos file with no answer at or below the device (nothing to restore).
    """
    if not arm.pending:
        return []
    option = f"{arm.name}=" + ",".join(f"{r}:{ref}" for r, ref in arm.pending.items())
    slots, lines = _place(arm.name, arm.pending, option, lambda ref, spelling: stock)
    arm.profile, arm.simulate, arm.pending = slots["profile"], slots["simulate"], None
    if arm.restore and arm.simulate is None:
        raise UsageError(f"--arm {option!r}: profile:restore needs simulate:P with answers at or below the "
                         "device (it restores what P lowers)")
    if arm.restore and arm.profile is not None:
        raise UsageError(f"--arm {option!r}: the Khronos file also raises answers (the app role): profile:restore "
                         "cannot take that role too")
    if arm.profile is not None and arm.simulate is not None and arm.profile.api != arm.simulate.api:
        raise UsageError(f"--arm {option!r}: profile and simulate are for different APIs")
    return [f"arm {arm.name}: {line}" for line in lines]


def default_arms(platform: str) -> tuple[list[Arm], str, str | None]:
    """The embedded default's arms, baseline arm and in-bundle host arm.

    Linux (Vulkan): ``native``, ``vm-stock`` (simulate vulkan-paravirt) and
    ``vm-unlocked`` (the same plus the restore profile); baseline ``vm-stock``,
    host ``native``. macOS (Metal): ``stock`` and ``metal-apple9``; baseline
    ``stock``, no host arm.
    """
    if platform == "darwin":
        return [Arm("stock"), Arm("metal-apple9", profile=profiles.load("metal-apple9"))], "stock", None
    sim = profiles.load("vulkan-paravirt")
    return ([Arm("native"), Arm("vm-stock", simulate=sim), Arm("vm-unlocked", simulate=sim, restore=True)],
            "vm-stock", "native")


def identity_profile(stock: dict, api: str, arms: list[Arm], can_simulate: bool) -> Profile:
    """The A/A arm's profile: the shim of ``api`` loaded, answering the device's own values.

    With a device role (``can_simulate``: the Vulkan layer) it is the restore profile over
    ``vulkan-paravirt``: the keys that profile lowers, at this device's values (a ``raise``
    profile, as always). Otherwise it answers, for every key the other arms' profiles of ``api``
    set (every key of the API the probe reports when they set none), the stock value, in their
    direction (``lower`` unless all of them raise: a lower-only shim such as CUDA's takes it, and
    lowering to the device's own value changes nothing).

    Args:
        stock: the device's stock answers (:meth:`capshim.backends.Backend.stock_answers`).
        api: the API (a backend name).
        arms: the bench's arms.
        can_simulate: whether that API's shim has a device role.

    Raises:
        UsageError: the generated profile is refused (a probe answer the profile language does not take).
    """
    if can_simulate:
        return ondevice.restore_profile(stock, profiles.load("vulkan-paravirt"), name="identity")
    others = [p for a in arms for p in (a.profile, a.simulate) if p is not None and p.api == api]
    known = KEYS.get(api, {})
    keys = [k for p in others for k in p.capabilities] or list(known)
    answers = stock.get("capabilities") or {}
    caps = {k: answers[k] for k in dict.fromkeys(keys) if k in known and answers.get(k) is not None}
    device = " ".join(str((stock.get("device") or {}).get("name", "this device")).split())
    doc = {"name": IDENTITY, "api": api,
           "direction": "raise" if others and all(p.direction == "raise" for p in others) else "lower",
           "version": 1, "description": f"A/A: the stock answers of {device}"[:200], "capabilities": caps}
    try:
        return profiles.parse(tomli_w.dumps(doc), f"generated:{IDENTITY}")
    except profiles.ProfileError as exc:
        raise UsageError(f"--aa: the A/A profile for {api} cannot be made from the device's answers: {exc}") from None
