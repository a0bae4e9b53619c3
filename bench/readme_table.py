"""Print the README's results table (markdown) from a `vlattn-bench --mode all` JSON file.

    python bench/readme_table.py bench/runs/<run>.json > /tmp/table.md
Rows: the layers mode's vlattn:native records; best PyTorch and × best as the bench computed them.
"""
import json
import sys


def main(path: str) -> None:
    d = json.load(open(path))
    meta = d["meta"]
    rows = [r for r in d["results"] if r["impl"] == "vlattn:native"]
    # vlattn:native_graph (runs from the sixth session on): the same op replayed from a CUDA graph.
    graph = {r["name"]: r for r in d["results"] if r["impl"] == "vlattn:native_graph"}
    g_head, g_rule = (" native graphed µs |", "---|") if graph else ("", "")
    print(f"| workload | T_SOL µs | native µs | native %SOL |{g_head} best PyTorch µs (which) | native × best | check |")
    print(f"|---|---|---|---|{g_rule}---|---|---|")
    for r in rows:
        check = "PASS" if (r.get("check") or {}).get("ok") else "FAIL"
        g = graph.get(r["name"])
        g_cell = (f" {g['us_median']:.1f} |" if g and g.get("us_median") is not None else " — |") if graph else ""
        print(f"| {r['name']} | {r['t_sol_us']:.1f} | {r['us_median']:.1f} | {r['pct_sol']:.1f}% |{g_cell} "
              f"{r['best_pytorch_us']:.1f} ({r['best_pytorch']}) | {r['x_best_pytorch']:.2f}× | {check} |")
    commit = meta.get("commit")
    if isinstance(commit, dict):
        commit = commit.get("short") or commit.get("sha")
    print(f"\n<!-- from {path}, commit {commit} -->")


if __name__ == "__main__":
    main(sys.argv[1])
