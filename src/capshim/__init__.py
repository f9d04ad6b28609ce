"""capshim: process-scoped GPU capability shims and evidence-grade A/B benchmarks.

One process at a time, capshim changes the capability answers a GPU API gives
(Vulkan through a layer, Metal through an injected dylib) and measures what
that does to a workload. See README.md and docs/.
"""

__version__ = "0.1.0"
