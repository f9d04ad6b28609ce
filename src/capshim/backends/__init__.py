"""One module per GPU API behind one interface, chosen once from a registry.

A backend (:class:`Backend`) builds its API's shim, gives the environment that
enables it for one process, names the shims a run asks for, probes the
answers a process sees, verifies its build and classifies its shims from a
status file. The launcher, the probe, the command line and the bench ask
:func:`get` (or :func:`for_profiles`) for the backend of a profile's API and
never test an API's name themselves.

Adding an API: a module in this package that defines a :class:`Backend`
subclass and an instance of it named ``BACKEND``, plus one line in
:data:`REGISTRY`. Its profile keys live in the capability catalog
(:mod:`capshim.profiles.catalog`).
"""

from __future__ import annotations

import importlib
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from capshim.contracts import bounded, output
from capshim import jsonread, status
from capshim.contracts.suggest import did_you_mean
from capshim.errors import EXIT_WORKLOAD, CapshimError, UsageError

if TYPE_CHECKING:
    from capshim.profiles import Profile
    from capshim.profiles.targets import Device, Placement
    from capshim.status import ShimState, StatusReport

# API name (a profile's ``api``) -> the module that defines its BACKEND. The
# order is the order of `capshim build`, `capshim verify` and the default API.
REGISTRY: dict[str, str] = {
    "vulkan": "capshim.backends.vulkan",
    "metal": "capshim.backends.metal",
    "cuda": "capshim.backends.cuda",
}


class Backend(ABC):
    """The interface every API's shim implements.

    Attributes:
        name: the API's name, as a profile's ``api`` spells it ("vulkan").
        shim_label: how messages name its shim ("the Vulkan layer").
        platforms: ``sys.platform`` prefixes where the API really runs
            (where ``run`` and ``probe`` can use it); the default API of
            ``probe`` is the first registered backend that runs here.
        can_simulate: whether the shim has a device role (``--simulate``).
        tabular_probe: whether :meth:`probe` returns the ``capabilities`` /
            ``extensions`` shape that :func:`capshim.probe.print_probe` draws
            as a table (otherwise the command prints JSON).
        added_extension_note: what becomes of an extension a raise profile
            adds that the device lacks (None: the generic words).
        cross_targets: other platforms this machine can build the shim for
            (``capshim build --target``), see :meth:`cross_build`.
        verifies_files: whether :meth:`verify` can check a given built file
            (``capshim verify --shim FILE``).
        device_targets: whether a process of this API may see several devices, so a profile
            can be placed on some (``PROFILE@DEVICE``, :meth:`devices` lists them); False for
            an API with one device by nature (Metal), which refuses every target.
    """

    name: str = ""
    shim_label: str = ""
    platforms: tuple[str, ...] = ()
    can_simulate: bool = False
    tabular_probe: bool = False
    added_extension_note: str | None = None
    cross_targets: tuple[str, ...] = ()
    verifies_files: bool = False
    device_targets: bool = False

    def runs_here(self, platform: str | None = None) -> bool:
        """Whether the API really runs on ``platform`` (default ``sys.platform``)."""
        platform = platform or sys.platform
        return any(platform.startswith(p) for p in self.platforms)

    @abstractmethod
    def unavailable(self) -> str | None:
        """Why this machine cannot build (and so verify) this shim, or None when it can.

        A reason is one sentence naming what is missing (the platform, a
        compiler), for ``capshim build`` / ``verify`` to print as "skipped".
        """

    @abstractmethod
    def build(self, force: bool = False) -> dict[str, Path]:
        """Build the shim (warnings are errors) or reuse the cached build.

        Returns:
            artifact name -> path, in the order ``capshim build`` prints them.

        Raises:
            BuildError: naming the failing command.
        """

    def shim_artifacts(self) -> dict[str, Path]:
        """The built files that change answers, hashed into a bench bundle's metadata
        (``metadata.json`` ``shims``: ``<api>_<name>``). Default: every :meth:`build` artifact."""
        return self.build()

    @abstractmethod
    def launch_env(self, profile: Profile | None, simulate: Profile | None, status_file: Path,
                   run_dir: Path, inherit: bool = False, quiet: bool = False) -> dict[str, str]:
        """Variables to add to one process's environment so it runs with the shims asked for.

        Args:
            profile: the shim profile (``--profile``), or None.
            simulate: the device-role profile (``--simulate``), or None.
            status_file: where the shims append their JSON-lines status.
            run_dir: an existing folder for this run's configuration files.
            inherit: whether the command's children keep the shims.
            quiet: no banner on stderr.

        Returns:
            name -> value; empty when nothing is asked for.

        Raises:
            UsageError: a profile this backend cannot run here.
            BuildError: the shim cannot be built.
        """

    @abstractmethod
    def requested_shims(self, profile: Profile | None, simulate: Profile | None) -> list[str]:
        """The shim names (status-file ``layer`` or ``shim``) a run with these profiles asks for."""

    @abstractmethod
    def probe(self, profile: Profile | None = None, simulate: Profile | None = None, device: int = 0,
              compare: bool = False) -> dict:
        """The answers one process sees, stock or through the shims (``capshim probe``).

        With ``compare``: a stock and a shimmed probe, each in its own process,
        and their differences. The result's shape is the backend's (see its module).

        Raises:
            CapshimError: the probe failed (exit 1), or bad usage (exit 2).
        """

    @abstractmethod
    def verify(self, shim: Path | None = None) -> list[dict]:
        """Checks of the built shim (or of the file ``shim``, when :attr:`verifies_files`):
        ``[{"check", "status", "detail"}]``; ``check`` starts with the API name;
        ``status`` is "passed", "failed", "warning" or "skipped (...)"."""

    def cross_build(self, target: str, force: bool = False) -> tuple[list[str], bool]:
        """Build the shim for another platform (one of :attr:`cross_targets`) and inspect it.

        Returns:
            ``(lines to print, ok)``; ok is False when an inspection failed.

        Raises:
            UsageError: ``target`` is not one of :attr:`cross_targets`.
            BuildError: the build failed.
        """
        raise UsageError(f"--target {target}: {self.name} cannot be built for another platform here")

    def stock_answers(self, device: int = 0) -> dict | None:
        """The device's own answers in profile terms, for the beyond-device check
        (:func:`capshim.profiles.ondevice.beyond_device`): ``{"device": {"name"...},
        "capabilities": {key: value}, "extensions": {name: spec}}``; None when
        this API cannot know what the hardware has (then nothing is checked).

        Raises:
            CapshimError: the probe failed.
        """
        return None

    def devices(self) -> list[Device]:
        """The devices a process of this API sees, in index order, for device targets
        (:mod:`capshim.profiles.targets`). Default: the one device an API with one device has
        (a target there is refused as such).

        Raises:
            CapshimError: the devices cannot be listed (no driver).
        """
        from capshim.profiles.targets import Device  # the profiles package only when targets are asked for

        return [Device(0, None, f"the {self.name} device")]

    def launch_env_targeted(self, placements: list[Placement], status_file: Path, run_dir: Path,
                            inherit: bool = False, quiet: bool = False) -> dict[str, str]:
        """:meth:`launch_env` for profiles placed on devices (:func:`capshim.profiles.targets.resolve`):
        one configuration per placement, each with its ``devices=`` specs, the configuration
        variable listing them separated by ':'.

        Raises:
            UsageError: this API takes no device target (it has one device).
        """
        raise UsageError(f"{self.shim_label} takes no device target (one device)")

    def probe_placed(self, placements: list[Placement] | None, device: int) -> dict:
        """One :meth:`probe` of ``device`` through the placements' shims (None: stock), in the
        shape ``probe --compare`` draws (:func:`capshim.probe.print_probe`).

        Raises:
            UsageError: this API takes no device target (it has one device).
        """
        raise UsageError(f"{self.shim_label} takes no device target (one device)")

    def probe_targeted(self, placements: list[Placement], devices: list[Device], compare: bool = False) -> dict:
        """:meth:`probe` of every device in ``devices`` through the placements' shims:
        ``{"devices": [{"index", "uuid" (8-4-4-4-12 hex or None), "name", "profile", "simulate"
        (the references, as given, that answer for it; None: stock in that role), then with
        ``compare`` "stock", "shimmed" and "differences" ({key: [stock, shimmed]}: what was
        changed on that device), else "answers" (the probe)}]}``.

        Raises:
            CapshimError: a probe failed; UsageError: this API takes no device target.
        """
        from capshim.profiles.targets import on_device, uuid_text

        out = []
        for d in devices:
            on = on_device(placements, d.index)
            entry: dict = {"index": d.index, "uuid": uuid_text(d.uuid) if d.uuid else None, "name": d.name,
                           "profile": on["profile"].text if on["profile"] else None,
                           "simulate": on["simulate"].text if on["simulate"] else None}
            shimmed = self.probe_placed(placements, d.index)
            if compare:
                stock = self.probe_placed(None, d.index)
                entry.update(stock=stock, shimmed=shimmed, differences=answer_differences(stock, shimmed))
            else:
                entry["answers"] = shimmed
            out.append(entry)
        return {"devices": out}

    def run_warnings(self, profile: Profile | None, simulate: Profile | None, argv: list[str]) -> list[str]:
        """Sentences ``capshim run`` prints before starting ``argv`` with these profiles."""
        return []

    def summarize_status(self, report: StatusReport, shims: list[str]) -> dict[str, ShimState]:
        """Classify each requested shim from a run's status report (:func:`capshim.status.classify`)."""
        return {name: status.classify(report, name) for name in shims}

    def run_states(self, report: StatusReport, shims: list[str], argv: list[str],
                   wrapped: bool = False) -> dict[str, ShimState]:
        """:meth:`summarize_status` of one ``capshim run`` of ``argv``: a backend that can tell from
        the program file why its shim stayed inert says so here. ``wrapped``: the command ran under
        the launcher's ``/bin/sh`` pid wrapper (:data:`capshim.launch.PID_WRAPPER`), which loads a
        preloaded shim before the program does. Default: :meth:`summarize_status`."""
        return self.summarize_status(report, shims)


def names() -> list[str]:
    """The registered API names, in registry order."""
    return list(REGISTRY)


def get(api: str) -> Backend:
    """The backend of ``api`` (imported on first use).

    Raises:
        UsageError: ``api`` is not registered (names the known ones).
    """
    try:
        module = REGISTRY[api]
    except KeyError:
        raise UsageError(f"api '{api}': no such backend{did_you_mean(api, REGISTRY)} "
                         f"(known: {', '.join(REGISTRY)})") from None
    return importlib.import_module(module).BACKEND


def target_devices(api: str) -> list[Device] | None:
    """The devices a ``PROFILE@DEVICE`` of ``api`` is checked against (:meth:`Backend.devices`),
    or None for an API with one device by nature (:attr:`Backend.device_targets` False):
    the ``devices_of`` of :func:`capshim.profiles.roles.place_targeted`.

    Raises:
        CapshimError: the devices cannot be listed (no driver).
    """
    be = get(api)
    return be.devices() if be.device_targets else None


def default_api(platform: str | None = None) -> str:
    """The first registered API that really runs on ``platform`` (else the first registered)."""
    for api in REGISTRY:
        if get(api).runs_here(platform):
            return api
    return next(iter(REGISTRY))


def for_profiles(profile: Profile | None, simulate: Profile | None) -> Backend | None:
    """The one backend that serves a run with ``profile`` (``--profile``) and ``simulate``
    (``--simulate``); None when neither is given.

    Raises:
        UsageError: the two are for different APIs, or ``simulate`` is for an
            API without a device role.
    """
    if simulate is not None and not get(simulate.api).can_simulate:
        raise UsageError(f"--simulate {simulate.source}: api is '{simulate.api}'; "
                         + cannot_simulate(simulate))
    if profile is not None and simulate is not None and profile.api != simulate.api:
        raise UsageError(f"--profile {profile.source} (api {profile.api}) and --simulate {simulate.source} "
                         f"(api {simulate.api}) are for different APIs")
    chosen = profile or simulate
    return get(chosen.api) if chosen is not None else None


def cannot_simulate(simulate: Profile, option: str = "--profile ") -> str:
    """What to say of a profile given to simulate (``--simulate``, ``simulate:`` of a bench arm) whose
    API has no device role: which shims can simulate, and, for a lowering profile, the option that
    lowers the answers through its own shim instead:
    ``only the Vulkan layer can simulate a weaker device; for CUDA use --profile t4-class (the CUDA
    shim lowers)``. ``option``: how that option is written (``"profile:"`` in a bench arm)."""
    who = " or ".join(get(a).shim_label for a in REGISTRY if get(a).can_simulate) or "no shim"
    text = f"only {who} can simulate a weaker device"
    be = get(simulate.api) if simulate.api in REGISTRY else None
    if be is not None and simulate.direction == "lower":
        ref = simulate.name if str(simulate.source).startswith("builtin:") else simulate.source
        api = be.shim_label.removeprefix("the ").split(" ")[0] or simulate.api
        text += f"; for {api} use {option}{ref} ({be.shim_label} lowers)"
    return text


def run_probe(cmd: list[str], env: dict[str, str], what: str, timeout: float = 300) -> tuple[dict, str]:
    """Run a probe program (``cmd``, with environment ``env``) and read the one JSON object it prints.

    Args:
        what: the probe's name in messages ("the Vulkan probe").

    Returns:
        (the object, the probe's stderr); an ``"error"`` key is left for the caller to word.

    Raises:
        CapshimError: it printed no JSON (exit 1, with the end of its stderr).
    """
    proc = bounded.run(cmd, env=env, timeout=timeout)
    try:
        return jsonread.loads(proc.stdout, f"{what}'s output"), proc.stderr
    except jsonread.JsonShapeError:
        raise CapshimError(f"{what} printed no JSON (exit {proc.returncode}): {proc.stderr.strip()[-500:]}",
                           exit_code=EXIT_WORKLOAD) from None


def answer_rows(data: dict) -> dict[str, object]:
    """A capability-shaped probe result as ``key -> answer`` rows: capabilities,
    then ``extension NAME`` -> spec version, then ``NVML KEY`` -> what NVML answers (the CUDA
    probe's ``nvml.answers``)."""
    rows = dict(data.get("capabilities", {}))
    for key, value in (data.get("nvml") or {}).get("answers", {}).items():
        rows[f"NVML {key}"] = value
    for name, spec in data.get("extensions", {}).items():
        rows[f"extension {name}"] = spec
    return rows


def placed_configs(placements: list[Placement], role: str, render, run_dir: Path, stem: str) -> str:
    """The configuration files of one role's placements (``run_dir/STEM-N.cfg``: ``render(profile)``
    and its ``devices=`` line, native/common/config.h), as the value of the shim's configuration
    variable: their paths separated by ':'; "" when the role has none.

    Raises:
        UsageError: more placements than a shim takes (config.h: CAPSHIM_MAX_CONFIGS).
    """
    from capshim.profiles.targets import MAX_TARGETS

    placed = [p for p in placements if p.role == role]
    if len(placed) > MAX_TARGETS:
        raise UsageError(f"{placed[0].flag}: more than {MAX_TARGETS} profiles placed on devices")
    files = []
    for n, p in enumerate(placed):
        cfg = run_dir / f"{stem}-{n}.cfg"
        text = render(p.profile) + (f"devices={','.join(p.specs)}\n" if p.specs else "")
        output.write_file(cfg, text.encode(), replace=True, fsync=False)  # never through a link left there
        files.append(str(cfg))
    return ":".join(files)


def answer_differences(stock: dict, shimmed: dict) -> dict[str, list]:
    """Keys whose answer differs between two capability-shaped probe results:
    ``key -> [stock, shimmed]`` (None where a side lacks the key)."""
    a, b = answer_rows(stock), answer_rows(shimmed)
    out = {}
    for key in list(a) + [k for k in b if k not in a]:
        if a.get(key) != b.get(key):
            out[key] = [a.get(key), b.get(key)]
    return out


__all__ = ["placed_configs", "Backend", "REGISTRY", "names", "get", "default_api", "for_profiles", "answer_rows",
           "answer_differences", "run_probe", "cannot_simulate"]
