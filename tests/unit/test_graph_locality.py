"""`order: locality`: a breadth-first numbering that keeps neighbours' numbers close, so the id
ranges placed on each worker cut few edges; the same edges, ids and attributes otherwise."""

from __future__ import annotations

import numpy as np

from backend.graphs.edge_list import parse_edge_list
from worker_server.graphs.csr import Graph, canonical_keys, check_simple, from_keys
from worker_server.graphs.cut import cut_fraction
from worker_server.graphs.locality import locality_order, relabel
from worker_server.graphs.spec import parse_graph_spec


def graph_of(n: int, pairs: list[tuple[int, int]]) -> Graph:
    u, v = np.array(pairs).T
    return from_keys(n, np.sort(canonical_keys(u, v, n)))


def shuffled_ring(n: int, seed: int) -> Graph:
    """A ring lattice (each node joined to the next two) whose node numbers are shuffled."""
    pairs = [(i, (i + d) % n) for i in range(n) for d in (1, 2)]
    perm = np.random.default_rng(seed).permutation(n)
    return graph_of(n, [(perm[a], perm[b]) for a, b in pairs])


def test_the_order_is_a_permutation_by_component_with_isolated_nodes_last():
    #  component A: 5-6-7 (5 and 7 have degree 1); component B: 0-1, 1-2, 1-3 (0, 2, 3 degree 1)
    graph = graph_of(9, [(5, 6), (6, 7), (0, 1), (1, 2), (1, 3)])
    order = locality_order(graph)
    assert sorted(order.tolist()) == list(range(9))
    # Lowest degree first (ties: the lower node): 0 starts B, breadth first; then A from 5;
    # 4 and 8 have no edge.
    assert order.tolist() == [0, 1, 2, 3, 5, 6, 7, 4, 8]


def test_a_shuffled_ring_placed_in_two_ranges_cuts_few_edges_after_it():
    graph = shuffled_ring(2000, seed=1)
    halves = np.array([0, 1000, 2000])
    assert cut_fraction(graph, halves) > 0.4
    new_of, (u, v) = relabel(graph, locality_order(graph))
    ordered = from_keys(2000, np.sort(canonical_keys(u, v, 2000)))
    check_simple(ordered)
    assert ordered.edges == graph.edges
    assert cut_fraction(ordered, halves) < 0.01
    # Every edge is kept, renumbered.
    for a in range(0, 2000, 97):
        assert (
            sorted(new_of[graph.neighbours(a)].tolist()) == ordered.neighbours(new_of[a]).tolist()
        )


def test_an_edge_list_in_locality_order_keeps_its_ids_edges_and_attributes():
    rows = [(i, (i + 1) % 300) for i in range(300)]
    perm = np.random.default_rng(3).permutation(300) * 7 + 1000  # ids with no order in them
    edges = "source,target\n" + "".join(f"{perm[a]},{perm[b]}\n" for a, b in rows)
    nodes = "id,club\n" + "".join(f"{i},c{i % 5}\n" for i in perm)
    spec = parse_graph_spec(
        {"kind": "edge_list", "upload": "e.csv", "order": "locality",
         "nodes": {"upload": "n.csv", "id_column": "id"}}
    )  # fmt: skip
    parsed = parse_edge_list(spec, edges.encode(), nodes.encode())
    ids = np.array(parsed.ids.to_pylist())
    clubs = parsed.attributes.column("club").to_pylist()
    assert sorted(ids.tolist()) == sorted(perm.tolist())
    assert clubs == [f"c{i % 5}" for i in ids]  # each agent keeps its own row's attributes
    got = {tuple(sorted((ids[a], ids[b]))) for a in range(300) for b in parsed.graph.neighbours(a)}
    assert got == {tuple(sorted((perm[a], perm[b]))) for a, b in rows}
    assert cut_fraction(parsed.graph, np.array([0, 150, 300])) < 0.02
    # The file's row order changes nothing.
    again = parse_edge_list(spec, ("source,target\n" + "".join(
        f"{perm[b]},{perm[a]}\n" for a, b in reversed(rows))).encode(), nodes.encode())  # fmt: skip
    assert again.ids.to_pylist() == parsed.ids.to_pylist()
