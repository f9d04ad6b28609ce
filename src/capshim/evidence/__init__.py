"""Evidence bundles: write them as a bench runs, finalize them with the bench's steps, verify them.

Storage only: this package never imports the analysis, the report or the
exporters. The bench hands its finalize steps to the bundle
(:class:`~capshim.evidence.finalize.Step`, made by :func:`capshim.bench.summarize.steps`).

- :mod:`.files`: bytes of a bundle's files (strict JSON, host facts, hashes), the write error;
- :mod:`.bundle`: :class:`Bundle` (create, store runs, metadata.json, finalize);
- :mod:`.finalize`: the finalize steps run isolated under the seal guard, then the seal;
- :mod:`.seal`: SHA256SUMS over a folder and its check (bundles and study folders);
- :mod:`.verify`: ``capshim evidence verify`` of a bundle (seal, layout, runs, metadata shape).

Use::

    b = Bundle.create(out_dir, metadata={...})
    b.write_run("native", 1, stdout=..., stderr=..., status_src=path_or_None)   # as runs finish
    summary = b.finalize(report.bundle_steps(records, arms, "native"), interrupted=False)

``finalize`` may be called with whatever finished (on Ctrl-C or a crash): it
always writes a complete, verifiable bundle. ``verify(dir)`` lists problems;
``capshim evidence verify DIR`` prints them and exits 1.
"""

from __future__ import annotations

from capshim.contracts.folders import unique_folder
from capshim.contracts.signals import SEAL_WAIT_S, StepInterrupted
from capshim.evidence.bundle import STATUS_COPY_LIMIT, Bundle, seal_guard
from capshim.evidence.files import (DOC_FILE, DOC_LIMIT, EvidenceError, finite_or_null, host_metadata, sha256_file,
                                    strict_json)
from capshim.evidence.finalize import Step
from capshim.evidence.seal import MAX_DEPTH, bundle_files, check_seal, foreign_entries, unsealed_documentation
from capshim.evidence.verify import LAYOUT_FILES, REQUIRED_FILES, require_verified, verify
from capshim.paths import SUMS_NAME, StorageError

__all__ = ["Bundle", "Step", "EvidenceError", "sha256_file", "verify", "check_seal", "require_verified",
           "REQUIRED_FILES", "LAYOUT_FILES", "host_metadata", "unique_folder", "strict_json", "finite_or_null",
           "SUMS_NAME", "SEAL_WAIT_S", "seal_guard", "StepInterrupted", "STATUS_COPY_LIMIT", "MAX_DEPTH",
           "bundle_files", "foreign_entries", "StorageError", "DOC_FILE", "DOC_LIMIT", "unsealed_documentation"]

