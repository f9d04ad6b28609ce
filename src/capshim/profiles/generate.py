"""Regenerate, or check, the files made from the capability table and the Khronos registry.

``python -m capshim.profiles.generate [--write] [--root DIR]``: without ``--write`` exit 1
(naming each file) when a generated file differs from what ``capabilities.toml`` and the
registry give; with it, rewrite those files. The files: ``registry_facts.toml`` (the Vulkan
keys' struct facts, read from vk.xml through vulkan-object: :mod:`capshim.profiles.registry`),
``native/common/config_limits.h``, ``native/vulkan/caps_table.h``, ``native/cuda/cuda_table.h`` and
``docs/capabilities.md``
(:mod:`capshim.profiles.table`, :mod:`capshim.profiles.cudatable`).
A table or registry mistake (a member vk.xml lacks, a struct it does not have) is exit 2 with
one line naming it. Without vulkan-object the check still compares the other files with
the committed facts and says that the facts were not checked; ``--write`` then exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from capshim.contracts import output
from capshim.errors import CapshimError
from capshim.contracts import tomlread
from capshim.profiles import registry
from capshim.profiles.cudatable import render_cuda_docs, render_cuda_table_h
from capshim.profiles.table import (TableError, parse, registry_facts, render_caps_table_h, render_config_limits_h,
                                    render_docs, shipped_text)

FACTS = "src/capshim/profiles/" + registry.FACTS_FILE


def _committed(path: Path) -> tuple[str, registry.Facts] | None:
    """(text, facts) of the committed facts file, or None when it is missing or unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
        return text, registry.parse(text, str(path))
    except (OSError, registry.RegistryError, tomlread.TomlError):
        return None


def generated_files(root: Path, check_registry: bool = True) -> dict[Path, str]:
    """Generated path (under the repository ``root``) -> its text from the shipped table.

    With ``check_registry`` the facts are read from vk.xml (vulkan-object); the committed facts
    file's text is kept when it says the same (:func:`capshim.profiles.registry.same`: a newer
    registry that changes none of the table's facts is no drift). Without it the committed
    facts are used and the facts file is not among the results.

    Raises:
        TableError: the table breaks a rule, vk.xml refuses a key, or no vulkan-object with
            ``check_registry``.
    """
    text = shipped_text()
    path = root / FACTS
    committed = _committed(path)
    out = {}
    if check_registry:
        facts = registry_facts(text, committed[1].registry if committed else None)
        if committed and registry.same(committed[1], facts):
            out[path], facts = committed
        else:
            out[path] = registry.render(facts)
    elif committed:
        facts = committed[1]
    else:
        raise TableError(f"{path} is missing and vulkan-object is not installed to generate it")
    table = parse(text, facts)
    out[root / "src/capshim/native/common/config_limits.h"] = render_config_limits_h(table)
    out[root / "src/capshim/native/vulkan/caps_table.h"] = render_caps_table_h(table)
    out[root / "src/capshim/native/cuda/cuda_table.h"] = render_cuda_table_h(table)
    out[root / "docs/capabilities.md"] = render_docs(table) + render_cuda_docs(table)
    return out


def _has_registry() -> bool:
    try:
        registry.registry_object()
    except registry.RegistryError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m capshim.profiles.generate [--write] [--root DIR]``: check (exit 1 on drift) or rewrite the generated files."""
    ap = argparse.ArgumentParser(prog="python -m capshim.profiles.generate", description=main.__doc__)
    ap.add_argument("--write", action="store_true", help="rewrite the generated files")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[3], help="repository root")
    args = ap.parse_args(argv)
    with_registry = _has_registry()
    if not with_registry:
        print("note: vulkan-object is not installed (pip install -e '.[test]'): registry_facts.toml was not "
              "checked against vk.xml", file=sys.stderr)
        if args.write:
            print("error: --write needs vulkan-object to read vk.xml", file=sys.stderr)
            return 2
    try:
        files = generated_files(args.root, with_registry)
    except TableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    stale = []
    for path, text in files.items():
        if path.is_file() and path.read_bytes() == text.encode("utf-8"):  # bytes: a Latin-1 edit is drift
            continue
        if args.write:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                output.write_file(path, text.encode("utf-8"), "--write", replace=True)  # contracts.output
            except OSError as e:
                print(f"error: {path}: cannot write: {e.strerror or e}", file=sys.stderr)
                return 2
            except CapshimError as e:
                print(f"error: {e}", file=sys.stderr)
                return e.exit_code
            print(f"wrote {path}")
        else:
            stale.append(path)
    for path in stale:
        print(f"{path}: differs from capabilities.toml and vk.xml (run python -m capshim.profiles.generate --write)",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
