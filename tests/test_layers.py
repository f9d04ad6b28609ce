"""The package's layers: no import cycle, and each layer imports only what it may.

The import graph is read from the source with :mod:`ast`, imports inside
functions included (an import hidden in a function still couples the modules).
Rules (issue 18, README "Layout"):

- no cycle between capshim modules;
- nothing imports the command line (``capshim.cli``) but the command line;
- the bench (``capshim.bench``) imports neither the studies nor the CLI;
- the exporters (``capshim.export``) read only the summary contract
  (``capshim.summary``) and the shared rules (``capshim.contracts``);
- storage never imports presentation: ``capshim.evidence`` imports neither
  the report, the exporters nor the bench; the results store (``capshim.db``)
  neither the report nor the exporters (it compares through the analysis);
- the shared rules (``capshim.contracts``) import only ``capshim.errors``;
- no module over 650 lines and no function over 100 lines (generated files
  and migrations aside).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path


SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "capshim"
MAX_MODULE_LINES = 650
MAX_FUNCTION_LINES = 100
#: Generated or data-like modules the size limits do not apply to.
SIZE_EXEMPT = ("capshim/db/migrations/",)


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(mod: str, path: Path) -> set[str]:
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("capshim"):
                t = _target(name)
                if t and t != mod:
                    found.add(t)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _under(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def _cycles() -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components; the graph is small
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return out


def _offending(importer: str, allowed) -> list[str]:
    bad = []
    for mod, deps in sorted(GRAPH.items()):
        if not _under(mod, importer):
            continue
        bad += [f"{mod} imports {d}" for d in sorted(deps) if not allowed(mod, d)]
    return bad


def test_the_graph_is_read():
    # a sanity check that can fail: the CLI imports the bench
    assert any(_under(d, "capshim.bench") for d in GRAPH["capshim.cli"] | {
        d for m, deps in GRAPH.items() if _under(m, "capshim.cli") for d in deps})


def test_no_import_cycle():
    assert _cycles() == []


def test_nothing_imports_the_cli():
    assert _offending("capshim", lambda m, d: not _under(d, "capshim.cli") or _under(m, "capshim.cli")) == []


def test_the_bench_imports_neither_studies_nor_cli():
    assert _offending("capshim.bench", lambda m, d: not (_under(d, "capshim.studies") or _under(d, "capshim.cli"))) == []


def test_exporters_read_only_the_summary_contract():
    ok = ("capshim.export", "capshim.summary", "capshim.contracts", "capshim.errors")
    assert _offending("capshim.export", lambda m, d: any(_under(d, p) for p in ok)) == []


PRESENTATION = ("capshim.report", "capshim.export", "capshim.cli", "capshim.studies")


def test_evidence_stores_and_never_presents():
    """The bench hands its finalize steps to the bundle: evidence imports no report, export or analysis."""
    banned = (*PRESENTATION, "capshim.bench")
    assert _offending("capshim.evidence", lambda m, d: not any(_under(d, b) for b in banned)) == []


def test_the_store_never_imports_presentation():
    """The results store reads bundles through the summary contract; its comparisons use the
    bench's analysis (the same intervals as a report), never the report or the exporters."""
    assert _offending("capshim.db", lambda m, d: not any(_under(d, b) for b in PRESENTATION)) == []


def test_contracts_import_only_errors():
    assert _offending("capshim.contracts",
                      lambda m, d: _under(d, "capshim.contracts") or d == "capshim.errors") == []


def _sized():
    for mod, path in sorted(MODULES.items()):
        rel = path.relative_to(SRC).as_posix()
        if not any(rel.startswith(e) for e in SIZE_EXEMPT):
            yield mod, path


def test_no_module_over_650_lines():
    big = {m: n for m, p in _sized() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert big == {}


def test_no_function_over_100_lines():
    long = []
    for mod, path in _sized():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{mod}.{node.name}: {n} lines")
    assert long == []


# ---- native C (issue 29) --------------------------------------------------------------------
# - no hand-written C source or header under native/ over MAX_C_LINES lines (the generated key
#   tables aside): 800 is above the largest file that holds one job today (metal/metal_shim.c,
#   763: the Metal interposition table and its runtime lookups) and below the Vulkan layer
#   before its split (layer.c, 931 lines, five jobs); the split layer files stay under 250;
# - native/common holds no API-specific include: its quoted includes name its own files (or
#   fuzz_keys.h, the keyspec hook each shim folder supplies to the fuzz driver), its system
#   includes no API's headers.

NATIVE = PKG / "native"
MAX_C_LINES = 800
#: Generated from the capability table (python -m capshim.profiles.generate), not written by hand.
C_GENERATED = {"vulkan/caps_table.h", "cuda/cuda_table.h", "common/config_limits.h"}
#: The one header common/ includes that each shim supplies (its keyspec for fuzz_config.c).
COMMON_HOOKS = {"fuzz_keys.h"}
_INCLUDE = re.compile(r"\s*#\s*include\s*(.*)")
_API_SYSTEM = re.compile(r"<(vulkan|Metal|Foundation|CoreFoundation|objc|cuda|nvml)", re.IGNORECASE)


def _c_files():
    return sorted(p for p in NATIVE.rglob("*") if p.suffix in (".c", ".h", ".m"))


def test_no_c_source_over_800_lines():
    assert _c_files(), "no C sources found under native/"
    big = {p.relative_to(NATIVE).as_posix(): n for p in _c_files()
           if p.relative_to(NATIVE).as_posix() not in C_GENERATED
           and (n := len(p.read_text().splitlines())) > MAX_C_LINES}
    assert big == {}


def test_the_c_size_rule_catches_the_unsplit_layer():
    """The rule would have refused the layer before its split (931 lines, one file)."""
    layer = sorted(NATIVE.glob("vulkan/layer*.c"))
    assert len(layer) >= 4 and sum(len(p.read_text().splitlines()) for p in layer) > MAX_C_LINES


def test_native_common_holds_no_api_specific_include():
    common = NATIVE / "common"
    own = {p.name for p in common.iterdir()}
    api_files = {p.name for d in NATIVE.iterdir() if d.is_dir() and d.name != "common" for p in d.iterdir()}
    bad = []
    for path in sorted(common.iterdir()):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = _INCLUDE.match(line)
            if not m:
                continue
            target = m[1].split("/*")[0].strip()
            name = target.strip('<>"')
            if target.startswith('"') and name in own | COMMON_HOOKS and name not in api_files - COMMON_HOOKS:
                continue
            if target.startswith("<") and not _API_SYSTEM.match(target):
                continue
            bad.append(f"common/{path.name}:{n}: {line.strip()}")
    assert bad == []


def test_every_shim_that_builds_the_fuzz_driver_supplies_its_keyspec():
    from capshim.backends import cuda, vulkan
    from capshim.native import build as nb

    assert sorted(p.name for p in (NATIVE / "common").iterdir() if p.is_file()) == sorted(nb.COMMON_FILES)
    for api, sources in (("vulkan", vulkan.SOURCES), ("cuda", cuda.SOURCES)):
        assert "fuzz_keys.h" in sources and (NATIVE / api / "fuzz_keys.h").is_file(), api


# ---- exit codes by name (issue 29) ----------------------------------------------------------
# The command line never writes an exit code as a number: sys.exit, SystemExit, ctx.exit and
# exit_code= take the names of capshim.errors (EXIT_*) or a computed value (signals.exit_code).

def _numeric_exits(text: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        args = list(node.args[:1]) if called in ("exit", "SystemExit", "Exit") else []
        args += [k.value for k in node.keywords if k.arg == "exit_code"]
        found += [f"{name}:{node.lineno}: {ast.unparse(node)[:60]}" for a in args
                  if isinstance(a, ast.Constant) and isinstance(a.value, int)]
    return found


def test_the_cli_names_its_exit_codes():
    cli = sorted((PKG / "cli").rglob("*.py"))
    assert cli
    assert [line for p in cli for line in _numeric_exits(p.read_text(), p.name)] == []


def test_the_exit_code_check_finds_a_number():
    text = "import sys\nsys.exit(5)\nraise SystemExit(1)\nE('x', exit_code=3)\nsys.exit(EXIT_OK)\n"
    assert [line.split(":")[1] for line in _numeric_exits(text, "x.py")] == ["2", "3", "4"]


# ---- arm states and their words in one place (issue 29) -------------------------------------
# capshim.summary names each state and writes what it means (arm_reason, explain_arm,
# STATE_WORDS); the bench's plan, the CLI and the studies spell no state as a literal.

def _state_literals(path: Path) -> list[str]:
    from capshim.summary import NATIVE, STATES
    words = set(STATES) - {NATIVE}  # "native" is also the stock arm's name, a different fact
    return [f"{path.relative_to(SRC)}:{n.lineno}: {n.value!r}" for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and n.value in words]


def test_arm_states_are_spelled_in_the_summary_contract_only():
    files = [PKG / "bench" / "plan.py", PKG / "cli" / "bench.py", PKG / "studies" / "kernels.py",
             PKG / "studies" / "common.py"]
    assert [line for p in files for line in _state_literals(p)] == []
    assert _state_literals(PKG / "summary.py")  # the checker sees them where they are defined
