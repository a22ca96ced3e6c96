#!/usr/bin/env bash
# Bytes on the wire of one getMultipleAccounts of 100 keys through `switchyard serve`, with and
# without gzip: a switchyard-localnet base layer with 100 funded accounts, serve in front of it
# twice (the response cache on, so serve compresses the answer itself; and off, so the
# localnet's gzip passes through uninflated), and curl with and without --compressed.
#   bench/gzip_bytes.sh [BUILD_DIR]     (default build/release; builds nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
switchyard=$build/app/switchyard
localnet=$build/localnet/switchyard-localnet
for binary in "$switchyard" "$localnet"; do
  [[ -x $binary ]] || { echo "no $binary: build it first" >&2; exit 1; }
done
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }

dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

wait_for() {  # FILE: waits until it holds a whole JSON object
  for _ in $(seq 1 300); do
    grep -q '}' "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "timed out waiting for $1" >&2
  exit 1
}
port_of() { sed -E "s/.*\"$2\":([0-9]+).*/\1/" "$1"; }

# 100 distinct pubkeys in base58 (32 bytes: 0x5a, i, then zeros).
mapfile -t keys < <(python3 - <<'PY'
alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
def b58(data):
    n = int.from_bytes(data, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = alphabet[r] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out
for i in range(100):
    print(b58(bytes([0x5a, i]) + bytes(30)))
PY
)
fund=()
for i in "${!keys[@]}"; do fund+=(--fund "${keys[$i]}=$((1000000000 + i))"); done
"$localnet" --port 0 --threads 1 --slot-ms 400 --ready-file "$dir/localnet.ready" "${fund[@]}" \
  >"$dir/localnet.log" 2>&1 &
pids+=($!)
wait_for "$dir/localnet.ready"
base_port=$(port_of "$dir/localnet.ready" http)

start_serve() {  # NAME CACHE(true|false)
  cat >"$dir/$1.toml" <<TOML
[api]
listen = "127.0.0.1:0"
threads = 1
[admin]
listen = "127.0.0.1:0"
[cache]
enabled = $2
coalesce = $2
[upstreams.base]
endpoints = [{url = "http://127.0.0.1:$base_port"}]
TOML
  "$switchyard" serve --config "$dir/$1.toml" --data-dir "$dir/$1.data" \
    --ready-file "$dir/$1.ready" >"$dir/$1.log" 2>&1 &
  pids+=($!)
  wait_for "$dir/$1.ready"
}
start_serve cached true
start_serve passthrough false

list=$(printf '"%s",' "${keys[@]}")
printf '{"jsonrpc":"2.0","id":1,"method":"getMultipleAccounts","params":[[%s],{"encoding":"base64"}]}' \
  "${list%,}" >"$dir/body.json"

measure() {  # PORT [curl args]: "body_bytes header_bytes content_encoding"
  local port=$1
  shift
  curl -sS -o "$dir/answer" -D "$dir/headers" -w '%{size_download} %{size_header}' \
    -H 'Content-Type: application/json' --data-binary @"$dir/body.json" "$@" \
    "http://127.0.0.1:$port/"
  local encoding
  encoding=$(grep -i '^content-encoding:' "$dir/headers" | tr -d '\r' | awk '{print $2}')
  echo " ${encoding:-identity}"
}

printf '%-52s %12s %12s %10s\n' "getMultipleAccounts, 100 keys" "body bytes" "header bytes" "encoding"
for row in "direct to the localnet:$base_port" "serve, cache on:$(port_of "$dir/cached.ready" api)" \
  "serve, cache off (pass-through):$(port_of "$dir/passthrough.ready" api)"; do
  name=${row%%:*}
  port=${row##*:}
  read -r plain_body plain_head plain_enc <<<"$(measure "$port")"
  read -r gzip_body gzip_head gzip_enc <<<"$(measure "$port" --compressed)"
  printf '%-52s %12s %12s %10s\n' "$name, no Accept-Encoding" "$plain_body" "$plain_head" "$plain_enc"
  printf '%-52s %12s %12s %10s\n' "$name, --compressed" "$gzip_body" "$gzip_head" "$gzip_enc"
  awk -v p="$plain_body" -v g="$gzip_body" 'BEGIN { printf "%-52s %12.1f\n", "  ratio (plain / gzip body)", p / g }'
done
