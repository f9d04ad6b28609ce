"""The one profile loader: a reference given for a role, placed in the roles the layer has.

Every place that names a profile (``run``/``probe`` ``--profile``/``--simulate``, ``capshim bench
--arm NAME=simulate:P,profile:Q``) goes through :func:`place_all`:

- a built-in name or a TOML file is loaded (:func:`capshim.profiles.load`) into the role it was given
  for;
- a Khronos Vulkan Profiles file (``FILE.json[#NAME]``, :mod:`capshim.profiles.khronos`; required
  profiles from its profile folder) is split per answer against the device's stock answers
  (:func:`capshim.profiles.khronos.derive`): when it has both parts, its lower part takes the device
  role (``simulate``) and its raise part the application role (``profile``), as one capshim profile
  has one direction; a file with one part fills the role it was given for.

The caller says how it spells each role (``--profile`` or ``profile:``) and supplies the stock
answers of the device (called only when a Khronos file is given, so TOML profiles need no device).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from capshim.contracts.pasteable import command as pasteable
from capshim.contracts import messages
from capshim.errors import CapshimError, UsageError
from capshim.profiles import khronos
from capshim.profiles.model import Profile, ProfileError
from capshim.profiles.targets import Device, Placement, TargetError, named, resolve, split

__all__ = ["ROLES", "RoleError", "place_all", "place_targeted", "is_targeted", "unsupported_summary"]

#: How messages name each API's devices.
API_WORDS = {"vulkan": "Vulkan", "cuda": "CUDA", "metal": "Metal"}

#: The roles, in the order they are placed: the application role, the device role.
ROLES = ("profile", "simulate")


class RoleError(UsageError):
    """A reference that cannot be placed (exit 2): a bad profile, or a split Khronos file whose other
    role is given too. The message starts with the role's spelling."""


_named = named  # ``--profile x.json`` or ``simulate:x.json``: a role's spelling with its reference


def unsupported_summary(reading: khronos.Reading, shown: int = 3) -> list[str]:
    """Lines for stderr: how a Khronos profile was resolved (its notes: required profiles, alternatives,
    aliases) and what it states that the layer does not answer (counted, the first ``shown`` named;
    ``capshim profile show`` lists them all)."""
    lines = [f"{reading.source}: {note}" for note in reading.notes]
    if reading.unsupported:
        names = messages.summarise([u.split(":", 1)[0] for u in reading.unsupported], first=shown, sep="; ")
        lines.append(f"{reading.source}: {len(reading.unsupported)} capabilities not answered by capshim "
                     f"(formats, queue families, video, structs without a capshim key): {names}; "
                     f"'{pasteable('capshim', 'profile', 'show', reading.source)}' lists each")
    return lines


def place_all(refs: dict[str, str | None], spell: dict[str, str], stock: Callable[[str, str], dict],
              load: Callable[[str], Profile]) -> tuple[dict[str, Profile | None], list[str]]:
    """Place each role's reference.

    Args:
        refs: role (:data:`ROLES`) -> the reference given for it, or None.
        spell: role -> how the caller names it in messages (``"--simulate"``, ``"simulate:"``).
        stock: ``stock(ref, spelling)`` -> the device's stock answers (``capshim probe --json`` form),
            called for a Khronos file only; it raises when the device cannot be probed.
        load: loads a built-in name or a TOML file (:func:`capshim.profiles.load`).

    Returns:
        (role -> profile or None, lines for stderr saying where a Khronos file's answers went).

    Raises:
        RoleError: a profile that fails to load, named with its role's spelling; a Khronos file that
            needs both roles while the other role is given too.
    """
    slots: dict[str, Profile | None] = {r: None for r in ROLES}
    lines: list[str] = []
    for role in ROLES:
        ref = refs.get(role)
        if ref is None:
            continue
        if not khronos.is_khronos_ref(ref):
            try:
                slots[role] = slots[role] or load(ref)
            except ProfileError as exc:
                raise RoleError(f"{spell[role].rstrip(':')}: {exc}") from None
            continue
        try:
            reading = khronos.read(ref)
            lower, higher = khronos.derive(reading, stock(ref, spell[role]))
        except ProfileError as exc:
            raise RoleError(f"{spell[role].rstrip(':')}: {exc}") from None
        parts = [p for p in (lower, higher) if p is not None]
        other = "simulate" if role == "profile" else "profile"
        if len(parts) == 2:
            if refs.get(other):
                raise RoleError(f"{_named(spell[role], ref)}: is weaker than the device in {len(lower.capabilities)} "
                                f"answers and stronger in {len(higher.capabilities) + len(higher.extensions)}: "
                                f"it needs both roles, and {spell[other]} is given too (drop {spell[other]}, or "
                                "write one direction with capshim profile import --direction)")
            slots["simulate"], slots["profile"] = lower, higher
            lines.append(f"{ref}: {len(lower.capabilities)} answers at or below the device (lower, device role "
                         f"as {spell['simulate']}), {len(higher.capabilities)} answers and {len(higher.extensions)} "
                         f"extensions above it (raise, app role as {spell['profile']}): one capshim profile has "
                         "one direction")
        elif parts:
            slots[role] = parts[0]
            lines.append(f"{ref}: every answer {'at or below' if parts[0].direction == 'lower' else 'above'} the "
                         f"device: one {parts[0].direction} profile")
        else:
            lines.append(f"{ref}: no answer the layer can give on this device")
        lines += unsupported_summary(reading)
    return slots, lines


def is_targeted(refs: dict[str, list[str]]) -> bool:
    """Whether the references given per role need :func:`place_targeted`: a role given more than
    once, or a reference with a device target (``PROFILE@DEVICE``)."""
    return any(len(r) > 1 or any("@" in x and not os.path.isfile(x) for x in r) for r in refs.values())


def place_targeted(refs: dict[str, list[str]], spell: dict[str, str], load: Callable[[str], Profile],
                   devices_of: Callable[[str], list[Device] | None],
                   context: str = "") -> tuple[dict[str, Profile | None], list[Placement]]:
    """Place references that name devices (``PROFILE@TARGET[,TARGET...]``,
    :mod:`capshim.profiles.targets`), checked against the devices before anything runs.

    Args:
        refs: role (:data:`ROLES`) -> the references given for it, in order.
        spell: role -> how the caller names it (``"--profile"``, ``"profile:"``).
        load: loads a built-in name or a TOML file (:func:`capshim.profiles.load`).
        devices_of: ``devices_of(api)`` -> the devices of that API (the backend's
            ``devices()``), or None for an API with one device by nature (Metal: every target
            is refused); called once, only when a reference names a device.
        context: what goes before each role's spelling in messages (``--arm b=``), so each
            starts with the flag and value as the user wrote them.

    Returns:
        (role -> the first profile given for it or None: what picks the backend and the shims;
        the placements, each with its profile and devices).

    Raises:
        RoleError: a profile that fails to load, a Khronos file with a target, profiles of
            different APIs; TargetError: the devices cannot be listed (no driver: drop the target
            or run where the devices are); TargetError (a UsageError): what :func:`capshim.profiles.targets.split`
            and :func:`~capshim.profiles.targets.resolve` refuse. Each one line naming the flag.
    """
    placements: list[Placement] = []
    for role in ROLES:
        flag = spell[role].rstrip(":")
        for ref in refs.get(role) or []:
            label = _named(context + spell[role], ref)
            base, targets = split(ref, context + spell[role])
            if khronos.is_khronos_ref(base):
                raise RoleError(f"{label}: a Khronos profiles file cannot take a device target "
                                "or share its role (write one direction first: capshim profile import "
                                "--direction lower|raise)")
            try:
                prof = load(base)
            except ProfileError as exc:
                raise RoleError(f"{label}: {exc}") from None
            placements.append(Placement(role, flag, base, ref, targets, profile=prof, label=label))
    apis = {p.profile.api for p in placements}
    if len(apis) > 1:
        a, b = placements[0], next(p for p in placements if p.profile.api != placements[0].profile.api)
        raise RoleError(f"{a.where} (api {a.profile.api}) and {b.where} (api {b.profile.api}) are "
                        "for different APIs: one run shims one API")
    firsts = {role: next((p.profile for p in placements if p.role == role), None) for role in ROLES}
    if placements:
        api = placements[0].profile.api
        word = API_WORDS.get(api, api)
        aimed = next((p for p in placements if p.targets), None)
        try:
            devices = devices_of(api) if aimed is not None else []  # untargeted: refused as such
        except CapshimError as exc:
            drop = ",".join(t.text for t in aimed.targets)
            raise TargetError(f"{aimed.where}: {exc}; drop '@{drop}', or run where the {word} devices are") \
                from None
        resolve(placements, devices or [], word, one_device=devices is None)
    return firsts, placements
