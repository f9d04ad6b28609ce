"""capshim.cuda_binary's fatbin reader against cuobjdump on real binaries.

Usage (on a CUDA machine, repository root): python3 scripts/h200-cuda-check/fatbin_check.py FILE...
The ELF sections are read inline (the GPU machine's image has no LIEF); each file prints the
architectures and counts both readers found and MATCH or DIFFER.
"""
import os
import re
import struct
import subprocess
import sys
import time

from capshim import cuda_binary as cb


def sections(path):
    with open(path, "rb") as fh:
        h = fh.read(64)
        shoff, = struct.unpack_from("<Q", h, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", h, 0x3A)
        fh.seek(shoff)
        raw = fh.read(shentsize * shnum)
        hdrs = [struct.unpack_from("<IIQQQQIIQQ", raw, i * shentsize) for i in range(shnum)]
        stro, strs = hdrs[shstrndx][4], hdrs[shstrndx][5]
        fh.seek(stro)
        names = fh.read(strs)
    out = {}
    for hd in hdrs:
        n = names[hd[0]:names.index(b"\0", hd[0])].decode()
        out[n] = (hd[4], hd[5], hd[1])
    return out


def mine(path):
    secs = sections(path)
    entries = []
    for name in cb.FATBIN_SECTIONS:
        if name in secs and secs[name][2] != 8:  # 8: SHT_NOBITS
            off, size, _ = secs[name]
            entries += cb.read_entries(path, off, size)
    return entries


def theirs(path, flag):
    r = subprocess.run(["cuobjdump", flag, path], capture_output=True, text=True, timeout=400)
    return [int(m) for m in re.findall(r"\.sm_(\d+)[a-z]?\.(?:cubin|ptx)", r.stdout)], r.returncode, r.stderr[-300:]


for path in sys.argv[1:]:
    if not os.path.isfile(path):
        print(path, "missing"); continue
    t0 = time.time()
    try:
        e = mine(path)
    except Exception as exc:  # noqa: BLE001
        print(path, "MINE ERROR", repr(exc)); e = None
    t1 = time.time()
    elf, rc1, err1 = theirs(path, "--list-elf")
    ptx, rc2, err2 = theirs(path, "--list-ptx")
    t2 = time.time()
    print(f"== {path} ({os.path.getsize(path)} bytes) mine {t1 - t0:.2f}s cuobjdump {t2 - t1:.2f}s rc {rc1},{rc2}")
    if e is not None:
        me_elf = sorted(x.arch for x in e if x.kind == "elf"); me_ptx = sorted(x.arch for x in e if x.kind == "ptx")
        print("mine  elf n", len(me_elf), "set", sorted(set(me_elf)), "| ptx n", len(me_ptx), "set", sorted(set(me_ptx)),
              "| other", sum(1 for x in e if x.kind == "other"))
    print("cuobj elf n", len(elf), "set", sorted(set(elf)), "| ptx n", len(ptx), "set", sorted(set(ptx)))
    if e is not None:
        print("MATCH" if (sorted(set(me_elf)) == sorted(set(elf)) and sorted(set(me_ptx)) == sorted(set(ptx))) else "DIFFER",
              "counts", (len(me_elf), len(elf)), (len(me_ptx), len(ptx)))
    if err1.strip():
        print("cuobjdump stderr:", err1)
