"""The output rule (capshim.contracts.output) and the quoting of printed commands (contracts.pasteable).

Issue 29 item 5: writers followed links out of their folder, waited forever on a FIFO, wrote into a
sealed bundle or replaced an input of the same command. Each refusal is checked here on the rule
itself and through commands that write (report -o/--chart, db matrix -o, db trend --chart, profile
from-host/capture -o, evidence sign, man --out).
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import subprocess
import sys

import pytest
from click.testing import CliRunner

from capshim.cli import main
from capshim.contracts import output, pasteable
from capshim.errors import EXIT_STORAGE, EXIT_USAGE, CapshimError, UsageError
from tests.conftest import REPO, run_capshim
from tests.test_report import _sealed_bundle

CAPTURE = REPO / "tests" / "fixtures" / "metal"


def _cli(*args, env=None):
    r = CliRunner().invoke(main, [str(a) for a in args], env=env)
    assert "Traceback" not in r.output
    return r.exit_code, r.output


def _left(folder):
    """Names in ``folder`` (temporary files included: the rule must leave none)."""
    return sorted(os.listdir(folder))


# ---- the rule itself ------------------------------------------------------------------------------

def test_a_new_file_is_written_whole_and_an_existing_one_only_when_asked(tmp_path):
    f = tmp_path / "out.md"
    assert output.write_file(f, b"one\n", "-o") == f and f.read_bytes() == b"one\n"
    with pytest.raises(UsageError, match=r"-o .*out.md: exists; pass --force to replace it"):
        output.write_file(f, b"two\n", "-o")
    assert f.read_bytes() == b"one\n"
    output.write_file(f, b"two\n", "-o", replace=True)
    assert f.read_bytes() == b"two\n" and _left(tmp_path) == ["out.md"]
    with pytest.raises(UsageError, match="does not overwrite it"):
        output.write_file(f, b"3", "-o", replace_flag=None)


def test_a_link_is_never_written_through(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep\n")
    link = tmp_path / "out.md"
    link.symlink_to(target)
    for replace in (False, True):
        with pytest.raises(UsageError, match="is a symbolic link"):
            output.write_file(link, b"x", "-o", replace=replace)
    assert target.read_text() == "keep\n" and link.is_symlink()
    dangling = tmp_path / "d.md"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(UsageError, match="is a symbolic link"):
        output.write_file(dangling, b"x", "-o", replace=True)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_only_regular_files_are_written(tmp_path, kind):
    """A FIFO is refused after lstat, never opened: the call returns at once (a subprocess with a timeout
    proves it, so a broken rule fails the test instead of hanging it)."""
    target = {"fifo": tmp_path / "p", "device": "/dev/null", "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    code = ("import sys; from capshim.contracts import output\n"
            "try:\n output.write_file(sys.argv[1], b'x', '-o', replace=True)\n"
            "except Exception as e:\n print(type(e).__name__, e); sys.exit(e.exit_code)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    r = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == EXIT_USAGE, r.stdout + r.stderr
    want = {"fifo": "is a FIFO", "device": "is a device", "folder": "is a folder"}[kind]
    assert want in r.stdout


def test_never_inside_a_sealed_folder_unless_it_is_the_file_a_seal_takes(tmp_path):
    b = _sealed_bundle(tmp_path)
    with pytest.raises(UsageError, match="inside the sealed folder"):
        output.write_file(b / "new.md", b"x", "--chart")
    link = tmp_path / "into"
    link.symlink_to(b)  # a link in the folder part that leads into the sealed bundle
    with pytest.raises(UsageError, match="inside the sealed folder"):
        output.write_file(link / "new.md", b"x", "--chart")
    assert not (b / "new.md").exists()
    output.write_file(b / "attestations.intoto.jsonl", b"{}\n", sealed_ok=True, replace=True)
    assert (b / "attestations.intoto.jsonl").read_bytes() == b"{}\n"


def test_never_over_an_input_nor_the_store(tmp_path):
    src = tmp_path / "in.json"
    src.write_text("{}")
    hard = tmp_path / "hard.json"
    os.link(src, hard)
    for target in (src, hard):  # the same file by another name too (st_dev, st_ino)
        with pytest.raises(UsageError, match="an input of this command"):
            output.write_file(target, b"x", "-o", replace=True, inputs=[str(src)])
    folder = tmp_path / "bundle"
    folder.mkdir()
    with pytest.raises(UsageError, match="inside .*an input of this command"):
        output.write_file(folder / "r.md", b"x", "-o", inputs=[folder])
    store = tmp_path / "r.sqlite"
    store.write_bytes(b"SQLite")
    with pytest.raises(UsageError, match="the results store"):
        output.write_file(store, b"x", "-o", replace=True, store=store)
    assert src.read_text() == "{}" and store.read_bytes() == b"SQLite"


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
@pytest.mark.parametrize("replace", [False, True])
def test_a_failed_write_is_exit_4_naming_the_file_and_leaves_nothing(tmp_path, monkeypatch, err, replace):
    f = tmp_path / "out.md"
    if replace:
        f.write_text("old\n")

    def failing(fd, data):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(output.os, "write", failing)
    with pytest.raises(CapshimError) as info:
        output.write_file(f, b"new\n", "--output", replace=replace)
    assert info.value.exit_code == EXIT_STORAGE
    assert f"--output {f}: cannot write: {os.strerror(err)}" in str(info.value)
    assert _left(tmp_path) == (["out.md"] if replace else [])
    if replace:
        assert f.read_text() == "old\n"


def test_a_file_that_appears_meanwhile_is_not_replaced(tmp_path, monkeypatch):
    f = tmp_path / "out.md"
    real = output.os.write

    def racing(fd, data):
        f.write_text("theirs\n")  # another process creates the file while capshim writes
        return real(fd, data)

    monkeypatch.setattr(output.os, "write", racing)
    with pytest.raises(UsageError, match="appeared while capshim wrote"):
        output.write_file(f, b"mine\n", "-o")
    assert f.read_text() == "theirs\n" and _left(tmp_path) == ["out.md"]


# ---- through the commands -------------------------------------------------------------------------

def test_report_output_existing_needs_force_and_a_link_is_refused(tmp_path):
    b = _sealed_bundle(tmp_path)
    out = tmp_path / "r.md"
    assert _cli("report", b, "-o", out)[0] == 0 and (tmp_path / "r.png").is_file()
    code, text = _cli("report", b, "-o", out)
    assert code == 2 and "exists; pass --force" in text
    assert _cli("report", b, "-o", out, "--force")[0] == 0
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    link = tmp_path / "l.md"
    link.symlink_to(victim)
    code, text = _cli("report", b, "-o", link, "--chart", tmp_path / "c.png", "--force")
    assert code == 2 and "is a symbolic link" in text and victim.read_text() == "keep\n"
    assert not (tmp_path / "c.png").exists()  # refused before anything was written


def test_report_output_over_an_input_is_refused(tmp_path):
    from tests._report_paths import FIXTURES

    arm = tmp_path / "stock.json"
    arm.write_bytes((FIXTURES / "cua" / "tiny-stock-minimal.json").read_bytes())
    before = arm.read_bytes()
    code, text = _cli("report", "--arm", f"stock={arm}", "-o", arm, "--format", "csv", "--force")
    assert code == 2 and "an input of this command" in text and arm.read_bytes() == before


def test_report_into_a_fifo_returns_at_once(tmp_path):
    b = _sealed_bundle(tmp_path)
    fifo = tmp_path / "out.md"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    r = subprocess.run([sys.executable, "-m", "capshim.cli", "report", str(b), "-o", str(fifo), "--force"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "is a FIFO" in r.stderr, r.stderr
    assert not (tmp_path / "out.png").exists()


def test_report_on_a_full_disk_is_exit_4_and_leaves_the_old_file(tmp_path, monkeypatch):
    b = _sealed_bundle(tmp_path)
    out = tmp_path / "r.md"
    out.write_text("old\n")

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output.os, "write", full)
    code, text = _cli("report", b, "-o", out, "--format", "md", "--chart", tmp_path / "c.png", "--force")
    assert code == 4 and "c.png: cannot write: No space left on device" in text
    assert out.read_text() == "old\n" and sorted(os.listdir(tmp_path)) == ["B", "r.md"]


def test_db_matrix_output_never_over_the_store(tmp_path):
    store = tmp_path / "r.sqlite"
    assert _cli("db", "--db", store, "list")[0] == 0
    before = store.read_bytes()
    code, text = _cli("db", "matrix", "--db", store, "-o", store, "--force")
    assert code == 2 and "the results store" in text and store.read_bytes() == before
    link = tmp_path / "m.md"
    link.symlink_to(store)
    code, text = _cli("db", "matrix", "--db", store, "-o", link, "--force")
    assert code == 2 and "is a symbolic link" in text and store.read_bytes() == before
    code, text = _cli("db", "matrix", "--db", store, "-o", tmp_path / "m.txt")  # allowed: the empty store speaks
    assert code == 2 and "no bundle in the store matches" in text and not (tmp_path / "m.txt").exists()


def test_db_trend_chart_inside_a_sealed_bundle_is_refused(tmp_path):
    b = _sealed_bundle(tmp_path)
    code, text = _cli("db", "trend", "vm-unlocked", "--db", tmp_path / "r.sqlite", "--chart", b / "t.png")
    assert code == 2 and "inside the sealed folder" in text and not (b / "t.png").exists()


def test_profile_from_host_output_over_its_capture_or_an_existing_file(tmp_path):
    cap = tmp_path / "host.json"
    cap.write_text(json.dumps({"not": "a capture"}))
    code, text = _cli("profile", "from-host", cap, "-o", cap)
    assert code == 2 and "an input of this command" in text and json.loads(cap.read_text()) == {"not": "a capture"}
    fifo = tmp_path / "p.toml"
    os.mkfifo(fifo)
    code, text = _cli("profile", "from-host", cap, "-o", fifo)  # refused before the FIFO is opened
    assert code == 2 and "is a FIFO" in text


def test_evidence_sign_never_writes_through_a_linked_attestation(tmp_path):
    b = _sealed_bundle(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (b / "attestations.intoto.jsonl").symlink_to(victim)
    key = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=60)
    code, text = _cli("evidence", "sign", b, "--key", key)
    assert code != 0 and victim.read_text() == "keep\n", text


def test_man_out_is_quoted_when_printed(tmp_path):
    folder = tmp_path / "my man's $pages"
    r = CliRunner().invoke(main, ["man", "--out", str(folder)])
    assert r.exit_code == 0, r.output
    printed = r.output.split("(read one: ", 1)[1].rsplit(")", 1)[0]
    assert shlex.split(printed) == ["man", "-l", str(folder / "capshim.1")]
    assert (folder / "capshim.1").is_file()
    assert CliRunner().invoke(main, ["man", "--out", str(folder)]).exit_code == 0  # its own pages: replaced


# ---- printed commands -----------------------------------------------------------------------------

def test_a_printed_command_parses_back_to_its_argv():
    argv = ["capshim", "evidence", "verify", "a b/it's $HOME `x`"]
    assert shlex.split(pasteable.command(*argv)) == argv
    assert pasteable.command("capshim", "evidence", "verify", "plain/B") == "capshim evidence verify plain/B"


def test_a_verify_hint_in_an_error_runs_as_printed(tmp_path):
    """``... does not verify (capshim evidence verify FOLDER)`` with a quote, a space and a $ in FOLDER."""
    b = _sealed_bundle(tmp_path)
    odd = tmp_path / "it's a $bundle"
    b.rename(odd)
    (odd / "summary.json").write_text("{}")  # no longer what was sealed
    code, text = _cli("report", odd)
    assert code == 2, text
    hint = " ".join(text.split()).split("does not verify (", 1)[1].split("):", 1)[0]
    assert shlex.split(hint) == ["capshim", "evidence", "verify", str(odd)]


def test_a_printed_command_is_never_wrapped_inside():
    """A message wrapped at 80 columns moves a command for pasting whole to a line of its own."""
    from capshim.contracts import messages

    odd = "/data/" + "a long folder name " * 4 + "it's $HOME"
    cmd = pasteable.command("capshim", "evidence", "verify", odd, "--signers", "FILE")
    text = messages.format_message(f"sealed: {odd}/SHA256SUMS (check it: {cmd})", limit=80)
    line = next(x for x in text.splitlines() if "capshim evidence verify" in x)
    assert shlex.split(line.strip().removeprefix("(check it: ").removesuffix(")")) == \
        ["capshim", "evidence", "verify", odd, "--signers", "FILE"]
    short = pasteable.command("capshim", "evidence", "verify", "B")
    assert messages.format_message(f"(check it: {short})", limit=80) == "capshim: (check it: capshim evidence verify B)"


def test_status_file_and_seal_study_are_refused_inside_a_sealed_folder(tmp_path):
    b = _sealed_bundle(tmp_path)
    code, text = _cli("run", "--status-file", b / "s.jsonl", "--", "true")
    assert code == 2 and "inside the sealed folder" in text and not (b / "s.jsonl").exists()
    (b / "raw" / "sub").mkdir()  # a folder with no seal of its own, inside a sealed one
    code, text = _cli("evidence", "seal-study", b / "raw" / "sub", "--kind", "ablate")
    assert code == 2 and "inside the sealed folder" in text
    assert not (b / "raw" / "sub" / "SHA256SUMS").exists()


def test_a_run_output_copied_into_the_bundle_never_follows_a_link(tmp_path):
    import tempfile

    from capshim.bench import runs

    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    dst = tmp_path / "arm-1.stdout"
    dst.symlink_to(victim)
    with tempfile.TemporaryFile() as fh:
        fh.write(b"output")
        with pytest.raises(OSError):
            runs._copy_output(fh, dst)
    assert victim.read_text() == "keep\n"


def test_launchagent_dry_run_commands_run_as_printed(tmp_path):
    home = tmp_path / "h o'me $x"
    home.mkdir()
    r = CliRunner().invoke(main, ["launchagent", "install", "--profile", "metal-apple9", "--label", "com.x.y",
                                  "--dry-run", "--", "/bin/true"], env={"HOME": str(home)})
    assert r.exit_code == 0, r.output
    lines = [x.removeprefix("#   ") for x in r.output.splitlines() if x.startswith("#   ")]
    plist = str(home / "Library" / "LaunchAgents" / "com.x.y.plist")
    assert shlex.split(lines[0]) == ["plutil", "-lint", plist]
    assert shlex.split(lines[-1])[-1] == plist


def test_a_results_store_inside_a_sealed_folder_is_refused(tmp_path):
    b = _sealed_bundle(tmp_path)
    before = sorted(p.name for p in b.iterdir())
    code, text = _cli("db", "add", b, "--db", b / "r.sqlite")
    assert code == 2 and "inside the sealed folder" in text
    assert sorted(p.name for p in b.iterdir()) == before


#: Modules that may write a file without contracts.output, and why: each writes only inside a folder
#: capshim made for itself (a temporary or staging folder, the cache, a run's private files), never at a
#: path a user named.
OWN_FOLDERS_ONLY = {
    "src/capshim/contracts/output.py": "the rule itself",
    "src/capshim/paths.py": "atomic_write: the cache and a new bundle's own files (mkstemp + os.replace)",
    "src/capshim/contracts/messages.py": "os.devnull in place of a failed standard stream",
    "src/capshim/cli/app.py": "os.devnull in place of a closed standard stream",
    "src/capshim/backends/vulkan.py": "the build's staging folder and a verify's temporary folder",
    "src/capshim/backends/cuda.py": "the build's staging folder and a verify's temporary folder",
    "src/capshim/backends/metal/compile.py": "the build's staging folder",
    "src/capshim/evidence/sshsig.py": "ssh-keygen's input files in a TemporaryDirectory",
    "src/capshim/bench/workloads/ncnn_worker.py": "the workload's synthetic network in its cache folder",
    "src/capshim/bench/workloads/builtin_worker.py": "its own stdout descriptor",
    "src/capshim/bench/runs.py": "a run's output copied into the bundle: O_NOFOLLOW, O_NONBLOCK, regular only",
    "src/capshim/bench/llamacpp_build.py": "the llama-bench build's log and binary in the cache",
    "src/capshim/launch.py": "--status-file: O_NOFOLLOW, O_NONBLOCK, regular only (the shims append to it)",
    "src/capshim/bench/templates.py": "a template's log in the bench's own run folder",
    "src/capshim/beyond.py": "appends to that status file: O_NOFOLLOW, O_NONBLOCK, regular only",
}
_RAW_WRITE = __import__("re").compile(
    r"\.write_text\(|\.write_bytes\(|open\([^)]*[\"'](?:w|a|x)b?\+?[\"']|shutil\.copy|os\.open\([^)]*O_(?:WRONLY|RDWR)"
    r"|savefig\((?!buf)")


def test_every_writer_goes_through_the_output_rule():
    """The one way to write a file at a user's path is contracts.output: any other raw write is in a module
    that OWN_FOLDERS_ONLY names with its reason (a new writer elsewhere fails here)."""
    found = {}
    for path in sorted((REPO / "src" / "capshim").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _RAW_WRITE.search(line) and not line.lstrip().startswith("#"):
                found.setdefault(rel, []).append(f"{rel}:{n}: {line.strip()}")
    stray = [x for rel, hits in found.items() if rel not in OWN_FOLDERS_ONLY for x in hits]
    assert stray == [], "\n".join(stray)
    assert set(found) >= {"src/capshim/paths.py", "src/capshim/bench/runs.py"}  # the scan finds writes


def test_a_model_hash_sidecar_is_never_written_into_a_sealed_folder(tmp_path):
    from capshim import paths

    b = _sealed_bundle(tmp_path)
    model = b / "raw" / "m.gguf"
    model.write_bytes(b"GGUF")  # (not sealed: the check is the sidecar's folder, not the model)
    before = sorted(p.name for p in (b / "raw").iterdir())
    assert len(paths.cached_sha256(model)) == 64
    assert sorted(p.name for p in (b / "raw").iterdir()) == before
    free = tmp_path / "m.gguf"
    free.write_bytes(b"GGUF")
    paths.cached_sha256(free)
    assert (tmp_path / "m.gguf.sha256").is_file()


def test_a_users_sidecar_or_a_link_at_the_model_hash_name_is_left_alone(tmp_path):
    """A hostile review: a bench rewrote a user's ``sha256sum`` file MODEL.sha256 as capshim's JSON and
    replaced a link there. Only capshim's own sidecar is replaced; anything else is left as it is."""
    from capshim import paths

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    side = tmp_path / "m.gguf.sha256"
    mine = "0" * 64 + "  m.gguf\n"
    side.write_text(mine)
    digest = paths.cached_sha256(model)
    assert side.read_text() == mine and len(digest) == 64
    side.unlink()
    keep = tmp_path / "keep.txt"
    keep.write_text("theirs")
    side.symlink_to(keep)
    paths._MEMO.clear()
    assert paths.cached_sha256(model) == digest
    assert side.is_symlink() and keep.read_text() == "theirs"
    side.unlink()
    paths._MEMO.clear()
    paths.cached_sha256(model)  # absent: written; ours: replaced when the file changes
    assert json.loads(side.read_text())["sha256"] == digest
    model.write_bytes(b"GGUF" + b"\1" * 60)
    paths._MEMO.clear()
    new = paths.cached_sha256(model)
    assert new != digest and json.loads(side.read_text())["sha256"] == new


def test_the_status_file_is_never_a_profile_or_the_program_it_runs(tmp_path):
    """A hostile review: ``run --status-file my.toml --force`` emptied the profile the same command read,
    and ``--status-file ./prog --force -- ./prog`` emptied the program. Both are inputs: exit 2, unchanged."""
    prof = tmp_path / "my.toml"
    prof.write_text((REPO / "src/capshim/profiles/builtin/vulkan-paravirt.toml").read_text()
                    if (REPO / "src/capshim/profiles/builtin/vulkan-paravirt.toml").exists()
                    else 'name="m"\napi="vulkan"\ndirection="lower"\nversion=1\ndescription="d"\n'
                         "[capabilities]\nmaxComputeSharedMemorySize = 16384\n")
    before = prof.read_bytes()
    r = run_capshim("run", "--simulate", str(prof), "--status-file", str(prof), "--force", "--", "true")
    assert r.returncode == 2 and "an input of this command" in r.stderr and prof.read_bytes() == before
    prog = tmp_path / "prog"
    prog.write_bytes(b"#!/bin/sh\nexit 0\n")
    prog.chmod(0o755)
    r = run_capshim("run", "--status-file", str(prog), "--force", "--", str(prog))
    assert r.returncode == 2 and "an input of this command" in r.stderr
    assert prog.read_bytes() == b"#!/bin/sh\nexit 0\n"


def test_db_matrix_never_writes_sqlites_own_files_beside_the_store(tmp_path):
    """A hostile review: ``db matrix --db s.db -o s.db-journal`` wrote the file, and SQLite deleted it
    on the next open as a stale journal (over a hot one it would have replaced the rollback data)."""
    from capshim.contracts import output

    store = tmp_path / "s.db"
    store.write_bytes(b"")
    for suffix in output.SQLITE_SIDECARS:
        with pytest.raises(UsageError, match="results store's"):
            output.check_file(tmp_path / f"s.db{suffix}", "-o", store=store)


def test_an_output_file_inside_the_bundle_is_refused_before_any_run(tmp_path):
    """A hostile review: ``--output-file e/res.txt --out e`` ran the whole bench, then failed the seal
    (exit 5: a file planted in the bundle). It is refused first: exit 2, nothing run, no folder."""
    out = tmp_path / "e"
    r = run_capshim("bench", "--metric", "wall", "--check-output", "--output-file", str(out / "res.txt"),
                    "--arm", "a=", "-r", "2", "--out", str(out), "--", "sh", "-c", f"echo 1 > {out}/res.txt")
    assert r.returncode == 2 and "inside --out" in r.stderr and not out.exists()


def test_man_out_writes_every_page_or_none(tmp_path):
    """A hostile review: a FIFO at one page's name stopped ``man --out`` after it had written the pages
    before it, and the hint said "leave --out out to print on stdout". Every page is checked first."""
    folder = tmp_path / "m"
    folder.mkdir()
    os.mkfifo(folder / "capshim-bench.1")
    r = run_capshim("man", "--out", str(folder), timeout=120)
    assert r.returncode == 2 and "is a FIFO" in r.stderr and "print on stdout" not in r.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["capshim-bench.1"]
