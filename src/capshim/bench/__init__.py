"""``capshim bench``: arms, workloads, statistics, path attestation and evidence."""
