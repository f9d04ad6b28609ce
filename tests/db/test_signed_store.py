"""A store that admits by signer (issue 30 item 3), on SQLite and PostgreSQL; PostgreSQL's least-privilege roles."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from capshim.cli import main
from capshim.db import schema
from capshim.db.store import DbError, Store
from capshim.evidence import signing
from tests.db.conftest import EVIDENCE

BUNDLE = EVIDENCE / "lavapipe-default"


def _cli(*args, env=None):
    r = CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "300", **(env or {})})
    return r.exit_code, r.output


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    for name in ("lab", "stranger"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(d / name)], check=True)
    pub = (d / "lab.pub").read_text().split()
    (d / "allowed").write_text(f"lab@capshim {pub[0]} {pub[1]}\n")
    return {"lab": d / "lab", "stranger": d / "stranger", "allowed": d / "allowed"}


def _signed(tmp_path, key, name="b"):
    root = tmp_path / name
    shutil.copytree(BUNDLE, root)
    if key is not None:
        signing.sign(root, key)
    return root


def _reseal(root):
    lines = []
    for line in (root / "SHA256SUMS").read_text().splitlines():
        rel = line[66:]
        lines.append(f"{hashlib.sha256((root / rel).read_bytes()).hexdigest()}  {rel}")
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def test_policy_admits_only_allowed_signers_and_list_shows_who(db_url, tmp_path, keys):
    good = _signed(tmp_path, keys["lab"], "good")
    other = _signed(tmp_path, keys["stranger"], "other")
    unsigned = _signed(tmp_path, None, "unsigned")
    rc, out = _cli("db", "add", good, other, unsigned, "--signers", keys["allowed"], "--db", db_url)
    assert rc == 2
    assert f"not stored: {other}: signed by ED25519 key SHA256:" in out
    assert f"the store admits only signers of --signers {keys['allowed']}" in out
    assert f"not stored: {unsigned}: not signed; the store admits only signers" in out
    with Store.open(db_url) as st:
        (row,) = st.select()
    assert row["signed_by"][0]["principal"] == "lab@capshim" and row["signed_by"][0]["key"].startswith("SHA256:")
    rc, out = _cli("db", "list", "--db", db_url)
    assert rc == 0 and "signed by" in out and "lab@capshim" in out
    assert f"lab@capshim {row['signed_by'][0]['key'][:15]}" in out, out  # the principal is the adder's word


def test_the_policy_from_the_environment(db_url, tmp_path, keys):
    other = _signed(tmp_path, keys["stranger"])
    rc, out = _cli("db", "add", other, "--db", db_url, env={"CAPSHIM_DB_SIGNERS": str(keys["allowed"])})
    assert rc == 2 and "the store admits only signers" in out


def test_edited_and_resealed_after_signing_is_refused_by_the_store(db_url, tmp_path, keys):
    root = _signed(tmp_path, keys["lab"])
    (root / "report.md").write_text((root / "report.md").read_text() + "\nbetter numbers\n")
    _reseal(root)
    for extra in ([], ["--signers", keys["allowed"]]):
        rc, out = _cli("db", "add", root, "--db", db_url, *extra)
        assert rc == 2 and "covers another report.md (changed after signing: edited and re-sealed?)" in out
        assert "Traceback" not in out
    with Store.open(db_url) as st:
        assert st.select() == []


def test_signed_filter_and_a_signature_added_later(db_url, tmp_path, keys):
    root = _signed(tmp_path, None)
    assert _cli("db", "add", root, "--db", db_url)[0] == 0
    with Store.open(db_url) as st:
        assert st.select({"signed": "yes"}) == [] and len(st.select()) == 1
    signing.sign(root, keys["lab"])
    rc, out = _cli("db", "add", root, "--db", db_url)
    assert rc == 0 and "already stored" in out
    with Store.open(db_url) as st:
        (row,) = st.select({"signed": "yes"})
        assert row["signed_by"][0]["principal"] is None  # added without a policy: the key, not who
        assert st.select({"signed": row["signed_by"][0]["key"]}) == [row]
    rc, out = _cli("db", "list", "--signed", "yes", "--json", "--db", db_url)
    assert rc == 0 and len(json.loads(out)) == 1


def test_arm_files_are_refused_under_a_policy(db_url, keys):
    raw = EVIDENCE / "h200-tinyllama-r10" / "raw" / "vm-unlocked-1.json"
    rc, out = _cli("db", "add", "--arm", f"a={raw}", "--signers", keys["allowed"], "--db", db_url)
    assert rc == 2 and "--arm files carry no signature" in out


# --- PostgreSQL: least privilege ---------------------------------------------------------------

def _dbname(url):
    return url.split("@/", 1)[1].split("?")[0]


def _roles(pg_server, url, suffix):
    """A reader (SELECT only) and a writer (SELECT, INSERT, UPDATE, sequences) on the store at ``url``."""
    import psycopg

    db = _dbname(url)
    reader, writer = f"reader_{suffix}", f"writer_{suffix}"
    with psycopg.connect(f"dbname={db} user=capshim host={pg_server.sock}", autocommit=True) as conn:
        for role in (reader, writer):
            conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute(f"GRANT CONNECT ON DATABASE {db} TO {role}")
            conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
            conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
        conn.execute(f"GRANT INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {writer}")
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {writer}")
    as_role = lambda role: url.replace("postgresql://capshim@", f"postgresql://{role}@")  # noqa: E731
    return as_role(reader), as_role(writer)


def test_postgresql_read_only_role_queries_and_changes_nothing(pg_server, tmp_path, keys):
    url = pg_server.new_database()
    with Store.open(url) as st:  # the owner creates the store
        assert st.revision() == schema.HEAD
    reader, writer = _roles(pg_server, url, _dbname(url))
    root = _signed(tmp_path, keys["lab"])
    rc, out = _cli("db", "add", root, "--signers", keys["allowed"], "--db", writer)
    assert rc == 0 and "added: #1" in out
    rc, out = _cli("db", "list", "--db", reader)
    assert rc == 0 and "lab@capshim" in out
    rc, out = _cli("db", "matrix", "--signed", "lab@capshim", "--json", "--db", reader)
    assert rc == 0 and {tuple(r["signed_by"]) for r in json.loads(out)["rows"]} == {("lab@capshim",)}
    other = _signed(tmp_path, keys["lab"], "other")
    (other / "report.md").write_text("another\n")
    _reseal(other)
    (other / "attestations.intoto.jsonl").unlink()
    rc, out = _cli("db", "add", other, "--db", reader)
    assert rc == 2 and "permission denied for table bundles" in out and out.count("\n") == 2


def test_postgresql_read_only_role_never_migrates(pg_server):
    url = pg_server.new_database()
    with Store.open(url, migrate=False) as st:
        st.migrate("0002")
    reader, _ = _roles(pg_server, url, "old_" + _dbname(url))
    with pytest.raises(DbError, match=r"role reader_old_\w+ may not change the schema, and the store is at "
                                      rf"revision 0002, this capshim needs {schema.HEAD}"):
        Store.open(reader)
    rc, out = _cli("db", "list", "--db", reader)
    assert rc == 2 and out.count("\n") == 1 and "may not change the schema" in out
    with Store.open(url, migrate=False) as st:
        assert st.revision() == "0002"


@pytest.mark.parametrize("case,window,code", [
    ("other_key_retired", 'valid-before="20200101"', 0),
    ("other_key_not_yet_valid", 'valid-after="20300101"', 0),
])
def test_a_dated_line_of_another_key_does_not_refuse_the_store(db_url, tmp_path, keys, case, window, code):
    good = _signed(tmp_path, keys["lab"], "good")
    stranger = " ".join(keys["stranger"].with_suffix(".pub").read_text().split()[:2])
    f = tmp_path / "signers"
    f.write_text(f"old@capshim {window} {stranger}\n" + keys["allowed"].read_text())
    rc, out = _cli("db", "add", good, "--signers", f, "--db", db_url)
    assert rc == code and "Traceback" not in out, out
    with Store.open(db_url) as st:
        (row,) = st.select()
    assert row["signed_by"][0]["principal"] == "lab@capshim"
    other = _signed(tmp_path, keys["stranger"], "other")
    rc, out = _cli("db", "add", other, "--signers", f, "--db", db_url)
    assert rc == 2 and ("key has expired" in out or "key is not yet valid" in out), out
    assert "not stored" in out and "Traceback" not in out


@pytest.mark.parametrize("case,nested,stored", [
    ("nested_garbage", b"garbage\n", 0),
    ("nested_truncated", b'{"payload"', 0),
    ("nested_absent", None, 1),
])
def test_a_study_with_a_bad_nested_attestation_file_is_not_stored(db_url, tmp_path, keys, case, nested, stored):
    root = tmp_path / "study"
    shutil.copytree(EVIDENCE / "lavapipe-ablate-default", root)
    (root / "attestations.intoto.jsonl").unlink(missing_ok=True)
    signing.sign(root, keys["lab"])
    if nested is not None:
        (root / "bench" / "attestations.intoto.jsonl").write_bytes(nested)
    rc, out = _cli("db", "add", root, "--signers", keys["allowed"], "--db", db_url)
    assert "Traceback" not in out, out
    if not stored:
        assert rc == 2 and "bench/attestations.intoto.jsonl" in out and "not stored" in out, out
    else:
        assert rc == 0, out
    with Store.open(db_url) as st:
        assert len(st.select()) == stored
