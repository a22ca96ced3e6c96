#!/usr/bin/env python3
"""Writes the JSON-RPC request bodies of bench/run's workloads, one body per line.

Undelegated accounts are the benchmark wallets (system accounts funded at genesis); delegated
accounts are the localnet scenario's, read from the last line of its ground truth. With
--signatures (one base58 signature a line, of transactions on the localnet base), also the
hot_set workload: getAccountInfo of the first 64 wallets and getTransaction of those signatures.
"""
import argparse
import json
import os


def body(method, params, rid=1):
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def dump(path, bodies):
    with open(path, "w") as f:
        for b in bodies:
            f.write(json.dumps(b, separators=(",", ":")) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wallets", required=True)
    parser.add_argument("--ground-truth", required=True)
    parser.add_argument("--signatures")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    undelegated = [line.strip() for line in open(args.wallets) if line.strip()]
    last = [line for line in open(args.ground_truth) if line.strip()][-1]
    delegated = sorted(json.loads(last)["delegated"])
    n = min(len(undelegated), len(delegated))
    if n < 10:
        raise SystemExit("make_bodies: need at least 10 delegated and 10 undelegated accounts")
    b64 = {"encoding": "base64"}

    dump(os.path.join(args.out, "account_undelegated.jsonl"),
         [body("getAccountInfo", [k, b64], i + 1) for i, k in enumerate(undelegated)])

    mixed = []
    for i in range(n):
        mixed.append(body("getAccountInfo", [delegated[i], b64], 2 * i + 1))
        mixed.append(body("getAccountInfo", [undelegated[i], b64], 2 * i + 2))
    dump(os.path.join(args.out, "account_mixed.jsonl"), mixed)

    multiple = []
    for i in range(n):
        keys = []
        for j in range(10):
            keys.append(delegated[(i + j) % n])
            keys.append(undelegated[(i + 3 * j) % n])
        multiple.append(body("getMultipleAccounts", [keys, b64], i + 1))
    dump(os.path.join(args.out, "multiple_accounts_20.jsonl"), multiple)

    # Ten calls: getAccountInfo of 3 delegated and 3 undelegated accounts, getBalance of one
    # of each, getSlot and getLatestBlockhash.
    batches = []
    for i in range(n):
        d = [delegated[(i + j) % n] for j in range(4)]
        u = [undelegated[(i + 5 * j) % n] for j in range(4)]
        calls = [
            body("getAccountInfo", [d[0], b64]), body("getAccountInfo", [u[0], b64]),
            body("getAccountInfo", [d[1], b64]), body("getAccountInfo", [u[1], b64]),
            body("getAccountInfo", [d[2], b64]), body("getAccountInfo", [u[2], b64]),
            body("getBalance", [d[3]]), body("getBalance", [u[3]]),
            body("getSlot", []), body("getLatestBlockhash", []),
        ]
        for k, call in enumerate(calls):
            call["id"] = 10 * i + k + 1
        batches.append(calls)
    dump(os.path.join(args.out, "batch_10.jsonl"), batches)

    # A hot set: 64 undelegated accounts (answered by base on every system) and finalized
    # getTransaction of a fixed set, interleaved so each transaction recurs every few bodies.
    if args.signatures:
        signatures = [line.strip() for line in open(args.signatures) if line.strip()]
        if len(undelegated) < 64 or not signatures:
            raise SystemExit("make_bodies: hot_set needs 64 wallets and at least one signature")
        tx_config = {"encoding": "json", "commitment": "finalized",
                     "maxSupportedTransactionVersion": 0}
        every = max(1, 64 // len(signatures))
        hot = []
        for i, key in enumerate(undelegated[:64]):
            hot.append(body("getAccountInfo", [key, b64]))
            if i % every == every - 1 and i // every < len(signatures):
                hot.append(body("getTransaction", [signatures[i // every], tx_config]))
        for i, call in enumerate(hot):
            call["id"] = i + 1
        dump(os.path.join(args.out, "hot_set.jsonl"), hot)

    with open(os.path.join(args.out, "delegated.txt"), "w") as f:
        f.write("\n".join(delegated) + "\n")


if __name__ == "__main__":
    main()
