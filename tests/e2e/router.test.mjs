// End-to-end: real Solana clients (@solana/web3.js, @solana/kit, the ephemeral-rollups SDK's
// ConnectionMagicRouter) pointed at `switchyard serve`, in front of a localnet base layer and
// two localnet ERs with different identities (issue 5 item 17).
//
// Every value read through Switchyard is compared with what the chain it should come from holds
// when asked directly, and the setup makes the chains disagree (an ER's balances move after
// delegation; an undelegated account changes on base after the ERs cloned it), so a request
// routed to the wrong chain fails the test.
//
// Env: SWITCHYARD_LOCALNET_BIN (switchyard-localnet), SWITCHYARD_BIN (switchyard); run through
// run_e2e.sh. Every process starts on port 0 with a ready file and is stopped when the tests
// end, killed on SIGTERM/SIGINT/SIGHUP and, through setpriv's parent-death signal, when this
// process is killed. Confirmation polls getSignatureStatuses; pubsub.test.mjs covers the
// WebSocket path.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import web3 from '@solana/web3.js';
import { processSet, rawCall, sleep, stop, waitFor } from './processes.mjs';
import sdk from '@magicblock-labs/ephemeral-rollups-sdk';

const { Connection, Keypair, LAMPORTS_PER_SOL, PublicKey, SystemProgram, Transaction } = web3;

const LOCALNET_BIN = process.env.SWITCHYARD_LOCALNET_BIN;
const SWITCHYARD_BIN = process.env.SWITCHYARD_BIN;
assert.ok(LOCALNET_BIN, 'set SWITCHYARD_LOCALNET_BIN to the switchyard-localnet binary');
assert.ok(SWITCHYARD_BIN, 'set SWITCHYARD_BIN to the switchyard binary');

// Processes: every child is killed when this process ends; logs, ready files and Switchyard's
// data dir live in tempRoot.
const { dir: tempRoot, children, spawnLogged, logTail } = processSet('switchyard-router-e2e-');

// Waits for a JSON ready file written by `child`.
async function readReadyFile(child, file, what, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${what} exited (${child.exitCode ?? child.signalCode}):\n${logTail(child.name)}`);
    }
    if (fs.existsSync(file)) {
      try {
        return JSON.parse(fs.readFileSync(file, 'utf8'));
      } catch {
        // written but not complete yet
      }
    }
    await sleep(20);
  }
  throw new Error(`${what} did not become ready within ${timeoutMs} ms:\n${logTail(child.name)}`);
}

let localnetCount = 0;
async function startLocalnet(args) {
  const name = `localnet-${localnetCount++}`;
  const ready = path.join(tempRoot, `${name}.ready`);
  const child = spawnLogged(LOCALNET_BIN,
    ['--port', '0', '--threads', '1', '--ready-file', ready, ...args], name);
  const info = await readReadyFile(child, ready, name);
  return {
    child,
    http: `http://127.0.0.1:${info.http}`,
    identity: new PublicKey(info.identity),
  };
}

async function startSwitchyard(base, ers) {
  const dir = path.join(tempRoot, 'switchyard');
  fs.mkdirSync(dir);
  const config = path.join(dir, 'switchyard.toml');
  const lines = [
    '[storage]',
    `data_dir = "${path.join(dir, 'data')}"`,
    'sync = false',
    '[api]',
    'listen = "127.0.0.1:0"',
    'threads = 2',
    '[admin]',
    'listen = "127.0.0.1:0"',
    'probe_interval_ms = 200',
    'refresh_interval_ms = 200',
    '[upstreams.base]',
    `endpoints = [{url = "${base.http}"}]`,
  ];
  for (const er of ers) {
    lines.push(`[upstreams.${er.name}]`, `endpoints = [{url = "${er.http}"}]`);
  }
  for (const er of ers) {
    lines.push('[[ers]]', `identity = "${er.identity.toBase58()}"`, `upstream = "${er.name}"`,
      `fqdn = "${er.http}"`, `block_time_ms = ${er.slotMs}`);
  }
  lines.push('[routing]', `default_er = "${ers[0].name}"`, '[ingest]', `base_url = "${base.http}"`);
  fs.writeFileSync(config, `${lines.join('\n')}\n`);

  const ready = path.join(dir, 'serve.ready');
  const child = spawnLogged(SWITCHYARD_BIN,
    ['serve', '--config', config, '--ready-file', ready], 'switchyard');
  const info = await readReadyFile(child, ready, 'switchyard serve');
  const sy = {
    child,
    url: `http://127.0.0.1:${info.api}`,
    admin: `http://127.0.0.1:${info.admin}`,
  };
  // /ready: the state is loaded and the applied slot is close to base's.
  const deadline = Date.now() + 20000;
  let last = '';
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`switchyard exited:\n${logTail('switchyard')}`);
    try {
      const response = await fetch(`${sy.admin}/ready`);
      last = `${response.status} ${await response.text()}`;
      if (response.status === 200) return sy;
    } catch (error) {
      last = String(error);
    }
    await sleep(50);
  }
  throw new Error(`switchyard did not become ready: ${last}\n${logTail('switchyard')}`);
}

// SIGTERM, then SIGKILL after 5 s; resolves with the exit code (or signal).
// ---------------------------------------------------------------------------------------------
// RPC helpers.

// Polls getSignatureStatuses on `conn` until the signature is confirmed; throws on an error.
async function confirm(conn, signature) {
  const status = await waitFor(`confirmation of ${signature}`, async () => {
    const { value } = await conn.getSignatureStatuses([signature]);
    const s = value[0];
    return s && (s.confirmationStatus === 'confirmed' || s.confirmationStatus === 'finalized')
      ? s : null;
  });
  assert.equal(status.err, null, `transaction ${signature} failed: ${JSON.stringify(status.err)}`);
  return status;
}

// A signed transaction sent with `conn` (its blockhash from `conn`), confirmed by polling.
async function sendAndPoll(conn, instructions, signers) {
  const tx = new Transaction().add(...instructions);
  const signature = await conn.sendTransaction(tx, signers);
  await confirm(conn, signature);
  return signature;
}

// A transaction sent through Switchyard (`conn`) with the blockhash a client must sign it
// with: the one getBlockhashForAccounts answers for its accounts (their ER's, else base's),
// as MagicBlock's SDK asks it. getLatestBlockhash through the router is base's, which no ER
// knows.
async function sendThroughRouter(conn, url, instructions, signers, accounts) {
  const tx = new Transaction().add(...instructions);
  const { blockhash } = await rawCall(url, 'getBlockhashForAccounts',
    [accounts.map((key) => key.toBase58())]);
  tx.recentBlockhash = blockhash;
  tx.feePayer = signers[0].publicKey;
  tx.sign(...signers);
  const signature = await conn.sendRawTransaction(tx.serialize());
  await confirm(conn, signature);
  return signature;
}

async function statusOn(conn, signature) {
  return (await conn.getSignatureStatuses([signature], { searchTransactionHistory: true })).value[0];
}

const transfer = (from, to, lamports) =>
  SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to.publicKey ?? to, lamports });

// The parts of an account every client shows, as plain values for deepEqual.
function accountView(info) {
  if (info === null) return null;
  return {
    lamports: info.lamports,
    owner: info.owner.toBase58(),
    data: Buffer.from(info.data).toString('base64'),
    executable: info.executable,
  };
}

// ---------------------------------------------------------------------------------------------

const BASE_SLOT_MS = 50;
const ACCOUNT_LAMPORTS = 5_000_000;

describe('Switchyard in front of a localnet base and two ERs, with real clients', () => {
  let base;
  let erA;
  let erB;
  let sy;
  let baseConn;
  let erAConn;
  let erBConn;
  let conn; // web3.js through Switchyard
  const funder = Keypair.generate();
  // a1, a2 delegated to ER A; b1, b2 to ER B; plain is never delegated.
  const a1 = Keypair.generate();
  const a2 = Keypair.generate();
  const b1 = Keypair.generate();
  const b2 = Keypair.generate();
  const plain = Keypair.generate();
  const missing = Keypair.generate().publicKey;

  // Creates system accounts and delegates them to `validator`, one transaction each.
  async function createAndDelegate(accounts, validator) {
    await Promise.all(accounts.map(async (account) => {
      const create = SystemProgram.createAccount({
        fromPubkey: funder.publicKey,
        newAccountPubkey: account.publicKey,
        lamports: ACCOUNT_LAMPORTS,
        space: 0,
        programId: SystemProgram.programId,
      });
      const delegate = sdk.createDelegateInstruction({
        payer: funder.publicKey,
        delegatedAccount: account.publicKey,
        ownerProgram: SystemProgram.programId,
        validator,
      }, { commitFrequencyMs: 30000 });
      await sendAndPoll(baseConn, [create, delegate], [funder, account]);
    }));
  }

  // Waits until Switchyard's state (fed by its ingest of the base layer) shows the delegations.
  async function waitForIngest(accounts, validator) {
    for (const account of accounts) {
      await waitFor(`ingest of ${account.publicKey.toBase58()}`, async () => {
        const status = await rawCall(sy.url, 'getDelegationStatus', [account.publicKey.toBase58()]);
        return status.isDelegated && status.delegationRecord.authority === validator.toBase58();
      });
    }
  }

  before(async () => {
    const started = Date.now();
    base = await startLocalnet(['--slot-ms', String(BASE_SLOT_MS)]);
    baseConn = new Connection(base.http, 'confirmed');
    // Different slot speeds make the chains' lastValidBlockHeight ranges disjoint: a
    // blockhash answer shows which chain it came from.
    const idA = Keypair.generate().publicKey;
    const idB = Keypair.generate().publicKey;
    [erA, erB] = await Promise.all([
      startLocalnet(['--er', '--identity', idA.toBase58(), '--base', base.http, '--slot-ms', '10']),
      startLocalnet(['--er', '--identity', idB.toBase58(), '--base', base.http, '--slot-ms', '20']),
    ]);
    assert.ok(erA.identity.equals(idA));
    assert.ok(erB.identity.equals(idB));
    erA.name = 'er_a';
    erA.slotMs = 10;
    erB.name = 'er_b';
    erB.slotMs = 20;
    erAConn = new Connection(erA.http, 'confirmed');
    erBConn = new Connection(erB.http, 'confirmed');

    sy = await startSwitchyard(base, [erA, erB]);
    conn = new Connection(sy.url, 'confirmed');

    // Delegate after Switchyard is up: its ingest sees them live.
    await confirm(baseConn, await baseConn.requestAirdrop(funder.publicKey, 20 * LAMPORTS_PER_SOL));
    await confirm(baseConn, await baseConn.requestAirdrop(plain.publicKey, LAMPORTS_PER_SOL));
    await Promise.all([createAndDelegate([a1, a2], idA), createAndDelegate([b1, b2], idB)]);
    await Promise.all([waitForIngest([a1, a2], idA), waitForIngest([b1, b2], idB)]);

    // Make each ER's balances differ from base's: a transfer on the ER itself.
    await sendAndPoll(erAConn, [transfer(a1, a2, 111)], [a1]);
    await sendAndPoll(erBConn, [transfer(b1, b2, 222)], [b1]);
    // The ERs clone `plain` now; then it changes on base, which the clones never see.
    assert.equal(await erAConn.getBalance(plain.publicKey), LAMPORTS_PER_SOL);
    assert.equal(await erBConn.getBalance(plain.publicKey), LAMPORTS_PER_SOL);
    await sendAndPoll(baseConn, [transfer(funder, plain, 4321)], [funder]);
    console.log(`# setup took ${Date.now() - started} ms`);
  });

  after(async () => {
    const code = await stop(sy);
    await Promise.all([stop(erA), stop(erB)]);
    await stop(base);
    // Whatever a failed setup left running.
    await Promise.all(children.map((child) => stop(child)));
    // serve drains and exits 0 on SIGTERM.
    if (sy) assert.equal(code, 0, `switchyard exit: ${code}\n${logTail('switchyard')}`);
  });

  // The connection an account's value should come from.
  const home = () => new Map([
    [a1.publicKey.toBase58(), erAConn], [a2.publicKey.toBase58(), erAConn],
    [b1.publicKey.toBase58(), erBConn], [b2.publicKey.toBase58(), erBConn],
    [plain.publicKey.toBase58(), baseConn], [missing.toBase58(), baseConn],
  ]);

  test('preconditions: base and the ERs disagree about every account read below', async () => {
    for (const [account, er] of [[a1, erAConn], [a2, erAConn], [b1, erBConn], [b2, erBConn]]) {
      const onBase = await baseConn.getAccountInfo(account.publicKey);
      const onEr = await er.getAccountInfo(account.publicKey);
      assert.ok(onBase.owner.equals(sdk.DELEGATION_PROGRAM_ID));
      assert.ok(onEr.owner.equals(SystemProgram.programId));
      assert.equal(onBase.lamports, ACCOUNT_LAMPORTS);
      assert.notEqual(onEr.lamports, onBase.lamports);
    }
    const other = await erBConn.getBalance(a1.publicKey); // ER B's clone of ER A's account
    assert.notEqual(other, await erAConn.getBalance(a1.publicKey));
    assert.notEqual(await baseConn.getBalance(plain.publicKey),
      await erAConn.getBalance(plain.publicKey));
    assert.notEqual(await baseConn.getBalance(plain.publicKey),
      await erBConn.getBalance(plain.publicKey));
  });

  test('web3.js: getAccountInfo, getBalance and getMultipleAccountsInfo return the right chain\'s values', async () => {
    const where = home();
    for (const key of [a1, a2, b1, b2, plain].map((k) => k.publicKey)) {
      const direct = where.get(key.toBase58());
      const routed = await conn.getAccountInfo(key);
      assert.deepEqual(accountView(routed), accountView(await direct.getAccountInfo(key)),
        `getAccountInfo ${key.toBase58()}`);
      assert.equal(await conn.getBalance(key), await direct.getBalance(key),
        `getBalance ${key.toBase58()}`);
    }
    assert.equal(await conn.getAccountInfo(missing), null);
    assert.equal(await conn.getBalance(missing), 0);

    const keys = [a1.publicKey, plain.publicKey, b1.publicKey, missing, a2.publicKey,
      b2.publicKey];
    const routed = await conn.getMultipleAccountsInfo(keys);
    assert.equal(routed.length, keys.length);
    for (let i = 0; i < keys.length; ++i) {
      const direct = await where.get(keys[i].toBase58()).getAccountInfo(keys[i]);
      assert.deepEqual(accountView(routed[i]), accountView(direct), `index ${i}`);
    }
    // context.slot is base's (its part is there): close to base's slot, not an ER's.
    const { context } = await conn.getMultipleAccountsInfoAndContext(keys);
    const baseSlot = await baseConn.getSlot();
    assert.ok(Math.abs(context.slot - baseSlot) < 40, `${context.slot} vs base ${baseSlot}`);
  });

  test('web3.js: an unmet minContextSlot is a SolanaJSONRPCError -32016; a met one reaches the ER without it; X-Min-Slot answers 412', async () => {
    const slot = await baseConn.getSlot();
    await assert.rejects(
      conn.getSlot({ minContextSlot: slot + 1_000_000 }),
      (error) => {
        assert.ok(error instanceof web3.SolanaJSONRPCError, `${error?.constructor?.name}: ${error}`);
        assert.equal(error.code, -32016);
        return true;
      });
    // A base-layer slot the state has reached: the read of a delegated account goes to its ER
    // without it (the ER's slots run on their own clock) and is answered there.
    assert.equal(await conn.getBalance(a1.publicKey, { minContextSlot: Math.max(0, slot - 100) }),
      await erAConn.getBalance(a1.publicKey));
    const response = await fetch(sy.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Min-Slot': String(slot + 1_000_000) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getSlot' }),
    });
    assert.equal(response.status, 412);
    assert.equal((await response.json()).error.code, -32016);
  });

  test('web3.js: a transfer between accounts delegated to ER B lands on ER B; an ordinary transfer lands on base', async () => {
    const erBefore = [await erBConn.getBalance(b1.publicKey), await erBConn.getBalance(b2.publicKey)];
    const baseBefore = [await baseConn.getBalance(b1.publicKey),
      await baseConn.getBalance(b2.publicKey)];
    // web3.js alone takes its blockhash from getLatestBlockhash, base's: ER B refuses it.
    await assert.rejects(conn.sendTransaction(new Transaction().add(transfer(b1, b2, 3000)), [b1]),
      /Blockhash not found/);
    const signature = await sendThroughRouter(conn, sy.url, [transfer(b1, b2, 3000)], [b1],
      [b1.publicKey, b2.publicKey]);

    assert.equal((await statusOn(erBConn, signature))?.err, null);
    assert.equal(await statusOn(baseConn, signature), null, 'the ER transfer is not on base');
    assert.equal(await statusOn(erAConn, signature), null, 'the ER transfer is not on ER A');
    assert.deepEqual(
      [await erBConn.getBalance(b1.publicKey), await erBConn.getBalance(b2.publicKey)],
      [erBefore[0] - 3000, erBefore[1] + 3000]); // ERs charge no fee
    assert.deepEqual(
      [await baseConn.getBalance(b1.publicKey), await baseConn.getBalance(b2.publicKey)],
      baseBefore);
    assert.equal(await conn.getBalance(b2.publicKey), erBefore[1] + 3000);
    const viaRouter = await conn.getTransaction(signature, { maxSupportedTransactionVersion: 0 });
    const onEr = await erBConn.getTransaction(signature, { maxSupportedTransactionVersion: 0 });
    assert.equal(viaRouter.slot, onEr.slot);
    assert.equal(viaRouter.transaction.signatures[0], signature);

    const recipient = Keypair.generate().publicKey;
    const fundsBefore = await baseConn.getBalance(funder.publicKey);
    const ordinary = await sendAndPoll(conn, [transfer(funder, recipient, 7777)], [funder]);
    assert.equal((await statusOn(baseConn, ordinary))?.err, null);
    assert.equal(await statusOn(erAConn, ordinary), null);
    assert.equal(await statusOn(erBConn, ordinary), null);
    assert.equal(await baseConn.getBalance(recipient), 7777);
    assert.equal(await baseConn.getBalance(funder.publicKey), fundsBefore - 7777 - 5000);
    assert.equal(await conn.getBalance(recipient), 7777);
  });

  test('@solana/kit: the same reads through createSolanaRpc', async () => {
    const kit = await import('@solana/kit');
    const rpc = kit.createSolanaRpc(sy.url);
    const where = home();
    const keys = [a1, a2, b1, b2, plain].map((k) => k.publicKey);
    for (const key of keys) {
      const direct = await where.get(key.toBase58()).getAccountInfo(key);
      const address = kit.address(key.toBase58());
      const { value } = await rpc.getAccountInfo(address, { encoding: 'base64' }).send();
      assert.equal(value.lamports, BigInt(direct.lamports), key.toBase58());
      assert.equal(value.owner, direct.owner.toBase58());
      assert.deepEqual(value.data, [Buffer.from(direct.data).toString('base64'), 'base64']);
      const balance = await rpc.getBalance(address).send();
      assert.equal(balance.value, BigInt(direct.lamports));
    }
    const all = [...keys, missing];
    const { value: many } = await rpc
      .getMultipleAccounts(all.map((k) => kit.address(k.toBase58())), { encoding: 'base64' })
      .send();
    assert.equal(many.length, all.length);
    for (let i = 0; i < all.length; ++i) {
      const direct = await where.get(all[i].toBase58()).getAccountInfo(all[i]);
      if (direct === null) {
        assert.equal(many[i], null);
      } else {
        assert.equal(many[i].lamports, BigInt(direct.lamports), `index ${i}`);
        assert.equal(many[i].owner, direct.owner.toBase58());
      }
    }
    // Base-layer methods pass through with the envelopes kit checks.
    const slot = await rpc.getSlot().send();
    assert.equal(typeof slot, 'bigint');
    assert.ok(slot > 0n);
    const { value: latest } = await rpc.getLatestBlockhash().send();
    assert.equal(typeof latest.blockhash, 'string');
    assert.equal(typeof latest.lastValidBlockHeight, 'bigint');
  });

  describe('ConnectionMagicRouter (@magicblock-labs/ephemeral-rollups-sdk)', () => {
    let router;
    before(() => {
      router = new sdk.ConnectionMagicRouter(sy.url, 'confirmed');
    });

    test('getDelegationStatus matches the delegation records on base', async () => {
      for (const [account, er] of [[a1, erA], [b2, erB]]) {
        const record = Buffer.from(
          (await baseConn.getAccountInfo(
            sdk.delegationRecordPdaFromDelegatedAccount(account.publicKey))).data);
        const status = await router.getDelegationStatus(account.publicKey);
        assert.deepEqual(status, {
          isDelegated: true,
          fqdn: er.http,
          delegationRecord: {
            authority: new PublicKey(record.subarray(8, 40)).toBase58(),
            owner: new PublicKey(record.subarray(40, 72)).toBase58(),
            delegationSlot: Number(record.readBigUInt64LE(72)),
            lamports: Number(record.readBigUInt64LE(80)),
          },
        });
        assert.equal(status.delegationRecord.authority, er.identity.toBase58());
      }
      assert.deepEqual(await router.getDelegationStatus(plain.publicKey.toBase58()),
        { isDelegated: false });
      assert.deepEqual(await router.getDelegationStatus(missing), { isDelegated: false });
    });

    test('getClosestValidator and getRoutes name the configured ERs', async () => {
      const closest = await router.getClosestValidator();
      // No [router] identity configured: the default ER (ER A), as MagicBlock's router answers
      // with an ER validator's identity and fqdn.
      assert.deepEqual(closest, { identity: erA.identity.toBase58(), fqdn: erA.http });
      // getRoutes lists the reachable ERs closest first, an order the probes' latencies decide:
      // compared here as a set.
      const routes = await rawCall(sy.url, 'getRoutes');
      const byIdentity = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
      assert.deepEqual(routes.map((r) => [r.identity, r.fqdn, r.blockTimeMs]).sort(byIdentity), [
        [erA.identity.toBase58(), erA.http, 10],
        [erB.identity.toBase58(), erB.http, 20],
      ].sort(byIdentity));
    });

    test('getBlockhashForAccounts answers from the accounts\' ER, else from base', async () => {
      // lastValidBlockHeight is block height + validity; the chains' ranges do not overlap.
      const between = async (chain, ask) => {
        const before = await chain.getLatestBlockhash();
        const answer = await ask();
        const after = await chain.getLatestBlockhash();
        assert.equal(typeof answer.blockhash, 'string');
        assert.ok(before.lastValidBlockHeight <= answer.lastValidBlockHeight &&
          answer.lastValidBlockHeight <= after.lastValidBlockHeight,
        `${answer.lastValidBlockHeight} not in [${before.lastValidBlockHeight}, ` +
          `${after.lastValidBlockHeight}]`);
        assert.deepEqual(Object.keys(answer).sort(), ['blockhash', 'lastValidBlockHeight']);
      };
      const txFor = (from, to) => {
        const tx = new Transaction().add(transfer(from, to, 1));
        tx.feePayer = from.publicKey;
        return tx;
      };
      await between(erAConn, () => router.getLatestBlockhashForTransaction(txFor(a1, a2)));
      await between(erBConn, () => router.getLatestBlockhashForTransaction(txFor(b1, b2)));
      await between(baseConn, () => router.getLatestBlockhashForTransaction(txFor(funder, plain)));
    });

    test('sendTransaction through the SDK lands on the right ER', async () => {
      // The SDK's flow: delegate to the closest validator, then send through the router.
      const { identity } = await router.getClosestValidator();
      const c1 = Keypair.generate();
      const c2 = Keypair.generate();
      await createAndDelegate([c1, c2], new PublicKey(identity));
      await waitFor('the SDK to see the delegation', async () =>
        (await router.getDelegationStatus(c1.publicKey)).isDelegated &&
        (await router.getDelegationStatus(c2.publicKey)).isDelegated);

      for (const [from, to, er, others] of [
        [c1, c2, erAConn, [baseConn, erBConn]],
        [b2, b1, erBConn, [baseConn, erAConn]],
      ]) {
        const before = [await er.getBalance(from.publicKey), await er.getBalance(to.publicKey)];
        const baseBefore = await baseConn.getBalance(from.publicKey);
        const tx = new Transaction().add(transfer(from, to, 4242));
        tx.feePayer = from.publicKey;
        const signature = await router.sendTransaction(tx, [from]);
        await confirm(router, signature);
        assert.equal((await statusOn(er, signature))?.err, null);
        for (const other of others) assert.equal(await statusOn(other, signature), null);
        assert.deepEqual(
          [await er.getBalance(from.publicKey), await er.getBalance(to.publicKey)],
          [before[0] - 4242, before[1] + 4242]);
        assert.equal(await baseConn.getBalance(from.publicKey), baseBefore);
        assert.equal(await router.getBalance(to.publicKey), before[1] + 4242);
      }
    });
  });
});
