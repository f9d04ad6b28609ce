"""The workloads a bench runs: one adapter per kind (:mod:`.base` is the seam the runner calls).

llama_bench (a llama-bench command), command (``--metric`` / ``--control``), builtin (llama.cpp
through cyllama) and ncnn; the child programs (builtin_worker, ncnn_worker) import nothing of
the parent side.
"""
