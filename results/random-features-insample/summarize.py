"""Collect runs.jsonl into results.csv and print the table of README.md.

Usage (repository root): python results/random-features-insample/summarize.py

Per (H, seed): L* is the exact population optimum of the same heads (the run without --fit-samples). Beside each
fit: the textbook first-order prediction L* (1 - H/n) for the in-sample error and L* (1 + H/n) for the population
error of the fitted weights (README.md, "Why the in-sample error is lower").
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    runs = [json.loads(line) for line in (HERE / "runs.jsonl").read_text().splitlines() if line.strip()]
    optimum = {(r["H"], r["seed"]): r["predicted_error"] for r in runs if "fit_samples" not in r}
    rows = []
    for r in runs:
        if "fit_samples" not in r:
            continue
        H, n, best = r["H"], r["fit_samples"], optimum.get((r["H"], r["seed"]))
        ratio = H / n
        rows.append(
            {
                "H": H,
                "seed": r["seed"],
                "n": n,
                "H_over_n": ratio,
                "in_sample": r["in_sample_error"],
                "population": r["predicted_error"],
                "optimum": best,
                "predicted_in_sample": None if best is None else best * (1 - ratio),
                "predicted_population": None if best is None else best * (1 + H / (n - H - 1)),
                "wall_s": r["wall_s"],
                "max_rss_mb": round(r["max_rss_mb"]),
                "loadavg_before": r["loadavg_before"],
            }
        )
    rows.sort(key=lambda row: (row["H"], row["n"], row["seed"]))
    with open(HERE / "results.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print("| H | n | seed | H/n | in-sample | L*(1 - H/n) | population of the fit | L*(1 + H/(n-H-1)) | L* | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        cells = [row["H"], row["n"], row["seed"], f"{row['H_over_n']:.4f}", f"{row['in_sample']:.4f}"]
        cells += [f"{row['predicted_in_sample']:.4f}", f"{row['population']:.4f}"]
        cells += [f"{row['predicted_population']:.4f}", f"{row['optimum']:.4f}", f"{row['wall_s']:.0f}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main()
