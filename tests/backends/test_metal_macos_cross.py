"""The macOS Metal shim without a Mac: cross-built with zig cc (``ziglang``)
for aarch64-macos and x86_64-macos from the macOS build's own source list and
warning flags, then read with LIEF the way ``capshim verify`` checks it on a
Mac (issue 11). What only a Mac can show (arm64e, codesign, dyld, Metal) is
in docs/verified.md ("The Metal shim") and .github/workflows/macos.yml."""

import json
import re
import sys

import pytest
from click.testing import CliRunner

from capshim import macho
from capshim.backends import metal
from capshim.backends.metal import compile as metal_build
from capshim.native.build import run_compiler
from capshim.cli import main
from capshim.errors import UsageError
from capshim.native import build as nb




SLOW = pytest.mark.slow  # zig compiles its libc stubs the first time (about a minute)


@pytest.fixture(scope="module")
def cross():
    return metal.build_cross()


def _by_check(checks):
    return {c["check"]: c for c in checks}


def test_one_source_list_and_the_macos_warning_flags_for_every_build():
    mac_shim, _, mac_probe, _ = metal_build._macos_commands()
    linux = metal_build._linux_commands()
    cross = metal_build._cross_commands()
    for cmd in [mac_shim, mac_probe, *linux, *cross]:
        assert cmd[cmd.index("-std=gnu11"):][:len(nb.WARNINGS) + 1] == ["-std=gnu11", *nb.WARNINGS]
        assert "-Werror" in cmd
    shims = [mac_shim, linux[0], cross[0], cross[2]]
    for cmd in shims:
        assert [a for a in cmd if a.endswith(".c")] == list(metal_build.SHIM_SOURCES)
        assert "-fvisibility=hidden" in cmd
    for cmd in [mac_probe, linux[1], cross[1], cross[3]]:
        assert [a for a in cmd if a.endswith(".c")] == list(metal_build.PROBE_SOURCES)
    assert [c[c.index("-target") + 1] for c in cross[::2]] == ["aarch64-macos.13.0", "x86_64-macos.13.0"]
    assert f"-mmacosx-version-min={metal_build.MACOS_MIN_VERSION}" in mac_shim
    for cmd in (mac_shim, cross[0], cross[2]):
        assert cmd[cmd.index("-install_name") + 1] == metal_build.INSTALL_NAME


@SLOW
def test_cross_build_both_targets_as_verify_would_on_a_mac(cross):
    assert set(cross) == {"shim-arm64", "probe-arm64", "shim-x86_64", "probe-x86_64", "sums"}
    ok, detail = metal.check_sums(cross["sums"].parent)
    assert ok, detail
    for arch in ("arm64", "x86_64"):
        (sl,) = macho.read(cross[f"shim-{arch}"])
        assert (sl.arch, sl.file_type, sl.install_name, sl.min_os) == (arch, "dylib", metal_build.INSTALL_NAME, "13.0.0")
        assert {macho.c_name(x) for x in sl.exports} <= metal_build.MACHO_LINKER_EXPORTS
        imports = {macho.c_name(x) for x in sl.imports}
        assert metal_build.MACHO_OBJC_IMPORTS <= imports and set(metal_build.INTERPOSED) <= imports
        assert set(sl.libraries) == {metal_build.LIBSYSTEM_INSTALL_NAME, metal_build.OBJC_INSTALL_NAME,
                                     metal_build.METAL_INSTALL_NAME}
        bound = {macho.c_name(k): v for k, v in sl.bound_to.items()}
        assert bound["method_setImplementation"] == metal_build.OBJC_INSTALL_NAME  # two-level, as on a Mac
        assert bound["MTLCopyAllDevices"] == metal_build.METAL_INSTALL_NAME
        assert bound["getenv"] == metal_build.LIBSYSTEM_INSTALL_NAME
        assert not any(x in imports for x in ("mach_absolute_time", "clock_gettime", "gettimeofday"))
        assert "__DATA,__interpose" in sl.sections
        assert tuple(macho.c_name(x) for x in sl.interposed) == metal_build.INTERPOSED
        assert sl.signed is (arch == "arm64")  # zig signs arm64 ad hoc; x86_64 needs none
        checks = _by_check(metal.inspect_macho(cross[f"shim-{arch}"]))
        assert checks["arm64e slice"]["status"] == "warning"
        assert "Mac with Xcode" in checks["arm64e slice"]["detail"]
        assert all(c["status"] == "passed" for n, c in checks.items() if n != "arm64e slice"), checks
        (pr,) = macho.read(cross[f"probe-{arch}"])
        assert (pr.arch, pr.file_type) == (arch, "execute")
        assert all(c["status"] == "passed" for c in metal.inspect_macho(cross[f"probe-{arch}"], "probe"))


BAD_SHIM = r"""
#include <time.h>
__attribute__((visibility("default"))) int capshim_test_hook(void) { return 1; }
__attribute__((visibility("default"))) long capshim_now(void)
{ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return (long)t.tv_sec; }
"""


@SLOW
def test_inspection_finds_test_hooks_unexpected_imports_and_no_interpose(tmp_path, cross):
    src = tmp_path / "bad.c"
    src.write_text(BAD_SHIM)
    out = tmp_path / metal.DYLIB_NAME
    run_compiler([sys.executable, "-m", "ziglang", "cc", "-target", "aarch64-macos.13.0",
                        "-dynamiclib", "-install_name", "/tmp/wrong.dylib", str(src), "-o", str(out)])
    checks = _by_check(metal.inspect_macho(out))
    assert checks["arm64: exported symbols"]["status"] == "failed"
    assert "capshim_test_hook" in checks["arm64: exported symbols"]["detail"]
    imp = checks["arm64: imported symbols"]
    assert imp["status"] == "failed" and "unexpected: clock_gettime" in imp["detail"]
    assert "missing: MTLCopyAllDevices" in imp["detail"]
    assert checks["arm64: __DATA,__interpose"]["status"] == "failed"
    assert checks["arm64: install name"]["status"] == "failed"
    assert checks["arm64: linked libraries"]["status"] == "failed"
    assert checks["deny-list strings"]["detail"] == "found clock_gettime"
    # The probe is an executable, not a dylib.
    assert _by_check(metal.inspect_macho(cross["probe-arm64"]))["arm64: file type"]["status"] == "failed"


@SLOW
def test_cli_build_target_macos_says_arm64e_needs_a_mac(cross):
    r = CliRunner().invoke(main, ["build", "--api", "metal", "--target", "macos"])
    assert r.exit_code == 0, r.output
    assert f"metal: shim-arm64: {cross['shim-arm64']}" in r.stdout
    assert re.search(r"metal: shim-arm64: \d+ Mach-O checks passed", r.stdout)
    assert "arm64e" in r.stdout and "can only be built on a Mac with Xcode" in r.stdout
    r = CliRunner().invoke(main, ["build", "--target", "macos"])
    assert r.exit_code == 2 and "--target macos: only with --api metal" in r.stderr


@SLOW
def test_cli_verify_shim_file_checks_a_dylib_built_elsewhere(cross, tmp_path):
    r = CliRunner().invoke(main, ["verify", "--api", "metal", "--json", "--shim", str(cross["shim-x86_64"])])
    assert r.exit_code == 0, r.output
    checks = _by_check(json.loads(r.stdout))
    assert checks["metal: x86_64: __DATA,__interpose"]["status"] == "passed"
    assert checks["metal: signature"]["status"] == "skipped (macOS only)"
    assert checks["metal: answers change on a real Metal device"]["status"] == "skipped (macOS only)"
    elf = metal.build()["shim"]  # the Linux build is ELF
    r = CliRunner().invoke(main, ["verify", "--api", "metal", "--shim", str(elf)])
    assert r.exit_code == 2 and f"--shim {elf}: not a Mach-O file" in r.stderr
    assert "Traceback" not in r.output
    r = CliRunner().invoke(main, ["verify", "--api", "metal", "--shim", str(tmp_path / "none.dylib")])
    assert r.exit_code == 2 and "no such file" in r.stderr
    r = CliRunner().invoke(main, ["verify", "--api", "vulkan", "--shim", str(elf)])
    assert r.exit_code == 2 and "--shim: only with --api metal" in r.stderr
    with pytest.raises(UsageError, match="not a Mach-O file"):
        macho.read(elf)


@pytest.mark.parametrize("module, argv, message", [
    ("ziglang", ["build", "--api", "metal", "--target", "macos"],
     "--target macos needs the zig toolchain: pip install 'capshim[macos]'"),
    ("lief", ["verify", "--api", "metal", "--shim", __file__],
     "reading Mach-O files needs LIEF: pip install 'capshim[macos]'"),
])
def test_a_missing_toolchain_or_reader_is_a_clear_error(monkeypatch, module, argv, message):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    monkeypatch.setitem(sys.modules, module, None)  # import fails as when not installed
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2 and message in r.stderr, r.output
    assert "Traceback" not in r.output


def _universal(slices: list[tuple[int, int, bytes]], out):
    """A fat Mach-O (Apple <mach-o/fat.h>: big-endian fat_header, fat_arch
    entries, slices aligned to 2^14), as lipo -create writes it."""
    import struct

    align = 1 << 14
    header = struct.pack(">II", 0xCAFEBABE, len(slices))
    offset, entries, body = align, b"", b""
    for cpu, sub, data in slices:
        entries += struct.pack(">IIIII", cpu, sub, offset, len(data), 14)
        pad = -len(data) % align
        body += data + b"\0" * pad
        offset += len(data) + pad
    out.write_bytes((header + entries).ljust(align, b"\0") + body)
    return out


@SLOW
def test_verify_reads_every_slice_of_a_universal_file(cross, tmp_path):
    fat = _universal([(0x0100000C, 0, cross["shim-arm64"].read_bytes()),
                      (0x01000007, 3, cross["shim-x86_64"].read_bytes())], tmp_path / metal.DYLIB_NAME)
    assert [s.arch for s in macho.read(fat)] == ["arm64", "x86_64"]
    checks = _by_check(metal.verify(fat))
    assert checks["architectures"]["detail"] == "arm64 x86_64"
    for arch in ("arm64", "x86_64"):
        assert checks[f"{arch}: imported symbols"]["status"] == "passed"
        assert checks[f"{arch}: __DATA,__interpose"]["status"] == "passed"
    assert checks["arm64e slice"]["status"] == "warning"
