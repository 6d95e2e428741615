"""The report's figures (matplotlib, PNG): each check's measurement beside its reference.
Returns the file name, relative to the report's folder."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a CI machine

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from backend.validate.references import final_size  # noqa: E402

DPI = 110
SIZE = (6.0, 3.6)


def _save(fig, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=DPI)
    plt.close(fig)
    return name


def voter(out: Path, unanimous: np.ndarray, expected: np.ndarray, k: int) -> str:
    fig, ax = plt.subplots(figsize=SIZE)
    t = np.arange(len(unanimous))
    ax.plot(t, unanimous, "o", markersize=3, label="measured")
    ax.plot(t, expected, "--", label="Markov chain (exact)")
    ax.set_xlabel("rounds of updates")
    ax.set_ylabel("share of cliques unanimous")
    ax.set_title(f"Voter model, cliques of {k}")
    ax.legend()
    return _save(fig, out, "voter.png")


def sir(out: Path, points: list[tuple[float, float]], tolerance: float) -> str:
    fig, ax = plt.subplots(figsize=SIZE)
    r = np.linspace(0, 3.5, 200)
    ax.plot(r, [final_size(x) for x in r], label="S = 1 - exp(-cT S)")
    xs, ys = zip(*points, strict=True)
    ax.errorbar(xs, ys, yerr=tolerance, fmt="o", capsize=3, label=f"measured (± {tolerance:g})")
    ax.set_xlabel("c · T")
    ax.set_ylabel("final attack rate")
    ax.set_title("SIR on Erdős–Rényi graphs")
    ax.legend()
    return _save(fig, out, "sir.png")


def hk(out: Path, shares: dict[float, tuple[float, float]]) -> str:
    """shares: epsilon -> (lowest, highest) share of replicas at consensus."""
    fig, ax = plt.subplots(figsize=SIZE)
    eps = sorted(shares)
    low = [shares[e][0] for e in eps]
    high = [shares[e][1] for e in eps]
    ax.bar([str(e) for e in eps], low, color="tab:blue", label="consensus")
    ax.bar(
        [str(e) for e in eps],
        np.subtract(high, low),
        bottom=low,
        color="tab:gray",
        label="undecided at the round limit",
    )
    ax.axhline(0.95, ls="--", color="tab:green", label="0.95")
    ax.axhline(0.5, ls=":", color="tab:red", label="0.5")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("confidence bound ε")
    ax.set_ylabel("share of replicas at consensus")
    ax.set_title("Hegselmann–Krause on complete graphs")
    ax.legend(fontsize="small")
    return _save(fig, out, "hk.png")


def clusters(
    out: Path, counts: dict[float, list[int]], expected: dict[float, tuple[int, int]]
) -> str:
    """counts: epsilon -> major clusters per replica; expected: epsilon -> (low, high)."""
    fig, ax = plt.subplots(figsize=SIZE)
    top = max(max(found, default=0) for found in counts.values()) + 1
    bins = np.arange(top + 1)
    width = 0.8 / max(len(counts), 1)
    for i, eps in enumerate(sorted(counts, reverse=True)):
        share = np.bincount(counts[eps], minlength=top + 1)[: top + 1] / max(len(counts[eps]), 1)
        low, high = expected[eps]
        span = str(low) if low == high else f"{low}–{high}"
        ax.bar(bins + i * width, share, width, label=f"ε = {eps:g} (about {span})")
    ax.set_xticks(bins + width * (len(counts) - 1) / 2, [str(b) for b in bins])
    ax.set_xlabel("major clusters in a replica")
    ax.set_ylabel("share of replicas")
    ax.set_title("Deffuant on complete graphs")
    ax.legend(fontsize="small")
    return _save(fig, out, "deffuant.png")


def guess(out: Path, series: dict[str, list[float]], targets: dict[str, float]) -> str:
    fig, ax = plt.subplots(figsize=SIZE)
    for (label, means), color in zip(series.items(), ("tab:blue", "tab:orange"), strict=False):
        ax.plot(range(1, len(means) + 1), means, "o-", color=color, label=label)
        ax.axhline(targets[label], ls="--", color=color, lw=0.8)
    ax.set_xlabel("round")
    ax.set_ylabel("mean guess")
    ax.set_title("Guessing game, level-k agents")
    ax.legend()
    return _save(fig, out, "guess.png")
