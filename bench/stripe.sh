#!/usr/bin/env bash
# bench/stripe.sh - one big all-reduce striped over the connection pool, against one connection and Gloo.
#
# usage: bench/stripe.sh [BUILD_DIR] > bench/stripe.md     (root: WAN emulation needs ip netns)
# env:   STRIPE_BYTES (268435456), STRIPE_POOLS ("1 8"), STRIPE_WAN_REPS (1), STRIPE_LO_REPS (5),
#        STRIPE_LO_ROUNDS (3: the loopback points run interleaved, round by round, so a load change on the
#        shared machine hits every implementation alike; reported: median of the round medians)
#
# 1. WAN emulation (bench/wan.sh, its "lossy" setting: 40 ms RTT, 1 Gbit/s per link, 0.1 % loss, cubic,
#    MTU 1500): 4 peers, one in-place float sum all-reduce of STRIPE_BYTES per repetition with a pool of P
#    connections (the master stripes it over all P), then Gloo's ring with one rank in each of the same
#    namespaces. 2. Loopback, 4 peers: pccl in place and out of place (one connection per neighbour: the
#    master does not stripe rings within one host), pccl striped over 8 anyway (PCCL_STRIPE_LOCAL=1), and
#    Gloo. Prints the markdown section docs/benchmarks.md includes (bench/report.py, section 4c).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build}/bin
BYTES=${STRIPE_BYTES:-268435456}
POOLS=${STRIPE_POOLS:-1 8}
WREPS=${STRIPE_WAN_REPS:-1}
LREPS=${STRIPE_LO_REPS:-5}
LROUNDS=${STRIPE_LO_ROUNDS:-3}
RES=$(mktemp /tmp/pcclb-stripe-XXXXXX)
trap 'rm -f "$RES"' EXIT
LOAD_BEFORE=$(uptime)
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
WAN_POOL=1 WAN_GLOO=1 WAN_TAG=lossy WAN_CC=cubic WAN_LOSS=0.1% WAN_MTU=1500 WAN_RATE=1gbit WAN_BYTES=$BYTES \
    "$ROOT/bench/wan.sh" "$BIN" "$WREPS" "$POOLS" >>"$RES"
for _ in $(seq "$LROUNDS"); do
    "$BIN/pccl_allreduce" ar 4 "$BYTES" "$LREPS" 1 >>"$RES"
    "$BIN/pccl_allreduce" oop 4 "$BYTES" "$LREPS" 1 >>"$RES"
    PCCL_STRIPE_LOCAL=1 "$BIN/pccl_allreduce" pool 4 "$BYTES" "$LREPS" 8 >>"$RES"
    if [ -x "$BIN/gloo_allreduce" ]; then "$BIN/gloo_allreduce" 4 "$BYTES" "$LREPS" 1 >>"$RES"; fi
done
python3 - "$RES" "$START" "$LOAD_BEFORE" "$(uptime)" "$(git -C "$ROOT" rev-parse --short HEAD)" "$LREPS" <<'PY'
import sys
rows = [dict(kv.split("=", 1) for kv in l.split()[1:]) for l in open(sys.argv[1]) if l.startswith("RESULT")]
emu = next((r["emu"].replace("_", " ") for r in rows if r.get("mode") == "wanenv"), "?")
print(f"Measured by `bench/stripe.sh` on {sys.argv[2]}, build {sys.argv[5]} (Release), 4 peers, one in-place float "
      f"sum all-reduce of {int(rows[-1]['bytes']) >> 20} MiB per repetition; time = max over ranks, median over "
      f"repetitions. Load before: `{sys.argv[3].strip()}`; after: `{sys.argv[4].strip()}`.")
print()
print(f"WAN emulation ({emu}), every peer in its own namespace; Gloo's ring runs one rank in each of the same "
      "namespaces:")
print()
print("| implementation | connections per edge | reps | median s | MB/s | vs pccl pool 1 | vs Gloo |")
print("| --- | --- | --- | --- | --- | --- | --- |")
wan = [r for r in rows if r.get("mode") == "wanpool" and "median_s" in r]
def t(r): return float(r["median_s"])
base = next((t(r) for r in wan if r["impl"] == "pccl" and r["conc"] == "1"), None)
gloo = next((t(r) for r in wan if r["impl"] == "gloo"), None)
for r in wan:
    conn = r["conc"] if r["impl"] == "pccl" else "1 (ring)"
    name = f"pccl, pool {r['conc']}" if r["impl"] == "pccl" else "Gloo"
    print(f"| {name} | {conn} | {r['reps']} | {t(r):.2f} | {int(r['bytes']) / t(r) / 1e6:.2f} | "
          f"{base / t(r) if base else float('nan'):.2f}x | {gloo / t(r) if gloo else float('nan'):.2f}x |")
for r in rows:
    if r.get("status", "").startswith("FAILED"):
        print(f"| {r['impl']} {r.get('mode')} conc {r.get('conc')} | FAILED | | | | | |")
print()
print(f"Loopback (one host, 2 cores), the four points interleaved in rounds of {sys.argv[6]} repetitions each: "
      "median of the round medians (the round medians in brackets):")
print()
print("| implementation | median ms | GB/s | vs Gloo | rounds (ms) |")
print("| --- | --- | --- | --- | --- |")
import statistics
lo = {}
for r in rows:
    if r.get("mode") in ("ar", "pool") and "median_s" in r:
        lo.setdefault((r["impl"], r["mode"]), []).append(t(r))
g = statistics.median(lo[("gloo", "ar")]) if ("gloo", "ar") in lo else None
names = {("pccl", "ar"): "pccl in place (one connection: not striped on one host)",
         ("pccl-oop", "ar"): "pccl out of place (one connection)",
         ("pccl", "pool"): "pccl in place, striped over 8 (`PCCL_STRIPE_LOCAL=1`)", ("gloo", "ar"): "Gloo ring"}
for k, v in lo.items():
    m = statistics.median(v)
    print(f"| {names.get(k, k[0])} | {m * 1e3:.1f} | {int(rows[-1]['bytes']) / m / 1e9:.4f} | "
          f"{g / m if g else float('nan'):.2f}x | {', '.join(f'{x * 1e3:.0f}' for x in v)} |")
PY
