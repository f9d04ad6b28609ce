"""The Metal claims that only a Mac can show, one line each (run by
.github/workflows/macos.yml on an Apple Silicon runner; the Linux suite
cannot run it). Each line: ``mac-only: ITEM: passed|failed|not runnable: detail``.
Exit 1 when an item failed. See docs/verified.md, "The Metal shim".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from capshim import launchagent, profiles
from capshim.backends import metal

failed = False


def line(item: str, status: str, detail: str) -> None:
    global failed
    failed |= status == "failed"
    print(f"mac-only: {item}: {status}: {detail}", flush=True)


def run(cmd: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def loaded_into(program: list[str], shim: Path, td: Path, name: str) -> tuple[int, list[dict], str]:
    status = td / f"{name}.jsonl"
    env = dict(os.environ, DYLD_INSERT_LIBRARIES=str(shim), CAPSHIM_STATUS_FILE=str(status),
               CAPSHIM_METAL_APPLE_FAMILY_MAX="1009", CAPSHIM_QUIET="1")
    r = run(program, env)
    return r.returncode, metal.read_status(status), r.stderr.strip()[-200:]


arts = metal.build(force=True)
shim, probe = arts["shim"], arts["probe"]

r = run(["lipo", "-archs", str(shim)])
archs = set(r.stdout.split())
line("universal arm64 + arm64e build (Xcode)", "passed" if {"arm64", "arm64e"} <= archs else "failed",
     f"lipo -archs: {' '.join(sorted(archs)) or r.stderr.strip()}")

for what, path in (("dylib", shim), ("probe", probe)):
    r = run(["codesign", "--verify", "--strict", "--verbose=2", str(path)])
    line(f"ad-hoc signature of the {what} (codesign --verify --strict)",
         "passed" if r.returncode == 0 else "failed", (r.stderr or r.stdout).strip().replace("\n", " | "))

bad = [c for c in metal.inspect_macho(shim) if c["status"] == "failed"]
line("the Xcode build passes the cross build's Mach-O checks", "failed" if bad else "passed",
     "; ".join(f"{c['check']}: {c['detail']}" for c in bad) or "exports, imports, install name, "
     "__DATA,__interpose, deny-list as on Linux")

with tempfile.TemporaryDirectory() as tdname:
    td = Path(tdname)
    rc, events, err = loaded_into([str(probe)], shim, td, "arm64")
    ok = any(e.get("event") == "loaded" and e.get("runtime") == "apple" for e in events)
    line("dyld loads the shim into an arm64 process (the probe)", "passed" if ok else "failed",
         f"exit {rc}; events {[e.get('event') for e in events]} {err}")

    # An arm64e child: a third-party arm64e program runs only where the
    # arm64e preview ABI is allowed; when it does not run stock, say so.
    src = td / "hello.c"
    src.write_text("int main(void) { return 0; }\n")
    exe = td / "hello-arm64e"
    r = run(["xcrun", "clang", "-arch", "arm64e", str(src), "-o", str(exe)])
    stock = run([str(exe)]) if r.returncode == 0 else r
    if stock.returncode != 0:
        line("dyld loads the shim into an arm64e child", "not runnable",
             "this runner does not build or run a third-party arm64e program: exit "
             f"{stock.returncode} {stock.stderr.strip()[-160:]}")
    else:
        rc, events, err = loaded_into([str(exe)], shim, td, "arm64e")
        ok = rc == 0 and any(e.get("event") == "loaded" for e in events)
        line("dyld loads the shim into an arm64e child", "passed" if ok else "failed",
             f"exit {rc}; events {[e.get('event') for e in events]} {err}")

    sip = shutil.which("true") or "/usr/bin/true"
    rc, events, _ = loaded_into([sip], shim, td, "sip")
    warned = bool(metal.warn_target([sip]))
    line("SIP drops DYLD_INSERT_LIBRARIES for /usr/bin programs, and capshim warns",
         "passed" if not events and warned else "failed", f"{sip}: {len(events)} status events; warned {warned}")

res = metal.probe(profiles.load("metal-apple9"), compare=True)
hooks = [e for e in res["events"] if e.get("event") == "hooks" and e.get("installed")]
path1 = any("-[_MTLDevice initGPUFamilySupport]" in e["installed"] for e in hooks)
line("the real -[_MTLDevice initGPUFamilySupport] entry hook (path 1)", "passed" if path1 else "failed",
     json.dumps(hooks[0] if hooks else [e for e in res["events"] if e.get("event") == "hooks"]))
s, st = res["shimmed"], res["stock"]
ok = (res["status"] == "active" and s["families"].get("1009") is True
      and (s["maxThreadgroupMemoryLength"] or 0) >= 65536
      and all(s["highest"][k] == st["highest"][k] for k in ("mac", "common", "metal")))
line("Metal.framework answers Apple9 and 64 KiB, Mac/Common/Metal unchanged", "passed" if ok else "failed",
     f"apple {st['highest']['apple']} -> {s['highest']['apple']}; threadgroup "
     f"{st['maxThreadgroupMemoryLength']} -> {s['maxThreadgroupMemoryLength']}; status {res['status']}")
broken = [c for c in metal.verify() if c["check"] == "answers stay stock with a broken configuration"]
line("a broken configuration keeps the real device stock", broken[0]["status"] if broken else "failed",
     broken[0]["detail"] if broken else "check missing")

with tempfile.TemporaryDirectory() as tdname:
    res = launchagent.install(profiles.load("metal-apple9"), "com.example.capshim-ci",
                              ["/usr/local/bin/llama server", "-m", "model.gguf"], dry_run=True)
    plist = Path(tdname) / "agent.plist"
    plist.write_text(res["plist"])
    r = run(["plutil", "-lint", str(plist)])
    line("plutil -lint accepts the LaunchAgent plist", "passed" if r.returncode == 0 else "failed",
         (r.stdout or r.stderr).strip())

sys.exit(1 if failed else 0)
