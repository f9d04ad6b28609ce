"""Device targets: ``PROFILE@TARGET[,TARGET...]``, the one spelling of "this profile on these
devices" (issue 32), for ``run``/``probe`` ``--profile``/``--simulate``, bench arms
(``profile:t4-class@1``), studies and the status file's per-device records.

A TARGET is a device index (decimal: for Vulkan the physical-device index in the order the loader
enumerates without capshim's layers, for CUDA the ordinal the application sees, after
``CUDA_VISIBLE_DEVICES``) or a UUID (CUDA's ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``, or 32
hex digits with or without dashes: ``VkPhysicalDeviceIDProperties::deviceUUID``,
``cuDeviceGetUuid``). A reference without ``@`` targets every device, as before; it cannot be
combined with targeted references of the same role. Devices no reference names answer stock.

:func:`split` reads the spelling, :func:`resolve` checks it against the devices the API lists
(:class:`Device`, from the probe) before anything runs, and gives the :class:`Placement` of
each reference: its devices and the ``devices=`` specs of its shim configuration
(``native/common/config.h``: an index, or ``uuid:`` and 32 lowercase hex digits).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from capshim.errors import UsageError

__all__ = ["named", "targets_event", "normal_uuid", "Target", "Device", "Placement", "on_device", "targeted", "TargetError", "split", "resolve", "uuid_text", "device_line",
           "MAX_TARGETS"]

#: Specs one configuration's ``devices=`` key holds and configurations one variable holds
#: (config.h: CAPSHIM_MAX_DEVICE_SPECS, CAPSHIM_MAX_CONFIGS); the largest index (CAPSHIM_DEVICE_INDEX_MAX).
MAX_TARGETS = 8
MAX_INDEX = 63

_INDEX = re.compile(r"(0|[1-9][0-9]{0,1})")
#: A UUID: an optional ``GPU-`` (any case, as nvidia-smi -L prints it upper), then 8-4-4-4-12 hex
#: digits with all four dashes, or 32 with none (a dash elsewhere is a typo, not a UUID).
_UUID = re.compile(r"(?i:GPU-)?(?:([0-9a-fA-F]{8})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-([0-9a-fA-F]{4})-"
                   r"([0-9a-fA-F]{12})|([0-9a-fA-F]{32}))")


class TargetError(UsageError):
    """A target that is not spelt right, or names no device, or names one twice (exit 2)."""


@dataclass(frozen=True)
class Target:
    """One TARGET as given.

    Attributes:
        text: as the user wrote it.
        index: the device index, or None for a UUID.
        uuid: 32 lowercase hex digits, or None for an index.
    """

    text: str
    index: int | None = None
    uuid: str | None = None

    @property
    def spec(self) -> str:
        """The native ``devices=`` spelling: ``1`` or ``uuid:HEX32``."""
        return str(self.index) if self.uuid is None else f"uuid:{self.uuid}"


@dataclass(frozen=True)
class Device:
    """One device an API lists to a process.

    Attributes:
        index: its index (Vulkan: loader order without the shim; CUDA: the ordinal after
            CUDA_VISIBLE_DEVICES).
        uuid: 32 lowercase hex digits, or None when the driver does not say.
        name: the device's own name.
    """

    index: int
    uuid: str | None
    name: str


@dataclass
class Placement:
    """One reference of one role placed on its devices.

    Attributes:
        role: ``profile`` (the application role) or ``simulate`` (the device role).
        flag: how the role is spelt (``--profile``, ``profile:``).
        ref: the reference without its targets (``t4-class``).
        text: as given (``t4-class@1``).
        targets: the targets given (empty: every device).
        devices: the devices they name (every device when untargeted).
        profile: the loaded profile, filled by the caller.
    """

    role: str
    flag: str
    ref: str
    text: str
    targets: tuple[Target, ...] = ()
    devices: list[Device] = field(default_factory=list)
    profile: object = None

    #: UUIDs several devices of this API share (the same driver listed twice): never a spec.
    shared_uuids: frozenset = frozenset()
    #: How messages name this reference (``--profile t4-class@1``, ``--arm b=profile:t4-class@1``);
    #: empty: ``flag`` and ``text``.
    label: str = ""

    @property
    def where(self) -> str:
        """The flag and value as a message about this reference starts."""
        return self.label or named(self.flag, self.text)

    @property
    def specs(self) -> list[str]:
        """The ``devices=`` specs of this reference's configuration, one per device named: its
        UUID when the driver gives one no other device shares (it names the device whatever
        order the loader or CUDA_VISIBLE_DEVICES lists it in; NVML finds a device by UUID
        only), else its index. Empty when untargeted."""
        if not self.targets:
            return []
        return [f"uuid:{d.uuid}" if d.uuid and d.uuid not in self.shared_uuids else str(d.index)
                for d in self.devices][:MAX_TARGETS]


def named(flag: str, ref: str) -> str:
    """``--profile t4-class@1`` or ``--arm b=simulate:t4-class@1``: a flag with its value, as a
    message starts (no space after a spelling that ends in ``:`` or ``=``)."""
    return f"{flag}{'' if flag.endswith((':', '=')) else ' '}{ref}"


def normal_uuid(text: object) -> str | None:
    """A UUID as a driver or the user spells it (``GPU-`` 8-4-4-4-12, or 32 hex digits) as 32
    lowercase hex digits; None when ``text`` is not one."""
    m = _UUID.fullmatch(text) if isinstance(text, str) else None
    return "".join(g for g in m.groups() if g).lower() if m else None


def uuid_text(uuid: str | None) -> str:
    """32 hex digits as CUDA and nvidia-smi print a UUID (``GPU-`` less: 8-4-4-4-12), or ``?``."""
    if not uuid:
        return "?"
    return f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}"


def device_line(d: Device) -> str:
    """``1: NVIDIA H200 (ca950000-...)``: one device for a message."""
    return f"{d.index}: {d.name}" + (f" ({uuid_text(d.uuid)})" if d.uuid else "")


def _target(text: str, flag: str, whole: str) -> Target:
    if _INDEX.fullmatch(text) and int(text) <= MAX_INDEX:
        return Target(text, index=int(text))
    uuid = normal_uuid(text)
    if uuid is not None:
        return Target(text, uuid=uuid)
    raise TargetError(f"{named(flag, whole)}: '{text}' is not a device index (0..{MAX_INDEX}, no leading zero) or "
                      "a UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, or 32 hex digits)")


def split(ref: str, flag: str) -> tuple[str, tuple[Target, ...]]:
    """``PROFILE@TARGET[,TARGET...]`` -> (PROFILE, targets); without ``@``: (ref, ()).

    The split is at the last ``@`` (a profile path may hold one; a target never does).
    ``flag`` is how messages name the option (``--profile``, ``--arm b=simulate:``).

    Raises:
        TargetError: an empty profile or target list, a target that is neither an index nor a
            UUID, one given twice, more than :data:`MAX_TARGETS`; the message names ``flag``.
    """
    if "@" not in ref:
        return ref, ()
    if os.path.isfile(ref):  # a profile file whose name holds '@'
        base, _, tail = ref.rpartition("@")
        if os.sep not in ref and base and tail and all(_INDEX.fullmatch(p) or normal_uuid(p) for p in tail.split(",")):
            raise TargetError(f"{named(flag, ref)}: both a file in this folder and the profile {base} on device "
                              f"{tail}: write ./{ref} for the file, or run elsewhere for the device target")
        return ref, ()
    base, _, tail = ref.rpartition("@")
    if not base:
        raise TargetError(f"{named(flag, ref)}: no profile before '@' (write PROFILE@DEVICE, e.g. t4-class@1)")
    parts = tail.split(",")
    if not tail or any(not p for p in parts):
        raise TargetError(f"{named(flag, ref)}: an empty device after '@' (write PROFILE@DEVICE[,DEVICE...], "
                          "e.g. t4-class@1 or t4-class@0,1)")
    targets = tuple(_target(p, flag, ref) for p in parts)
    if len(targets) > MAX_TARGETS:
        raise TargetError(f"{named(flag, ref)}: more than {MAX_TARGETS} devices")
    seen: set[str] = set()
    for t in targets:
        if t.spec in seen:
            raise TargetError(f"{named(flag, ref)}: device '{t.text}' given twice")
        seen.add(t.spec)
    return base, targets


def _listing(devices: list[Device], api_word: str) -> str:
    n = len(devices)
    shown = "; ".join(device_line(d) for d in devices[:4]) + ("; ..." if n > 4 else "")
    return f"this machine has {n} {api_word} device{'s' if n != 1 else ''} ({shown})"


def _find(t: Target, devices: list[Device], where: str, api_word: str) -> Device:
    if t.uuid is None:
        hit = [d for d in devices if d.index == t.index]
    else:
        hit = [d for d in devices if d.uuid == t.uuid]
        if len(hit) > 1:
            raise TargetError(f"{where}: UUID {t.text} is shared by {api_word} devices "
                              f"{', '.join(str(d.index) for d in hit)} (the same driver listed twice?): "
                              "name the device by its index")
    if not hit and len(devices) == 1:
        raise TargetError(f"{where}: {_listing(devices, api_word)}; drop '@{t.text}' (the profile then "
                          f"answers for device 0, as @0 does), or run where {api_word} device {t.text} is")
    if not hit:
        raise TargetError(f"{where}: no {api_word} device {t.text}: {_listing(devices, api_word)}")
    return hit[0]


def resolve(placements: list[Placement], devices: list[Device], api_word: str,
            one_device: bool = False) -> list[Placement]:
    """Check the placements of one API against its devices; fill each one's ``devices``.

    Args:
        placements: every reference given, of every role, in the order given.
        devices: what the API lists (:class:`Device`), in index order.
        api_word: the API as messages name it ("Vulkan", "CUDA").
        one_device: the API has one device by nature (Metal): every target is refused. A
            Vulkan or CUDA machine with one device takes ``@0`` (or its UUID): the same
            answers as no target, but the status and probe name device 0.

    Returns:
        ``placements``, each with its devices.

    Raises:
        TargetError: one line naming the flag and value: a target on an API with one device by
            nature, an index or UUID that names no device (the devices listed), a UUID two devices share,
            a role given both untargeted and targeted, a device named twice in one role (an index
            and the UUID of one device count as the same device).
    """
    by_role: dict[str, list[Placement]] = {}
    for p in placements:
        by_role.setdefault(p.role, []).append(p)
    for group in by_role.values():
        plain = [p for p in group if not p.targets]
        if plain and len(group) > 1:
            other = next(p for p in group if p is not plain[0])
            flag = plain[0].flag
            raise TargetError(f"{plain[0].where}: targets every device, and {other.where} is "
                              f"given too: give every {flag} a device (PROFILE@DEVICE), or one {flag} without '@'")
    owner: dict[tuple[str, int], Placement] = {}
    uuids = [d.uuid for d in devices if d.uuid]
    shared = frozenset(u for u in uuids if uuids.count(u) > 1)
    for p in placements:
        where = p.where
        if not p.targets:
            p.devices = list(devices)
            continue
        if one_device:
            raise TargetError(f"{where}: {api_word} has one device per process: a device target does not "
                              f"apply; drop '@{','.join(t.text for t in p.targets)}'")
        p.devices = []
        p.shared_uuids = shared
        for t in p.targets:
            d = _find(t, devices, where, api_word)
            before = owner.get((p.role, d.index))
            if before is p:
                raise TargetError(f"{where}: device {d.index} named twice ('{t.text}' is {device_line(d)})")
            if before is not None:
                raise TargetError(f"{where}: device {device_line(d)} is already given "
                                  f"{before.where}: one profile per device and role")
            owner[(p.role, d.index)] = p
            p.devices.append(d)
    return placements


def targeted(placements: list[Placement] | None) -> bool:
    """Whether any placement names its devices (a run then writes one configuration per placement)."""
    return bool(placements) and any(p.targets for p in placements)


def on_device(placements: list[Placement], index: int) -> dict[str, Placement | None]:
    """Role (``profile``, ``simulate``) -> the placement that answers for device ``index``, or None
    (that device answers stock in that role)."""
    out: dict[str, Placement | None] = {"profile": None, "simulate": None}
    for p in placements:
        if any(d.index == index for d in p.devices):
            out[p.role] = out[p.role] or p
    return out


def targets_event(api: str, placements: list[Placement], pid: int) -> dict:
    """The ``targets`` status event ``capshim run`` writes before the command starts (docs/status.md):
    per device a placement names, its ``index``, ``uuid`` (8-4-4-4-12 hex or None), ``name`` and, per
    role, the reference as given (``"profile": "t4-class@1"``; None: stock in that role)."""
    seen: dict[int, dict] = {}
    for p in placements:
        for d in p.devices:
            rec = seen.setdefault(d.index, {"index": d.index, "uuid": uuid_text(d.uuid) if d.uuid else None,
                                            "name": d.name, "profile": None, "simulate": None})
            rec[p.role] = p.text
    return {"schema": 1, "event": "targets", "shim": api, "pid": pid, "process": "capshim",
            "devices": [seen[k] for k in sorted(seen)]}
