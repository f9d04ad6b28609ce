"""Signatures over a sealed folder: an in-toto Statement in a DSSE envelope, signed with an SSH key.

A seal (SHA256SUMS) proves that a folder's files match their own list; anyone can
re-seal. A signature says who made the folder. The formats are the software supply
chain's, so readers already have tools for them:

- the **Statement** is in-toto's v1 layout (``_type`` ``https://in-toto.io/Statement/v1``,
  ``subject`` a list of ``{"name", "digest": {"sha256"}}``, ``predicateType`` a URI,
  ``predicate``): https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md.
  The subjects are every sealed file of the folder, its SHA256SUMS included (for a study:
  its top files, each nested bundle's files and each SHA256SUMS), by SHA-256.
  The predicate (:data:`PREDICATE_TYPE`) records what the bench or study was;
- the **envelope** is DSSE (payloadType ``application/vnd.in-toto+json``; a signature
  covers ``PAE(type, payload) = "DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload``:
  https://github.com/secure-systems-lab/dsse/blob/master/protocol.md), read and written
  with securesystemslib's :class:`securesystemslib.dsse.Envelope`;
- the **signature** is OpenSSH's SSHSIG (``ssh-keygen -Y sign`` in the namespace
  :data:`NAMESPACE`; PROTOCOL.sshsig, ssh-keygen(1)), the binary signature blob as the DSSE
  ``sig`` and the key's ``SHA256:`` fingerprint as ``keyid``. It is checked with
  ``ssh-keygen -Y check-novalidate`` (the key inside the signature), or, given an
  allowed-signers file (ssh-keygen(1) "ALLOWED SIGNERS", the file git's
  ``gpg.ssh.allowedSignersFile`` names), ``-Y find-principals`` then ``-Y verify``, as git
  does (git commit facca53 "ssh signing: verify signatures using ssh-keygen").

No cryptography is written here: ssh-keygen signs and checks, securesystemslib encodes.

The envelopes live in :data:`~capshim.evidence.files.ATTESTATION_FILE` beside SHA256SUMS,
one envelope a line (the in-toto "bundle" convention of JSON Lines, ``*.intoto.jsonl``),
outside the seal: signing never changes a sealed file, and a folder can carry several
signatures (one line each).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from capshim import __version__, jsonread, paths
from capshim.contracts import output
from capshim.errors import EXIT_WORKLOAD, CapshimError, UsageError
from capshim.evidence.files import (ATTESTATION_FILE, ATTESTATION_LIMIT, EvidenceError, sha256_file, utc_now)
from capshim.paths import SUMS_NAME
from capshim.evidence.sshsig import NAMESPACE, SigningError  # noqa: F401  (re-exported: the module's API)
from capshim.evidence.sshsig import (_check_novalidate, _check_with_signers, _sign_pae, _ssh_copy,
                                     check_signers_file, require_key)

if TYPE_CHECKING:  # securesystemslib (and cryptography under it) is imported where a signature is read
    from securesystemslib.dsse import Envelope

__all__ = ["NAMESPACE", "PAYLOAD_TYPE", "STATEMENT_TYPE", "PREDICATE_TYPE", "MAX_ENVELOPES", "SignatureCheck",
           "SigningError", "subjects", "statement", "sign", "check", "read_envelopes", "require_key", "sign_sealed",
           "check_signers_file"]


PAYLOAD_TYPE = "application/vnd.in-toto+json"
"""The DSSE payloadType of an in-toto Statement (in-toto attestation spec, envelope layer)."""

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"

PREDICATE_TYPE = "https://github.com/capshim/capshim/blob/main/docs/evidence.md#signed-bundles"
"""What the predicate is: capshim's record of a bench or study (docs/evidence.md, "Signed bundles")."""

MAX_ENVELOPES = 64
"""Lines (envelopes) an attestation file may hold."""

MAX_SIGNATURES = 16
"""Signatures one envelope may hold."""

_SSHSIG_LIMIT = 64 << 10
"""Bytes one SSH signature may have (an RSA-16384 one is about 2.1 KiB)."""

_STATEMENT_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["_type", "subject", "predicateType", "predicate"],
    "properties": {
        "_type": {"const": STATEMENT_TYPE},
        "subject": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["name", "digest"], "additionalProperties": False,
            "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 4096},
                           "digest": {"type": "object", "required": ["sha256"], "additionalProperties": False,
                                      "properties": {"sha256": {"type": "string",
                                                                "pattern": "^[0-9a-f]{64}$"}}}}}},
        "predicateType": {"const": PREDICATE_TYPE},
        "predicate": {"type": "object"},
    },
}

_ENVELOPE_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["payload", "payloadType", "signatures"],
    "properties": {
        "payload": {"type": "string", "minLength": 1},
        "payloadType": {"const": PAYLOAD_TYPE},
        "signatures": {"type": "array", "minItems": 1, "maxItems": MAX_SIGNATURES, "items": {
            "type": "object", "required": ["keyid", "sig"], "additionalProperties": False,
            "properties": {"keyid": {"type": "string", "pattern": "^SHA256:[A-Za-z0-9+/]{43}$"},
                           "sig": {"type": "string", "minLength": 1, "maxLength": _SSHSIG_LIMIT * 2}}}},
    },
}




@dataclass
class SignatureCheck:
    """What one signature in a folder's attestation file says.

    Attributes:
        line: the 1-based line of its envelope in the attestation file.
        keyid: the key's ``SHA256:`` fingerprint (as ssh-keygen prints it).
        key_type: ``ED25519``, ``RSA``, ``ECDSA`` ... (ssh-keygen's word).
        principal: who the allowed-signers file says the key is; None when not checked
            against one, or the key is not in it.
        signed_utc: when the predicate says it was signed (the signer's clock).
        problem: None when the signature is good and covers every file as it is now;
            else one line saying why not.
    """

    line: int
    keyid: str
    key_type: str
    principal: str | None
    signed_utc: str | None
    problem: str | None

    def who(self) -> str:
        """``alice@example.org (ED25519 key SHA256:...)`` or ``ED25519 key SHA256:...``."""
        key = f"{self.key_type} key {self.keyid}"
        return f"{self.principal} ({key})" if self.principal else key


# --- the statement ---------------------------------------------------------------------

def _is_study(root: Path) -> bool:
    from capshim.evidence import study  # study imports this package; imported late
    return study.is_study(root)


def subjects(root: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file a folder's seal covers, SHA256SUMS itself included.

    A bundle: the files its SHA256SUMS lists, and SHA256SUMS. A study: its top files,
    each nested bundle's files (``bench/raw/a-1.json``) and each SHA256SUMS. The digests of
    listed files are the seal's; call this on a folder that verifies.

    Raises:
        EvidenceError: a SHA256SUMS cannot be read (names it).
    """
    p = Path(root)
    folders = [""]
    if _is_study(p):
        from capshim.evidence import study
        folders += list((study.read_study(p) or {}).get("bundles", []))
    out: dict[str, str] = {}
    for rel_dir in folders:
        folder = p / rel_dir if rel_dir else p
        prefix = f"{rel_dir}/" if rel_dir else ""
        try:
            listed, _ = paths.read_sums(folder)
        except OSError as exc:
            raise EvidenceError(f"{folder / SUMS_NAME}: cannot read: {exc.strerror or exc}") from None
        for rel, digest in listed.items():
            out[prefix + rel] = digest.lower()
        out[prefix + SUMS_NAME] = sha256_file(folder / SUMS_NAME)
    return dict(sorted(out.items()))


def _predicate(root: Path) -> dict:
    """What the folder was, from its sealed metadata.json (a bench) or study.json (a study)."""
    if _is_study(root):
        from capshim.evidence import study
        doc = study.read_study(root) or {}
        facts = doc.get("facts") if isinstance(doc.get("facts"), dict) else {}
        made = {"kind": f"study:{doc.get('kind')}", "bundles": doc.get("bundles", []),
                "capshim_version": doc.get("capshim"), "sealed_utc": doc.get("sealed_utc"),
                "sealed_after": doc.get("sealed_after"), "facts": facts}
    else:
        try:
            meta = jsonread.load_metadata(root)
        except jsonread.JsonShapeError:
            meta = {}
        host = meta.get("host") if isinstance(meta.get("host"), dict) else {}
        arms = meta.get("arms") if isinstance(meta.get("arms"), dict) else {}
        made = {"kind": "bench", "title": meta.get("title"), "command_line": meta.get("command_line"),
                "arms": sorted(arms), "baseline": meta.get("baseline"),
                "capshim_version": meta.get("capshim_version") or host.get("capshim"),
                "capshim_commit": meta.get("capshim_commit"), "host": host, "device": meta.get("device"),
                "started_utc": meta.get("started_utc"), "finished_utc": meta.get("finished_utc"),
                "interrupted": meta.get("interrupted")}
    return {"made": made, "signed": {"utc": utc_now(), "capshim_version": __version__}}


def statement(root: str | Path) -> dict:
    """The in-toto Statement v1 a signature of ``root`` covers: its :func:`subjects` and the predicate
    ``{"made": {what the bench or study was}, "signed": {"utc", "capshim_version"}}``."""
    p = Path(root)
    subj = [{"name": n, "digest": {"sha256": d}} for n, d in subjects(p).items()]
    return {"_type": STATEMENT_TYPE, "subject": subj, "predicateType": PREDICATE_TYPE, "predicate": _predicate(p)}


# --- ssh-keygen -------------------------------------------------------------------------

def read_envelopes(root: str | Path) -> list[tuple[int, "Envelope", dict]]:
    """The envelopes of ``root``'s attestation file: ``[(line, Envelope, statement)]``; [] when there is none.

    Raises:
        SigningError (exit 1): the file is a link or not a regular file, over
            :data:`~capshim.evidence.files.ATTESTATION_LIMIT` bytes, has more than
            :data:`MAX_ENVELOPES` lines, an empty or repeated line, a line that is not an envelope
            of an in-toto Statement (names the line and the JSON path), a signature twice (the
            same key and signature, or the same key over the same payload, in any JSON spacing).
    """
    f = Path(root) / ATTESTATION_FILE
    name = ATTESTATION_FILE
    try:
        st = os.lstat(f)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SigningError(f"{name}: cannot read: {exc.strerror or exc}", EXIT_WORKLOAD) from None
    if not stat.S_ISREG(st.st_mode):
        raise SigningError(f"{name}: not a regular file (signatures live in a plain file beside SHA256SUMS)",
                           EXIT_WORKLOAD)
    if st.st_size > ATTESTATION_LIMIT:
        raise SigningError(f"{name}: {st.st_size} bytes, over the {ATTESTATION_LIMIT >> 20} MiB an attestation "
                           "file may have", EXIT_WORKLOAD)
    try:
        data = f.read_bytes()
    except OSError as exc:
        raise SigningError(f"{name}: cannot read: {exc.strerror or exc}", EXIT_WORKLOAD) from None
    if not data.endswith(b"\n"):
        raise SigningError(f"{name}: does not end with a newline (truncated?)", EXIT_WORKLOAD)
    lines = data[:-1].split(b"\n")
    if len(lines) > MAX_ENVELOPES:
        raise SigningError(f"{name}: {len(lines)} lines, over the {MAX_ENVELOPES} envelopes one folder may carry",
                           EXIT_WORKLOAD)
    out, seen, sigs = [], {}, {}
    for i, raw in enumerate(lines, 1):
        where = f"{name} line {i}"
        if not raw.strip():
            raise SigningError(f"{where}: empty (one DSSE envelope a line)", EXIT_WORKLOAD)
        if raw in seen:
            raise SigningError(f"{where}: repeats line {seen[raw]}", EXIT_WORKLOAD)
        seen[raw] = i
        env, stmt = _envelope(raw, where)
        _no_signature_twice(env, i, where, sigs)
        out.append((i, env, stmt))
    return out


def _no_signature_twice(env: "Envelope", line: int, where: str, sigs: dict) -> None:
    """SigningError (exit 1) when an envelope carries a signature an earlier line has: the same key
    and signature bytes, or the same key over the same payload, however the JSON is spaced.

    ``sigs`` maps ``("sig", keyid, signature hex)`` and ``("payload", keyid, sha256 of the PAE)``
    to the line that had them; this line's are added.
    """
    import hashlib
    pae = hashlib.sha256(env.pae()).hexdigest()
    for sig in env.signatures.values():
        for ident in (("sig", sig.keyid, sig.signature.lower()), ("payload", sig.keyid, pae)):
            if ident in sigs:
                raise SigningError(f"{where}: a signature twice: {sig.keyid} over the same payload as line "
                                   f"{sigs[ident]}", EXIT_WORKLOAD)
        sigs[("sig", sig.keyid, sig.signature.lower())] = line
        sigs[("payload", sig.keyid, pae)] = line


def _shape_problem(value, schema: dict, at: str = "$") -> str | None:
    """The first place ``value`` leaves ``schema`` (the few JSON Schema words the two schemas above
    use: type, const, required, properties, additionalProperties, items, min/maxItems,
    min/maxLength, pattern), as ``"$.path: why"``; None when it fits. Checked here rather than by
    jsonschema so that ``evidence verify`` of a signed bundle stays a small command (issue 28)."""
    if "const" in schema:
        return None if value == schema["const"] else f"{at}: expected {schema['const']!r}"
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str}
    if kind and not isinstance(value, types[kind]):
        return f"{at}: expected {'an' if kind in ('object', 'array') else 'a'} {kind}"
    if kind == "string":
        if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
            return f"{at}: a string of {len(value)} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"{at}: does not match {schema['pattern']}"
    if kind == "array":
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            return f"{at}: {len(value)} items"
        for i, item in enumerate(value):
            problem = _shape_problem(item, schema.get("items", {}), f"{at}[{i}]")
            if problem:
                return problem
    if kind == "object":
        for key in schema.get("required", []):
            if key not in value:
                return f"{at}: {key!r} is required"
        props = schema.get("properties", {})
        for key, item in value.items():
            if key not in props:
                if schema.get("additionalProperties") is False:
                    return f"{at}: {key!r} is not expected"
                continue
            problem = _shape_problem(item, props[key], f"{at}.{key}")
            if problem:
                return problem
    return None


def _loads(raw: bytes, where: str, schema: dict, max_depth: int):
    """Strict JSON (:func:`capshim.jsonread.loads`, unique keys) of ``schema``'s shape; SigningError (exit 1)."""
    try:
        value = jsonread.loads(raw, where, None, max_depth=max_depth, limit=ATTESTATION_LIMIT, unique_keys=True)
    except jsonread.JsonShapeError as exc:
        raise SigningError(str(exc), EXIT_WORKLOAD) from None
    problem = _shape_problem(value, schema)
    if problem:
        raise SigningError(f"{where}: {problem}", EXIT_WORKLOAD)
    return value


def _envelope(raw: bytes, where: str) -> tuple["Envelope", dict]:
    """One line as a DSSE Envelope and its Statement; SigningError (exit 1) naming what is wrong."""
    from securesystemslib import exceptions as ssl_exceptions
    from securesystemslib.dsse import Envelope

    try:
        doc = _loads(raw, where, _ENVELOPE_SCHEMA, 4)
        env = Envelope.from_dict(doc)
    except SigningError as exc:
        raise SigningError(f"{exc} (not a DSSE envelope of an in-toto Statement)", EXIT_WORKLOAD) from None
    except (binascii.Error, ValueError, KeyError, TypeError, ssl_exceptions.FormatError) as exc:
        raise SigningError(f"{where}: not a DSSE envelope: {exc}", EXIT_WORKLOAD) from None
    try:
        stmt = _loads(env.payload, f"{where}: payload", _STATEMENT_SCHEMA, 32)
    except SigningError as exc:
        raise SigningError(f"{exc} (not an in-toto Statement v1 of capshim)", EXIT_WORKLOAD) from None
    names = [s["name"] for s in stmt["subject"]]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SigningError(f"{where}: payload: subject {paths.show_name(dup)!r} is named twice", EXIT_WORKLOAD)
    for sig in env.signatures.values():
        if len(sig.signature) > _SSHSIG_LIMIT * 2:
            raise SigningError(f"{where}: the signature of {sig.keyid} is over {_SSHSIG_LIMIT} bytes",
                               EXIT_WORKLOAD)
    return env, stmt


def _coverage_problem(stmt: dict, now: dict[str, str]) -> str | None:
    """Why the statement's subjects are not the folder's files as they are now, or None."""
    signed = {s["name"]: s["digest"]["sha256"] for s in stmt["subject"]}
    data_first = sorted(now.items(), key=lambda kv: (kv[0].rsplit("/", 1)[-1] == SUMS_NAME, kv[0]))
    for name, digest in data_first:  # name the data file that changed, not the SHA256SUMS re-written over it
        if name not in signed:
            return f"does not cover {paths.show_name(name)} (a file sealed after signing)"
        if signed[name] != digest:
            return (f"covers another {paths.show_name(name)} (changed after signing: "
                    f"edited and re-sealed?)")
    for name in signed:
        if name not in now:
            return f"covers {paths.show_name(name)}, which the folder does not have (a signature over other files)"
    return None


def check(root: str | Path, signers: str | Path | None = None) -> list[SignatureCheck]:
    """Check every signature of a folder against its files as they are now (call after the seal verifies).

    Args:
        root: the bundle or study folder.
        signers: an allowed-signers file; None checks each signature with the key inside it only.

    Returns:
        One :class:`SignatureCheck` per signature, in file order; [] when the folder is not signed.

    Raises:
        SigningError (exit 1): the attestation file cannot be read or has a bad line (:func:`read_envelopes`).
        UsageError (exit 2): ``signers`` is unusable or has a line ssh-keygen cannot read.
    """
    p = Path(root)
    signers_path = check_signers_file(signers) if signers is not None else None
    _check_nested(p)
    envelopes = read_envelopes(p)
    now = subjects(p) if envelopes else {}
    if signers_path is None or not envelopes:
        return _check_each(envelopes, now, None, signers_path)
    with _ssh_copy(signers_path) as ssh_signers:
        return _check_each(envelopes, now, ssh_signers, signers_path)


def _check_each(envelopes: list, now: dict[str, str], ssh_signers: Path | None,
                signers_path: Path | None) -> list[SignatureCheck]:
    """:func:`check`'s loop: one :class:`SignatureCheck` per signature of ``envelopes``."""
    out = []
    for line, env, stmt in envelopes:
        cover = _coverage_problem(stmt, now)
        signed = (stmt.get("predicate", {}).get("signed") or {}).get("utc")
        pae = env.pae()
        for sig in env.signatures.values():
            blob = bytes.fromhex(sig.signature)
            fp, key_type, why = _check_novalidate(pae, blob)
            principal = None
            if why:
                problem = f"the signature of {sig.keyid} does not check: {why}"
            elif fp != sig.keyid:
                problem = f"keyid {sig.keyid} is not the key that signed ({fp})"
            elif cover:
                problem = f"the signature of {key_type} key {fp} {cover}"
            elif ssh_signers is not None:
                principal, problem = _check_with_signers(pae, blob, ssh_signers,
                                                          signed if isinstance(signed, str) else None, signers_path)
            else:
                problem = None
            out.append(SignatureCheck(line, fp or sig.keyid, key_type or "unknown", principal,
                                      signed if isinstance(signed, str) else None, problem))
    return out


def _check_nested(root: Path) -> None:
    """For a study: each nested bundle's attestation file must read and its signatures hold, as
    ``evidence verify`` of that bundle alone asks (the study's signers file is the policy of the
    study's own signatures; a nested one need only hold). Nothing for a bundle.

    Raises:
        SigningError (exit 1): names the nested file (``FOLDER/attestations.intoto.jsonl``), its
            line and why.
    """
    if not _is_study(root):
        return
    from capshim.evidence import study
    for rel in (study.read_study(root) or {}).get("bundles", []):
        try:
            checks = check(root / rel)
        except SigningError as exc:
            raise SigningError(f"{paths.show_name(rel)}/{exc}", EXIT_WORKLOAD) from None
        for c in checks:
            if c.problem:
                raise SigningError(f"{paths.show_name(rel)}/{ATTESTATION_FILE} line {c.line}: {c.problem}",
                                   EXIT_WORKLOAD)


def sign(root: str | Path, key: str | Path) -> SignatureCheck:
    """Sign a sealed folder: append one DSSE envelope of its :func:`statement` to its attestation file.

    The folder must verify (seal, layout, nested bundles) and its attestation file, if any, must
    read; no sealed file is touched; the attestation file is replaced atomically.

    Args:
        root: a bundle or study folder.
        key: an SSH private key file, or a ``.pub`` whose private key ssh-agent holds.

    Returns:
        The check of the new signature (no problem).

    Raises:
        EvidenceError (exit 1): the folder does not verify (names the first problems), a signature
            it carries does not hold (:func:`check`), or this key already signed it (nothing written).
        SigningError: the attestation file has a bad line (exit 1); ssh-keygen failed.
        UsageError (exit 2): ``key`` is missing or not a key ssh-keygen can sign with.
        StorageError (exit 4): the disk is full.
    """
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import Signature

    from capshim.evidence import study
    from capshim.evidence.verify import verify
    p = Path(root)
    if p.is_symlink() or not p.is_dir():
        raise UsageError(f"evidence sign {p}: not a folder")
    problems = study.verify(p) if study.is_study(p) else verify(p)
    if problems:
        raise EvidenceError(f"{p}: does not verify, not signed: " + "; ".join(problems[:5]), EXIT_WORKLOAD)
    envelopes = read_envelopes(p)
    for c in check(p):  # never add to a file that verify refuses: a bad line stays the reader's problem
        if c.problem:
            raise EvidenceError(f"{ATTESTATION_FILE} line {c.line}: {c.problem}; not signed (a signature that "
                                "no longer holds is removed by hand, deliberately)", EXIT_WORKLOAD)
    stmt = statement(p)
    payload = _jsonl(stmt).encode()
    env = Envelope(payload, PAYLOAD_TYPE, {})
    blob, keyid, key_type = _sign_pae(env.pae(), str(key))
    for line, old, old_stmt in envelopes:
        if keyid in old.signatures and _coverage_problem(old_stmt, subjects(p)) is None:
            raise EvidenceError(f"{p}: already signed by {key_type} key {keyid} ({ATTESTATION_FILE} line {line}); "
                                "nothing written", EXIT_WORKLOAD)
    env.signatures[keyid] = Signature(keyid, blob.hex())
    old_text = (p / ATTESTATION_FILE).read_bytes() if envelopes else b""
    text = old_text + _jsonl(env.to_dict()).encode() + b"\n"
    # the output rule (contracts.output): the one file a sealed folder takes, replaced whole (the old lines and
    # one more), never through a link or into a FIFO; a full disk is exit 4 and leaves the old file
    output.write_file(p / ATTESTATION_FILE, text, replace=True, sealed_ok=True, inputs=[key])
    return SignatureCheck(len(envelopes) + 1, keyid, key_type, None, stmt["predicate"]["signed"]["utc"], None)


def sign_sealed(root: str | Path, key: str | Path) -> str:
    """:func:`sign` for ``bench --sign``: the line to print, or the error saying the bundle stays sealed.

    Raises:
        CapshimError: :func:`sign`'s, its message starting ``--sign KEY: BUNDLE is sealed but not signed``
            (its exit code kept).
    """
    try:
        c = sign(root, key)
    except CapshimError as exc:
        raise type(exc)(f"--sign {key}: {root} is sealed but not signed: {exc}", exc.exit_code) from None
    return f"{Path(root) / ATTESTATION_FILE} line {c.line} by {c.who()}"


def _jsonl(value) -> str:
    """``value`` as one line of compact JSON with sorted keys (a JSON Lines record)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
