"""The rules several commands share, each written once.

- :mod:`.names`: what an arm, control, study or label may be called, and the
  file stems that names become in a bundle.
- :mod:`.numbers`: numbers from outside (options, files, workload output):
  finite floats, integers where the layer takes integers, bounded digits.
- :mod:`.signals`: which signals stop capshim, the exit code of each, and the
  guard that keeps a bundle's seal through any order of signals.
- :mod:`.folders`: output folders (new or empty, unique by default, never
  inside a sealed bundle or study).
- :mod:`.output`: output files (new, or replaced only when asked; never
  through a link, into a FIFO or device, inside a sealed folder or over an
  input; whole or not at all; a failed write is exit 4 naming the file).
- :mod:`.pasteable`: every command capshim prints for a user to paste,
  quoted so it runs as printed.
- :mod:`.environ`: environment variables whose bytes are not UTF-8.
- :mod:`.tomlread`: every TOML text capshim reads (size, nesting depth, array
  length and table size bounded before any validator sees it).
- :mod:`.verdict`: the one rule that says "improvement", "regression", "same"
  or "unclear" (and why), and the harness check of the A/A arm and controls.
- :mod:`.suggest`: "did you mean" for a name outside a closed set (keys,
  commands, presets, dimensions, metrics, choices).

These modules import only the standard library, :mod:`capshim.errors` and
each other; everything else may import them.
"""
