"""capshim: process-scoped GPU capability shims and evidence-grade A/B benchmarks.

One process at a time, capshim changes the capability answers a GPU API gives
(Vulkan through a layer, Metal through an injected dylib) and measures what
that does to a workload. See README.md and docs/.
"""

#: capshim's version, defined here only: pyproject.toml reads it (``[tool.setuptools.dynamic]``),
#: ``capshim --version`` prints it, metadata.json records it, and the native builds get it
#: (:data:`capshim.native.build.VERSION_DEFINE`, the Vulkan manifests' ``implementation_version``
#: and description); tests/native/test_version.py checks that they agree.
__version__ = "0.1.0"
