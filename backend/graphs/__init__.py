"""Manager-only graph work: where a population's graph file lives, and uploaded edge lists.

The graph itself (specs, generators, the file format) is shared with workers in
worker_server.graphs; see docs/networks.md.
"""
