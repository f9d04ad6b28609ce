"""The studies: ablate, tune and kernels, clients of the bench (one seam: :func:`capshim.studies.common.run_arms`), and their seal (:mod:`capshim.studies.seal`)."""
