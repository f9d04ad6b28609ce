"""scripts/cuda-clients/table.py on the stand-in runtime (issue 27 item 4, the CPU side).

The table runs every client that is installed here as its own `capshim run` process, stock and
under each built-in CUDA profile, and seals its folder as a ``cuda-clients`` study. Here (no GPU)
the clients are the runtime through ctypes, the C extension module built at run time and
imported normally (dlopen RTLD_LOCAL), and pynvml (no NVML here unless a stand-in provides one);
the others are skipped by name. On the H200 the same script runs with scripts/cuda-clients/h200.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from capshim import folder_readme, profiles
from capshim.backends import cuda
from capshim.evidence import study
from tests.conftest import REPO, run_capshim

TABLE = REPO / "scripts" / "cuda-clients" / "table.py"
PROFILES = [n for n in profiles.builtin_names() if profiles.load(n).api == "cuda"]
FACTS = ("computeCapability", "multiProcessorCount", "sharedMemPerBlockOptin", "sharedMemPerMultiprocessor",
         "deviceName")
#: The stand-in driver's answers (native/cuda/standin_cuda.c: an H200).
H200 = {"computeCapability": 90, "multiProcessorCount": 132, "sharedMemPerBlockOptin": 232448,
        "sharedMemPerMultiprocessor": 233472, "deviceName": "NVIDIA H200"}


def _table(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TABLE), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """One run of the table on the stand-ins: (folder, clients.json)."""
    cuda.build()
    out = tmp_path_factory.mktemp("clients") / "t"
    p = _table("--out", str(out), "--standins", "--clients", "ctypes,ext,pynvml,torch,jax,nvidia-smi", "--jobs", "2")
    assert p.returncode == 0, p.stderr
    return out, json.loads((out / "clients.json").read_text())


def _cells(doc, client, arm):
    return [c for c in doc["cells"] if c["client"] == client and c["arm"] == arm]


def _expect(arm: str) -> dict:
    """The expected answers, written out from the profile files here: min(H200, profile)."""
    if arm == "stock":
        return H200
    caps = profiles.load(arm).capabilities
    return {k: (min(v, caps[k]) if k in caps else v) for k, v in H200.items()}


def test_the_folder_verifies_as_a_cuda_clients_study(table):
    out, doc = table
    assert study.verify(out) == []
    assert study.read_study(out)["kind"] == "cuda-clients" and study.read_study(out)["bundles"] == []
    r = run_capshim("evidence", "verify", str(out))
    assert r.returncode == 0 and "a study without nested bundles" in r.stdout, r.stderr
    assert doc["arms"] == ["stock", *PROFILES]


def test_the_expected_values_are_min_of_device_and_profile(table):
    _out, doc = table
    for arm in doc["arms"]:
        assert doc["expected"][arm] == _expect(arm), arm
    assert doc["expected"]["t4-class"]["computeCapability"] == 75


@pytest.mark.parametrize("arm", ["stock", *PROFILES])
def test_ctypes_sees_every_fact_as_the_profile_says(table, arm):
    _out, doc = table
    cells = _cells(doc, "ctypes", arm)
    assert {c["fact"] for c in cells} == set(FACTS)
    for c in cells:
        assert c["agrees"] is True and c["value"] == _expect(arm)[c["fact"]], c
    run = next(r for r in doc["runs"] if r["arm"] == arm and r["client"] == "ctypes")
    assert run["shim"]["state"] == ("absent" if arm == "stock" else "active"), run


def test_the_extension_module_stock_agrees(table):
    _out, doc = table
    cells = _cells(doc, "ext", "stock")
    assert {c["fact"].split(" ")[0] for c in cells} == set(FACTS)
    assert all(c["agrees"] is True for c in cells), cells
    assert doc["ext_build"]["built"] is True and "-l:libcudart.so.13" in doc["ext_build"]["command"]


@pytest.mark.parametrize("arm", PROFILES)
def test_the_extension_module_imported_rtld_local_sees_the_profile(table, arm):
    _out, doc = table
    cells = _cells(doc, "ext", arm)
    assert cells and all(c["agrees"] is True for c in cells), [(c["fact"], c["value"], c["why"]) for c in cells]


def test_pynvml_agrees_through_the_standin_nvml(table):
    """Through the stand-in libnvidia-ml.so.1 (issue 27 item 2) every pynvml cell agrees with the
    profile; pynvml itself is a test dependency (nvidia-ml-py), so it may not be skipped here."""
    _out, doc = table
    assert "pynvml" not in doc["skipped"], doc["skipped"]
    assert (cuda.build().standin / "libnvidia-ml.so.1").is_file()
    for arm in doc["arms"]:
        cells = _cells(doc, "pynvml", arm)
        assert cells
        for c in cells:
            assert c["agrees"] is True, c


def test_clients_that_are_not_here_are_skipped_by_name(table):
    out, doc = table
    asked = {"ctypes", "ext", "pynvml", "torch", "jax", "nvidia-smi"}
    assert set(doc["clients"]) | set(doc["skipped"]) == asked and not set(doc["clients"]) & set(doc["skipped"])
    assert "nvidia-smi" in doc["skipped"]  # the stand-ins have no nvidia-smi
    md = (out / "clients.md").read_text()
    for name, why in doc["skipped"].items():
        assert f"- {name}: {why}" in md
        assert not (out / "raw" / "stock" / f"{name}.json").exists()
    for name in doc["clients"]:
        for arm in doc["arms"]:
            assert (out / "raw" / arm / f"{name}.json").is_file() and (out / "raw" / arm / f"{name}.stderr").is_file()


def test_the_markdown_reads_at_80_columns_and_says_why_a_cell_is_empty(table):
    out, doc = table
    md = (out / "clients.md").read_text()
    assert max(len(line) for line in md.splitlines()) <= 80, md
    assert f"{doc['counts']['agree']} cells agree" in md
    assert sum(doc["counts"].values()) == len(doc["cells"])
    for c in doc["cells"]:
        if c["agrees"] is None:
            assert c["why"] and f"{c['client']}: {c['why']}"[:60] in md.replace("\n    ", " "), c
    readme = folder_readme.render(out)
    assert "a `cuda-clients` study folder without nested bundles" in readme and "| ctypes | cc |" in readme


def test_a_changed_or_planted_file_does_not_verify(table, tmp_path):
    out, _doc = table
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "raw" / "stock" / "ctypes.json").write_text("{}\n")
    (copy / "raw" / "stock" / "extra.txt").write_text("x")
    problems = study.verify(copy)
    assert "raw/stock/ctypes.json: checksum mismatch" in problems
    assert "raw/stock/extra.txt: not listed in SHA256SUMS" in problems


@pytest.mark.parametrize("args, words", [
    (["--profiles", "vulkan-paravirt"], "--profiles vulkan-paravirt: not a CUDA profile"),
    (["--profiles", "t4-clas"], "--profiles"),
    (["--clients", "tensorflow"], "--clients tensorflow: unknown client"),
])
def test_bad_usage_is_one_line_exit_2(tmp_path, args, words):
    p = _table("--out", str(tmp_path / "o"), *args, timeout=120)
    assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "o").exists()


def test_a_non_empty_out_is_refused(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "x").write_text("")
    p = _table("--out", str(tmp_path / "o"), "--standins", timeout=120)
    assert p.returncode == 2 and "exists and is not empty" in p.stderr and "Traceback" not in p.stderr, p.stderr


#: A cuda_runtime_api.h as the toolkit's (CUDA 13's member offsets, evidence/h200-cuda-shim-checks/
#: cudaDeviceProp-offsets-cuda13.txt): the ext client compiled "with the CUDA headers", as on the H200.
FAKE_HEADER = """#define CUDART_VERSION  13000
typedef int cudaError_t;
struct cudaDeviceProp { char name[256]; char p0[104]; int major; int minor; char p1[16]; int multiProcessorCount;
  char p2[236]; unsigned long sharedMemPerMultiprocessor; char p3[40]; unsigned long sharedMemPerBlockOptin;
  char p4[328]; };
_Static_assert(sizeof(struct cudaDeviceProp) == 1008, "CUDA 13 size");
_Static_assert(__builtin_offsetof(struct cudaDeviceProp, sharedMemPerBlockOptin) == 672, "CUDA 13 offset");
cudaError_t cudaRuntimeGetVersion(int *);
cudaError_t cudaDeviceGetAttribute(int *, int, int);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *, int);
"""


@pytest.mark.parametrize("how, words", [
    ("library", "struct read with the CUDA 13 offsets, loaded with ctypes.CDLL"),
    ("headers", "struct read with the CUDA headers"),
])
def test_the_ext_client_other_builds_agree_stock(tmp_path, how, words):
    """Without Python.h the ext client is a plain library loaded with ctypes.CDLL (RTLD_LOCAL as well);
    with a toolkit's header it reads struct cudaDeviceProp by member names."""
    extra = ["--ext", "library"] if how == "library" else ["--cuda-include", str(tmp_path / "inc")]
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "cuda_runtime_api.h").write_text(FAKE_HEADER)
    p = _table("--out", str(tmp_path / "o"), "--standins", "--clients", "ext", "--profiles", "t4-class", *extra)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "o" / "clients.json").read_text())
    assert doc["ext_build"]["mode"] == ("library" if how == "library" else "module")
    assert doc["versions"]["ext"] == f"runtime 13000 ({words})"
    cells = _cells(doc, "ext", "stock")
    assert len(cells) == 7 and all(c["agrees"] is True for c in cells), cells


def test_a_spent_budget_is_recorded_not_run_and_the_table_still_seals(tmp_path):
    p = _table("--out", str(tmp_path / "o"), "--standins", "--clients", "ctypes", "--budget", "0.01")
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "o" / "clients.json").read_text())
    assert {c["why"] for c in doc["cells"]} == {"not run: the table's --budget was spent"}
    assert study.verify(tmp_path / "o") == []


def test_a_profile_file_is_an_arm_named_by_its_profile(tmp_path):
    """--profiles takes a TOML file as `capshim run --profile` does; its arm (and raw/ folder) is the
    profile's name, and the expected answers are that profile's."""
    text = (REPO / "src/capshim/profiles/builtin/t4-class.toml").read_text()
    f = tmp_path / "volta.toml"
    f.write_text(text.replace('name = "t4-class"', 'name = "my-volta"').replace('"7.5"', '"7.0"'))
    p = _table("--out", str(tmp_path / "o"), "--standins", "--clients", "ctypes", "--profiles", str(f))
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "o" / "clients.json").read_text())
    assert doc["arms"] == ["stock", "my-volta"] and doc["expected"]["my-volta"]["computeCapability"] == 70
    assert [c["value"] for c in _cells(doc, "ctypes", "my-volta") if c["fact"] == "computeCapability"] == [70]
    assert study.verify(tmp_path / "o") == []


def _table_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("cuda_clients_table", TABLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_nvidia_smis_line_is_read_or_its_failure_said():
    """nvidia-smi is launched by `capshim run` itself (a child of a Python client would be stock)."""
    parse = _table_module()._parse_smi
    assert parse("7.5, NVIDIA H200\n", 0)["facts"] == {"computeCapability": {"value": 75},
                                                       "deviceName": {"value": "NVIDIA H200"}}
    failed = parse("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", 9)
    assert failed["facts"] == {} and failed["why"].startswith("nvidia-smi exited 9: NVIDIA-SMI has failed")
    assert "is not MAJOR.MINOR" in parse("[N/A], NVIDIA H200\n", 0)["facts"]["computeCapability"]["error"]


def test_a_huge_stderr_is_kept_bounded():
    mod = _table_module()
    text = "".join(f"FATAL line {i}\n" for i in range(100_000))
    kept = mod._bounded(text)
    assert len(kept) < mod.STDERR_KEEP + 200 and kept.startswith("FATAL line 0\n") and kept.endswith("99999\n")
    assert "characters left out here" in kept and mod._bounded("short") == "short"
