"""Each study's settings when the user gives none: the ONE table the studies and their ``--help`` read.

Imports nothing (the CLI reads it for its help text at start-up). Per study, the values on a
CPU Vulkan device (lavapipe) and on a GPU:

* CPU: short processes (about 2.5 s each with the tiny model on 2 cores once Mesa's shader
  cache is filled); the warm-up round fills that cache: on lavapipe a process that compiles the
  shaders measures faster than one that reads them from the cache (capshim.bench.plan), so a
  cold first process would skew its arm.
* ``tune`` on a GPU is sized for one command under 10 minutes on the H200 with tinyllama-1.1b:
  8 candidates (every single change there), stages of 9 x 3 and 5 x 5 processes, confirmation 3 x 11.
* ``kernels`` runs one small untimed pass per model and answers, on any device: a prompt batch
  (the matrix-matrix path) and a few generated tokens (the matrix-vector path).

Units: ``repetitions``, ``confirm``: processes per arm; ``warmup``: unrecorded rounds;
``n_prompt``, ``n_gen``: tokens; ``budget``: candidates.
"""

from __future__ import annotations

DEFAULTS: dict[str, dict[str, dict[str, int]]] = {
    "ablate": {"cpu": {"repetitions": 2, "warmup": 1, "n_prompt": 64, "n_gen": 16},
               "gpu": {"repetitions": 10, "warmup": 1, "n_prompt": 512, "n_gen": 128}},
    "tune": {"cpu": {"repetitions": 2, "warmup": 1, "n_prompt": 64, "n_gen": 16, "confirm": 2, "budget": 4},
             "gpu": {"repetitions": 2, "warmup": 1, "n_prompt": 512, "n_gen": 128, "confirm": 10, "budget": 8}},
    "kernels": {"any": {"n_prompt": 64, "n_gen": 4}},
}


def for_device(study: str, cpu: bool) -> dict[str, int]:
    """The :data:`DEFAULTS` of ``study`` (``ablate``, ``tune``) on a CPU device (``cpu``) or a GPU."""
    return DEFAULTS[study]["cpu" if cpu else "gpu"]


def help_text(study: str, key: str) -> str:
    """``[default: 10 on a GPU, 2 on a CPU device]`` (one value when both are the same), for ``--help``."""
    gpu, cpu = DEFAULTS[study]["gpu"][key], DEFAULTS[study]["cpu"][key]
    return f"[default: {gpu}]" if gpu == cpu else f"[default: {gpu} on a GPU, {cpu} on a CPU device]"
