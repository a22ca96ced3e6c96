#!/usr/bin/env python3
"""Writes a delegation event history for `switchyard log append --jsonl`: delegations and
undelegations (2:1) over 50 k accounts, 8 validators and 100 owner programs, sealed every
1000 events. Deterministic (seeded)."""
import argparse
import random

ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def b58(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, r = divmod(n, 58)
        out.append(ALPHABET[r])
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    key = lambda n: b58(rng.randbytes(n))  # noqa: E731
    accounts = [key(32) for _ in range(50_000)]
    validators = [key(32) for _ in range(8)]
    owners = [key(32) for _ in range(100)]
    signatures = [key(64) for _ in range(1000)]
    slot = 1
    with open(args.out, "w") as f:
        for i in range(args.events):
            account = accounts[rng.randrange(len(accounts))]
            signature = signatures[i % len(signatures)]
            if rng.randrange(3) == 0:
                f.write(f'{{"kind":"undelegated","account":"{account}","slot":{slot},'
                        f'"signature":"{signature}"}}\n')
            else:
                f.write(f'{{"kind":"delegated","account":"{account}",'
                        f'"validator":"{validators[rng.randrange(8)]}",'
                        f'"owner":"{owners[rng.randrange(100)]}","slot":{slot},'
                        f'"lamports":{rng.randrange(1, 10**9)},"commit_frequency_ms":30000,'
                        f'"signature":"{signature}"}}\n')
            if (i + 1) % 1000 == 0:
                f.write(f'{{"kind":"slot_sealed","slot":{slot}}}\n')
                slot += 1
        f.write(f'{{"kind":"slot_sealed","slot":{slot}}}\n')


if __name__ == "__main__":
    main()
