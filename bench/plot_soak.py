#!/usr/bin/env python3
"""Plots the samples of SoakTest.ServeUnderChurnAndLoadStaysFlat (the CSV named by
SWITCHYARD_SOAK_CSV): serve's RSS, open descriptors, threads and the clients' p99 against time,
RocksDB's memtables (state store and embedded log) and block cache within that RSS, one panel each, as a PNG (gnuplot, as bench/report.py).

Usage: bench/plot_soak.py SOAK_CSV [OUT_PNG]   (OUT_PNG defaults to SOAK_CSV with .png)
"""
import csv
import os
import shutil
import subprocess
import sys

COLUMNS = ["elapsed_s", "rss_kb", "fds", "threads", "p99_us", "requests", "failures",
           "store_kb"]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.splitext(path)[0] + ".png"
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != COLUMNS:
            sys.exit(f"{path}: expected the columns {','.join(COLUMNS)}")
        rows = list(reader)
    if not rows:
        sys.exit(f"{path}: no samples")
    if shutil.which("gnuplot") is None:
        sys.exit("gnuplot is not installed")
    panels = [("rss_kb", "RSS (KiB)"),
              ("store_kb", "of which RocksDB's memtables (state store and embedded log) and block cache (KiB)"),
              ("fds", "open descriptors"), ("threads", "threads"),
              ("p99_us", "p99 per sample interval (µs)")]
    script = [f'set terminal pngcairo size 1000,{260 * len(panels)} font ",10" noenhanced',
              f'set output "{out}"', f"set multiplot layout {len(panels)},1",
              "set datafile separator ','", "set grid", "set key off",
              'set xlabel "elapsed (s)"']
    for column, label in panels:
        index = COLUMNS.index(column) + 1
        script += [f'set title "{label}"', f'plot "{path}" every ::1 using 1:{index} with lines lw 2']
    script.append("unset multiplot")
    done = subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True,
                          capture_output=True)
    if done.returncode != 0 or not os.path.exists(out):
        sys.exit(f"gnuplot failed: {done.stderr}")
    last = rows[-1]
    print(f"{out}: {len(rows)} samples over {last['elapsed_s']} s, "
          f"{last['requests']} requests, {last['failures']} failures")


if __name__ == "__main__":
    main()
