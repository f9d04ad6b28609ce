"""The host step of the Metal case, as a command: on the Apple Silicon Mac
that runs the macOS VM, read or change ``ForceUnrestrictedDeviceFeatureLevel``
in the ``com.apple.gpusw.ParavirtualizedGraphics`` defaults domain.

Source: the Cua/Lume shim's documentation (trycua/cua) and issue 4:
``defaults write com.apple.gpusw.ParavirtualizedGraphics
ForceUnrestrictedDeviceFeatureLevel -bool true``, then stop and start the VM
again (a running VM keeps the level it started with). ``kern.hv_vmm_present``
(sysctl) is 1 inside a virtual machine.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from capshim.contracts import bounded
from capshim.contracts.suggest import did_you_mean
from capshim.errors import EXIT_WORKLOAD, UsageError

DOMAIN = "com.apple.gpusw.ParavirtualizedGraphics"
KEY = "ForceUnrestrictedDeviceFeatureLevel"
ACTIONS = ("status", "enable", "disable")


def command(action: str) -> list[str]:
    """The ``defaults`` command for ``action`` ("status", "enable", "disable").

    disable deletes the key (the system default applies again).

    Raises:
        UsageError: unknown action.
    """
    if action == "status":
        return ["defaults", "read", DOMAIN, KEY]
    if action == "enable":
        return ["defaults", "write", DOMAIN, KEY, "-bool", "true"]
    if action == "disable":
        return ["defaults", "delete", DOMAIN, KEY]
    raise UsageError(f"host {action!r}: use one of {', '.join(ACTIONS)}{did_you_mean(action, ACTIONS)}")


def restart_hint(lume_on_path: bool | None = None) -> str:
    """The sentence that tells the user to restart the VM (naming lume's
    commands when ``lume`` is on PATH)."""
    if lume_on_path is None:
        lume_on_path = shutil.which("lume") is not None
    text = "Stop the VM and start it again for this to apply (a running VM keeps its level)"
    if lume_on_path:
        text += ": lume stop VM_NAME && lume run VM_NAME"
    return text + "."


def parse_value(rc: int, stdout: str) -> bool | None:
    """``defaults read`` result -> True/False, or None when the key is not set."""
    if rc != 0:
        return None
    v = stdout.strip().lower()
    return v in ("1", "true", "yes")


def is_vm_guest(platform: str | None = None) -> bool | None:
    """Whether this Mac is a virtual machine guest (``sysctl -n kern.hv_vmm_present`` is 1);
    None off macOS or when sysctl cannot tell."""
    if (platform or sys.platform) != "darwin":
        return None
    try:
        r = bounded.run(["sysctl", "-n", "kern.hv_vmm_present"], timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() == "1" if r.returncode == 0 else None


def check_host(platform: str | None = None, in_vm: bool | None = None) -> None:
    """Refuse anywhere but a macOS host.

    Raises:
        UsageError (exit 2): not macOS, or this Mac is itself a VM guest.
    """
    platform = platform or sys.platform
    if platform != "darwin":
        raise UsageError(f"host: runs on the macOS host (the Apple Silicon Mac that runs "
                         f"the VM); this is {platform}")
    if in_vm is None:
        in_vm = is_vm_guest(platform) is True
    if in_vm:
        raise UsageError("host: this Mac is a virtual machine guest "
                         "(kern.hv_vmm_present = 1); run it on the host that runs the VM")


def run(action: str) -> dict:
    """Do ``action`` on this host; return ``{"action", "command", "value",
    "message"}`` where value is the setting afterwards (None: not set).

    Raises:
        UsageError: not a macOS host; bad action; ``defaults write`` failed.
    """
    cmd = command(action)
    check_host()
    if action != "status":
        r = bounded.run(cmd)
        if r.returncode != 0 and action == "enable":
            raise UsageError(f"{' '.join(cmd)} failed: {r.stderr.strip()}", exit_code=EXIT_WORKLOAD)
    r = bounded.run(command("status"))
    value = parse_value(r.returncode, r.stdout)
    shown = {True: "true", False: "false", None: "not set (default)"}[value]
    msg = f"{DOMAIN} {KEY} = {shown}"
    if action != "status":
        msg += ". " + restart_hint()
    return {"action": action, "command": cmd, "value": value, "message": msg}
