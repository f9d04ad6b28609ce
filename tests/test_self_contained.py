"""The suite needs nothing outside the repository (issue 9, item 7): no test reaches beside the clone,
and every fixture folder of copied data says where it came from."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_no_test_reads_outside_the_repository():
    me = Path(__file__).name
    bad = []
    for f in (REPO / "tests").rglob("*.py"):
        if f.name == me:
            continue
        text = f.read_text(encoding="utf-8")
        # the folder beside a developer's checkout, which a user's clone does not have
        outside = "".join(("sha", "red"))
        for needle in ("REPO.parent", "../" + outside, "/work/" + outside):
            if needle in text:
                bad.append(f"{f.relative_to(REPO)}: {needle}")
    assert bad == []


#: Folders that are someone's machine, not the repository or the system a test runs on.
PRIVATE = ("/home/", "/root/", "/work/", "/opt/", "/usr/local/", "~/")


def _skip_reasons(tree) -> list[tuple[int, str]]:
    """``(line, text)`` of the string parts of every skip, skipif, xfail and importorskip reason."""
    import ast

    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if not name.split(".")[-1] in ("skip", "skipif", "xfail", "importorskip"):
            continue
        parts = [kw.value for kw in node.keywords if kw.arg in ("reason", "msg")]
        if name.split(".")[-1] in ("skip", "xfail") and node.args:
            parts.append(node.args[0])
        for part in parts:
            out += [(node.lineno, c.value) for c in ast.walk(part) if isinstance(c, ast.Constant)
                    and isinstance(c.value, str)]
            out += [(node.lineno, ast.unparse(c)) for c in ast.walk(part) if isinstance(c, ast.FormattedValue)]
    return out


def test_no_skip_reason_names_a_folder_outside_the_repository():
    """A skip reason is printed on every run (-ra): it must not show a maintainer's folders (issue 28)."""
    import ast

    bad = []
    for f in (REPO / "tests").rglob("*.py"):
        for line, text in _skip_reasons(ast.parse(f.read_text(encoding="utf-8"))):
            if any(p in text for p in PRIVATE) or text.startswith("/"):
                bad.append(f"{f.relative_to(REPO)}:{line}: {text!r}")
    assert bad == []


def test_no_test_reads_a_private_folder():
    """No test opens a file under a maintainer's folders (fake paths in a command line are fine: those
    are arguments, never read); committed copies live under evidence/ or tests/fixtures/."""
    import re

    me = Path(__file__).name
    bad = []
    for f in (REPO / "tests").rglob("*.py"):
        if f.name == me:
            continue
        for no, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"Path\(\s*[\"'](/home/|/root/|/work/|~/)", line):
                bad.append(f"{f.relative_to(REPO)}:{no}: {line.strip()}")
    assert bad == []


def test_the_suite_runs_without_the_users_gpu_variables():
    """tests/conftest.py unsets, before any test, the variables that would change what the tests see
    (the product's own list, capshim.bench.inherited_env.recorded, and CAPSHIM_*), and keeps the few a
    process needs; a test of environment handling sets its own."""
    import os

    from tests.conftest import KEPT, scrubbed

    for name in ("GGML_VK_VISIBLE_DEVICES", "GGML_VK_DISABLE_F16", "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING",
                 "VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_LAYER_PATH", "VK_INSTANCE_LAYERS",
                 "VK_LOADER_LAYERS_DISABLE", "LD_PRELOAD", "LLAMA_ARG_THREADS", "MESA_VK_DEVICE_SELECT",
                 "CAPSHIM_DB", "CAPSHIM_QUIET", "CAPSHIM_INHERIT"):
        assert scrubbed(name), name
        assert name not in os.environ, f"{name} reached the tests"
    for name in (*KEPT, "PATH", "HOME", "LANG"):
        assert not scrubbed(name), name


def test_copied_fixture_data_names_its_source():
    for d in (REPO / "tests" / "fixtures").iterdir():
        if d.is_dir() and any(p.suffix in (".json", ".stderr", ".jsonl") for p in d.iterdir()):
            # copied data names its source; generated data sits beside the script that makes it
            assert ((d / "SOURCE.md").is_file() or (d / "README.md").is_file()
                    or any(p.suffix == ".py" for p in d.iterdir())), d


def test_no_source_cites_a_design_file_outside_the_repository():
    """The contracts the code relies on live in docs/; comments cite them there."""
    cites = [f"{f.relative_to(REPO)}" for pattern in ("*.py", "*.c", "*.h", "*.m")
             for f in (REPO / "src").rglob(pattern) if "DESIGN.md" in f.read_text(encoding="utf-8", errors="replace")]
    assert cites == []
    for ref in ("contracts.md", "evidence.md", "paths.md", "hostile-inputs.md"):
        assert (REPO / "docs" / ref).is_file(), ref


def test_hostile_inputs_table_names_real_tests():
    """docs/hostile-inputs.md has at least 30 rows, and each test it names exists."""
    import re

    text = (REPO / "docs" / "hostile-inputs.md").read_text(encoding="utf-8")
    rows = [ln for ln in text.splitlines() if re.match(r"^\| \d+ \|", ln)]
    assert len(rows) >= 30
    for path, name in re.findall(r"`(tests/[\w/]+\.py)::(\w+)", text):
        assert f"def {name}(" in (REPO / path).read_text(encoding="utf-8"), f"{path}::{name}"
    for ln in rows:
        assert "tests/" in ln or "same test" in ln, ln


def test_no_source_script_or_doc_names_a_maintainers_folder():
    """What ships (src/, scripts/, docs/, README.md, setup.sh) cites committed files, never a folder of
    the machine it was written on (a user's clone has none of them): a fact measured elsewhere lives
    under evidence/ and is cited there."""
    import re

    needle = re.compile(r"(?<![\w.])/(work|root|home)/")
    bad = []
    files = [REPO / "README.md", REPO / "setup.sh"]
    for top in ("src", "scripts", "docs"):
        files += [f for f in (REPO / top).rglob("*") if f.is_file() and f.suffix in
                  {".py", ".c", ".h", ".m", ".toml", ".md", ".sh", ".map", ".yml", ""}]
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for no, line in enumerate(text.splitlines(), 1):
            if needle.search(line):
                bad.append(f"{f.relative_to(REPO)}:{no}: {line.strip()[:120]}")
    assert bad == []


def test_no_fixture_holds_this_machines_folders():
    """Fixtures copied from a run here (a llama.cpp log) once kept the developer's checkout path
    (``/work/...``): a user's clone has no such folder. Golden files of the committed evidence keep
    the sealed bundles' own recorded ``--out`` paths (the GPU machine's), which are data, not ours."""
    bad = []
    for f in (REPO / "tests" / "fixtures").rglob("*"):
        if not f.is_file() or "golden" in f.parts or f.suffix in (".gguf", ".png", ".so"):
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        bad += [f"{f.relative_to(REPO)}: {p}" for p in ("/work/", "/home/") if p in text]
    assert bad == []
