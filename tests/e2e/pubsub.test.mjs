// End-to-end: @solana/web3.js subscriptions through `switchyard serve` (issue 6 item 8), in
// front of a localnet base layer and a localnet ER. sendAndConfirmTransaction confirms over
// Switchyard's signatureSubscribe (base and ER transactions), and onAccountChange follows an
// account from base to the ER when it is delegated: Switchyard's ingest sees the delegation, the
// router switches the subscription to the ER, and the ER's changes reach the same callback.
//
// Env: SWITCHYARD_LOCALNET_BIN (switchyard-localnet), SWITCHYARD_BIN (switchyard); run through
// run_e2e.sh. Every process starts on port 0 with a ready file and is killed when this process
// ends.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import bs58 from 'bs58';
import web3 from '@solana/web3.js';
import { processSet, rawCall, sleep, stop, waitFor } from './processes.mjs';
import sdk from '@magicblock-labs/ephemeral-rollups-sdk';

const {
  Connection, Keypair, LAMPORTS_PER_SOL, PublicKey, SystemProgram, Transaction,
  sendAndConfirmRawTransaction, sendAndConfirmTransaction,
} = web3;

const LOCALNET_BIN = process.env.SWITCHYARD_LOCALNET_BIN;
const SWITCHYARD_BIN = process.env.SWITCHYARD_BIN;
assert.ok(LOCALNET_BIN, 'set SWITCHYARD_LOCALNET_BIN to the switchyard-localnet binary');
assert.ok(SWITCHYARD_BIN, 'set SWITCHYARD_BIN to the switchyard binary');

const { dir: workDir, spawnLogged: launch, logTail: tail, ready } =
  processSet('switchyard-pubsub-e2e-');

async function startLocalnet(name, args) {
  const file = path.join(workDir, `${name}.ready`);
  const child = launch(LOCALNET_BIN, ['--port', '0', '--threads', '1', '--ready-file', file, ...args],
    name);
  const info = await ready(child, file);
  return { child, http: `http://127.0.0.1:${info.http}` };
}

async function startSwitchyard(base, er, identity) {
  const config = path.join(workDir, 'switchyard.toml');
  fs.writeFileSync(config, [
    '[storage]', `data_dir = "${path.join(workDir, 'data')}"`, 'sync = false',
    '[api]', 'listen = "127.0.0.1:0"', 'threads = 1',
    '[admin]', 'listen = "127.0.0.1:0"', 'probe_interval_ms = 200', 'refresh_interval_ms = 200',
    '[pubsub]', 'threads = 1',
    '[upstreams.base]', `endpoints = [{url = "${base.http}"}]`,
    '[upstreams.er]', `endpoints = [{url = "${er.http}"}]`,
    '[[ers]]', `identity = "${identity.toBase58()}"`, 'upstream = "er"',
    '[routing]', 'default_er = "er"',
    '[ingest]', `base_url = "${base.http}"`,
    '',
  ].join('\n'));
  const file = path.join(workDir, 'serve.ready');
  const child = launch(SWITCHYARD_BIN, ['serve', '--config', config, '--ready-file', file],
    'switchyard');
  const info = await ready(child, file);
  assert.ok(info.pubsub > 0, `no pubsub port in ${JSON.stringify(info)}`);
  return {
    child,
    http: `http://127.0.0.1:${info.api}`,
    ws: `ws://127.0.0.1:${info.pubsub}`,
    upgrade: `ws://127.0.0.1:${info.api}`,
    admin: `http://127.0.0.1:${info.admin}`,
  };
}

async function metric(admin, series) {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(' ')[1]) : NaN;
}

// web3.js reconnects its WebSocket forever: close every connection before the servers stop.
const connections = [];
function connect(http, ws) {
  const conn = new Connection(http, { commitment: 'confirmed', wsEndpoint: ws });
  connections.push(conn);
  return conn;
}
function closeConnections() {
  for (const conn of connections.splice(0)) {
    conn._rpcWebSocket.setAutoReconnect(false);
    conn._rpcWebSocket.close();
  }
}

describe('web3.js subscriptions through switchyard serve', () => {
  const identity = Keypair.generate().publicKey;
  const funder = Keypair.generate();
  const alice = Keypair.generate();
  const bob = Keypair.generate();
  let base;
  let er;
  let sy;
  let conn;

  before(async () => {
    base = await startLocalnet('base', ['--slot-ms', '40', '--fund',
      `${funder.publicKey.toBase58()}=${20 * LAMPORTS_PER_SOL}`]);
    er = await startLocalnet('er', ['--er', '--identity', identity.toBase58(), '--base', base.http,
      '--slot-ms', '20']);
    sy = await startSwitchyard(base, er, identity);
    conn = connect(sy.http, sy.ws);
  });

  after(async () => {
    closeConnections();
    const code = await stop(sy?.child);
    await stop(er?.child);
    await stop(base?.child);
    if (sy) assert.equal(code, 0, `switchyard exit ${code}:\n${tail('switchyard')}`);
  });

  test('sendAndConfirmTransaction confirms over the router\'s signatureSubscribe', async () => {
    const before = await metric(sy.admin, 'switchyard_pubsub_connections_accepted_total');
    for (const account of [alice, bob]) {
      const create = SystemProgram.createAccount({
        fromPubkey: funder.publicKey,
        newAccountPubkey: account.publicKey,
        lamports: 5_000_000,
        space: 0,
        programId: SystemProgram.programId,
      });
      await sendAndConfirmTransaction(conn, new Transaction().add(create), [funder, account]);
    }
    assert.equal(await conn.getBalance(alice.publicKey), 5_000_000);
    // The confirmation came over Switchyard's pubsub, not another endpoint.
    assert.ok(await metric(sy.admin, 'switchyard_pubsub_connections_accepted_total') >= Math.max(1, before));
    await waitFor('the notifications metric', async () =>
      (await metric(sy.admin, 'switchyard_pubsub_notifications_sent_total')) >= 2, 5000);
  });

  test('onAccountChange follows the account from base to its ER; ER transactions confirm too', async () => {
    const seen = [];
    const subscription = conn.onAccountChange(alice.publicKey, (info, context) => {
      seen.push({ lamports: info.lamports, owner: info.owner.toBase58(), slot: context.slot });
    }, { commitment: 'confirmed' });
    // A slot subscription through Upgrade on the HTTP port, at the same time.
    const upgraded = connect(sy.http, sy.upgrade);
    const slots = [];
    const slotSubscription = upgraded.onSlotChange((info) => slots.push(info.slot));
    // web3.js subscribes once its socket is open: wait until Switchyard has both.
    await waitFor('the subscriptions', async () =>
      (await metric(sy.admin, 'switchyard_pubsub_client_subscriptions{method="account"}')) === 1 &&
      (await metric(sy.admin, 'switchyard_pubsub_client_subscriptions{method="slot"}')) === 1);

    // 1. On base.
    const transfer = (from, to, lamports) =>
      SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to.publicKey, lamports });
    await sendAndConfirmTransaction(conn, new Transaction().add(transfer(funder, alice, 1000)),
      [funder]);
    await waitFor('the base change', () => seen.some((s) => s.lamports === 5_001_000));

    // 2. Delegated with the SDK (the transaction goes to base: it calls the delegation program).
    for (const account of [alice, bob]) {
      const ix = sdk.createDelegateInstruction({
        payer: funder.publicKey,
        delegatedAccount: account.publicKey,
        ownerProgram: SystemProgram.programId,
        validator: identity,
      }, { commitFrequencyMs: 30000 });
      await sendAndConfirmTransaction(conn, new Transaction().add(ix), [funder, account]);
    }
    for (const account of [alice, bob]) {
      await waitFor('ingest of the delegation', async () =>
        (await rawCall(sy.http, 'getDelegationStatus', [account.publicKey.toBase58()])).isDelegated);
    }
    await waitFor('the switch to the ER',
      async () => (await metric(sy.admin, 'switchyard_pubsub_switches_total')) >= 1);

    // 3. On the ER, through Switchyard: routed there by the delegation, confirmed by the ER.
    // Its blockhash must be the ER's: asked of the router as MagicBlock's SDK asks it.
    const erBlockhash = await rawCall(sy.http, 'getBlockhashForAccounts',
      [[alice.publicKey.toBase58(), bob.publicKey.toBase58()]]);
    const onEr = new Transaction().add(transfer(alice, bob, 100));
    onEr.recentBlockhash = erBlockhash.blockhash;
    onEr.feePayer = alice.publicKey;
    onEr.sign(alice);
    await sendAndConfirmRawTransaction(conn, onEr.serialize(), {
      signature: bs58.encode(onEr.signature),
      ...erBlockhash,
    }, { commitment: 'confirmed' });
    await waitFor('the ER change', () => seen.some((s) => s.lamports === 5_000_900));
    const erInfo = await rawCall(er.http, 'getBalance', [alice.publicKey.toBase58()]);
    assert.equal(erInfo.value, 5_000_900);

    // Every value once, in the order the chains went through them: base's, the delegation on
    // base, the ER's copy (it may be skipped when the ER transfer came first), the ER change.
    const expected = [
      { lamports: 5_001_000, owner: SystemProgram.programId.toBase58() },
      { lamports: 5_001_000, owner: sdk.DELEGATION_PROGRAM_ID.toBase58() },
      { lamports: 5_001_000, owner: SystemProgram.programId.toBase58() },
      { lamports: 5_000_900, owner: SystemProgram.programId.toBase58() },
    ];
    console.log(`# onAccountChange saw ${JSON.stringify(seen)}`);
    const key = (s) => `${s.lamports}/${s.owner}`;
    let at = 0;
    for (const s of seen) {
      while (at < expected.length && key(expected[at]) !== key(s)) at += 1;
      assert.ok(at < expected.length, `unexpected or out-of-order ${key(s)} in ${JSON.stringify(seen)}`);
      at += 1;
    }
    assert.equal(key(seen[0]), key(expected[0]), JSON.stringify(seen));
    assert.equal(key(seen[seen.length - 1]), key(expected[3]), JSON.stringify(seen));
    await sleep(500);
    assert.equal(key(seen[seen.length - 1]), key(expected[3]), `a late duplicate: ${JSON.stringify(seen)}`);

    assert.ok(slots.length > 0, 'no slot notification through Upgrade');
    for (let i = 1; i < slots.length; ++i) assert.ok(slots[i] > slots[i - 1]);
    await conn.removeAccountChangeListener(subscription);
    await upgraded.removeSlotChangeListener(slotSubscription);
  });
});
