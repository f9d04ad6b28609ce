"""The studies: ablate, tune and kernels, clients of the bench (one seam: :func:`capshim.studies.common.run_arms`).

A study folder is sealed and verified by storage, :mod:`capshim.evidence.study`.
"""
