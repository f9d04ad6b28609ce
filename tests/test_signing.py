"""Signed bundles: capshim evidence sign, verify with and without --signers, and bad input (issue 30)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from capshim.cli import main
from capshim.evidence import signing
from capshim.evidence.files import ATTESTATION_FILE
from tests.conftest import REPO

BUNDLE = REPO / "evidence" / "lavapipe-default-warmup-round"
STUDY = REPO / "evidence" / "h200-cuda-clients"



def _key(d, name, kind="ed25519"):
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", name, "-f", str(d / name)], check=True)
    return d / name


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    k = {"alice": _key(d, "alice"), "bob": _key(d, "bob")}
    pub = (d / "alice.pub").read_text().split()
    (d / "allowed").write_text(f"# the lab\nalice@lab {pub[0]} {pub[1]}\n")
    k["allowed"] = d / "allowed"
    return k


def _copy(tmp_path, src=BUNDLE):
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def _cli(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.output


def _snapshot(root):
    """Every file's bytes but the attestation file's: what signing and a refused check must not change."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ATTESTATION_FILE}


def _reseal(root):
    """What a person can do to any bundle: rewrite SHA256SUMS over the files as they are (sha256sum)."""
    lines = []
    for line in (root / "SHA256SUMS").read_text().splitlines():
        name = line[66:]
        lines.append(f"{hashlib.sha256((root / name).read_bytes()).hexdigest()}  {name}")
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def test_unsigned_is_never_just_ok(tmp_path):
    root = _copy(tmp_path)
    rc, out = _cli("evidence", "verify", root)
    assert rc == 0 and out.startswith(f"sealed, not signed: {root}: every file matches SHA256SUMS")
    assert not any(line.startswith("ok") for line in out.splitlines())


def test_sign_then_verify_with_and_without_signers(tmp_path, keys):
    root = _copy(tmp_path)
    before = _snapshot(root)
    rc, out = _cli("evidence", "sign", root, "--key", keys["alice"])
    assert rc == 0 and out.startswith(f"signed: {root / ATTESTATION_FILE} line 1 by ED25519 key SHA256:")
    assert _snapshot(root) == before  # no sealed file changed
    rc, out = _cli("evidence", "verify", root)
    assert rc == 0 and "(not checked against a signer list)" in out and out.startswith("signed by ED25519 key")
    rc, out = _cli("evidence", "verify", root, "--signers", keys["allowed"])
    assert rc == 0 and out.startswith("signed by alice@lab (ED25519 key SHA256:")
    assert f"allowed by {keys['allowed']}" in out


def test_statement_layout(tmp_path, keys):
    root = _copy(tmp_path)
    signing.sign(root, keys["alice"])
    (env,) = [json.loads(x) for x in (root / ATTESTATION_FILE).read_text().splitlines()]
    assert env["payloadType"] == "application/vnd.in-toto+json" and len(env["signatures"]) == 1
    stmt = json.loads(base64.b64decode(env["payload"]))
    assert stmt["_type"] == "https://in-toto.io/Statement/v1"
    assert stmt["predicateType"] == signing.PREDICATE_TYPE
    names = {s["name"]: s["digest"]["sha256"] for s in stmt["subject"]}
    listed = {ln[66:] for ln in (root / "SHA256SUMS").read_text().splitlines()}
    assert set(names) == listed | {"SHA256SUMS"}
    assert names["summary.json"] == hashlib.sha256((root / "summary.json").read_bytes()).hexdigest()
    made = stmt["predicate"]["made"]
    meta = json.loads((root / "metadata.json").read_text())
    assert made["kind"] == "bench" and made["arms"] == sorted(meta["arms"])
    assert made["started_utc"] == meta["started_utc"] and made["host"] == meta["host"]


def test_edited_and_resealed_after_signing_is_refused(tmp_path, keys):
    root = _copy(tmp_path)
    signing.sign(root, keys["alice"])
    summary = json.loads((root / "summary.json").read_text())
    summary["note"] = "better numbers"
    (root / "summary.json").write_text(json.dumps(summary))
    _reseal(root)
    rc, _ = _cli("evidence", "verify", root)
    assert rc == 1
    rc, out = _cli("evidence", "verify", root, "--signers", keys["allowed"])
    assert rc == 1 and out.count("\n") == 1
    assert "covers another summary.json (changed after signing: edited and re-sealed?)" in out


def test_signer_not_allowed_and_not_signed_with_signers(tmp_path, keys):
    root = _copy(tmp_path)
    rc, out = _cli("evidence", "verify", root, "--signers", keys["allowed"])
    assert rc == 1 and "sealed, not signed" in out and out.count("\n") == 1
    signing.sign(root, keys["bob"])
    rc, out = _cli("evidence", "verify", root, "--signers", keys["allowed"])
    assert rc == 1 and f"which --signers {keys['allowed']} does not allow" in out and out.count("\n") == 1


def test_several_signatures_and_the_same_key_twice(tmp_path, keys):
    root = _copy(tmp_path)
    signing.sign(root, keys["bob"])
    signing.sign(root, keys["alice"])
    rc, out = _cli("evidence", "sign", root, "--key", keys["alice"])
    assert rc == 1 and "already signed by ED25519 key" in out and "nothing written" in out
    assert len((root / ATTESTATION_FILE).read_text().splitlines()) == 2
    rc, out = _cli("evidence", "verify", root, "--signers", keys["allowed"])
    assert rc == 0 and "signed by alice@lab" in out and "also signed by ED25519 key" in out


def test_a_study_is_signed_over_its_own_files(tmp_path, keys):
    root = _copy(tmp_path, STUDY)
    signing.sign(root, keys["alice"])
    rc, out = _cli("evidence", "verify", root, "--signers", keys["allowed"])
    assert rc == 0 and "\nsigned by alice@lab" in "\n" + out
    stmt = signing.read_envelopes(root)[-1][2]
    assert stmt["predicate"]["made"]["kind"] == "study:cuda-clients"
    assert "clients.json" in {s["name"] for s in stmt["subject"]}


def test_a_nested_bundles_files_are_subjects_of_a_study(tmp_path):
    root = _copy(tmp_path, REPO / "evidence" / "kernels-lavapipe-gemma3")
    names = signing.subjects(root)
    assert "bench-tinyllama-1.1b/summary.json" in names and "bench-tinyllama-1.1b/SHA256SUMS" in names


def test_an_unsigned_file_sealed_after_signing_or_a_listed_attestation(tmp_path, keys):
    root = _copy(tmp_path)
    signing.sign(root, keys["alice"])
    sums = (root / "SHA256SUMS").read_text().splitlines()
    (root / "SHA256SUMS").write_text("\n".join(sums[1:]) + "\n")  # a file dropped from the seal
    rc, out = _cli("evidence", "verify", root)
    assert rc == 1 and "not listed in SHA256SUMS" in out


# --- bad input: one line naming the problem, exit 1 or 2, no traceback, nothing changed -------

def _line(root):
    return (root / ATTESTATION_FILE).read_bytes().splitlines()[0]


def _env(root):
    return json.loads(_line(root))


def _with_payload(root, stmt):
    env = _env(root)
    env["payload"] = base64.b64encode(json.dumps(stmt).encode()).decode()
    return json.dumps(env).encode() + b"\n"


def _stmt(root):
    return json.loads(base64.b64decode(_env(root)["payload"]))


BAD_ATTESTATIONS = {
    "truncated": (lambda r: _line(r)[:200], 1, "does not end with a newline (truncated?)"),
    "truncated_line": (lambda r: _line(r)[:200] + b"\n", 1, "invalid JSON"),
    "oversized": (lambda r: b" " * (9 << 20) + b"\n", 1, "over the 8 MiB"),
    "empty_line": (lambda r: _line(r) + b"\n\n" + _line(r) + b"\n", 1, "line 2: empty"),
    "duplicated_line": (lambda r: (_line(r) + b"\n") * 2, 1, "line 2: repeats line 1"),
    "not_json": (lambda r: b"hello\n", 1, "invalid JSON"),
    "an_array": (lambda r: b"[" + _line(r) + b"]\n", 1, "not a DSSE envelope"),
    "nested_envelope": (lambda r: json.dumps({"envelope": _env(r)}).encode() + b"\n", 1, "not a DSSE envelope"),
    "duplicate_key": (lambda r: _line(r)[:-1] + b',"payloadType":"x"}\n', 1, "appears twice"),
    "other_payload_type": (lambda r: json.dumps({**_env(r), "payloadType": "text/plain"}).encode() + b"\n", 1,
                           "payloadType"),
    "payload_not_base64": (lambda r: json.dumps({**_env(r), "payload": "!!!"}).encode() + b"\n", 1,
                           "not a DSSE envelope"),
    "signature_twice": (lambda r: json.dumps({**_env(r), "signatures": _env(r)["signatures"] * 2}).encode() + b"\n",
                        1, "Multiple signatures found for keyid"),
    "signature_twice_respaced": (lambda r: _line(r) + b"\n" + json.dumps(_env(r), indent=None).encode() + b"\n", 1,
                                 "line 2: a signature twice"),
    "signature_twice_reordered": (lambda r: _line(r) + b"\n" + json.dumps(dict(reversed(_env(r).items())),
                                                                          separators=(" ,", " : ")).encode()
                                  + b"\n", 1, "line 2: a signature twice"),
    "signature_twice_other_envelope": (lambda r: _line(r) + b"\n" + json.dumps({**_env(r), "payload": base64.b64encode(
        base64.b64decode(_env(r)["payload"]) + b" ").decode()}).encode() + b"\n", 1, "line 2: a signature twice"),
    "signature_twice_trailing_space": (lambda r: _line(r) + b"\n" + _line(r) + b" \n", 1,
                                       "line 2: a signature twice"),
    "signature_twice_sig_reencoded": (lambda r: _line(r) + b"\n" + json.dumps({**_env(r), "signatures": [
        {**_env(r)["signatures"][0], "sig": base64.b64encode(base64.b64decode(_env(r)["signatures"][0]["sig"])
                                                             ).decode().rstrip("=")}]}).encode() + b"\n", 1,
                                      "a signature twice"),
    "no_signature": (lambda r: json.dumps({**_env(r), "signatures": []}).encode() + b"\n", 1, "signatures"),
    "statement_v01": (lambda r: _with_payload(r, {**_stmt(r), "_type": "https://in-toto.io/Statement/v0.1"}), 1,
                      "not an in-toto Statement v1"),
    "statement_nested": (lambda r: _with_payload(r, {"statement": _stmt(r)}), 1, "not an in-toto Statement v1"),
    "subject_twice": (lambda r: _with_payload(r, {**_stmt(r), "subject": _stmt(r)["subject"] * 2}), 1,
                      "is named twice"),
    "payload_edited": (lambda r: _with_payload(r, {**_stmt(r), "predicate": {"made": {"kind": "typed by hand"}}}),
                       1, "does not check"),
    "signature_over_other_files": (lambda r: _with_payload(r, {**_stmt(r), "subject": _stmt(r)["subject"][:-1]}),
                                   1, "does not check"),
    "garbage_sig": (lambda r: json.dumps({**_env(r), "signatures": [{**_env(r)["signatures"][0],
                                                                     "sig": base64.b64encode(b"x" * 40).decode()}]}
                                         ).encode() + b"\n", 1, "does not check"),
    "wrong_keyid": (lambda r: json.dumps({**_env(r), "signatures": [{**_env(r)["signatures"][0],
                                                                     "keyid": "SHA256:" + "A" * 43}]}
                                         ).encode() + b"\n", 1, "is not the key that signed"),
}


@pytest.mark.parametrize("case", sorted(BAD_ATTESTATIONS))
def test_bad_attestation_files(tmp_path, keys, case):
    root = _copy(tmp_path)
    signing.sign(root, keys["alice"])
    make, code, words = BAD_ATTESTATIONS[case]
    (root / ATTESTATION_FILE).write_bytes(make(root))
    before = {**_snapshot(root), ATTESTATION_FILE: (root / ATTESTATION_FILE).read_bytes()}
    for args in (("evidence", "verify", root), ("evidence", "verify", root, "--signers", keys["allowed"]),
                 ("evidence", "sign", root, "--key", keys["bob"])):
        rc, out = _cli(*args)
        assert rc == code, (args, out)
        assert words in out and out.count("\n") == 1 and "Traceback" not in out, out
    assert {**_snapshot(root), ATTESTATION_FILE: (root / ATTESTATION_FILE).read_bytes()} == before


def test_a_signature_copied_from_another_bundle(tmp_path, keys):
    """A valid envelope of one bundle put beside another: it covers other files."""
    a, b = _copy(tmp_path), _copy(tmp_path / "x", REPO / "evidence" / "lavapipe-default")
    signing.sign(a, keys["alice"])
    shutil.copy(a / ATTESTATION_FILE, b / ATTESTATION_FILE)
    rc, out = _cli("evidence", "verify", b, "--signers", keys["allowed"])
    assert rc == 1 and out.count("\n") == 1 and "the signature of ED25519 key" in out


def test_attestation_file_as_a_link_or_folder(tmp_path, keys):
    root = _copy(tmp_path)
    (root / ATTESTATION_FILE).mkdir()
    rc, out = _cli("evidence", "verify", root)
    assert rc == 1 and "not a regular file" in out and "Traceback" not in out


@pytest.mark.parametrize("case,text,words", [
    ("garbage_line", "this is not a signer\n", "line 1: invalid key"),
    ("bad_base64", "alice@lab ssh-ed25519 AAAA!!!!\n", "line 1: invalid key"),
    ("second_line_bad", "{good}\nbob ssh-rsa\n", "line 2:"),
    ("only_comments", "# nobody\n\n", "no signer in it"),
    ("not_utf8", b"\xff\xfe\n", "not UTF-8"),
])
def test_odd_allowed_signers_files(tmp_path, keys, case, text, words):
    root = _copy(tmp_path)
    signing.sign(root, keys["alice"])
    good = keys["allowed"].read_text().splitlines()[1]
    f = tmp_path / "signers"
    if isinstance(text, bytes):
        f.write_bytes(text)
    else:
        f.write_text(text.replace("{good}", good))
    rc, out = _cli("evidence", "verify", root, "--signers", f)
    assert rc == 2 and words in out and out.count("\n") == 1 and "Traceback" not in out, out


def test_missing_signers_file(tmp_path):
    rc, out = _cli("evidence", "verify", _copy(tmp_path), "--signers", tmp_path / "nope")
    assert rc == 2 and "--signers" in out and "No such file" in out


@pytest.mark.parametrize("case,words", [("missing", "No such file"), ("not_a_key", "not an SSH private key"),
                                        ("plain_text", "not an SSH private key"), ("pem_public_only", ""),
                                        ("folder", "not a regular file")])
def test_unusable_keys(tmp_path, case, words):
    root = _copy(tmp_path)
    key = tmp_path / "key"
    if case == "not_a_key":
        key.write_text("-----BEGIN PGP PRIVATE KEY BLOCK-----\nxx\n-----END PGP PRIVATE KEY BLOCK-----\n")
    elif case == "plain_text":
        key.write_text("notakey\n")
    elif case == "pem_public_only":
        key.write_text("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----\n")
    elif case == "folder":
        key.mkdir()
    before = _snapshot(root)
    rc, out = _cli("evidence", "sign", root, "--key", key)
    assert rc == 2 and out.startswith(f"capshim: --key {key}:") and out.count("\n") == 1, out
    assert words in out and (case == "missing" or "No such file" not in out), out
    assert _snapshot(root) == before and not (root / ATTESTATION_FILE).exists()


def test_unknown_key_type_in_an_allowed_signers_line(tmp_path, keys):
    root = _copy(tmp_path)
    signing.sign(root, keys["alice"])
    f = tmp_path / "signers"
    f.write_text("carol@lab ssh-unknown-type AAAAB3NzaC1yc2EAAAADAQABAAABAQ\n")
    rc, out = _cli("evidence", "verify", root, "--signers", f)
    assert rc == 2 and "line 1:" in out and out.count("\n") == 1


def test_a_broken_bundle_is_not_signed(tmp_path, keys):
    root = _copy(tmp_path)
    (root / "summary.json").write_text("{}")
    rc, out = _cli("evidence", "sign", root, "--key", keys["alice"])
    assert rc == 1 and "does not verify, not signed: summary.json: checksum mismatch" in out
    assert not (root / ATTESTATION_FILE).exists()


def test_bench_sign_signs_as_the_last_step(tmp_path, keys):
    from tests.conftest import run_capshim
    out = tmp_path / "b"
    r = run_capshim("bench", "--metric", "wall", "--arm", "stock=", "-r", "2", "--warmup", "0", "--out", str(out),
                    "--sign", str(keys["alice"]), "--", "true", timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"signed: {out / ATTESTATION_FILE} line 1 by ED25519 key SHA256:" in r.stderr
    rc, text = _cli("evidence", "verify", out, "--signers", keys["allowed"])
    assert rc == 0 and text.startswith("signed by alice@lab")


def test_bench_sign_with_a_missing_key_refused_before_any_run(tmp_path):
    from tests.conftest import run_capshim
    out = tmp_path / "b"
    r = run_capshim("bench", "--metric", "wall", "--arm", "stock=", "-r", "2", "--warmup", "0", "--out", str(out),
                    "--sign", str(tmp_path / "nokey"), "--", "true", timeout=300)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"capshim: --sign {tmp_path / 'nokey'}: No such file or directory"]
    assert not out.exists()


# --- allowed-signers options: a date window belongs to one key and is read at the signing time --------------

def _pub(key):
    return " ".join(key.with_suffix(".pub").read_text().split()[:2])


DATED_SIGNERS = {
    # case: (signer, signed_utc or None for now, allowed-signers lines, exit code, words)
    "retired_other_key": ("alice", None, ['bob valid-before="20200101" {bob}', "alice@lab {alice}"], 0,
                          "signed by alice@lab"),
    "future_other_key": ("alice", None, ['bob valid-after="20300101" {bob}', "alice@lab {alice}"], 0,
                         "signed by alice@lab"),
    "all_options": ("alice", None, ['bob cert-authority,namespaces="capshim-evidence" {bob}',
                                    'alice@lab namespaces="capshim-evidence",valid-after="20200101",'
                                    'valid-before="20991231" {alice}'], 0, "signed by alice@lab"),
    "retired_key_signed_in_its_window": ("bob", "2019-06-01T12:00:00Z", ['bob@lab valid-before="20200101" {bob}'],
                                         0, "signed by bob@lab"),
    "retired_key_signed_after": ("bob", None, ['bob@lab valid-before="20200101" {bob}', "alice@lab {alice}"], 1,
                                 "key has expired"),
    "key_signed_before_its_window": ("bob", "2019-06-01T12:00:00Z", ['bob@lab valid-after="20200101" {bob}'], 1,
                                     "key is not yet valid"),
}


@pytest.mark.parametrize("case", sorted(DATED_SIGNERS))
def test_dated_allowed_signers_lines(tmp_path, keys, monkeypatch, case):
    signer, when, lines, code, words = DATED_SIGNERS[case]
    root = _copy(tmp_path)
    if when:
        monkeypatch.setattr(signing, "utc_now", lambda: when)
    signing.sign(root, keys[signer])
    monkeypatch.undo()
    f = tmp_path / "signers"
    f.write_text("\n".join(x.format(alice=_pub(keys["alice"]), bob=_pub(keys["bob"])) for x in lines) + "\n")
    rc, out = _cli("evidence", "verify", root, "--signers", f)
    assert rc == code and words in out and "Traceback" not in out, out
    if code:
        assert out.count("\n") == 1, out
    assert _stmt(root)["predicate"]["signed"]["utc"] == (when or _stmt(root)["predicate"]["signed"]["utc"])


# --- a study's nested bundles: their attestation files are read as when each is verified alone -----------

NESTED = REPO / "evidence" / "lavapipe-ablate-default"

NESTED_ATTESTATIONS = {
    # case: (what bench/attestations.intoto.jsonl holds, given the nested bundle's own good line; exit; words)
    "garbage": (lambda good: b"garbage\n", 1, "bench/attestations.intoto.jsonl line 1: invalid JSON"),
    "truncated": (lambda good: good[:100], 1, "bench/attestations.intoto.jsonl: does not end with a newline"),
    "signature_twice": (lambda good: good + good.replace(b",", b", "), 1, "line 2: a signature twice"),
    "good": (lambda good: good, 0, "signed by "),
    "none": (None, 0, "signed by "),
}


@pytest.mark.parametrize("case", sorted(NESTED_ATTESTATIONS))
def test_a_nested_bundles_attestation_file_is_checked(tmp_path, keys, case):
    make, code, words = NESTED_ATTESTATIONS[case]
    root = _copy(tmp_path, NESTED)
    (root / ATTESTATION_FILE).unlink(missing_ok=True)
    signing.sign(root / "bench", keys["alice"])
    good = (root / "bench" / ATTESTATION_FILE).read_bytes()
    if make is None:
        (root / "bench" / ATTESTATION_FILE).unlink()
    else:
        (root / "bench" / ATTESTATION_FILE).write_bytes(make(good))
    signing.sign(root, keys["alice"]) if code == 0 else (root / ATTESTATION_FILE).write_bytes(
        _signed_study_line(tmp_path, keys))
    alone = _cli("evidence", "verify", root / "bench")
    for args in (("evidence", "verify", root, "--signers", keys["allowed"]), ("evidence", "verify", root)):
        rc, out = _cli(*args)
        assert rc == code and words in out and "Traceback" not in out, (args, out)
        assert rc == 0 or (out.count("\n") == 1 and alone[0] == 1), (out, alone)


def _signed_study_line(tmp_path, keys):
    """A good study signature made before the nested file went bad (the bad file is outside the seal)."""
    other = _copy(tmp_path / "clean", NESTED)
    (other / ATTESTATION_FILE).unlink(missing_ok=True)
    signing.sign(other, keys["alice"])
    return (other / ATTESTATION_FILE).read_bytes()


def test_a_crlf_allowed_signers_file_reads_like_its_lf_twin(tmp_path, keys):
    root = _copy(tmp_path)
    signing.sign(root, keys["alice"])
    f = tmp_path / "signers"
    f.write_bytes(b"# the lab\r\n\r\n" + f"alice@lab {_pub(keys['alice'])}\r\n\r\n".encode()
                  + f"bob@lab {_pub(keys['bob'])}\r\n".encode())
    rc, out = _cli("evidence", "verify", root, "--signers", f)
    assert rc == 0 and out.startswith("signed by alice@lab"), out
    f.write_bytes(f"\n  \nalice@lab {_pub(keys['alice'])}\n\t\n  ".encode())  # LF, blank lines
    rc, out = _cli("evidence", "verify", root, "--signers", f)
    assert rc == 0 and out.startswith("signed by alice@lab"), out
    f.write_bytes(b"\r\nbob ssh-rsa\r\n")
    rc, out = _cli("evidence", "verify", root, "--signers", f)
    assert rc == 2 and f"--signers {f}: line 2:" in out and out.count("\n") == 1, out


SAME_KEY_LINES = {
    # case: (allowed-signers lines, exit code, words)
    "first_line_other_namespace": (['alice@git namespaces="git" {alice}', "alice@lab {alice}"], 0,
                                   "signed by alice@lab"),
    "first_line_retired": (['alice@old valid-before="20200101" {alice}', "alice@lab {alice}"], 0,
                           "signed by alice@lab"),
    "two_principals_one_line": (["alice@lab,alice@home {alice}"], 0, "signed by alice@lab"),
    "only_other_namespace": (['alice@git namespaces="git" {alice}'], 1, "namespace"),
    "every_line_refuses": (['alice@git namespaces="git" {alice}', 'alice@file namespaces="file" {alice}'], 1,
                           'namespace "capshim-evidence"'),
}


@pytest.mark.parametrize("case", sorted(SAME_KEY_LINES))
def test_a_key_on_several_allowed_signers_lines(tmp_path, keys, case):
    lines, code, words = SAME_KEY_LINES[case]
    root = _copy(tmp_path)
    signing.sign(root, keys["alice"])
    f = tmp_path / "signers"
    f.write_text("\n".join(x.format(alice=_pub(keys["alice"])) for x in lines) + "\n")
    rc, out = _cli("evidence", "verify", root, "--signers", f)
    assert rc == code and words in out and "Traceback" not in out, out
    assert code == 0 or (out.count("\n") == 1 and f"--signers {f}:1:" in out), out
