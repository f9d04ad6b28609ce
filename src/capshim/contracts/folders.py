"""Output folders: one rule for bench bundles, study folders and report files.

- ``--out`` given: the folder must not exist yet or be empty; it is created.
  An empty ``--out ""`` is refused (it is not "no --out").
- ``--out`` not given: ``./capshim-KIND-YYYYmmdd-HHMMSS``, or ``...-2``,
  ``...-3`` when taken (``mkdir`` is atomic, so two commands started in the
  same second get two folders).
- Never inside a sealed bundle or study: no folder above the target may hold
  a ``SHA256SUMS`` (a sealed bundle is read-only evidence).
"""

from __future__ import annotations

import time
from pathlib import Path

from capshim.errors import CapshimError, UsageError, EXIT_STORAGE

SEAL_FILE = "SHA256SUMS"


def sealed_above(path: str | Path) -> Path | None:
    """The nearest folder above ``path`` that holds a SHA256SUMS (a sealed bundle or study), or None.

    Both the path as given and the path with its links resolved are checked, so a link to a
    folder inside a sealed bundle does not open a way into it.
    """
    given = Path(path).absolute()
    try:
        real = Path(path).resolve()  # a link on the way may lead into a sealed folder
    except (OSError, RuntimeError):
        real = given
    for p in (given, real):
        for folder in p.parents:
            try:
                if (folder / SEAL_FILE).is_file():
                    return folder
            except OSError:
                continue
    return None


def refuse_inside_sealed(path: str | Path, flag: str, folder: bool = False) -> None:
    """Refuse an output path inside a sealed bundle or study (``folder``: or that is one itself).

    Raises:
        UsageError: (exit 2) naming ``flag``, the path and the sealed folder.
    """
    sealed = sealed_above(Path(path) / SEAL_FILE if folder else path)
    if sealed is not None:
        raise UsageError(f"{flag} {path}: inside the sealed folder {sealed} (it has a {SEAL_FILE}); "
                         "write somewhere else so the evidence stays as it was sealed")


def unique_folder(base: Path) -> Path:
    """Create and return a new empty folder ``base``, or ``base-2``, ``base-3`` ... when taken.

    Raises:
        CapshimError: (exit 4) the parent folder cannot be written (names it).
    """
    for n in range(1, 1000):
        cand = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            cand.mkdir(parents=False)
            return cand
        except FileExistsError:
            continue
        except OSError as exc:
            raise CapshimError(f"{cand}: cannot create the output folder: {exc.strerror or exc}",
                               EXIT_STORAGE) from None
    raise UsageError(f"{base}: 999 folders of this name exist; give --out")


def check_out(out: str | Path | None, flag: str = "--out") -> None:
    """What can be said of ``out`` before anything runs: not empty, not inside a sealed folder.

    Raises:
        UsageError: (exit 2, naming ``flag``) an empty path, or one inside a sealed bundle or study.
    """
    if out is not None and not str(out).strip():
        raise UsageError(f"{flag}: an empty path: give a folder, or leave {flag} out for the default")
    if out is not None:
        refuse_inside_sealed(out, flag, folder=True)


def new_output_folder(out: str | Path | None, kind: str, flag: str = "--out") -> Path:
    """Create the output folder of a bench or study and return it.

    Args:
        out: the folder given with ``flag``, or None for a unique default.
        kind: ``bench``, ``ablate``, ``tune``, ``kernels`` ... (names the default).
        flag: the option that named ``out``, for errors.

    Raises:
        UsageError: (exit 2) ``out`` is empty, a file, a non-empty folder, or inside a sealed folder.
        CapshimError: (exit 4) the folder cannot be created.
    """
    check_out(out, flag)
    if out is None:
        return unique_folder(Path(f"capshim-{kind}-{time.strftime('%Y%m%d-%H%M%S')}"))
    path = Path(out)
    if path.exists() or path.is_symlink():
        if path.is_symlink() or not path.is_dir():
            raise UsageError(f"{flag} {path}: exists and is not a folder")
        try:
            empty = next(path.iterdir(), None) is None
        except OSError as exc:
            raise UsageError(f"{flag} {path}: cannot list it: {exc.strerror or exc}") from None
        if not empty:
            raise UsageError(f"{flag} {path}: exists and is not empty; give a new folder")
        return path
    try:
        path.mkdir(parents=True)
    except OSError as exc:
        raise CapshimError(f"{flag} {path}: cannot create the folder: {exc.strerror or exc}", EXIT_STORAGE) from None
    return path
