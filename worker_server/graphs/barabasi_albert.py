"""Barabási–Albert preferential attachment with networkx's repeated-nodes list, all at once.

networkx starts from a star (agent 0 joined to 1..m), then each new agent s draws m distinct
targets uniformly from a list holding every agent once per unit of degree, and appends its
targets and m copies of itself. That looks sequential, but the list's length before agent s is
known in advance, 2m(s - m), and so is what sits at each position: a slot holding "agent t" is
fixed, a slot holding "agent t's j-th target" points at an earlier draw. So every draw picks its
position up front and pointers are followed by pointer jumping (about log2 of the longest chain
in passes over shrinking arrays). Draws that repeat a target their agent already drew are
redrawn; the change flows down to the draws that copied them (found through an index of who
points at whom), and their agents are checked again, until no agent repeats a target.
"""

from __future__ import annotations

import numpy as np

from worker_server.graphs.csr import Graph, from_keys

# Redraw rounds are few (a few hundred repeats in 5·10^6 draws at m = 5, nearly all among the
# early, high-degree agents); this only bounds a bug.
MAX_REDRAW_ROUNDS = 10_000
# Cells (draws × tries × m) one multi-try redraw round may compare: bounds its memory.
MAX_TRY_CELLS = 2**24
FIXED = -1  # a draw whose list slot holds an agent, not another draw's target


def barabasi_albert(n: int, m: int, rng: np.random.Generator) -> Graph:
    star = np.arange(1, m + 1, dtype=np.int64)  # edges (0, i): key 0 * n + i
    arrivals = n - m - 1
    if arrivals <= 0:
        return from_keys(n, star)
    owner = np.repeat(np.arange(m + 1, n, dtype=np.int64), m)  # agent making each draw
    list_length = 2 * m * (owner - m)
    parent, target = _slots(rng.integers(0, list_length), m)
    _follow(parent, target)
    copies = _CopyIndex(parent)
    rows = np.arange(arrivals, dtype=np.int64)  # agents (as arrival rows) to check for repeats
    for attempt in range(MAX_REDRAW_ROUNDS):
        redrawn = _repeated_draws(target, rows, m)
        if redrawn.size == 0:
            break
        parent[redrawn], target[redrawn] = _redraw(redrawn, target, list_length, m, attempt, rng)
        copies.add(parent[redrawn], redrawn)
        changed = _propagate(redrawn, parent, target, copies)
        rows = np.union1d(changed // m, redrawn // m)
    else:
        raise RuntimeError("barabasi_albert: repeated targets did not settle")
    keys = np.sort(target * n + owner)  # target < owner: the canonical (lo, hi) key
    # Mirrored keys (owner, target) come sorted almost free: owners ascend, each owner's m
    # targets are sorted within their row; the star's (i, 0) sort before every arrival.
    mirrored = owner * n + np.sort(target.reshape(arrivals, m), axis=1).reshape(-1)
    return from_keys(n, np.concatenate([star, keys]), mirrored=np.concatenate([star * n, mirrored]))


def _redraw(redrawn, target, list_length, m: int, attempt: int, rng: np.random.Generator):
    """New (parent, target) for draws that repeated a target of their agent.

    Later rounds try several positions per draw and keep the first whose agent the row does not
    hold yet (networkx draws until it gets a new one): when m is close to the size, the last
    free agent of a row can be one slot in 2m, and one try per round would take ~2m rounds.
    """
    tries = min(2 ** min(attempt, 10), MAX_TRY_CELLS // max(redrawn.size * m, 1))
    if tries <= 1:
        return _slots(rng.integers(0, list_length[redrawn]), m)
    count = redrawn.size
    where = rng.integers(0, list_length[redrawn][:, None], size=(count, tries))
    parent, value = _slots(where.reshape(-1), m)
    copying = parent != FIXED
    value[copying] = target[parent[copying]]
    parent, value = parent.reshape(count, tries), value.reshape(count, tries)
    row = target.reshape(-1, m)[redrawn // m]
    new = ~(value[:, :, None] == row[:, None, :]).any(axis=2)
    pick = np.where(new.any(axis=1), new.argmax(axis=1), tries - 1)
    chosen = np.arange(count)
    return parent[chosen, pick], value[chosen, pick]


def _slots(position: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Per draw: the earlier draw its list slot copies (or FIXED) and the agent if fixed."""
    target = np.full(position.size, -1, dtype=np.int64)
    parent = np.full(position.size, FIXED, dtype=np.int64)
    in_star = position < 2 * m  # the star's slots: m copies of agent 0, then agents 1..m
    target[in_star] = np.where(position[in_star] < m, 0, position[in_star] - m + 1)
    block, slot = np.divmod(position[~in_star] - 2 * m, 2 * m)
    listed = np.flatnonzero(~in_star)
    own_copy = slot >= m  # a block's second half: its agent's m copies of itself
    target[listed[own_copy]] = block[own_copy] + m + 1
    parent[listed[~own_copy]] = block[~own_copy] * m + slot[~own_copy]
    return parent, target


def _follow(parent: np.ndarray, target: np.ndarray) -> None:
    """Fill target for draws that copy another draw, by pointer jumping (in place)."""
    jump = parent.copy()
    chasing = np.flatnonzero(jump != FIXED)
    while chasing.size:
        via = jump[chasing]
        onward = jump[via]  # read before any write of this pass
        landed = onward == FIXED
        target[chasing[landed]] = target[via[landed]]
        jump[chasing] = onward  # a chain's remaining length halves each pass
        chasing = chasing[~landed]


class _CopyIndex:
    """Who copies whom: the first draws' pairs, sorted once, plus a small side index of pairs
    made by redraws. A redrawn draw's old pair stays in place: following it only recomputes a
    draw from its real parent, which changes nothing, and it spares an O(draws) edit per round
    (at 10^7 agents those edits were most of the time)."""

    def __init__(self, parent: np.ndarray):
        copier = np.flatnonzero(parent != FIXED)
        order = np.argsort(parent[copier], kind="stable")
        self._sorted = (parent[copier][order], copier[order])
        self._side = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))

    def add(self, copied: np.ndarray, copier: np.ndarray) -> None:
        keep = copied != FIXED
        merged_from = np.concatenate([self._side[0], copied[keep]])
        merged_copier = np.concatenate([self._side[1], copier[keep]])
        order = np.argsort(merged_from, kind="stable")
        self._side = (merged_from[order], merged_copier[order])

    def copiers(self, draws: np.ndarray) -> np.ndarray:
        found = []
        for copied_from, copier in (self._sorted, self._side):
            lo = np.searchsorted(copied_from, draws, side="left")
            hi = np.searchsorted(copied_from, draws, side="right")
            found.append(copier[_ranges(lo, hi)])
        return np.concatenate(found)


def _propagate(redrawn, parent, target, copies: _CopyIndex) -> np.ndarray:
    """Recompute the redrawn draws and everything that copies them; return changed draws."""
    changed = [redrawn]
    frontier = redrawn
    first = True
    while frontier.size:
        source = parent[frontier]
        copying = source != FIXED
        fresh = target[frontier].copy()
        fresh[copying] = target[source[copying]]
        # A redrawn draw counts as changed even if it landed on the same agent.
        moved = np.ones(frontier.size, dtype=bool) if first else fresh != target[frontier]
        target[frontier] = fresh
        frontier = frontier[moved]
        changed.append(frontier)
        frontier = copies.copiers(frontier)
        first = False
    return np.concatenate(changed)


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Concatenation of arange(lo[i], hi[i]) over i, without a Python loop."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return starts + np.arange(total, dtype=np.int64)


def _repeated_draws(target: np.ndarray, rows: np.ndarray, m: int) -> np.ndarray:
    """Draw indices that repeat an earlier draw's target within the same row (agent)."""
    if rows.size == 0 or m == 1:
        return np.empty(0, dtype=np.int64)
    grid = target.reshape(-1, m)[rows]
    order = np.argsort(grid, axis=1, kind="stable")
    ordered = np.take_along_axis(grid, order, axis=1)
    later = ordered[:, 1:] == ordered[:, :-1]  # the later draw of an equal pair
    row, col = np.nonzero(later)
    return rows[row] * m + order[row, col + 1]
