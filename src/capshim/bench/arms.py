"""Benchmark arms: a name plus the shims one run of the workload gets.

Spelling (``--arm NAME=SPEC``)::

    native=                      nothing: the stock process (also: native=stock)
    vm-stock=simulate:vulkan-paravirt
    vm-unlocked=simulate:vulkan-paravirt,profile:restore
    shimmed=profile:metal-apple9
    mine=profile:./my-profile.toml
    aa=identity                  A/A: the app layer active, answering exactly the stock values

``profile:restore`` is resolved after a stock probe: a raise profile that
answers the stock values the simulated profile lowered
(:func:`capshim.profiles.ondevice.restore_profile`). ``identity`` is resolved
the same way, without a simulated device: the app layer answers, for every
key ``vulkan-paravirt`` touches, the value the device already reports, so
the arm measures what loading the layer alone costs (``capshim bench --aa``).
"""

from __future__ import annotations

from dataclasses import dataclass

from capshim import profiles
from capshim.contracts import names
from capshim.contracts.suggest import closest
from capshim.errors import UsageError
from capshim.profiles import Profile

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
    """

    name: str
    profile: Profile | None = None
    simulate: Profile | None = None
    restore: bool = False
    identity: bool = False

    @property
    def shimmed(self) -> bool:
        """Whether any shim is asked for."""
        return self.profile is not None or self.simulate is not None or self.restore or self.identity

    def spec(self) -> dict:
        """What the arm runs with, for metadata.json and summary.json."""
        def desc(p: Profile | None):
            if p is None:
                return None
            return {"name": p.name, "source": p.source, "sha256": p.sha256, "direction": p.direction,
                    "api": p.api, "text": p.text}
        out = {"profile": desc(self.profile), "simulate": desc(self.simulate)}
        if self.identity:
            out["identity"] = True
        return out


def parse(option: str) -> Arm:
    """Parse one ``--arm NAME=SPEC``.

    Raises:
        UsageError: naming the option and what is wrong (bad name, unknown
            item, a profile that fails to load, the same role twice).
    """
    if "=" not in option:
        raise UsageError(f"--arm {option!r}: expected NAME=SPEC (e.g. vm-stock=simulate:vulkan-paravirt)")
    name, spec = option.split("=", 1)
    names.check(name, f"--arm {option!r}: arm name")
    arm = Arm(name)
    if spec.strip() in ("", "stock", "native"):
        return arm
    if spec.strip() == IDENTITY:
        arm.identity = True
        return arm
    for item in spec.split(","):
        role, sep, ref = item.partition(":")
        if not sep or role not in ("profile", "simulate") or not ref:
            hint = closest(role, ("profile", "simulate")) if sep and ref else None
            hint = f" (did you mean '{hint}:{ref}'?)" if hint else ""
            raise UsageError(f"--arm {option!r}: item {item!r} is not profile:P or simulate:P{hint}")
        if (role == "profile" and (arm.profile or arm.restore)) or (role == "simulate" and arm.simulate):
            raise UsageError(f"--arm {option!r}: {role} given twice")
        if role == "profile" and ref == RESTORE:
            arm.restore = True
            continue
        try:
            prof = profiles.load(ref)
        except profiles.ProfileError as exc:
            raise UsageError(f"--arm {option!r}: {exc}") from None
        setattr(arm, role, prof)
    if arm.restore and arm.simulate is None:
        raise UsageError(f"--arm {option!r}: profile:restore needs simulate:P (it restores what P lowers)")
    if arm.simulate is not None and arm.simulate.api != "vulkan":
        raise UsageError(f"--arm {option!r}: simulate:{arm.simulate.source} is a {arm.simulate.api} profile; "
                         "only Vulkan can simulate")
    if arm.profile is not None and arm.simulate is not None and arm.profile.api != arm.simulate.api:
        raise UsageError(f"--arm {option!r}: profile and simulate are for different APIs")
    return arm


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
