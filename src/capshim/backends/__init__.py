"""One module per GPU API: build its shim, give the environment that enables
it for one process, and probe the answers a process sees."""
