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


def llm_games(out: Path, results: list) -> str:
    """One figure for the LLM games: public goods, El Farol and the guessing variants, each
    with the model's series (solid) beside GAMA-Bench's rows (dashed)."""
    panels = (
        ("llm.public_goods", "Public goods", "mean contribution (of 20)"),
        ("llm.el_farol", "El Farol", "share going"),
        ("llm.guess.", "Guessing game", "mean guess"),
    )
    fig, axes = plt.subplots(1, 3, figsize=(13.0, 3.8))
    for ax, (prefix, title, ylabel) in zip(axes, panels, strict=True):
        shown = [r for r in results if r.name.startswith(prefix) and r.details.get("by_round")]
        for r, color in zip(shown, plt.cm.tab10.colors, strict=False):
            series = [np.nan if v is None else v for v in r.details["by_round"]]
            label = r.details.get("variant", "measured")
            ax.plot(range(1, len(series) + 1), series, "o-", ms=3, lw=2, color=color, label=label)
        # The published rows: thin dotted lines in colours of their own.
        published = [(m, row) for r in shown for m, row in r.details.get("reference", {}).items()]
        for (model, row), color in zip(published, plt.cm.Dark2.colors, strict=False):
            ax.plot(
                range(1, len(row) + 1), row, ":", lw=1, color=color, label=f"{model} (GAMA-Bench)"
            )
        ax.set_title(title)
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
        if shown:
            ax.legend(fontsize=6)
    return _save(fig, out, "llm_games.png")


def agentscope(out: Path, distributions: dict[str, list[list[float]]], results: list) -> str:
    """The AgentScope paper's figure types: guesses by round (basic and chain of thought),
    the mean guess by education level, and the convergence of 1/2·mean + 5."""
    fig, axes = plt.subplots(1, 3, figsize=(13.0, 3.8))
    ax = axes[0]
    two_thirds = [label for label in distributions if label.startswith("2/3")]
    for i, label in enumerate(two_thirds):
        rounds = distributions[label]
        at = np.arange(1, len(rounds) + 1) + (i - 0.5) * 0.35
        parts = ax.boxplot(rounds, positions=at, widths=0.3, patch_artist=True, manage_ticks=False)
        for box in parts["boxes"]:
            box.set_facecolor(("tab:blue", "tab:orange")[i % 2])
        ax.plot([], [], "s", color=("tab:blue", "tab:orange")[i % 2], label=label)
    ax.set_title("Guesses by round (2/3 of the mean)")
    ax.set_xlabel("round")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("guess")
    ax.legend(fontsize=7)
    ax = axes[1]
    shown = [r for r in results if r.details.get("by_education")]
    for i, r in enumerate(shown):
        levels = list(r.details["by_education"])
        ax.bar(
            np.arange(len(levels)) + i * 0.8 / max(len(shown), 1),
            [r.details["by_education"][c] for c in levels],
            width=0.8 / max(len(shown), 1),
            label=r.details["variant"],
        )
        ax.set_xticks(np.arange(len(levels)), [c.split("'")[0] for c in levels], fontsize=7)
    ax.set_title("Mean guess by education")
    ax.legend(fontsize=6)
    ax = axes[2]
    for r in results:
        if r.target == 10.0:
            series = [np.nan if v is None else v for v in r.details["by_round"]]
            ax.plot(range(1, len(series) + 1), series, "o-", label="mean guess")
            ax.axhline(10, ls="--", color="grey", lw=0.8, label="equilibrium 10")
    ax.set_title("1/2·mean + 5")
    ax.set_xlabel("round")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=7)
    return _save(fig, out, "agentscope.png")
