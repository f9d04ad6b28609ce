"""Regenerate, or check, the files made from the capability table.

``python -m capshim.profiles.generate [--write] [--root DIR]``: without
``--write`` exit 1 (naming each file) when a generated file differs from what
``capabilities.toml`` gives; with it, rewrite those files. See
:mod:`capshim.profiles.table`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from capshim.profiles.cudatable import render_cuda_docs, render_cuda_table_h
from capshim.profiles.table import load, render_caps_table_h, render_docs


def generated_files(root: Path) -> dict[Path, str]:
    """Generated path (under the repository ``root``) -> its text from the shipped table."""
    table = load()
    return {root / "src/capshim/native/vulkan/caps_table.h": render_caps_table_h(table),
            root / "src/capshim/native/cuda/cuda_table.h": render_cuda_table_h(table),
            root / "docs/capabilities.md": render_docs(table) + render_cuda_docs(table)}


def main(argv: list[str] | None = None) -> int:
    """``python -m capshim.profiles.generate [--write] [--root DIR]``: check (exit 1 on drift) or rewrite the generated files."""
    ap = argparse.ArgumentParser(prog="python -m capshim.profiles.generate", description=main.__doc__)
    ap.add_argument("--write", action="store_true", help="rewrite the generated files")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[3], help="repository root")
    args = ap.parse_args(argv)
    stale = []
    for path, text in generated_files(args.root).items():
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        if args.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        else:
            stale.append(path)
    for path in stale:
        print(f"{path}: differs from capabilities.toml (run python -m capshim.profiles.generate --write)",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
