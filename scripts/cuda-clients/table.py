"""What independent CUDA clients see, stock and under each built-in CUDA profile: a sealed table.

Usage (repository root; capshim importable, e.g. PYTHONPATH=src):

    python3 scripts/cuda-clients/table.py --out evidence/h200-cuda-clients
    python3 scripts/cuda-clients/table.py --out /tmp/t --standins     # no GPU: capshim's stand-ins

For stock and each profile (default: every built-in profile whose api is cuda), each client
runs as its own process, launched the same way every time:

    python3 -m capshim.cli run [--profile P] --status-file F -- python3 clients.py CLIENT
    python3 -m capshim.cli run [--profile P] --status-file F -- nvidia-smi --query-gpu=...

(``clients.py``: PyTorch, Triton, CuPy, numba-cuda, cuda.core, JAX, pynvml, the runtime through
ctypes, and ``ext``: ``cuda_clients_ext.c``, compiled here with gcc against the libcudart
that is present and imported normally, i.e. dlopen'ed RTLD_LOCAL.) A client whose package
is not installed is skipped and named. Each cell is the value the client read and whether
it equals the expected answer (stock: the device's, from capshim's stock probe; a profile:
``capshim.profiles.checks.answers_after``, min(device, profile)), or why there is no value.

Writes OUT (a new or empty folder), sealed as a ``cuda-clients`` study
(:mod:`capshim.evidence.study`; ``capshim evidence verify OUT``):
``clients.json`` (every run, cell and expected value), ``clients.md`` (the table, 80
columns), ``raw/<arm>/<client>.json|.stderr|.status.jsonl`` (each process's output line,
its stderr with capshim's notes, and the shim's status file). Exit 0 when the table is
written and sealed (a cell that disagrees is a finding, not a failure), 2 on bad usage,
1 when the folder cannot be written.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as _dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
try:
    import capshim  # noqa: F401
except ImportError:  # run from a checkout without PYTHONPATH: its src/
    sys.path.insert(0, str(REPO / "src"))

from capshim import __version__, profiles  # noqa: E402
from capshim import status as st  # noqa: E402
from capshim.backends import cuda  # noqa: E402
from capshim.contracts.folders import new_output_folder  # noqa: E402
from capshim.errors import CapshimError  # noqa: E402
from capshim.evidence import study  # noqa: E402
from capshim.evidence.files import strict_json  # noqa: E402
from capshim.profiles.checks import answers_after  # noqa: E402

sys.path.insert(0, str(HERE))
import clients as clients_mod  # noqa: E402

SCHEMA = "capshim-cuda-clients/1"
STOCK = "stock"
#: The facts every client is asked for (capshim's key names) and their short labels in clients.md.
FACTS = {"computeCapability": "cc", "multiProcessorCount": "SMs", "sharedMemPerBlockOptin": "smem optin",
         "sharedMemPerMultiprocessor": "smem/SM", "deviceName": "name"}
NVIDIA_SMI = "nvidia-smi"
CLIENT_NAMES = [*clients_mod.CLIENTS, NVIDIA_SMI]
EXT_MODULE = "cuda_clients_ext"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cuda_profiles() -> list[str]:
    """The built-in profiles whose api is cuda (sorted by name)."""
    return [n for n in profiles.builtin_names() if profiles.load(n).api == "cuda"]


def _expected(answers: dict) -> dict:
    """The facts of a probe-form answer dict: capabilities and the device name."""
    caps = answers.get("capabilities", {})
    out = {f: caps[f] for f in FACTS if f in caps}
    out["deviceName"] = answers.get("device", {}).get("name")
    return out


def expected_values(arms: list[str], stock: dict | None, refs: dict[str, str] | None = None) -> dict:
    """{arm: {fact: value}}: the device's answers for stock, min(device, profile) for a profile
    (:func:`capshim.profiles.checks.answers_after`); {} per arm when the stock probe failed."""
    if stock is None:
        return {a: {} for a in arms}
    refs = refs or {}
    return {a: _expected(stock if a == STOCK else answers_after(profiles.load(refs.get(a, a)), stock)) for a in arms}


def _find_headers(runtime: Path) -> Path | None:
    """A folder with the CUDA toolkit's cuda_runtime_api.h matching ``runtime``'s major version, if any."""
    major = runtime.name.rsplit(".so.", 1)[-1]
    places = [runtime.parent.parent / "include", Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"]
    for inc in places:
        header = inc / "cuda_runtime_api.h"
        try:
            text = header.read_text(errors="replace")
        except OSError:
            continue
        m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", text)
        if m and str(int(m[1]) // 1000) == major:
            return inc
    return None


def build_ext(runtime: Path | None, into: Path, own_layout: bool, mode: str = "auto",
              cuda_include: Path | None = None) -> dict:
    """Compile cuda_clients_ext.c into ``into`` against ``runtime``; returns what was done.

    ``own_layout``: no CUDA header, the struct offsets of the C file (the stand-ins); ``cuda_include``:
    the folder of the cuda_runtime_api.h to use (default: found next to the runtime or in CUDA_HOME).
    ``mode``: ``module`` (a Python extension module, imported), ``library`` (a plain shared library
    loaded with ctypes.CDLL, RTLD_LOCAL too: for a Python without Python.h), ``auto`` (module when
    Python.h is there).

    Returns:
        ``{"built": bool, "mode", "command": [...], "runtime", "headers", "why"}`` (``why``: the reason
        it was not built, or why it is a library; ``skip`` True when the cause is something not installed).
    """
    include = Path(sysconfig.get_paths()["include"])
    if runtime is None:
        return {"built": False, "skip": True, "why": "not installed: no libcudart.so.13 or .12 found"}
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        return {"built": False, "skip": True, "why": f"not installed: no C compiler ({cc})"}
    why = None
    if mode == "auto":
        mode = "module" if (include / "Python.h").is_file() else "library"
        if mode == "library":
            why = f"no Python.h in {include} (python3-dev): a plain library loaded with ctypes.CDLL (RTLD_LOCAL)"
    headers = cuda_include or (None if own_layout else _find_headers(runtime))
    done = _compile_ext(cc, runtime, headers, include, into, mode, why)
    if not done["built"] and headers is not None:  # the toolkit's headers did not compile: its own offsets
        failed = done["why"]
        done = _compile_ext(cc, runtime, None, include, into, mode, why)
        done["headers_failed"] = failed
    return done


def _compile_ext(cc: str, runtime: Path, headers: Path | None, include: Path, into: Path, mode: str,
                 why: str | None) -> dict:
    """One gcc run of :func:`build_ext`; its result dict."""
    layout = "13" if runtime.name.endswith(".so.13") else "12"
    flags = [f"-isystem{headers}", "-DCLIENTS_CUDA_HEADERS"] if headers else [f"-DCLIENTS_LAYOUT={layout}"]
    if mode == "module":
        flags.insert(0, f"-I{include}")
        target = into / f"{EXT_MODULE}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    else:
        flags.append("-DCLIENTS_NO_PYTHON")
        target = into / f"lib{EXT_MODULE}.so"
    cmd = [cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", *flags, "-o", str(target),
           str(HERE / "cuda_clients_ext.c"), f"-L{runtime.parent}", f"-l:{runtime.name}",
           f"-Wl,-rpath,{runtime.parent}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    done = {"mode": mode, "command": cmd, "runtime": str(runtime), "headers": str(headers) if headers else None,
            "why": why}
    if proc.returncode != 0:
        return {**done, "built": False, "skip": False,
                "why": f"gcc exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"}
    return {**done, "built": True}


def installed(client: str, standins: bool, ext: dict) -> str | None:
    """None when ``client`` can run here, else why it is skipped ("not installed ...")."""
    if client == NVIDIA_SMI:
        if standins:
            return "not a client of the stand-ins (it reads the real driver)"
        return None if shutil.which(NVIDIA_SMI) else "not installed (no nvidia-smi on PATH)"
    if client == "ext":
        return ext["why"] if ext.get("skip") else None
    import importlib.util
    module = clients_mod.CLIENTS[client][0]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError) as exc:
        return f"not installed ({type(exc).__name__}: {exc})"
    return None if found else f"not installed (no module {module})"


def _command(arm: str, client: str, status_file: Path, ref: str | None = None) -> list[str]:
    run = [sys.executable, "-m", "capshim.cli", "run", "--status-file", str(status_file)]
    if arm != STOCK:
        run += ["--profile", ref or arm]
    if client == NVIDIA_SMI:
        return [*run, "--", NVIDIA_SMI, "--query-gpu=compute_cap,name", "--format=csv,noheader", "-i", "0"]
    return [*run, "--", sys.executable, str(HERE / "clients.py"), client]


def _parse_smi(stdout: str, rc: int) -> dict:
    """nvidia-smi's CSV line as a client's output."""
    out = {"client": NVIDIA_SMI}
    line = stdout.strip().splitlines()[0] if stdout.strip() else ""
    if rc != 0 or "," not in line:
        out["why"] = f"nvidia-smi exited {rc}: {stdout.strip()[-300:]}"
        out["facts"] = {}
        return out
    cap, name = (x.strip() for x in line.split(",", 1))
    facts = {"deviceName": {"value": name}}
    try:
        major, minor = cap.split(".")
        facts["computeCapability"] = {"value": int(major) * 10 + int(minor)}
    except ValueError:
        facts["computeCapability"] = {"error": f"compute_cap {cap!r} is not MAJOR.MINOR"}
    out["facts"] = facts
    return out


def run_one(arm: str, client: str, env: dict, work: Path, timeout: float, deadline: float | None = None,
            ref: str | None = None) -> dict:
    """Run one client under one arm; returns {"arm", "client", "command", "rc", "seconds", "output",
    "stderr", "status" (text), "shim" {"state", "reason"}}. ``deadline`` (time.monotonic()): a run
    not started by then is not started (its output says so), and none runs past it."""
    status_file = work / "status" / arm / f"{client}.jsonl"
    cmd = _command(arm, client, status_file, ref)
    t0 = time.monotonic()
    if deadline is not None:
        if deadline - t0 < 5:
            return {"arm": arm, "client": client, "command": cmd, "rc": None, "seconds": 0.0,
                    "output": {"client": client, "why": "not run: the table's --budget was spent", "facts": {}},
                    "stdout": "", "stderr": "", "status": "", "shim": {"state": "unknown", "reason": "not run"}}
        timeout = min(timeout, deadline - t0)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO,
                              errors="replace")
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = None
        stdout = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    seconds = round(time.monotonic() - t0, 1)
    if client == NVIDIA_SMI:
        output = _parse_smi(stdout, rc if rc is not None else -1)
    else:
        lines = [x for x in stdout.splitlines() if x.startswith(clients_mod.MARK)]
        output = json.loads(lines[-1][len(clients_mod.MARK):]) if lines else None
    if rc is None:
        output = {"client": client, "why": f"timed out after {timeout:.0f} s", "facts": (output or {}).get("facts", {})}
    elif output is None:
        tail = [x for x in stderr.strip().splitlines() if x.strip()][-1:] or ["(no output)"]
        output = {"client": client, "why": f"exited {rc} without an answer: {tail[0][-300:]}", "facts": {}}
    status_text = status_file.read_text(errors="replace") if status_file.is_file() else ""
    shim = {"state": "absent", "reason": "no profile (stock)"}
    if arm != STOCK:
        try:
            shim = cuda.classify(st.read(status_file)).to_dict() if status_file.is_file() else \
                {"state": "unknown", "reason": "no status file was written"}
        except Exception as exc:  # noqa: BLE001 - a status file capshim cannot read is recorded, not fatal
            shim = {"state": "unknown", "reason": f"{type(exc).__name__}: {exc}"[:300]}
    return {"arm": arm, "client": client, "command": cmd, "rc": rc, "seconds": seconds, "output": output,
            "stdout": stdout, "stderr": stderr, "status": status_text, "shim": shim}


def cells_of(run: dict, expected: dict, expected_why: str | None) -> list[dict]:
    """The cells of one run: one per fact the client reports (or one per expected fact when the
    client gave no facts at all, each saying why)."""
    out = run["output"]
    facts = out.get("facts") or {}
    why_all = out.get("why") or (out.get("installed") is False and "not installed") or None
    cells = []
    for fact, got in facts.items():
        base = fact.split(" ", 1)[0]
        cell = {"arm": run["arm"], "client": run["client"], "fact": fact, "value": got.get("value"),
                "expected": expected.get(base), "agrees": None, "why": None}
        if "error" in got:
            cell["why"] = got["error"]
        elif cell["expected"] is None:
            cell["why"] = expected_why or f"no expected value for {base}"
        else:
            cell["agrees"] = cell["value"] == cell["expected"]
        cells.append(cell)
    if not facts and why_all:
        cells.append({"arm": run["arm"], "client": run["client"], "fact": "*", "value": None, "expected": None,
                      "agrees": None, "why": why_all})
    return cells


def _show(fact: str, value) -> str:
    if value is None:
        return "?"
    if fact.startswith("computeCapability") and isinstance(value, int):
        return f"{value // 10}.{value % 10}"
    return str(value)


def markdown(doc: dict) -> str:
    """clients.md: the expected answers and every client's cells, arms as columns (80 columns)."""
    arms = doc["arms"]
    notes: dict[str, int] = {}

    def note(text: str) -> str:
        notes.setdefault(text, len(notes) + 1)
        return f"n/a [{notes[text]}]"

    by = {(c["arm"], c["client"], c["fact"]): c for c in doc["cells"]}
    head = ["| client | fact | " + " | ".join(arms) + " |", "|---|---|" + "---|" * len(arms)]
    rows = []
    for fact, label in FACTS.items():
        rows.append(f"| expected | {label} | " + " | ".join(_show(fact, doc["expected"][a].get(fact)) for a in arms)
                    + " |")
    for client in doc["clients"]:
        order = [*FACTS, *(f"{f} (attribute)" for f in FACTS)]
        facts = sorted(dict.fromkeys(c["fact"] for c in doc["cells"] if c["client"] == client),
                       key=lambda f: order.index(f) if f in order else len(order))
        for fact in facts:
            label = FACTS.get(fact.split(" ", 1)[0], fact) + (" (attr)" if "(attribute)" in fact else "")
            shown = []
            for a in arms:
                c = by.get((a, client, fact)) or by.get((a, client, "*"))
                if c is None:
                    shown.append("-")
                elif c["agrees"] is True:
                    shown.append(_show(fact, c["value"]))
                elif c["agrees"] is False:
                    shown.append(f"{_show(fact, c['value'])} ≠")
                else:
                    shown.append(note(f"{client}: {c['why']}"))
            rows.append(f"| {client} | {'*' if fact == '*' else label} | " + " | ".join(shown) + " |")
    n = doc["counts"]
    lines = ["# What each CUDA client sees", "",
             *textwrap.wrap(
                 f"Device (capshim's stock probe): {doc['device']}. Each client ran as its own process under "
                 "`capshim run` (stock: without a profile). A cell is the value the client read: plain when it "
                 "equals the expected answer (first rows: the device's for stock, min(device, profile) under a "
                 "profile), `≠` when it does not, `n/a [N]` when there is no value (note N says why). "
                 "cc: compute capability; smem: shared memory in bytes (per block with opt-in, per SM).",
                 78), "",
             f"{n['agree']} cells agree, {n['disagree']} disagree (≠), {n['no_value']} have no value.", "",
             *head, *rows, ""]
    if doc["skipped"]:
        lines += ["Skipped (named, not run):", ""]
        lines += [f"- {k}: {v}" for k, v in doc["skipped"].items()] + [""]
    shim_rows = []
    for client in doc["clients"]:
        states = [next((r["shim"]["state"] for r in doc["runs"] if r["arm"] == a and r["client"] == client), "-")
                  for a in arms if a != STOCK]
        shim_rows.append(f"| {client} | " + " | ".join(states) + " |")
    if len(arms) > 1:
        lines += ["The shim's state per run (capshim's status file):", "",
                  "| client | " + " | ".join(a for a in arms if a != STOCK) + " |",
                  "|---|" + "---|" * (len(arms) - 1), *shim_rows, ""]
    if notes:
        lines += ["Notes:", ""]
        for text, i in notes.items():
            lines += textwrap.wrap(f"[{i}] {text}", 78, subsequent_indent="    ", break_on_hyphens=False)
        lines.append("")
    return "\n".join(lines)


#: The most of one process's stderr kept in raw/ (a kernel that refuses the GPU can print tens of MB).
STDERR_KEEP = 256 * 1024


def _bounded(text: str) -> str:
    """``text``, or its first 64 KiB and last 192 KiB with a line saying how much was left out."""
    if len(text) <= STDERR_KEEP:
        return text
    head, tail = text[:64 * 1024], text[-(STDERR_KEEP - 64 * 1024):]
    return f"{head}\n[table.py: {len(text) - len(head) - len(tail)} characters left out here]\n{tail}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="table.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="a new or empty folder for the sealed table")
    ap.add_argument("--profiles", help="comma-separated profiles (default: every built-in CUDA profile)")
    ap.add_argument("--clients", help=f"comma-separated clients (default: all: {', '.join(CLIENT_NAMES)})")
    ap.add_argument("--standins", action="store_true",
                    help="use capshim's stand-in libcudart/libcuda (no GPU: CI) instead of the real ones")
    ap.add_argument("--ext", choices=("auto", "module", "library"), default="auto",
                    help="the ext client as an extension module (imported) or a plain library (ctypes.CDLL); "
                         "auto: the module when Python.h is there")
    ap.add_argument("--cuda-include", type=Path, metavar="DIR",
                    help="the folder of the cuda_runtime_api.h the ext client is compiled with (default: the "
                         "toolkit's beside the runtime or in CUDA_HOME; with --standins: none, its own offsets)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="processes at a time")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds one client process may take")
    ap.add_argument("--budget", type=float, help="seconds all the runs may take; a run not started by then "
                    "is recorded as not run (the table is still written and sealed)")
    args = ap.parse_args(argv)
    started = _now()
    refs: dict[str, str] = {}  # arm (the profile's name) -> how --profile names it (a built-in name or a file)
    try:
        for ref in args.profiles.split(",") if args.profiles else cuda_profiles():
            prof = profiles.load(ref)
            if prof.api != "cuda":
                ap.error(f"--profiles {ref}: not a CUDA profile (built-in CUDA profiles: {', '.join(cuda_profiles())})")
            if prof.name in refs or prof.name == STOCK:
                ap.error(f"--profiles {ref}: a second profile named {prof.name!r}")
            refs[prof.name] = ref
    except profiles.ProfileError as exc:
        ap.error(f"--profiles: {exc}")
    wanted = args.clients.split(",") if args.clients else list(CLIENT_NAMES)
    for c in wanted:
        if c not in CLIENT_NAMES:
            ap.error(f"--clients {c}: unknown client (one of {', '.join(CLIENT_NAMES)})")
    if args.jobs < 1:
        ap.error("--jobs: at least 1")
    if args.cuda_include is not None and not (args.cuda_include / "cuda_runtime_api.h").is_file():
        ap.error(f"--cuda-include {args.cuda_include}: no cuda_runtime_api.h in it")
    try:
        build = cuda.build()
    except CapshimError as exc:
        print(f"table.py: cannot build capshim's CUDA shim: {exc}", file=sys.stderr)
        return 1
    try:
        out = new_output_folder(args.out, "cuda-clients")
    except CapshimError as exc:
        print(f"table.py: {exc}", file=sys.stderr)
        return 2
    arms = [STOCK, *refs]

    env = {k: v for k, v in os.environ.items() if k not in ("CAPSHIM_TARGET_PID", "CAPSHIM_INHERIT", cuda.CONFIG_VAR)}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO / "src"), env.get("PYTHONPATH")) if x)
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # JAX shares the GPU with the other clients running
    if args.standins:
        env.update(cuda.standin_env(build))
    runtime = Path(env["CAPSHIM_CUDA_RUNTIME"]) if env.get("CAPSHIM_CUDA_RUNTIME") else cuda.find_runtime()
    try:
        stock = cuda.probe(extra_env=cuda.standin_env(build) if args.standins else None, b=build)
        stock.pop("shim", None)
        expected_why = None
        device = (f"{stock['device']['name']}, {stock['device']['driver']}, {stock['device']['apiVersion']} "
                  f"({stock.get('runtime')})")
    except CapshimError as exc:
        stock, expected_why, device = None, f"no expected value: the stock probe failed: {exc}", f"none ({exc})"
    expected = expected_values(arms, stock, refs)

    with tempfile.TemporaryDirectory(prefix="capshim-clients-") as td:
        work = Path(td)
        ext = build_ext(runtime, work, own_layout=args.standins, mode=args.ext,
                        cuda_include=args.cuda_include) if "ext" in wanted else {}
        env["CAPSHIM_CLIENTS_EXT_DIR"] = str(work)
        env["CAPSHIM_CLIENTS_EXT_MODE"] = ext.get("mode") or ""
        skipped = {c: why for c in wanted if (why := installed(c, args.standins, ext))}
        to_run = [c for c in wanted if c not in skipped]
        jobs = [(a, c) for a in arms for c in to_run]
        deadline = time.monotonic() + args.budget if args.budget else None
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(lambda ac: run_one(ac[0], ac[1], env, work, args.timeout, deadline,
                                                    refs.get(ac[0])), jobs))
    if "ext" in to_run and not ext.get("built"):
        for r in runs:
            if r["client"] == "ext":
                r["output"] = {"client": "ext", "why": f"could not be built: {ext.get('why')}", "facts": {}}

    cells = [c for r in runs for c in cells_of(r, expected[r["arm"]], expected_why)]
    counts = {"agree": sum(c["agrees"] is True for c in cells), "disagree": sum(c["agrees"] is False for c in cells),
              "no_value": sum(c["agrees"] is None for c in cells)}
    versions = {}
    for r in runs:
        if r["arm"] == STOCK and r["output"].get("version"):
            versions[r["client"]] = r["output"]["version"]
    doc = {"schema": SCHEMA, "capshim": __version__, "device": device, "arms": arms, "clients": to_run,
           "skipped": skipped, "expected": expected, "counts": counts, "stock_probe": stock,
           "stock_probe_error": expected_why, "ext_build": {k: v for k, v in ext.items() if k != "skip"},
           "standins": args.standins, "versions": versions,
           "runs": [{k: r[k] for k in ("arm", "client", "command", "rc", "seconds", "shim")} |
                    {"why": r["output"].get("why"), "version": r["output"].get("version")} for r in runs],
           "cells": cells}
    try:
        for r in runs:
            folder = out / "raw" / r["arm"]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{r['client']}.json").write_bytes(strict_json(r["output"]))
            (folder / f"{r['client']}.stderr").write_text(_bounded(r["stderr"]), encoding="utf-8")
            if r["status"]:
                (folder / f"{r['client']}.status.jsonl").write_text(r["status"], encoding="utf-8")
        (out / "clients.json").write_bytes(strict_json(doc))
        (out / "clients.md").write_text(markdown(doc), encoding="utf-8")
        machine = (f"{device}; {os.cpu_count()} CPU cores, {platform.platform()}, "
                   f"Python {platform.python_version()}")
        facts = {"command": ["python3", "scripts/cuda-clients/table.py", *argv], "machine": machine,
                 "software": {"capshim": __version__, **versions}, "started_utc": started, "finished_utc": _now()}
        sums = study.seal(out, "cuda-clients", facts=facts)
    except (OSError, CapshimError) as exc:
        print(f"table.py: cannot write {out}: {exc}", file=sys.stderr)
        return 1
    print(markdown(doc))
    print(f"sealed: {sums} (check it: capshim evidence verify {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
