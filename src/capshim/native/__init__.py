"""Native sources of the shims (C), one folder per API, and the build helper."""
