#!/usr/bin/env python3
"""bench/run's load matrix against a started stack (raw/stack.json, written by bench/run).

For every workload and repetition, runs wrk (bench/wrk/jsonrpc.lua) against each system in
turn -- direct (the localnet base), nginx, switchyard -- with the order reversed on odd
repetitions. Each measured run is preceded by an unrecorded warm-up of the same workload on
the same system. Around each measured run it reads the CPU time (utime+stime,
/proc/PID/stat) of the proxy, the localnet base and the ER, the proxy's peak RSS (VmHWM) and
the wrk process's own CPU (rusage), and for Switchyard the deltas of its /metrics counters.
One JSON line per measured run goes to raw/runs.jsonl. Then, unless --no-profile, it profiles
the proxies with perf during a getAccountInfo run (profile/).

The hot_set workload also runs against switchyard_nocache, a second serve with the response
cache off, when bench/run started one (--cache on, the default); around every Switchyard run
the "cache" object of /status is read, and its hit ratio recorded.

The getAccountInfo, getMultipleAccounts and batch workloads also run against
switchyard_baseline when bench/run started one (--baseline-bin, --extra-toml): another build or
configuration of the router, measured in the same repetitions, so that the cost of a change is
read as one ratio.
"""
import argparse
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request

SYSTEMS = ["direct", "nginx", "switchyard"]
CACHE_OFF = "switchyard_nocache"
BASELINE = "switchyard_baseline"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LUA = os.path.join(ROOT, "bench", "wrk", "jsonrpc.lua")
TICKS = os.sysconf("SC_CLK_TCK")
DELEGATION_PROGRAM = "DELeGGvXpWV2fqJUhqcF5ZSYMS4JTLjteaAMARRSaeSh"


class Workload:
    def __init__(self, name, title, bodies, connections=64, stream=False, short=False,
                 cache_off=False, baseline=False):
        self.name, self.title, self.bodies = name, title, bodies
        self.connections, self.stream, self.short = connections, stream, short
        self.cache_off = cache_off  # also run against switchyard_nocache
        self.baseline = baseline  # also run against switchyard_baseline


def workloads(quick):
    loaded = [
        Workload("account_undelegated", "getAccountInfo, undelegated accounts",
                 "account_undelegated.jsonl", baseline=True),
        Workload("account_mixed", "getAccountInfo, 50/50 delegated and undelegated",
                 "account_mixed.jsonl", baseline=True),
        Workload("multiple_accounts_20", "getMultipleAccounts, 20 keys (10 delegated)",
                 "multiple_accounts_20.jsonl", baseline=True),
        # Before send_transaction: a serve that has forwarded a few hundred thousand transactions
        # answers reads measurably slower than a fresh one (bench/ANALYSIS.md, "Response
        # cache"), and switchyard_nocache and switchyard_baseline, which are sent none, have not.
        Workload("hot_set", "hot set: getAccountInfo of 64 accounts, finalized getTransaction "
                 "of 16", "hot_set.jsonl", cache_off=True),
        Workload("batch_10", "JSON-RPC batch of 10 calls", "batch_10.jsonl", baseline=True),
        Workload("send_transaction", "sendTransaction, base64 v0 transfer", None, stream=True),
    ]
    single = [w for w in loaded if not quick or w.name.startswith("account_")]
    return loaded + [
        Workload(w.name + "_c1", w.title + ", one connection", w.bodies, connections=1,
                 stream=w.stream, short=True, baseline=w.baseline)
        for w in single
    ]


# --- /proc -------------------------------------------------------------------------------
def children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(entry))
        except OSError:
            pass
    return out


def process_tree(pid):
    return [pid] + children(pid)


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        except OSError:
            pass
    return total / TICKS


def status_kb(pids, key):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def context_switches(pids):
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt")):
                            total += int(line.split()[1])
            except OSError:
                pass
    return total


def tcp_active_opens():
    """connect() calls on the whole machine (/proc/net/snmp Tcp: ActiveOpens)."""
    try:
        with open("/proc/net/snmp") as f:
            rows = [line.split() for line in f if line.startswith("Tcp:")]
        return int(rows[1][rows[0].index("ActiveOpens")])
    except (OSError, IndexError, ValueError):
        return 0


# --- HTTP ----------------------------------------------------------------------------------
def post(url, body, timeout=5, api_key=None):
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["x-api-key"] = api_key
    request = urllib.request.Request(url, data=body.encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read().decode()


def metrics(admin_url):
    values = {}
    try:
        with urllib.request.urlopen(admin_url + "/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return values
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        if "_bucket" in name:
            continue
        try:
            values[name] = float(value)
        except ValueError:
            pass
    return values


def cache_stats(admin_url):
    """The "cache" object of /status (hits, misses, coalesced, ...), or None."""
    try:
        with urllib.request.urlopen(admin_url + "/status", timeout=5) as response:
            return json.loads(response.read().decode()).get("cache")
    except (OSError, ValueError):
        return None


def cache_delta(before, after):
    if not before or not after:
        return None
    delta = {k: after[k] - before[k] for k in ("hits", "misses", "coalesced", "evictions")}
    lookups = delta["hits"] + delta["misses"]
    delta["hit_ratio"] = delta["hits"] / lookups if lookups else None
    delta["entries"] = after["entries"]
    return delta


def metrics_delta(before, after):
    keep = ("requests_total", "errors_total", "failures_total", "retries_total",
            "reroutes_total", "calls_total", "split_accounts_total", "batches_total",
            "fallbacks_total", "hits_total", "misses_total", "coalesced_total",
            "pipelined_total", "probes_total", "breaks_total", "moves_total", "hedges_total")
    return {k: after[k] - before.get(k, 0) for k in after
            if k.endswith(keep) or any(s + "{" in k for s in keep)
            if after[k] - before.get(k, 0) != 0}


# --- checks --------------------------------------------------------------------------------
def check_answer(system, workload, url, first_body, api_key=None):
    """One request before the runs: HTTP 200, a JSON-RPC result (every element of a batch),
    and for Switchyard the delegated accounts answered by the ER (their owner is not the
    delegation program)."""
    problems = []
    try:
        status, text = post(url, first_body, api_key=api_key)
    except OSError as e:
        return {"ok": False, "problems": [f"request failed: {e}"]}
    if status != 200:
        problems.append(f"HTTP {status}")
    try:
        answer = json.loads(text)
    except ValueError:
        return {"ok": False, "problems": problems + ["not JSON"], "answer": text[:300]}
    answers = answer if isinstance(answer, list) else [answer]
    for a in answers:
        if "error" in a or "result" not in a:
            problems.append(f"JSON-RPC error: {json.dumps(a)[:200]}")
    routed_to_er = None
    if workload.startswith("account_mixed"):
        value = answers[0].get("result", {}).get("value") or {}
        owner = value.get("owner")
        routed_to_er = owner is not None and owner != DELEGATION_PROGRAM
        if system.startswith("switchyard") and not routed_to_er:
            problems.append(f"delegated account answered with owner {owner}, not by the ER")
    return {"ok": not problems, "problems": problems, "delegated_owner_is_er": routed_to_er}


# --- wrk -----------------------------------------------------------------------------------
def run_wrk(stack, url, bodies, connections, seconds, stream_offset=None, think_ms=0,
            api_key=None):
    """One wrk run; think_ms > 0 makes each connection wait that long before each request
    (jsonrpc.lua's WRK_DELAY_MS), which bounds the rate at about
    connections / (think_ms + latency)."""
    cmd = []
    if stack["load_cpu"] != "":
        cmd += ["taskset", "-c", str(stack["load_cpu"])]
    cmd += ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s", "--latency",
            "-s", LUA, url, "--", bodies]
    if stream_offset is not None:
        cmd += ["stream", str(stream_offset)]
    env = dict(os.environ)
    env.pop("WRK_DELAY_MS", None)
    if think_ms > 0:
        env["WRK_DELAY_MS"] = str(think_ms)
    env.pop("WRK_API_KEY", None)
    if api_key:
        env["WRK_API_KEY"] = api_key
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env)
    text = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    result = None
    for line in text.splitlines():
        if line.startswith("WRK_RESULT "):
            result = json.loads(line[len("WRK_RESULT "):])
    if result is None or os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"wrk failed ({' '.join(cmd)}):\n{text}")
    result["wrk_cpu_s"] = usage.ru_utime + usage.ru_stime
    return result


class Runner:
    def __init__(self, stack, work, out, quick):
        self.stack, self.work, self.out, self.quick = stack, work, out, quick
        self.pids = stack["pids"]
        self.urls = stack["urls"]
        self.next_transaction = 0
        self.transactions_generated = 0
        self.stream_rates = {}  # (system, connections) -> the last sendTransaction req/s
        self.runs = open(os.path.join(out, "raw", "runs.jsonl"), "a")

    def api_key(self, system):
        """The x-api-key the routers' requests carry (bench/run --api-key), to both the measured
        serve and the baseline, so that they parse the same bytes."""
        if system in ("switchyard", BASELINE):
            return self.stack.get("api_key") or None
        return None

    def proxy_pids(self, system):
        if system == "nginx":
            return process_tree(self.pids["nginx"])
        if system in ("switchyard", CACHE_OFF, BASELINE):
            return [self.pids[system]]
        return []

    def systems(self, workload):
        systems = list(SYSTEMS)
        if workload.cache_off and self.urls.get(CACHE_OFF):
            systems.append(CACHE_OFF)
        if workload.baseline and self.urls.get(BASELINE):
            systems.append(BASELINE)
        return systems

    def remind_hot_transactions(self):
        """Sends hot_set's transactions again through each Switchyard (the base answers that
        they were processed), so that its signature memory holds them whatever the
        sendTransaction runs pushed out: getTransaction of a remembered signature is forwarded
        to one target, and only such a read is kept."""
        with open(self.stack["hot_transactions"]) as f:
            bodies = [line.strip() for line in f if line.strip()]
        for system in ("switchyard", CACHE_OFF):
            if not self.urls.get(system):
                continue
            for b in bodies:
                try:
                    post(self.urls[system], b, api_key=self.api_key(system))
                except OSError as e:
                    print(f"  {system}: resending a hot_set transaction failed: {e}", flush=True)

    def fresh_transactions(self, seconds, key):
        """A file of transactions never sent before, enough for `seconds` at the last rate
        of this system and connection count (the highest rate seen, before its first run),
        with a margin; a faster run wraps and gets duplicates, which the report counts."""
        rate = self.stream_rates.get(key) or max(self.stream_rates.values(), default=30000.0)
        count = int(rate * seconds * 1.5) + 2000
        path = os.path.join(self.work, "transactions.jsonl")
        subprocess.run([self.stack["transaction_generator"], "--wallets",
                        str(self.stack["wallets"]), "--first", str(self.next_transaction),
                        "--count", str(count), "--blockhash", self.stack["blockhash"],
                        "--out", path], check=True)
        self.next_transaction += count
        self.transactions_generated += count
        return path

    def bodies(self, system, workload, seconds):
        """The bodies file of one run: transactions signed for it, or the workload's file."""
        if workload.stream:
            return self.fresh_transactions(seconds, (system, workload.connections))
        return os.path.join(self.work, workload.bodies)

    def run(self, system, workload, seconds, bodies):
        result = run_wrk(self.stack, self.urls[system], bodies, workload.connections, seconds,
                         0 if workload.stream else None, api_key=self.api_key(system))
        if workload.stream:
            os.remove(bodies)
            self.stream_rates[(system, workload.connections)] = result["rps"]
        return result

    def measure(self, system, workload, rep, position, seconds, warmup):
        if warmup > 0:
            self.run(system, workload, warmup, self.bodies(system, workload, warmup))
        proxy = self.proxy_pids(system)
        admin = self.urls.get(system + "_admin")
        m0 = metrics(admin) if admin else {}
        c0 = cache_stats(admin) if admin else None
        bodies = self.bodies(system, workload, seconds)  # signed before the counters start
        switches0, opens0 = context_switches(proxy), tcp_active_opens()
        cpu0 = {"proxy": cpu_seconds(proxy), "base": cpu_seconds([self.pids["base"]]),
                "er": cpu_seconds([self.pids["er"]])}
        started = time.time()
        result = self.run(system, workload, seconds, bodies)
        cpu1 = {"proxy": cpu_seconds(proxy), "base": cpu_seconds([self.pids["base"]]),
                "er": cpu_seconds([self.pids["er"]])}
        switches1, opens1 = context_switches(proxy), tcp_active_opens()
        m1 = metrics(admin) if admin else {}
        c1 = cache_stats(admin) if admin else None
        record = {
            "workload": workload.name, "system": system, "rep": rep, "position": position,
            "connections": workload.connections, "duration_s": seconds, "started": started,
            "wrk": result,
            "cpu_s": {k: round(cpu1[k] - cpu0[k], 3) for k in cpu0} | {
                "wrk": round(result["wrk_cpu_s"], 3)},
            "proxy_context_switches": switches1 - switches0 if proxy else None,
            "tcp_active_opens": opens1 - opens0,
            "proxy_vm_hwm_kb": status_kb(proxy, "VmHWM") if proxy else None,
            "proxy_vm_rss_kb": status_kb(proxy, "VmRSS") if proxy else None,
            "switchyard_metrics_delta": metrics_delta(m0, m1) if m1 else None,
            "cache_delta": cache_delta(c0, c1),
        }
        self.runs.write(json.dumps(record) + "\n")
        self.runs.flush()
        bad = (result["http_errors"] + result["rpc_errors"] + result["missing_result"] +
               sum(result["socket_errors"].values()))
        hits = record["cache_delta"]
        hit_text = f"  hit {hits['hit_ratio']:.3f}" if hits and hits["hit_ratio"] is not None \
            else ""
        print(f"  {workload.name:26s} rep {rep} {system:18s} {result['rps']:9.0f} req/s  "
              f"p50 {result['latency_us']['p50']:6d} us  p99 {result['latency_us']['p99']:6d} us"
              f"  bad {bad}  dup {result['duplicates']}{hit_text}", flush=True)

    def matrix(self, reps, duration):
        checks = []
        for workload in workloads(self.quick):
            systems = self.systems(workload)
            if workload.cache_off:
                self.remind_hot_transactions()
            if not workload.stream:  # a sendTransaction check would spend a transaction
                with open(os.path.join(self.work, workload.bodies)) as f:
                    first = f.readline().strip()
                for system in systems:
                    check = check_answer(system, workload.name, self.urls[system], first,
                                         api_key=self.api_key(system))
                    check |= {"workload": workload.name, "system": system}
                    checks.append(check)
                    if not check["ok"]:
                        print(f"  CHECK FAILED {workload.name} {system}: {check['problems']}",
                              flush=True)
            seconds = max(2, duration // 2) if workload.short else duration
            warmup = 1 if self.quick or workload.short else 2
            for rep in range(reps):
                order = systems if rep % 2 == 0 else list(reversed(systems))
                for position, system in enumerate(order):
                    self.measure(system, workload, rep, position, seconds, warmup)
        with open(os.path.join(self.out, "raw", "checks.json"), "w") as f:
            json.dump(checks, f, indent=1)
        with open(os.path.join(self.out, "raw", "transactions.json"), "w") as f:
            json.dump({"generated": self.transactions_generated}, f)

    def profile(self, seconds, workload):
        """During a run of `workload` (a request-file workload) at its connections against each
        system:
        perf stat of the proxy and of the localnet base (syscalls, context switches and CPU
        per request), and for the proxies perf record (flat profile by symbol and by shared
        object, in profile/; nginx only in a full run)."""
        directory = os.path.join(self.out, "profile")
        os.makedirs(directory, exist_ok=True)
        summary = {}
        perf = shutil.which("perf")
        for system in SYSTEMS:
            entry = {"workload": workload.name, "title": workload.title}
            summary[system] = entry
            if perf is None:
                entry["error"] = "perf is not installed"
                continue
            data = os.path.join(self.work, f"{system}.perf.data")
            pids = ",".join(str(p) for p in self.proxy_pids(system))
            sample = system == "switchyard" or (system == "nginx" and not self.quick)
            load = {}
            thread = threading.Thread(target=lambda: load.update(run_wrk(
                self.stack, self.urls[system], os.path.join(self.work, workload.bodies),
                workload.connections, seconds + 2)))
            thread.start()
            time.sleep(1)
            stat_cmd = [perf, "stat", "-x", ",", "-e",
                        "raw_syscalls:sys_enter,context-switches,task-clock", "-p"]
            counters = {who: subprocess.Popen(
                stat_cmd + [p, "--", "sleep", str(seconds)], stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True)
                for who, p in (("proxy", pids), ("base", str(self.pids["base"]))) if p}
            record = None
            if sample:
                record = subprocess.run(
                    [perf, "record", "-F", "999", "-p", pids, "-o", data, "--", "sleep",
                     str(seconds)], capture_output=True, text=True)
            thread.join()
            entry["load"] = load
            entry["seconds"] = seconds
            requests = load.get("rps", 0) * seconds
            names = {"raw_syscalls:sys_enter": ("syscalls_per_request", 1),
                     "context-switches": ("context_switches_per_request", 1),
                     "task-clock": ("cpu_us_per_request", 1000)}  # task-clock is in ms
            for who, process in counters.items():
                per_request = {}
                for line in process.communicate()[1].splitlines():
                    fields = line.split(",")
                    if len(fields) > 2 and fields[2] in names and requests:
                        try:
                            name, scale = names[fields[2]]
                            per_request[name] = float(fields[0]) * scale / requests
                        except ValueError:
                            pass
                entry[f"{who}_counters"] = per_request
            if record is None:
                continue
            if record.returncode != 0 or not os.path.exists(data):
                entry["error"] = (record.stderr.strip().splitlines() or ["perf record failed"])[-1]
                continue
            for sort, limit in (("symbol", "0.4"), ("dso", "0.2")):
                report = subprocess.run(
                    [perf, "report", "-i", data, "--no-children", "--sort", sort, "--stdio",
                     "-g", "none", "--percent-limit", limit],
                    capture_output=True, text=True, timeout=300)
                path = os.path.join(directory, f"{system}.{sort}.txt")
                with open(path, "w") as f:
                    f.write(report.stdout)
                rows = []
                for line in report.stdout.splitlines():
                    line = line.strip()
                    if not line or line.startswith("#") or "%" not in line:
                        continue
                    percent, _, rest = line.partition("%")
                    try:
                        name = " ".join(rest.split())
                        while name.endswith(" -"):
                            name = name[:-2]
                        rows.append({"percent": float(percent), "name": name})
                    except ValueError:
                        pass
                entry[f"top_{sort}"] = rows[:30]
        with open(os.path.join(self.out, "raw", "profile.json"), "w") as f:
            json.dump(summary, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--profile-workload", default="account_undelegated")
    args = parser.parse_args()
    with open(args.stack) as f:
        stack = json.load(f)
    # Checked before the matrix, so a wrong name does not cost a whole run.
    profiled = next((w for w in workloads(bool(stack["quick"]))
                     if w.name == args.profile_workload and not w.stream), None)
    if profiled is None and not args.no_profile:
        raise SystemExit(f"cannot profile workload {args.profile_workload!r}: not a request-file "
                         "workload of this run")
    runner = Runner(stack, args.work, args.out, bool(stack["quick"]))
    runner.matrix(stack["reps"], stack["duration_s"])
    if not args.no_profile:
        print("  profiling", flush=True)
        runner.profile(2 if stack["quick"] else 8, profiled)


if __name__ == "__main__":
    main()
