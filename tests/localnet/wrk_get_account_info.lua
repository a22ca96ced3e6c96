-- wrk script for the localnet's getAccountInfo fast path. Run:
--   switchyard-localnet --port 18899 --fund 9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM=1000000 &
--   wrk -t2 -c64 -d10s -s tests/localnet/wrk_get_account_info.lua http://127.0.0.1:18899/
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"getAccountInfo","params":["9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM",{"encoding":"base64"}]}'
