"""The SSH side of evidence signatures: ``ssh-keygen -Y`` signs and checks, allowed-signers files
are read as git reads them.

Split from :mod:`capshim.evidence.signing` (which keeps the in-toto Statement, the DSSE
envelopes and the attestation file): nothing here knows a bundle. Sources: ssh-keygen(1)
("-Y sign", "-Y verify", "-Y find-principals", "-Y check-novalidate", "ALLOWED SIGNERS");
OpenSSH's PROTOCOL.sshsig (the armored signature); git commit facca53 ("ssh signing: verify
signatures using ssh-keygen"), the same calls git makes. No cryptography is written here.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from capshim import paths
from capshim.contracts import bounded
from capshim.errors import CapshimError, UsageError
from capshim.evidence.files import EvidenceError

NAMESPACE = "capshim-evidence"
"""The SSHSIG namespace (``ssh-keygen -Y sign -n``): a signature made for git ("git") or a file
("file") is never taken for a bundle's, and an allowed-signers line may limit a key to it
with ``namespaces="capshim-evidence"``."""


class SigningError(EvidenceError):
    """A signature could not be made or read: names the file, line or key (exit 2 by default)."""


_GOOD = re.compile(r'^Good "[^"]*" signature (?:for (?P<principal>.+) )?with (?P<type>\S+) key (?P<fp>SHA256:\S+)$')


def _ssh_keygen() -> str:
    exe = shutil.which("ssh-keygen")
    if not exe:
        raise UsageError("ssh-keygen: not found on PATH (signing uses OpenSSH's ssh-keygen -Y: "
                         "install the OpenSSH client, e.g. apt install openssh-client)")
    return exe


def _run(args: list[str], data: bytes, timeout: float | None = 60) -> subprocess.CompletedProcess:
    try:
        return bounded.run([_ssh_keygen(), *args], input=data, text=False, timeout=timeout,
                           group=timeout is not None)  # signing may ask for a passphrase on the terminal
    except subprocess.TimeoutExpired:
        raise SigningError(f"ssh-keygen {args[0]} {args[1]}: no answer in {timeout:.0f} s") from None
    except OSError as exc:
        raise SigningError(f"ssh-keygen: cannot run: {exc.strerror or exc}") from None


def _last_line(err: bytes) -> str:
    lines = [x.strip() for x in err.decode("utf-8", "replace").splitlines() if x.strip()]
    lines = [x for x in lines if not x.startswith("Signing data on")]
    return " ".join(lines[-1].split())[:300] if lines else "no reason given"


def _armor(blob: bytes) -> bytes:
    """The SSHSIG text form ssh-keygen reads (PROTOCOL.sshsig, "Armored format": base64 between markers)."""
    b64 = base64.b64encode(blob).decode()
    body = "\n".join(b64[i:i + 70] for i in range(0, len(b64), 70))
    return f"-----BEGIN SSH SIGNATURE-----\n{body}\n-----END SSH SIGNATURE-----\n".encode()


def _dearmor(text: bytes) -> bytes:
    lines = text.decode("ascii", "replace").strip().splitlines()
    if len(lines) < 3 or lines[0] != "-----BEGIN SSH SIGNATURE-----" or lines[-1] != "-----END SSH SIGNATURE-----":
        raise SigningError("ssh-keygen -Y sign: its output is not an SSH signature")
    return base64.b64decode("".join(lines[1:-1]), validate=True)


def _key_problem(key: str) -> str | None:
    """Why ``key`` cannot be handed to ssh-keygen, or None (existence and kind only; ssh-keygen reads it)."""
    try:
        st = os.stat(key)
    except OSError as exc:
        return f"--key {key}: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):
        return f"--key {key}: not a regular file (an SSH private key, or its .pub with the key in ssh-agent)"
    if st.st_size > 1 << 20:
        return f"--key {key}: {st.st_size} bytes, not an SSH key"
    return None


def require_key(key: str | Path | None) -> None:
    """Refuse, before a bench runs, a ``--sign`` key that is missing or not a regular file (None: no --sign).

    Raises:
        UsageError (exit 2): names the key and why (whether ssh-keygen can sign with it is
            known only when it signs).
    """
    problem = None if key is None else _key_problem(str(key))
    if problem:
        raise UsageError(problem.replace("--key", "--sign", 1))


def _sign_pae(pae: bytes, key: str) -> tuple[bytes, str, str]:
    """``(sshsig blob, SHA256 fingerprint, key type)`` of ``ssh-keygen -Y sign`` over ``pae`` with ``key``.

    ``key`` is a private key file (ssh-keygen asks for its passphrase on the terminal), or a
    public key whose private half ssh-agent holds (ssh-keygen(1): "-Y sign ... -f key_file ...
    a public key may be given and the private key is then used from ssh-agent").
    """
    problem = _key_problem(key)
    if problem:
        raise UsageError(problem)
    r = _run(["-Y", "sign", "-n", NAMESPACE, "-f", str(key)], pae, timeout=None)
    if r.returncode != 0 or not r.stdout.strip():
        why = _last_line(r.stderr)
        if why.startswith("Couldn't load public key"):  # neither a private key nor a public one (sshsig.c)
            raise UsageError(f"--key {key}: not an SSH private key (nor a .pub whose key ssh-agent holds)")
        raise UsageError(f"--key {key}: ssh-keygen cannot sign with it: {why} "
                         "(an OpenSSH private key, or a .pub whose key ssh-agent holds)")
    blob = _dearmor(r.stdout)
    keyid, key_type, why = _check_novalidate(pae, blob)
    if why:
        raise SigningError(f"--key {key}: ssh-keygen made a signature it cannot check: {why}")
    return blob, keyid, key_type


@contextlib.contextmanager
def _sig_file(blob: bytes):
    with tempfile.TemporaryDirectory(prefix="capshim-sig-") as d:
        f = Path(d) / "sig"
        f.write_bytes(_armor(blob))
        yield str(f)


def _check_novalidate(pae: bytes, blob: bytes) -> tuple[str, str, str | None]:
    """``(fingerprint, key type, problem or None)`` of ``ssh-keygen -Y check-novalidate``."""
    with _sig_file(blob) as f:
        r = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", f], pae)
    m = _GOOD.match(r.stdout.decode("utf-8", "replace").strip().splitlines()[-1] if r.stdout.strip() else "")
    if r.returncode != 0 or not m:
        return "", "", _last_line(r.stderr + r.stdout)
    return m.group("fp"), m.group("type"), None


_DATE_WINDOW = ("key has expired", "key is not yet valid")
"""How ssh-keygen (sshsig.c) says a line's valid-before/valid-after window does not hold the
verify time: a fact about that line's key, not a line it cannot read."""


@contextlib.contextmanager
def _ssh_copy(signers: Path):
    """The path to hand ssh-keygen for ``signers``: itself, or a copy with CRLF line ends made LF
    and blank lines made ``#`` comments, line numbers unchanged.

    ssh-keygen 9.2 reads a blank line (LF or CRLF) as a signer line with no key ("missing key");
    a file written on Windows, or spaced out by blank lines, is read as its plain twin.
    """
    data = _signers_bytes(signers)
    lines = data.replace(b"\r\n", b"\n").split(b"\n")
    last = len(lines) - 1  # the empty piece after a final newline is not a line
    plain = b"\n".join(b"#" if not x.strip() and (x or i != last) else x for i, x in enumerate(lines))
    if plain == data:
        yield signers
        return
    with tempfile.TemporaryDirectory(prefix="capshim-signers-") as d:
        f = Path(d) / "allowed_signers"
        f.write_bytes(plain)
        yield f


def _signers_line_problem(err: bytes, signers: Path, shown: Path | None = None) -> str | None:
    """The first complaint of ssh-keygen about a line of the allowed-signers file ("FILE:N: why"),
    its date-window notes (:data:`_DATE_WINDOW`) left out: they concern one key only. ``signers``
    is the file ssh-keygen read, ``shown`` the one to name (default ``signers``)."""
    pat = re.compile(rf"^{re.escape(str(signers))}:(\d+): (.+)$")
    for line in err.decode("utf-8", "replace").splitlines():
        m = pat.match(line.strip())
        if m and not m.group(2).startswith(_DATE_WINDOW):
            return (f"--signers {shown or signers}: line {m.group(1)}: {m.group(2)} (each line: principals "
                    "[options] key-type base64-key, as git's gpg.ssh.allowedSignersFile; ssh-keygen(1) "
                    "\"ALLOWED SIGNERS\")")
    return None


def _verify_time(signed_utc: str | None) -> list[str]:
    """``["-Overify-time=YYYYmmddHHMMSSZ"]`` for a signing time ``YYYY-mm-ddTHH:MM:SSZ``, else [].

    An allowed-signers line's valid-after/valid-before window is checked at the time the signed
    statement says it was signed, as git does with the commit time (ssh-keygen(1) ``-O
    verify-time``); without a readable time, ssh-keygen uses now.
    """
    if isinstance(signed_utc, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", signed_utc):
        return [f"-Overify-time={re.sub(r'[-:T]', '', signed_utc)}"]
    return []


def _check_with_signers(pae: bytes, blob: bytes, signers: Path, signed_utc: str | None = None,
                        shown: Path | None = None) -> tuple[str | None, str | None]:
    """``(principal or None, problem or None)``: the allowed signer whose key made ``blob``.

    Its line's date window is checked at ``signed_utc`` (:func:`_verify_time`); a key whose only
    lines are out of their window at that time gives ``(None, "... key has expired ...")``. A key
    on several lines (other principals, namespaces or windows) is tried on each, as
    ``-Y find-principals`` names the first line's principals only; the first refusal is returned
    when none takes it. ``signers`` is the file ssh-keygen reads, ``shown`` the one to name.
    """
    first = _principal_of(pae, blob, signers, signed_utc, shown)
    if first == (None, None) or first[1] is None:
        return first
    for one in _each_line_of_key(pae, blob, signers):
        principal, problem = _principal_of(pae, blob, one, signed_utc, shown)
        if principal and not problem:
            return principal, None
    return first


def _each_line_of_key(pae: bytes, blob: bytes, signers: Path):
    """Copies of ``signers`` (one at a time, same line numbers) keeping a single line that names
    the key which made ``blob``; nothing when at most one line does."""
    with _sig_file(blob) as f:
        r = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", f, "-Oprint-pubkey"], pae)
    key = [w for x in r.stdout.split(b"\n")[1:] for w in x.split()[1:2]]  # "TYPE BASE64" after "Good ..."
    lines = _signers_bytes(signers).split(b"\n")
    hits = [i for i, x in enumerate(lines) if key and key[0] in x.split() and not x.lstrip().startswith(b"#")]
    if len(hits) < 2:
        return
    with tempfile.TemporaryDirectory(prefix="capshim-signers-") as d:
        one = Path(d) / "allowed_signers"
        for i in hits:
            one.write_bytes(b"\n".join(x if j == i else b"#" for j, x in enumerate(lines)))
            yield one


def _principal_of(pae: bytes, blob: bytes, signers: Path, signed_utc: str | None,
                  shown: Path | None) -> tuple[str | None, str | None]:
    """:func:`_check_with_signers` over the first line of ``signers`` naming the key: each of its
    principals is tried with ``-Y verify``."""
    when = _verify_time(signed_utc)
    name = str(shown or signers)
    with _sig_file(blob) as f:
        r = _run(["-Y", "find-principals", "-n", NAMESPACE, "-s", f, "-f", str(signers), *when], b"")
        bad_line = _signers_line_problem(r.stderr, signers, shown)
        if bad_line:
            raise UsageError(bad_line)
        if r.returncode != 0:
            window = [x.strip().replace(str(signers), name, 1)
                      for x in r.stderr.decode("utf-8", "replace").splitlines() if any(w in x for w in _DATE_WINDOW)]
            if window:  # the key is listed, but not for the time it signed
                at = f" (signed {signed_utc})" if when else ""
                return None, f"--signers {window[0][:240]}{at}"
            return None, None  # no principal: the key is not in the file
        principals = [x.strip() for x in r.stdout.decode("utf-8", "replace").splitlines() if x.strip()][:16]
        first = None
        for principal in principals:
            v = _run(["-Y", "verify", "-n", NAMESPACE, "-f", str(signers), "-I", principal, "-s", f, *when], pae)
            out = v.stdout.decode("utf-8", "replace").strip()
            if v.returncode == 0 and _GOOD.match(out.splitlines()[-1] if out else ""):
                return principal, None
            if first is None:
                err = v.stderr.decode("utf-8", "replace").splitlines()
                said = [x.strip().replace(str(signers), name, 1) for x in err if x.strip().startswith(f"{signers}:")]
                why = f"--signers {said[0][:240]}" if said else _last_line(v.stderr + v.stdout)
                first = (principal, f"ssh-keygen -Y verify refuses it for {principal}: {why}")
    return first or (None, None)


SIGNERS_MAX_BYTES = 1 << 20
"""The largest allowed-signers file read (a line per key: thousands of keys fit)."""


def _signers_bytes(signers: Path) -> bytes:
    """An allowed-signers file's bytes: a regular file of at most :data:`SIGNERS_MAX_BYTES`
    (:func:`capshim.paths.read_limited`: a FIFO or device is refused before any read).

    Raises:
        OSError: not a regular file, larger, or unreadable.
    """
    return paths.read_limited(signers, SIGNERS_MAX_BYTES)


def check_signers_file(signers: str | Path) -> Path:
    """``signers`` as a Path when it is a readable regular file with at least one signer line.

    Raises:
        UsageError (exit 2): missing, not a regular file, over 1 MiB, not UTF-8, or no signer in it.
    """
    p = Path(signers)
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"--signers {p}: not a regular file (an allowed-signers file, as git's "
                             "gpg.ssh.allowedSignersFile)")
        if st.st_size > SIGNERS_MAX_BYTES:
            raise UsageError(f"--signers {p}: {st.st_size} bytes, over the {SIGNERS_MAX_BYTES >> 20} MiB an "
                             "allowed-signers file may have")
        text = _signers_bytes(p).decode("utf-8")
    except OSError as exc:
        raise UsageError(f"--signers {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--signers {p}: not UTF-8 text (byte {exc.start})") from None
    if not any(x.strip() and not x.lstrip().startswith("#") for x in text.splitlines()):
        raise UsageError(f"--signers {p}: no signer in it (each line: principals [options] key-type base64-key)")
    p = p.absolute()
    with _ssh_copy(p) as f:
        _read_every_line(f, p)
    return p


def _read_every_line(signers: Path, shown: Path) -> None:
    """Have ssh-keygen read every line of ``signers``; UsageError naming the first it cannot read.

    ``-Y find-principals`` stops at the first line whose key made the signature, so it is asked
    about a signature of a throwaway key that no line can name: it then reads the whole file.
    """
    with tempfile.TemporaryDirectory(prefix="capshim-probe-") as d:
        key = Path(d) / "probe"
        r = _run(["-q", "-t", "ed25519", "-N", "", "-C", "probe", "-f", str(key)], b"")
        if r.returncode != 0:
            raise SigningError(f"ssh-keygen cannot make a key to read --signers {signers}: {_last_line(r.stderr)}")
        s = _run(["-Y", "sign", "-n", NAMESPACE, "-f", str(key)], b"probe")
        if s.returncode != 0:
            raise SigningError(f"ssh-keygen cannot sign to read --signers {signers}: {_last_line(s.stderr)}")
        (Path(d) / "sig").write_bytes(s.stdout)
        r = _run(["-Y", "find-principals", "-s", str(Path(d) / "sig"), "-f", str(signers)], b"")
    bad_line = _signers_line_problem(r.stderr, signers, shown)
    if bad_line:
        raise UsageError(bad_line)


# --- the attestation file ---------------------------------------------------------------

