#!/usr/bin/env python3
"""Builds bench/run's report from a results directory: report.json (schema in
bench/README.md), report.md and PNG plots (gnuplot).

Usage: bench/report.py RESULTS_DIR
"""
import glob
import json
import os
import platform
import statistics
import subprocess
import sys

SCHEMA = "switchyard-bench-report/1"
# switchyard_nocache: a second serve with [cache] enabled = false, in hot_set only.
# switchyard_baseline: another build or configuration (bench/run --baseline-bin, --extra-toml),
# in the getAccountInfo, getMultipleAccounts and batch workloads.
SYSTEMS = ["direct", "nginx", "switchyard", "switchyard_nocache", "switchyard_baseline"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLES = {
    "account_undelegated": "getAccountInfo, undelegated accounts",
    "account_mixed": "getAccountInfo, 50/50 delegated/undelegated",
    "multiple_accounts_20": "getMultipleAccounts, 20 keys (10 delegated)",
    "send_transaction": "sendTransaction, base64 v0 transfer",
    "batch_10": "JSON-RPC batch of 10 calls",
    "hot_set": "hot set: getAccountInfo of 64 accounts, finalized getTransaction of 16",
}
GETACCOUNTINFO = ["account_undelegated", "account_mixed"]
# A system whose answers are more than this fraction bad (non-200, JSON-RPC error, no result,
# socket error) has no valid figures for that workload: ratios and goals skip it.
INVALID_FRACTION = 0.001


def load_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}


def title(workload):
    base = workload[:-3] if workload.endswith("_c1") else workload
    text = TITLES.get(base, base)
    return text + (", one connection" if workload.endswith("_c1") else "")


def loadavg(path):
    try:
        with open(path) as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None


def git_info():
    def git(*args):
        try:
            return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None
            else None}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# --- load results ------------------------------------------------------------------------
def summarize_runs(runs):
    by_key = {}
    for run in runs:
        by_key.setdefault((run["workload"], run["system"]), []).append(run)
    order = []
    for run in runs:
        if run["workload"] not in order:
            order.append(run["workload"])
    workloads = {}
    for workload in order:
        systems = {}
        for system in SYSTEMS:
            rs = sorted(by_key.get((workload, system), []), key=lambda r: r["rep"])
            if not rs:
                continue
            w = [r["wrk"] for r in rs]
            per_request = lambda key: [  # noqa: E731
                (r["cpu_s"][key] * 1e6 / r["wrk"]["requests"]) if r["wrk"]["requests"] and
                (key != "proxy" or system != "direct") else None for r in rs]
            answers = {
                "checked": sum(x["checked"] for x in w),
                "http_errors": sum(x["http_errors"] for x in w),
                "rpc_errors": sum(x["rpc_errors"] for x in w),
                "missing_result": sum(x["missing_result"] for x in w),
                "duplicates": sum(x["duplicates"] for x in w),
                "socket_errors": sum(sum(x["socket_errors"].values()) for x in w),
                "stream_wraps": sum(x["stream_wraps"] for x in w),
            }
            bad = (answers["http_errors"] + answers["rpc_errors"] + answers["missing_result"] +
                   answers["socket_errors"])
            caches = [r.get("cache_delta") for r in rs if r.get("cache_delta")]
            cache = None
            if caches:
                cache = {k: sum(c[k] for c in caches) for k in ("hits", "misses", "coalesced")}
                cache["hit_ratio"] = spread([c["hit_ratio"] for c in caches])
            answers["bad"] = bad
            answers["bad_fraction"] = bad / max(1, answers["checked"])
            systems[system] = {
                "valid": answers["bad_fraction"] <= INVALID_FRACTION,
                "reps": len(rs),
                "connections": rs[0]["connections"],
                "duration_s": rs[0]["duration_s"],
                "rps": spread([x["rps"] for x in w]),
                "latency_us": {p: spread([x["latency_us"][p] for x in w])
                               for p in ("p50", "p90", "p99", "p999", "mean", "max")},
                "proxy_cpu_us_per_request": spread(per_request("proxy")),
                "base_cpu_us_per_request": spread(per_request("base")),
                "er_cpu_us_per_request": spread(per_request("er")),
                "wrk_cpu_share": spread([r["cpu_s"]["wrk"] / (x["duration_us"] / 1e6)
                                         for r, x in zip(rs, w)]),
                "proxy_peak_rss_kb": max((r["proxy_vm_hwm_kb"] or 0) for r in rs) or None,
                "requests": sum(x["requests"] for x in w),
                "server_cpu_us_per_request": spread([
                    sum(r["cpu_s"][k] for k in ("proxy", "base", "er")) * 1e6 / x["requests"]
                    if x["requests"] else None for r, x in zip(rs, w)]),
                "proxy_context_switches_per_request": spread([
                    r["proxy_context_switches"] / x["requests"]
                    if r.get("proxy_context_switches") is not None and x["requests"] else None
                    for r, x in zip(rs, w)]),
                "tcp_connects_per_1000_requests": spread([
                    r["tcp_active_opens"] * 1000 / x["requests"]
                    if r.get("tcp_active_opens") is not None and x["requests"] else None
                    for r, x in zip(rs, w)]),
                "requests": sum(x["requests"] for x in w),
                "answers": answers,
                "switchyard_metrics_delta": rs[-1].get("switchyard_metrics_delta"),
                "cache": cache,
            }
        ratios = {}
        reps = {r["rep"] for r in runs if r["workload"] == workload}
        valid = {k: v["valid"] for k, v in systems.items()}
        others = ("nginx", "direct") + tuple(
            o for o in ("switchyard_nocache", "switchyard_baseline") if o in systems)
        for other in others:
            if not (valid.get("switchyard") and valid.get(other)):
                ratios[f"switchyard_over_{other}"] = {"rps": None, "p50": None, "p99": None,
                                                      "added_p50_us": None, "invalid": True}
                continue
            rps, p50, p99, added = [], [], [], []
            for rep in sorted(reps):
                s = [r for r in by_key.get((workload, "switchyard"), []) if r["rep"] == rep]
                o = [r for r in by_key.get((workload, other), []) if r["rep"] == rep]
                if not s or not o:
                    continue
                s, o = s[0]["wrk"], o[0]["wrk"]
                rps.append(s["rps"] / o["rps"] if o["rps"] else None)
                p50.append(s["latency_us"]["p50"] / max(1, o["latency_us"]["p50"]))
                p99.append(s["latency_us"]["p99"] / max(1, o["latency_us"]["p99"]))
                added.append(s["latency_us"]["p50"] - o["latency_us"]["p50"])
            ratios[f"switchyard_over_{other}"] = {"rps": spread(rps), "p50": spread(p50),
                                                  "p99": spread(p99),
                                                  "added_p50_us": spread(added)}
        nginx_added = []
        for rep in sorted(reps) if valid.get("nginx") and valid.get("direct") else []:
            n = [r for r in by_key.get((workload, "nginx"), []) if r["rep"] == rep]
            d = [r for r in by_key.get((workload, "direct"), []) if r["rep"] == rep]
            if n and d:
                nginx_added.append(n[0]["wrk"]["latency_us"]["p50"] -
                                   d[0]["wrk"]["latency_us"]["p50"])
        ratios["nginx_over_direct"] = {"added_p50_us": spread(nginx_added)}
        if valid.get("switchyard_nocache") and valid.get("nginx"):
            off = []
            for rep in sorted(reps):
                c = [r for r in by_key.get((workload, "switchyard_nocache"), []) if r["rep"] == rep]
                n = [r for r in by_key.get((workload, "nginx"), []) if r["rep"] == rep]
                if c and n and n[0]["wrk"]["rps"]:
                    off.append(c[0]["wrk"]["rps"] / n[0]["wrk"]["rps"])
            ratios["switchyard_nocache_over_nginx"] = {"rps": spread(off)}
        workloads[workload] = {"title": title(workload), "systems": systems, "ratios": ratios}
    return workloads


def micro_results(raw):
    out = {}
    for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
        data = load_json(path)
        if not isinstance(data, dict) or "benchmarks" not in data:
            continue
        name = os.path.basename(path)[:-5]
        rows = []
        for b in data["benchmarks"]:
            if b.get("run_type") == "aggregate":
                continue
            row = {k: b[k] for k in ("name", "real_time", "cpu_time", "time_unit", "iterations")
                   if k in b}
            for k, v in b.items():
                if k.endswith("_per_second") or k in ("accounts", "peak_rss_mb"):
                    row[k] = v
            if b.get("error_occurred"):
                row["error"] = b.get("error_message")
            rows.append(row)
        out[name] = {"context": {k: data.get("context", {}).get(k) for k in
                                 ("date", "num_cpus", "mhz_per_cpu", "library_build_type")},
                     "benchmarks": rows}
    return out


def find_bench(micro, binary, prefix):
    for row in micro.get(binary, {}).get("benchmarks", []):
        if row["name"].startswith(prefix):
            return row
    return None


def seconds_of(row):
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[row.get("time_unit", "ns")]
    return row["real_time"] * scale


def goals(workloads, micro, kafka=None):
    rows = []

    def add(goal, target, measured, unit, higher_is_better, source):
        ratio = None if measured is None or target is None else measured / target
        met = None if measured is None or target is None else (
            measured >= target if higher_is_better else measured <= target)
        rows.append({"goal": goal, "target": target, "unit": unit, "measured": measured,
                     "ratio": ratio, "met": met, "higher_is_better": higher_is_better,
                     "source": source})

    for w in GETACCOUNTINFO:
        r = workloads.get(w, {}).get("ratios", {}).get("switchyard_over_nginx", {}).get("rps")
        add(f"Switchyard req/s ≥ 1.2× nginx ({w})", 1.2, r and r["median"], "×", True,
            f"{w}: median over repetitions of Switchyard req/s ÷ nginx req/s")
    for w in GETACCOUNTINFO:
        sy = workloads.get(w, {}).get("systems", {}).get("switchyard", {})
        c = sy.get("proxy_cpu_us_per_request") if sy.get("valid") else None
        add(f"CPU per proxied request ≤ 20 µs ({w})", 20, c and c["median"], "µs", False,
            f"{w}: switchyard serve utime+stime ÷ requests, median")
    for w in GETACCOUNTINFO:
        a = workloads.get(w + "_c1", {}).get("ratios", {}).get("switchyard_over_direct", {}).get(
            "added_p50_us")
        add(f"Unloaded added p50 ≤ 40 µs ({w}_c1)", 40, a and a["median"], "µs", False,
            f"{w}_c1: Switchyard p50 − direct p50 at one connection, median")
    for w in ("multiple_accounts_20", "send_transaction", "batch_10"):
        r = workloads.get(w, {}).get("ratios", {}).get("switchyard_over_nginx", {}).get("rps")
        add(f"Switchyard req/s ≥ 1.0× nginx ({w})", 1.0, r and r["median"], "×", True,
            f"{w}: median over repetitions of Switchyard req/s ÷ nginx req/s")
    for w in GETACCOUNTINFO:
        ratios = workloads.get(w + "_c1", {}).get("ratios", {})
        sy = ratios.get("switchyard_over_direct", {}).get("added_p50_us")
        ng = ratios.get("nginx_over_direct", {}).get("added_p50_us")
        value = sy["median"] / ng["median"] if sy and ng and ng["median"] > 0 else None
        add(f"Added p50 ≤ nginx's added p50 ({w}_c1)", 1.0, value, "×", False,
            f"{w}_c1: (Switchyard p50 − direct p50) ÷ (nginx p50 − direct p50), medians")
    hot = workloads.get("hot_set", {})
    for other, target in (("nginx", 3.0), ("direct", 1.0)):
        r = hot.get("ratios", {}).get(f"switchyard_over_{other}", {}).get("rps")
        add(f"Switchyard req/s ≥ {target:g}× {other} (hot_set, cache on)", target,
            r and r["median"], "×", True,
            f"hot_set: median over repetitions of Switchyard req/s ÷ {other} req/s")
    cache = (hot.get("systems", {}).get("switchyard") or {}).get("cache") or {}
    hit = cache.get("hit_ratio")
    add("Cache hit ratio (hot_set)", 0.9, hit and hit["median"], "ratio", True,
        "hot_set: /status cache hits ÷ (hits + misses) over each Switchyard run, median; the "
        "workload allows about one miss per account per 400 ms slot, so ≥ 0.99 above 10 k req/s")
    off = hot.get("ratios", {}).get("switchyard_nocache_over_nginx", {}).get("rps")
    add("Switchyard, cache off, req/s ÷ nginx (hot_set), for reference", None,
        off and off["median"], "×", True,
        "hot_set: the second serve, [cache] enabled = false (coalescing on), ÷ nginx, median")
    on_off = hot.get("ratios", {}).get("switchyard_over_switchyard_nocache", {}).get("rps")
    add("Switchyard cache on ÷ cache off (hot_set), for reference", None,
        on_off and on_off["median"], "×", True,
        "hot_set: Switchyard req/s ÷ the cache-off serve's req/s in the same repetition, median")
    for w in GETACCOUNTINFO:
        r = workloads.get(w, {}).get("ratios", {}).get("switchyard_over_switchyard_baseline",
                                                       {}).get("rps")
        if r:
            add(f"Switchyard req/s ≥ 0.95× the baseline ({w})", 0.95, r["median"], "×", True,
                f"{w}: median over repetitions of Switchyard req/s ÷ the baseline serve's")
    for name, target in (("BM_ParseGetAccountInfo", 150), ("BM_DecideGetAccountInfo", 300)):
        row = find_bench(micro, "api_bench", name)
        ns = row and seconds_of(row) * 1e9
        add(f"{name} ≤ {target} ns", target, ns, "ns", False, f"api_bench {name}, real time")
    fold = find_bench(micro, "switchyard_core_bench", "BM_FoldRunnerFromEmbeddedLog/1/100000/1/")
    add("Fold ≥ 1 M events/s", 1e6, fold and fold.get("items_per_second"), "events/s", True,
        "core_bench BM_FoldRunnerFromEmbeddedLog/1/100000/1 (serve's fold: read from the embedded "
        "log, pipelined, 100 k records per durable commit with fsync, snapshots published)")
    burst = find_bench(micro, "switchyard_core_bench", "BM_FoldIntoRocksDb/50000/1/")
    add("Fold burst, 50 k records per commit, for reference", None,
        burst and burst.get("items_per_second"), "events/s", True,
        "core_bench BM_FoldIntoRocksDb/50000/1 (no log, fold and commit on one thread, fsync)")
    restart = find_bench(micro, "switchyard_core_bench", "BM_RestartToReady")
    add("Restart-to-ready ≤ 1 s at 1 M accounts", 1.0, restart and seconds_of(restart), "s", False,
        "core_bench BM_RestartToReady (fresh process: open RocksDB, load, build snapshot)")
    add("Peak RSS at restart ≤ 300 MB at 1 M accounts", 300, restart and restart.get("peak_rss_mb"),
        "MB", False, "core_bench BM_RestartToReady peak_rss_mb (the loading process)")
    kafka = kafka or {}
    scale = kafka.get("scale_fold_events_per_s") or {}
    add("Fold from Kafka ≥ 300 k events/s", 3e5, scale.get("kafka"), "events/s", True,
        f"kafka_log_bench: {scale.get('events', '?')} events over {scale.get('partitions', '?')} "
        "partitions in large record batches, folded from offset 0 (mock cluster)")
    backfill = kafka.get("backfill_events_per_s") or {}
    for log in ("kafka", "embedded"):
        add(f"Backfill produce ≥ 200 k events/s ({log})", 2e5, backfill.get(log), "events/s", True,
            f"kafka_log_bench: {backfill.get('events', '?')} delegations, 10,000 records per "
            "Append, then the seal")
    return rows


# --- formatting ----------------------------------------------------------------------------
def fmt(value, digits=0):
    if value is None:
        return "–"
    if isinstance(value, float) and abs(value) >= 1e5:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def fmt_spread(s, digits=0):
    if not s:
        return "–"
    if s["n"] == 1:
        return fmt(s["median"], digits)
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)})"


def fmt_ratio(s):
    if not s:
        return "invalid" if s is None else "–"
    return f"{s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}"


def goal_value(g):
    m = g["measured"]
    if m is None:
        return "–"
    if g["unit"] == "×":
        return f"{m:.2f}×"
    if g["unit"] == "ratio":
        return f"{m:.4f}"
    if g["unit"] == "events/s":
        return f"{m:,.0f} events/s"
    if g["unit"] == "s":
        return f"{m:.3f} s"
    return f"{m:.1f} {g['unit']}"


def goal_target(g):
    t = g["target"]
    if t is None:
        return "reference"
    op = "≥" if g["higher_is_better"] else "≤"
    if g["unit"] == "×":
        return f"{op} {t}×"
    if g["unit"] == "events/s":
        return f"{op} {t:,.0f} events/s"
    if g["unit"] == "ratio":
        return f"{op} {t:g}"
    return f"{op} {t:g} {g['unit']}"


def micro_time(row):
    t, unit = row.get("real_time"), row.get("time_unit", "ns")
    return f"{t:,.1f} {unit}" if t is not None else "–"


# --- soak ----------------------------------------------------------------------------------
SOAK_COLUMNS = ["elapsed_s", "rss_kb", "fds", "threads", "p99_us", "requests", "failures",
                "store_kb"]


def soak_summary(out):
    """The samples of a soak run (bench/run --soak): min, max and end of each series, RSS
    without RocksDB's memtables and block cache included, and soak.png (bench/plot_soak.py)."""
    path = os.path.join(out, "raw", "soak.csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        lines = [line.strip() for line in f if line.strip()]
    if not lines or lines[0].split(",") != SOAK_COLUMNS or len(lines) < 2:
        return {"error": f"{path}: not a soak CSV ({','.join(SOAK_COLUMNS)})"}
    rows = [dict(zip(SOAK_COLUMNS, (int(v) for v in line.split(",")))) for line in lines[1:]]
    for row in rows:
        row["own_rss_kb"] = row["rss_kb"] - row["store_kb"]
    series = {}
    for key in ("rss_kb", "own_rss_kb", "store_kb", "fds", "threads", "p99_us"):
        values = [row[key] for row in rows]
        series[key] = {"min": min(values), "max": max(values), "end": values[-1]}
    summary = {"samples": len(rows), "seconds": rows[-1]["elapsed_s"],
               "requests": rows[-1]["requests"], "failures": rows[-1]["failures"],
               "series": series, "plot": None}
    plot = os.path.join(out, "soak.png")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "plot_soak.py"), path,
                           plot], capture_output=True, text=True)
    if done.returncode == 0 and os.path.exists(plot):
        summary["plot"] = "soak.png"
    return summary


# --- plots ---------------------------------------------------------------------------------
def plots(out, workloads):
    if not subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True).stdout:
        return []
    data = os.path.join(out, "plots")
    os.makedirs(data, exist_ok=True)
    made = []
    loaded = [w for w in workloads if not w.endswith("_c1")]
    single = [w for w in workloads if w.endswith("_c1")]

    def value(w, s, path):
        node = workloads[w]["systems"].get(s)
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    for name, group, ylabel, path, log in (
            ("throughput", loaded, "requests per second", ("rps",), False),
            ("throughput_c1", single, "requests per second (one connection)", ("rps",), False),
            ("proxy_cpu", loaded, "proxy CPU µs per request", ("proxy_cpu_us_per_request",),
             False)):
        if not group:
            continue
        rows = []
        for w in group:
            cells = []
            for s in SYSTEMS:
                v = value(w, s, path)
                cells += [v["median"], v["min"], v["max"]] if v else [0, 0, 0]
            rows.append(w.replace("_", "-") + " " + " ".join(f"{c:.3f}" for c in cells))
        dat = os.path.join(data, f"{name}.dat")
        with open(dat, "w") as f:
            f.write("\n".join(rows) + "\n")
        script = f"""
set terminal pngcairo size 1100,520 font ",10" noenhanced
set output "{os.path.join(out, name + '.png')}"
set style data histogram
set style histogram errorbars gap 1 lw 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key top right
set ylabel "{ylabel}"
set yrange [0:*]
set grid ytics
set xtics rotate by -20
set title "{ylabel}: median, bars min–max over repetitions"
{'set logscale y' if log else ''}
plot "{dat}" using 2:3:4:xtic(1) title "direct", '' using 5:6:7 title "nginx", \\
     '' using 8:9:10 title "switchyard", '' using 11:12:13 title "switchyard, cache off"
"""
        subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if os.path.exists(os.path.join(out, name + ".png")):
            made.append(name + ".png")

    # Latency percentiles: one panel per workload, p50/p90/p99 per system (log scale).
    all_w = loaded + single
    if all_w:
        cols = 3
        rows_n = (len(all_w) + cols - 1) // cols
        parts = [f'set terminal pngcairo size 1200,{330 * rows_n} font ",9" noenhanced',
                 f'set output "{os.path.join(out, "latency.png")}"',
                 f"set multiplot layout {rows_n},{cols}",
                 "set style data histogram", "set style histogram clustered gap 1",
                 "set style fill solid 0.8 border -1", "set logscale y", "set grid ytics",
                 'set ylabel "µs"', "set key top left font \",8\""]
        for w in all_w:
            dat = os.path.join(data, f"latency_{w}.dat")
            with open(dat, "w") as f:
                for s in SYSTEMS:
                    lat = value(w, s, ("latency_us",))
                    if lat:
                        f.write(f"{s} " + " ".join(
                            f"{max(1, lat[p]['median'])}" for p in ("p50", "p90", "p99")) + "\n")
            parts.append(f'set title "{w}"')
            parts.append(f'plot "{dat}" using 2:xtic(1) title "p50", "" using 3 title "p90", '
                         f'"" using 4 title "p99"')
        parts.append("unset multiplot")
        subprocess.run(["gnuplot"], input="\n".join(parts) + "\n", text=True, capture_output=True)
        if os.path.exists(os.path.join(out, "latency.png")):
            made.append("latency.png")
    return made


# --- markdown ------------------------------------------------------------------------------
def markdown(report):
    m = report["machine"]
    s = report["settings"]
    lines = [f"# Switchyard bench report — {report['started_utc']}", ""]
    lines += [
        f"- commit `{report['git']['commit']}`" + (" (with uncommitted changes)"
                                                     if report["git"]["dirty"] else ""),
        f"- machine: {m['cores']} cores, {m['cpu_model']}, Linux {m['kernel']}",
        f"- switchyard binary: `{s.get('switchyard_binary') or 'build/release/app/switchyard'}`",
        f"- load average (1/5/15 min): start {m['loadavg_start']}, end {m['loadavg_end']}"
        " — the machine is shared; compare systems through the ratios, which are measured "
        "back to back in the same repetition",
        f"- pinning: wrk (one thread) on CPU {m['load_cpu'] or '–'}; every server process — "
        f"localnet base, localnet ER, nginx (1 worker), switchyard serve (api.threads = 1) — "
        f"on CPU {m['server_cpu'] or '–'}. A proxied request therefore pays for the proxy and "
        "for the localnet on the same core; a direct one only for the localnet.",
        f"- response cache of the measured serve: {s.get('cache') or 'on'}"
        + ("; hot_set also runs against switchyard_nocache, a second serve with [cache] "
           "enabled = false (coalescing on), idle during the other workloads"
           if (s.get('cache') or 'on') == 'on' else " ([cache] enabled = false, coalesce = false)"),
        (f"- baseline serve (switchyard_baseline, in the getAccountInfo, getMultipleAccounts "
         f"and batch workloads): `{s.get('baseline_binary')}`"
         + (f", configuration + `{s['baseline_toml']}`" if s.get("baseline_toml") else "")
         + (f"; the measured serve's configuration + `{s['extra_toml']}`"
            if s.get("extra_toml") else "")
         + ("; both get every request with an `x-api-key`" if s.get("api_key") else "")
         if s.get("baseline_binary") else "- no baseline serve"),
        f"- mode: {'quick' if s['quick'] else 'full'}; {s['reps']} repetition(s) of "
        f"{s['duration_s']} s per system and workload (one-connection runs: "
        f"{max(2, s['duration_s'] // 2)} s), each after an "
        "unrecorded warm-up; system order direct → nginx → switchyard, reversed on odd "
        "repetitions",
        f"- data: {s['wallets']} undelegated wallets (system accounts), {s['delegated']} accounts "
        f"delegated to the ER by the localnet scenario; {s['transactions'] or 0:,} signed v0 "
        "transfers (each sent once)",
        "- direct and nginx send every request to the base layer, delegated accounts included "
        "(the base answers them with the delegation program as owner); Switchyard sends "
        "delegated accounts to the ER, splits getMultipleAccounts and batches by target",
        "",
        "Figures are medians over repetitions with (min–max) where there is more than one. "
        "CPU/req is the process's utime+stime over the run ÷ requests answered; server CPU "
        "adds the localnet base and ER. TCP connects counts connect() calls on the whole "
        "machine (/proc/net/snmp ActiveOpens) per 1000 requests: near 0 means kept-alive "
        "upstream connections. "
        "wrk CPU is the load generator's CPU share of its core: near 1.0 means the load "
        "generator, not the server, set the pace.",
        "",
        "## Goals", "",
        "| goal | target | measured | measured ÷ target | met |",
        "|---|---|---|---|---|",
    ]
    for g in report["goals"]:
        met = "–" if g["met"] is None else ("met" if g["met"] else "**not met**")
        ratio = "–" if g["ratio"] is None else f"{g['ratio']:.2f}"
        lines.append(f"| {g['goal']} | {goal_target(g)} | {goal_value(g)} | {ratio} | {met} |")
    lines += ["", "## Ratios", "",
              "min / median / max over repetitions; req/s ratio > 1 and latency ratio < 1 favour "
              "Switchyard.", "",
              "| workload | S/nginx req/s | S/direct req/s | S/nginx p50 | S/direct p50 | "
              "added p50 µs vs direct: Switchyard | nginx |",
              "|---|---|---|---|---|---|---|"]
    for name, w in report["workloads"].items():
        r = w["ratios"]
        lines.append(
            f"| {name} | {fmt_ratio(r['switchyard_over_nginx']['rps'])} | "
            f"{fmt_ratio(r['switchyard_over_direct']['rps'])} | "
            f"{fmt_ratio(r['switchyard_over_nginx']['p50'])} | "
            f"{fmt_ratio(r['switchyard_over_direct']['p50'])} | "
            f"{fmt_spread(r['switchyard_over_direct']['added_p50_us'])} | "
            f"{fmt_spread(r['nginx_over_direct']['added_p50_us'])} |")
    against = [(name, w) for name, w in report["workloads"].items()
               if "switchyard_over_switchyard_baseline" in w["ratios"]]
    if against:
        lines += ["", "## Against the baseline serve", "",
                  "The measured serve ÷ switchyard_baseline in the same repetitions (min / median "
                  "/ max); CPU/req of each.", "",
                  "| workload | req/s ratio | p50 ratio | p99 ratio | proxy CPU µs/req: "
                  "Switchyard | baseline |", "|---|---|---|---|---|---|"]
        for name, w in against:
            r = w["ratios"]["switchyard_over_switchyard_baseline"]
            cpu = {k: (w["systems"].get(k) or {}).get("proxy_cpu_us_per_request")
                   for k in ("switchyard", "switchyard_baseline")}
            lines.append(f"| {name} | {fmt_ratio(r['rps'])} | {fmt_ratio(r['p50'])} | "
                         f"{fmt_ratio(r['p99'])} | {fmt_spread(cpu['switchyard'], 1)} | "
                         f"{fmt_spread(cpu['switchyard_baseline'], 1)} |")
    lines += ["", "## Throughput and latency", ""]
    for name, w in report["workloads"].items():
        first = next(iter(w["systems"].values()))
        lines += [f"### {name}: {w['title']} ({first['connections']} connection"
                  f"{'s' if first['connections'] != 1 else ''})", "",
                  "| system | req/s | p50 µs | p90 µs | p99 µs | proxy CPU µs/req | "
                  "server CPU µs/req (proxy+base+ER) | proxy ctx switches/req | "
                  "TCP connects/1k req | proxy peak RSS MiB | wrk CPU | bad answers |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for system, x in w["systems"].items():
            a = x["answers"]
            bad_text = f"{a['bad']:,} of {a['checked']:,}"
            if not x["valid"]:
                bad_text = f"**{a['bad']:,} of {a['checked']:,} ({100 * a['bad_fraction']:.1f} %): " \
                           "INVALID**"
            if a["duplicates"]:
                bad_text += f" (+{a['duplicates']:,} duplicate tx)"
            rss = x["proxy_peak_rss_kb"]
            lines.append(
                f"| {system} | {fmt_spread(x['rps'])} | {fmt_spread(x['latency_us']['p50'])} | "
                f"{fmt_spread(x['latency_us']['p90'])} | {fmt_spread(x['latency_us']['p99'])} | "
                f"{fmt_spread(x['proxy_cpu_us_per_request'], 1)} | "
                f"{fmt_spread(x['server_cpu_us_per_request'], 1)} | "
                f"{fmt_spread(x['proxy_context_switches_per_request'], 2)} | "
                f"{fmt_spread(x['tcp_connects_per_1000_requests'], 1)} | "
                f"{fmt(rss / 1024, 1) if rss else '–'} | "
                f"{fmt_spread(x['wrk_cpu_share'], 2)} | {bad_text} |")
        lines.append("")
    lines += ["## Answer checks", "",
              "Every answer of every run is checked by bench/wrk/jsonrpc.lua (HTTP 200, a "
              "JSON-RPC result, no error; a batch with any failed element counts as bad). Before "
              "the runs one request per workload and system is checked by bench/loadtest.py, "
              "including that Switchyard answers a delegated account from the ER.", ""]
    failed = [c for c in report["checks"] if not c.get("ok")]
    total_bad = sum(x["answers"]["http_errors"] + x["answers"]["rpc_errors"] +
                    x["answers"]["missing_result"] + x["answers"]["socket_errors"]
                    for w in report["workloads"].values() for x in w["systems"].values())
    total = sum(x["answers"]["checked"] for w in report["workloads"].values()
                for x in w["systems"].values())
    dups = sum(x["answers"]["duplicates"] for w in report["workloads"].values()
               for x in w["systems"].values())
    lines.append(f"- answers checked: {total:,}; bad (non-200, JSON-RPC error, no result, socket "
                 f"error): {total_bad:,}; duplicate transactions: {dups:,}")
    lines.append(f"- pre-run checks: {len(report['checks'])}, failed: {len(failed)}")
    for c in failed:
        lines.append(f"  - {c['workload']} / {c['system']}: {'; '.join(c['problems'])}")
    sy = report["workloads"].get("account_mixed", {}).get("systems", {}).get("switchyard", {})
    if sy.get("switchyard_metrics_delta"):
        delta = ", ".join(f"`{k}` {v:,.0f}" for k, v in
                          sorted(sy["switchyard_metrics_delta"].items()))
        lines.append(f"- Switchyard /metrics over its last account_mixed run: {delta}")
    lines += ["", "## Micro-benchmarks (Google Benchmark)", ""]
    for binary, data in report["micro"].items():
        lines += [f"### {binary}", "", "| benchmark | time | CPU time | items/s | notes |",
                  "|---|---|---|---|---|"]
        for row in data["benchmarks"]:
            notes = []
            for k in ("accounts", "peak_rss_mb", "bytes_per_second"):
                if k in row:
                    notes.append(f"{k} {row[k]:,.0f}")
            if "error" in row:
                notes.append(f"error: {row['error']}")
            cpu = f"{row['cpu_time']:,.1f} {row.get('time_unit', 'ns')}" if "cpu_time" in row \
                else "–"
            lines.append(f"| {row['name']} | {micro_time(row)} | {cpu} | "
                         f"{fmt(row.get('items_per_second'))} | {', '.join(notes)} |")
        lines.append("")
    kafka = report.get("kafka")
    lines += ["### Kafka log (switchyard_kafka_bench, librdkafka mock cluster)", ""]
    if kafka:
        lines += ["The embedded log is measured in the same run as the baseline.", "",
                  "| figure | value |", "|---|---|"]

        def flatten(prefix, node):
            if isinstance(node, dict):
                for k, v in node.items():
                    flatten(f"{prefix}.{k}" if prefix else k, v)
            else:
                lines.append(f"| {prefix} | {fmt(node, 3) if isinstance(node, float) else node} |")
        flatten("", kafka)
        lines.append("")
    else:
        lines += ["**Slot:** no Kafka figures in this run (bench/CMakeLists.txt did not declare "
                  "`switchyard_kafka_bench`, it did not build, or it failed: see "
                  "logs/kafka_log_bench.log). bench/run runs it when it is there and this "
                  "section shows its JSON.", ""]
    rp = report.get("replay")
    if rp:
        lines += ["### fold and replay through the `switchyard` binary (embedded log)", "",
                  "| events | `switchyard fold` events/s | `switchyard replay` events/s (wall, "
                  "incl. process start) | digests equal |", "|---|---|---|---|",
                  f"| {rp['events']:,} | {rp['fold_events_per_s']:,.0f} | "
                  f"{rp['replay_events_per_s']:,.0f} | {rp['digests_match']} |", ""]
    soak = report.get("soak")
    if soak and "error" in soak:
        lines += ["### soak", "", soak["error"], ""]
    elif soak:
        names = {"rss_kb": "VmRSS (KiB)", "own_rss_kb": "RSS without RocksDB's memtables and "
                 "block cache (KiB)", "store_kb": "RocksDB's memtables and block cache (KiB)",
                 "fds": "open descriptors", "threads": "threads",
                 "p99_us": "p99 per sample interval (µs)"}
        lines += ["### soak (`app_soak_test`, bench/run --soak)", "",
                  f"{soak['samples']} samples over {soak['seconds']} s, "
                  f"{soak['requests']:,} requests, {soak['failures']} failed.", "",
                  "| series | min | max | end |", "|---|---|---|---|"]
        for key, name in names.items():
            v = soak["series"][key]
            lines.append(f"| {name} | {v['min']:,} | {v['max']:,} | {v['end']:,} |")
        lines.append("")
        if soak["plot"]:
            lines += [f"![soak]({soak['plot']})", ""]
    prof = report.get("profile") or {}
    if prof:
        first = next(iter(prof.values()), {})
        title = first.get("title", "getAccountInfo, undelegated accounts")
        lines += ["## Profile", "",
                  f"perf record at 999 Hz of the proxy process during the {title} run "
                  f"(`{first.get('workload', 'account_undelegated')}`); self time by symbol and "
                  "by shared object (profile/*.txt hold the full listings).", ""]
        lines += ["Per request during that run (perf stat):", "",
                  "| system | req/s | proxy syscalls | proxy ctx switches | proxy CPU µs | "
                  "base syscalls | base ctx switches | base CPU µs |",
                  "|---|---|---|---|---|---|---|---|"]
        for system, entry in prof.items():
            pc, bc = entry.get("proxy_counters", {}), entry.get("base_counters", {})
            lines.append(
                f"| {system} | {fmt(entry.get('load', {}).get('rps'))} | "
                f"{fmt(pc.get('syscalls_per_request'), 1)} | "
                f"{fmt(pc.get('context_switches_per_request'), 2)} | "
                f"{fmt(pc.get('cpu_us_per_request'), 1)} | "
                f"{fmt(bc.get('syscalls_per_request'), 1)} | "
                f"{fmt(bc.get('context_switches_per_request'), 2)} | "
                f"{fmt(bc.get('cpu_us_per_request'), 1)} |")
        lines.append("")
        for system, entry in prof.items():
            if "top_symbol" not in entry and not entry.get("error"):
                continue
            if entry.get("error"):
                lines += [f"- {system}: profile unavailable ({entry['error']})", ""]
                continue
            lines += [f"### {system}", "", "| self % | symbol |", "|---|---|"]
            for row in entry.get("top_symbol", [])[:20]:
                lines.append(f"| {row['percent']:.2f} | `{row['name'][:110]}` |")
            lines += ["", "| self % | shared object |", "|---|---|"]
            for row in entry.get("top_dso", [])[:10]:
                lines.append(f"| {row['percent']:.2f} | `{row['name']}` |")
            lines.append("")
    if report.get("analysis"):
        lines += ["## Analysis (bench/ANALYSIS.md, written by hand)", "",
                  report["analysis"].strip(), ""]
    if report["plots"]:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in report["plots"]] + [""]
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = os.path.abspath(sys.argv[1])
    raw = os.path.join(out, "raw")
    stack = load_json(os.path.join(raw, "stack.json"), {})
    runs = []
    if os.path.exists(os.path.join(raw, "runs.jsonl")):
        with open(os.path.join(raw, "runs.jsonl")) as f:
            runs = [json.loads(line) for line in f if line.strip()]
    workloads = summarize_runs(runs)
    micro = micro_results(raw)
    started = stack.get("started_utc") or os.path.basename(out.rstrip("/"))
    report = {
        "schema": SCHEMA,
        "started_utc": started,
        "git": git_info(),
        "machine": {"cores": os.cpu_count(), "cpu_model": cpu_model(),
                    "kernel": platform.release(),
                    "load_cpu": stack.get("load_cpu"), "server_cpu": stack.get("server_cpu"),
                    "loadavg_start": loadavg(os.path.join(raw, "loadavg_start.txt")),
                    "loadavg_end": loadavg(os.path.join(raw, "loadavg_end.txt"))},
        "settings": {k: stack.get(k) for k in ("quick", "reps", "duration_s", "wallets",
                                               "delegated", "switchyard_binary", "cache",
                                               "baseline_binary", "baseline_toml",
                                               "extra_toml", "api_key")} | {
            "transactions": (load_json(os.path.join(raw, "transactions.json"), {}) or {}).get(
                "generated")},
        "workloads": workloads,
        "checks": load_json(os.path.join(raw, "checks.json"), []),
        "micro": micro,
        "kafka": load_json(os.path.join(raw, "kafka_log_bench.json")),
        "replay": load_json(os.path.join(raw, "replay.json")),
        "goals": goals(workloads, micro, load_json(os.path.join(raw, "kafka_log_bench.json"))),
        "profile": load_json(os.path.join(raw, "profile.json")),
        "soak": soak_summary(out),
        "analysis": None,
        "plots": [],
    }
    findings = os.path.join(ROOT, "bench", "ANALYSIS.md")
    if os.path.exists(findings):
        with open(findings) as f:
            report["analysis"] = f.read()
    report["plots"] = plots(out, workloads)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(report))


if __name__ == "__main__":
    main()
