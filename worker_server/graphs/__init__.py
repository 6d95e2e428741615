"""Population graphs, shared by the manager and the workers (numpy only, no backend imports).

- `spec`: the `graph:` section of a population config and its checks against the size;
- `csr`: the undirected simple graph in CSR form and the one way edges become one;
- `generators`: seeded generators per kind (same spec, size and seed → the same bytes);
- `storage`: the checksummed, memory-mapped file a population's graph lives in;
- `stats`: degree statistics, components and a clustering estimate for a population's record;
- `cut`: the share of edges a contiguous id-range split cuts.
"""
