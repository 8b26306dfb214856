"""Plots of a run: latency over time per operation, with the nemesis
intervals shaded, and throughput over time.

Run with a Python that has matplotlib (Debian's python3-matplotlib for
/usr/bin/python3):  python3 plots.py RUN_DIR
Reads RUN_DIR/history.jsonl, writes latency.png and throughput.png.
"""

import json
import os
import sys


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def main(run_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = load(os.path.join(run_dir, "history.jsonl"))
    if not events:
        return 1
    t0 = events[0]["time"]
    sec = lambda t: (t - t0) / 1e9  # noqa: E731

    # Nemesis intervals.
    spans, open_ = [], {}
    for ev in events:
        if ev.get("process") != "nemesis":
            continue
        key = (ev.get("f"), json.dumps(ev.get("targets"), sort_keys=True))
        if ev["type"] == "start":
            open_[key] = ev
        elif ev["type"] == "end" and key in open_:
            st = open_.pop(key)
            spans.append((sec(st["time"]), sec(ev["time"]), ev["f"]))
    end = sec(events[-1]["time"])
    for (f, _), st in open_.items():
        spans.append((sec(st["time"]), end, f))

    # Operations.
    inv = {}
    series = {}
    for ev in events:
        p = ev.get("process")
        if not isinstance(p, int):
            continue
        if ev["type"] == "invoke":
            inv[p] = ev
        elif p in inv:
            st = inv.pop(p)
            key = (st.get("f"), ev["type"])
            series.setdefault(key, []).append(
                (sec(st["time"]), (ev["time"] - st["time"]) / 1e6))

    colors = {"ok": "tab:blue", "fail": "tab:red", "info": "tab:orange"}
    marks = {"acquire": "o", "release": "s", "read": "^", "write": "v",
             "open": "D", "close": "x", "holders": "*"}
    nem_colors = {}
    palette = ["#f4cccc", "#d9ead3", "#cfe2f3", "#fff2cc", "#ead1dc",
               "#d0e0e3"]

    def shade(ax):
        for s, e, f in spans:
            if f not in nem_colors:
                nem_colors[f] = palette[len(nem_colors) % len(palette)]
            ax.axvspan(s, e, color=nem_colors[f], alpha=0.6, lw=0,
                       label="nemesis " + f)

    fig, ax = plt.subplots(figsize=(12, 6))
    shade(ax)
    for (f, typ), pts in sorted(series.items()):
        ax.scatter([p[0] for p in pts], [max(p[1], 0.01) for p in pts],
                   s=6, marker=marks.get(f, "."),
                   color=colors.get(typ, "gray"), label="%s %s" % (f, typ))
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("latency per operation, " + os.path.basename(
        os.path.normpath(run_dir)))
    h, l = ax.get_legend_handles_labels()
    uniq = dict(zip(l, h))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7, loc="upper left",
              ncol=3)
    fig.tight_layout()
    fig.savefig(os.path.join(run_dir, "latency.png"), dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(12, 4))
    shade(ax)
    width = 1.0
    nb = int(end / width) + 1
    for typ in ("ok", "fail", "info"):
        counts = [0] * nb
        for (f, t), pts in series.items():
            if t != typ:
                continue
            for s, _ in pts:
                counts[min(nb - 1, int(s / width))] += 1
        ax.plot([i * width for i in range(nb)], counts,
                color=colors[typ], label=typ)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("completions per second")
    ax.set_title("throughput")
    h, l = ax.get_legend_handles_labels()
    uniq = dict(zip(l, h))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(os.path.join(run_dir, "throughput.png"), dpi=100)
    plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
