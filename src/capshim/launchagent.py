"""Per-workload persistence on macOS: a LaunchAgent that starts one program
with the Metal shim injected into it alone.

The plist (written with the standard library's ``plistlib``) sets
``DYLD_INSERT_LIBRARIES`` and the shim's configuration in the job's own
``EnvironmentVariables``, so only that program (and, since the shim scrubs
its variables at load, none of its children) is shimmed. ``launchctl
setenv`` is never used: it would reach every process of the login session.

Sources of facts: launchd.plist(5) (Label, ProgramArguments,
EnvironmentVariables, WorkingDirectory, RunAtLoad, StandardOutPath,
StandardErrorPath; user agents live in ``~/Library/LaunchAgents``);
launchctl(1) (``bootstrap gui/UID PATH``, ``bootout gui/UID/LABEL``);
plutil(1) (``-lint``).
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

from capshim.contracts import bounded
from capshim.backends import metal
from capshim.contracts import output
from capshim.errors import EXIT_WORKLOAD, UsageError

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_label(label: str) -> str:
    """Return ``label`` when it is a usable launchd label (reverse-DNS style).

    Raises:
        UsageError: naming ``--label`` when it is empty, has '/' or spaces, or
            is longer than 128 characters.
    """
    if not LABEL_RE.match(label or ""):
        raise UsageError(f"--label {label!r}: use letters, digits, '.', '_' and '-' "
                         "(reverse-DNS style, e.g. com.example.llama), at most 128 characters")
    return label


def paths(label: str, home: Path | None = None) -> dict[str, Path]:
    """Where an agent's files go (all under the user's home).

    plist: ``~/Library/LaunchAgents/LABEL.plist``; dylib: the agent's own copy
    of the shim, ``~/Library/Application Support/capshim/launchagents/LABEL/``
    (so that clearing capshim's build cache cannot break the agent; dyld
    refuses to start a program whose inserted library is missing); logs and
    status file: ``~/Library/Logs/capshim/LABEL.{out,err}.log``,
    ``LABEL.status.jsonl``.
    """
    home = home or Path.home()
    support = home / "Library" / "Application Support" / "capshim" / "launchagents" / label
    logs = home / "Library" / "Logs" / "capshim"
    return {"plist": home / "Library" / "LaunchAgents" / f"{label}.plist",
            "support": support, "dylib": support / metal.DYLIB_NAME,
            "stdout": logs / f"{label}.out.log", "stderr": logs / f"{label}.err.log",
            "status": logs / f"{label}.status.jsonl"}


def resolve_program(program: str) -> str:
    """An absolute path for PROGRAM (launchd does not search PATH).

    Raises:
        UsageError: PROGRAM is a folder, or relative and not found on PATH.
    """
    if os.path.isdir(program) or program.endswith("/"):  # as `capshim run` refuses it
        raise UsageError(f"PROGRAM {program!r}: it is a folder, not a program")
    if os.path.isabs(program):
        return program
    found = shutil.which(program)
    if found is None:
        raise UsageError(f"PROGRAM {program!r}: not found on PATH; give an absolute path")
    return os.path.abspath(found)


def plist_dict(profile, label: str, argv: list[str], *, home: Path | None = None,
               cwd: str | None = None) -> dict:
    """The LaunchAgent's content as a dict (see module docstring for keys).

    Raises:
        UsageError: bad label, no program, or a profile that is not Metal.
    """
    check_label(label)
    if not argv:
        raise UsageError("launchagent install: give the program after '--' "
                         "(capshim launchagent install --profile P --label L -- PROGRAM ARGS)")
    p = paths(label, home)
    env = metal.shim_env(profile, p["dylib"], p["status"], inherit=False, quiet=False)
    return {
        "Label": label,
        "ProgramArguments": [resolve_program(argv[0]), *argv[1:]],
        "EnvironmentVariables": env,
        "WorkingDirectory": cwd or os.getcwd(),
        "RunAtLoad": True,
        "StandardOutPath": str(p["stdout"]),
        "StandardErrorPath": str(p["stderr"]),
    }


def plist_bytes(data: dict) -> bytes:
    """XML plist bytes for ``data`` (keys in the order given).

    Raises:
        UsageError: a string holds a control character, which an XML plist
            cannot carry (plistlib refuses it); the message names the key.
    """
    try:
        return plistlib.dumps(data, fmt=plistlib.FMT_XML, sort_keys=False)
    except ValueError:
        bad = [k for k, v in data.items() if _has_control(v)]
        raise UsageError(f"launchagent plist key {', '.join(bad) or '?'}: a control character "
                         "cannot be written to a plist (PROGRAM, its arguments and the paths "
                         "must be plain text)") from None


def _has_control(value) -> bool:
    if isinstance(value, str):
        return any(ord(c) < 0x20 and c not in "\t\n\r" for c in value)
    if isinstance(value, list):
        return any(_has_control(v) for v in value)
    if isinstance(value, dict):
        return any(_has_control(k) or _has_control(v) for k, v in value.items())
    return False


# Keys and types launchd reads from a LaunchAgent (launchd.plist(5)); the
# first two are required.
PLIST_KEYS = {"Label": str, "ProgramArguments": list, "EnvironmentVariables": dict,
              "WorkingDirectory": str, "RunAtLoad": bool, "StandardOutPath": str,
              "StandardErrorPath": str}


def check_plist(text: bytes, label: str, home: Path | None = None) -> list[str]:
    """Problems found when ``text`` is read back as macOS reads a LaunchAgent.

    Read with ``plistlib`` (the same XML plist format as plutil(1) and
    launchd): the required keys ``Label`` (equal to ``label``) and
    ``ProgramArguments`` (non-empty, strings, the program an absolute
    path: launchd does not search PATH); no key outside ``PLIST_KEYS`` and
    each of the right type; ``EnvironmentVariables`` all strings (launchd
    ignores other values), ``DYLD_INSERT_LIBRARIES`` exactly the agent's
    installed copy of the shim (``paths(label)["dylib"]``); the paths
    absolute. Returns plain sentences, empty when the plist is good.
    """
    try:
        data = plistlib.loads(text)
    except Exception as exc:  # plistlib raises several types for bad input
        return [f"not a readable plist: {exc}"]
    if not isinstance(data, dict):
        return ["the top level is not a dictionary"]
    out = []
    for key in ("Label", "ProgramArguments"):
        if key not in data:
            out.append(f"{key}: missing (required)")
    for key, value in data.items():
        want = PLIST_KEYS.get(key)
        if want is None:
            out.append(f"{key}: not a key capshim writes")
        elif not isinstance(value, want):
            out.append(f"{key}: {type(value).__name__}, expected {want.__name__}")
    if data.get("Label") != label:
        out.append(f"Label: {data.get('Label')!r}, expected {label!r}")
    args = data.get("ProgramArguments")
    if isinstance(args, list):
        if not args or not all(isinstance(a, str) for a in args):
            out.append("ProgramArguments: must be a non-empty list of strings")
        elif not os.path.isabs(args[0]):
            out.append(f"ProgramArguments[0]: {args[0]!r} is not an absolute path")
    env = data.get("EnvironmentVariables", {})
    if isinstance(env, dict):
        odd = [k for k, v in env.items() if not isinstance(v, str)]
        if odd:
            out.append(f"EnvironmentVariables: not strings: {', '.join(map(str, odd))}")
        want_dylib = str(paths(label, home)["dylib"])
        if env.get("DYLD_INSERT_LIBRARIES") != want_dylib:
            out.append(f"EnvironmentVariables.DYLD_INSERT_LIBRARIES: "
                       f"{env.get('DYLD_INSERT_LIBRARIES')!r}, expected the installed copy {want_dylib!r}")
    for key in ("WorkingDirectory", "StandardOutPath", "StandardErrorPath"):
        v = data.get(key)
        if isinstance(v, str) and not os.path.isabs(v):
            out.append(f"{key}: {v!r} is not an absolute path")
    return out


def install_commands(plist: Path, label: str, uid: int) -> list[list[str]]:
    """Commands run after writing the plist: lint, remove any older copy of
    the job (its failure is ignored), bootstrap into the GUI domain."""
    return [["plutil", "-lint", str(plist)],
            ["launchctl", "bootout", f"gui/{uid}/{label}"],
            ["launchctl", "bootstrap", f"gui/{uid}", str(plist)]]


def uninstall_commands(label: str, uid: int) -> list[list[str]]:
    """Commands that stop and unload the job."""
    return [["launchctl", "bootout", f"gui/{uid}/{label}"]]


def _refuse(action: str) -> None:
    if sys.platform != "darwin":
        raise UsageError(f"launchagent {action}: LaunchAgents exist only on macOS; this is "
                         f"{sys.platform}" + (" (install --dry-run prints the plist)" if action == "install" else ""))


def _run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
    r = bounded.run(cmd)
    if check and r.returncode != 0:
        raise UsageError(f"{' '.join(cmd)} failed (exit {r.returncode}): "
                         f"{(r.stderr or r.stdout).strip()}", exit_code=EXIT_WORKLOAD)
    return r


def install(profile, label: str, argv: list[str], dry_run: bool = False) -> dict:
    """Write, lint and bootstrap the agent; with ``dry_run`` only build the text.

    Returns ``{"plist": text, "path": plist path, "commands": [...],
    "warnings": [...]}`` (commands are what was, or would be, run).

    Raises:
        UsageError: bad label/program/profile; not macOS without dry_run;
            plutil or launchctl failed (exit 1).
        BuildError: the shim could not be built.
    """
    data = plist_dict(profile, label, argv)
    p = paths(label)
    raw = plist_bytes(data)
    problems = check_plist(raw, label)
    if plistlib.loads(raw) != data:
        problems.append("the plist does not read back as written (a carriage return in an argument?)")
    if problems:
        raise UsageError(f"launchagent install --label {label}: the plist would not be read as "
                         "intended: " + "; ".join(problems))
    text = raw.decode()
    cmds = install_commands(p["plist"], label, os.getuid())
    warnings = metal.profile_warnings(profile) + metal.warn_target(data["ProgramArguments"])
    result = {"plist": text, "path": str(p["plist"]), "commands": cmds, "warnings": warnings}
    if dry_run:
        return result
    _refuse("install")
    arts = metal.build()
    p["support"].mkdir(parents=True, exist_ok=True)
    p["stdout"].parent.mkdir(parents=True, exist_ok=True)
    p["plist"].parent.mkdir(parents=True, exist_ok=True)
    # the output rule (contracts.output): install's job is to replace its own plist and dylib copy, whole,
    # never through a link a user or program left at those names
    output.write_file(p["dylib"], Path(arts["shim"]).read_bytes(), "launchagent install", replace=True)
    os.chmod(p["dylib"], 0o755)
    output.write_file(p["plist"], raw, "launchagent install", replace=True)
    _run(cmds[0])
    _run(cmds[1], check=False)
    _run(cmds[2])
    return result


def uninstall(label: str) -> dict:
    """Boot the agent out and remove its plist and its copy of the shim.

    Returns ``{"removed": [paths], "commands": [...]}``.

    Raises:
        UsageError: bad label; not macOS; no such agent.
    """
    check_label(label)
    _refuse("uninstall")
    p = paths(label)
    if not p["plist"].exists() and not p["support"].exists():
        raise UsageError(f"--label {label}: no capshim LaunchAgent ({p['plist']} does not exist)")
    cmds = uninstall_commands(label, os.getuid())
    _run(cmds[0], check=False)  # not loaded is fine
    removed = []
    if p["plist"].exists():
        p["plist"].unlink()
        removed.append(str(p["plist"]))
    if p["support"].exists():
        shutil.rmtree(p["support"])
        removed.append(str(p["support"]))
    return {"removed": removed, "commands": cmds}
