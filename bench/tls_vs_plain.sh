#!/bin/bash
# getAccountInfo single reads through `switchyard serve` (1 API thread, cache off) in front of a
# localnet base layer, with wrk -t1 -c32 -d10s keep-alive: plain HTTP, or HTTPS with "tls".
# Usage: bench/tls_vs_plain.sh BUILD_DIR [tls]
set -e
B=$1; TLS=$2; D=$(mktemp -d)
$B/localnet/switchyard-localnet --port 0 --threads 1 --ready-file $D/ln.ready --fund 9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM=1000000 > $D/ln.log 2>&1 &
LN=$!
for i in $(seq 100); do grep -q '}' $D/ln.ready 2>/dev/null && break; sleep 0.1; done
LP=$(grep -o '"http":[0-9]*' $D/ln.ready | cut -d: -f2)
EXTRA=""
SCHEME=http
if [ "$TLS" = tls ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout $D/key.pem -out $D/cert.pem -days 1 -subj /CN=localhost 2>/dev/null
  EXTRA="tls_cert_file = \"$D/cert.pem\"
tls_key_file = \"$D/key.pem\""
  SCHEME=https
fi
cat > $D/serve.toml <<EOT
[api]
listen = "127.0.0.1:0"
threads = 1
$EXTRA
[admin]
listen = "127.0.0.1:0"
[upstreams.base]
endpoints = [{url = "http://127.0.0.1:$LP"}]
[cache]
enabled = false
EOT
$B/app/switchyard serve --config $D/serve.toml --data-dir $D/data --ready-file $D/serve.ready > $D/serve.log 2>&1 &
SV=$!
for i in $(seq 100); do grep -q '}' $D/serve.ready 2>/dev/null && break; sleep 0.1; done
SP=$(grep -o '"api":[0-9]*' $D/serve.ready | cut -d: -f2)
wrk -t1 -c32 -d10s -s "$(dirname "$0")/../tests/localnet/wrk_get_account_info.lua" $SCHEME://127.0.0.1:$SP/ | grep -E "Requests/sec|Non-2xx|Socket errors|requests in"
kill $SV $LN; wait 2>/dev/null; rm -rf $D
