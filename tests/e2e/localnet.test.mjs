// End-to-end: real Solana clients (@solana/web3.js, @solana/kit, the ephemeral-rollups SDK)
// against switchyard-localnet (base layer and ER mode).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import bs58 from 'bs58';
import web3 from '@solana/web3.js';
import sdk from '@magicblock-labs/ephemeral-rollups-sdk';

const {
  Connection, Keypair, LAMPORTS_PER_SOL, PublicKey, SystemProgram, Transaction,
  sendAndConfirmTransaction,
} = web3;

const BIN = process.env.SWITCHYARD_LOCALNET_BIN;
assert.ok(BIN, 'set SWITCHYARD_LOCALNET_BIN to the switchyard-localnet binary');

const children = [];
function killAll() {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
process.on('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAll();
    process.exit(1);
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Starts a localnet on free ports and waits (15 s at most) for its ready file.
async function startLocalnet(args) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-e2e-'));
  const ready = path.join(dir, 'ready.json');
  const child = spawn(BIN, ['--port', '0', '--threads', '1', '--ready-file', ready, ...args], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const deadline = Date.now() + 15000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`localnet exited with ${child.exitCode}`);
    if (fs.existsSync(ready)) {
      const info = JSON.parse(fs.readFileSync(ready, 'utf8'));
      return {
        child,
        http: `http://127.0.0.1:${info.http}`,
        ws: `ws://127.0.0.1:${info.ws}`,
        identity: new PublicKey(info.identity),
      };
    }
    await sleep(20);
  }
  throw new Error('localnet did not become ready within 15 s');
}

async function stop(net) {
  if (!net || net.child.exitCode !== null) return;
  const exited = new Promise((resolve) => net.child.once('exit', resolve));
  net.child.kill('SIGTERM');
  const timer = setTimeout(() => net.child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

// web3.js reconnects its WebSocket forever; close it before the localnet goes away so the
// test process can exit.
const connections = [];
function connect(net) {
  const conn = new Connection(net.http, { commitment: 'confirmed', wsEndpoint: net.ws });
  connections.push(conn);
  return conn;
}
function closeConnections() {
  for (const conn of connections.splice(0)) {
    conn._rpcWebSocket.setAutoReconnect(false);
    conn._rpcWebSocket.close();
  }
}

async function airdrop(conn, pubkey, lamports) {
  const signature = await conn.requestAirdrop(pubkey, lamports);
  const blockhash = await conn.getLatestBlockhash();
  const result = await conn.confirmTransaction({ signature, ...blockhash }, 'confirmed');
  assert.equal(result.value.err, null);
}

// Creates `account` owned by `owner` and delegates it to `validator` with the SDK.
async function createAndDelegate(conn, payer, account, owner, validator, space = 8) {
  const create = SystemProgram.createAccount({
    fromPubkey: payer.publicKey,
    newAccountPubkey: account.publicKey,
    lamports: 5_000_000,
    space,
    programId: owner,
  });
  await sendAndConfirmTransaction(conn, new Transaction().add(create), [payer, account]);
  const ix = sdk.createDelegateInstruction(
    { payer: payer.publicKey, delegatedAccount: account.publicKey, ownerProgram: owner, validator },
    { commitFrequencyMs: 30000 },
  );
  return sendAndConfirmTransaction(conn, new Transaction().add(ix), [payer, account]);
}

describe('base layer', () => {
  let base;
  let conn;
  before(async () => {
    base = await startLocalnet(['--slot-ms', '20']);
    conn = connect(base);
  });
  after(async () => {
    closeConnections();
    await stop(base);
  });

  test('airdrop, then a transfer confirmed through signatureSubscribe', async () => {
    const alice = Keypair.generate();
    const bob = Keypair.generate();
    await airdrop(conn, alice.publicKey, 2 * LAMPORTS_PER_SOL);
    assert.equal(await conn.getBalance(alice.publicKey), 2 * LAMPORTS_PER_SOL);

    const tx = new Transaction().add(
      SystemProgram.transfer({ fromPubkey: alice.publicKey, toPubkey: bob.publicKey, lamports: 12345 }),
    );
    const { blockhash } = await conn.getLatestBlockhash();
    tx.recentBlockhash = blockhash;
    tx.feePayer = alice.publicKey;
    tx.sign(alice);
    const sigText = bs58.encode(tx.signature);
    const notified = new Promise((resolve) => {
      conn.onSignature(sigText, (result, context) => resolve({ result, context }), 'confirmed');
    });
    const sent = await conn.sendRawTransaction(tx.serialize());
    assert.equal(sent, sigText);
    const { result, context } = await notified;
    assert.equal(result.err, null);
    assert.ok(context.slot > 0);

    const info = await conn.getAccountInfo(bob.publicKey);
    assert.equal(info.lamports, 12345);
    assert.ok(info.owner.equals(SystemProgram.programId));
    assert.equal(info.data.length, 0);
    assert.equal(await conn.getBalance(alice.publicKey), 2 * LAMPORTS_PER_SOL - 12345 - 5000);

    const missing = Keypair.generate().publicKey;
    const many = await conn.getMultipleAccountsInfo([alice.publicKey, bob.publicKey, missing]);
    assert.equal(many.length, 3);
    assert.equal(many[1].lamports, 12345);
    assert.equal(many[2], null);

    const fetched = await conn.getTransaction(sent, { maxSupportedTransactionVersion: 0 });
    assert.equal(fetched.meta.err, null);
    assert.equal(fetched.transaction.signatures[0], sent);
  });

  test('a Delegate built with the ephemeral-rollups SDK moves the owner and writes the record', async () => {
    const payer = Keypair.generate();
    await airdrop(conn, payer.publicKey, LAMPORTS_PER_SOL);
    const account = Keypair.generate();
    const owner = Keypair.generate().publicKey;
    const validator = Keypair.generate().publicKey;
    const signature = await createAndDelegate(conn, payer, account, owner, validator);

    const info = await conn.getAccountInfo(account.publicKey);
    assert.ok(info.owner.equals(sdk.DELEGATION_PROGRAM_ID));

    const recordPda = sdk.delegationRecordPdaFromDelegatedAccount(account.publicKey);
    const record = await conn.getAccountInfo(recordPda);
    assert.ok(record.owner.equals(sdk.DELEGATION_PROGRAM_ID));
    assert.equal(record.data.length, 96);
    const data = Buffer.from(record.data);
    assert.equal(data.readBigUInt64LE(0), 100n);
    assert.ok(new PublicKey(data.subarray(8, 40)).equals(validator));
    assert.ok(new PublicKey(data.subarray(40, 72)).equals(owner));
    const tx = await conn.getTransaction(signature, { maxSupportedTransactionVersion: 0 });
    assert.equal(data.readBigUInt64LE(72), BigInt(tx.slot));
    assert.equal(data.readBigUInt64LE(80), BigInt(info.lamports));
    assert.equal(data.readBigUInt64LE(88), 30000n);
    assert.ok(tx.meta.logMessages.some((l) => l.includes(sdk.DELEGATION_PROGRAM_ID.toBase58())));

    const metadata = await conn.getAccountInfo(
      sdk.delegationMetadataPdaFromDelegatedAccount(account.publicKey));
    assert.ok(metadata.owner.equals(sdk.DELEGATION_PROGRAM_ID));
    assert.equal(Buffer.from(metadata.data).readBigUInt64LE(0), 102n);
  });
});

describe('ER mode', () => {
  let base;
  let er;
  before(async () => {
    base = await startLocalnet(['--slot-ms', '20']);
  });
  after(async () => {
    closeConnections();
    await stop(er);
    await stop(base);
  });

  test('accepts a transfer between delegated accounts and rejects an undelegated fee payer', async () => {
    const baseConn = connect(base);
    const identity = Keypair.generate().publicKey;
    const funder = Keypair.generate();
    await airdrop(baseConn, funder.publicKey, 10 * LAMPORTS_PER_SOL);
    const alice = Keypair.generate();
    const bob = Keypair.generate();
    // System accounts delegated to the ER: the ER shows them with their original owner.
    for (const account of [alice, bob]) {
      await createAndDelegate(baseConn, funder, account, SystemProgram.programId, identity, 0);
    }
    const carol = Keypair.generate();
    await airdrop(baseConn, carol.publicKey, LAMPORTS_PER_SOL);

    er = await startLocalnet(['--er', '--identity', identity.toBase58(), '--base', base.http,
      '--slot-ms', '10']);
    const erConn = connect(er);
    const erInfo = await erConn.getAccountInfo(alice.publicKey);
    assert.ok(erInfo.owner.equals(SystemProgram.programId));
    assert.equal(erInfo.lamports, 5_000_000);

    const ok = new Transaction().add(
      SystemProgram.transfer({ fromPubkey: alice.publicKey, toPubkey: bob.publicKey, lamports: 1000 }),
    );
    await sendAndConfirmTransaction(erConn, ok, [alice]);
    assert.equal(await erConn.getBalance(bob.publicKey), 5_000_000 + 1000);

    const bad = new Transaction().add(
      SystemProgram.transfer({ fromPubkey: carol.publicKey, toPubkey: bob.publicKey, lamports: 1000 }),
    );
    await assert.rejects(sendAndConfirmTransaction(erConn, bad, [carol]),
      /This account may not be used to pay transaction fees/);

    const notWritable = new Transaction().add(
      SystemProgram.transfer({ fromPubkey: alice.publicKey, toPubkey: carol.publicKey, lamports: 1 }),
    );
    await assert.rejects(sendAndConfirmTransaction(erConn, notWritable, [alice]),
      /Transaction loads a writable account that cannot be written/);
  });
});

// @solana/kit parses answers strictly (bigints, exact envelopes): the same localnet through it.
describe('@solana/kit', () => {
  let base;
  before(async () => {
    base = await startLocalnet(['--slot-ms', '20']);
  });
  after(async () => {
    await stop(base);
  });

  test('airdrop confirmed over kit subscriptions, then reads', async () => {
    const kit = await import('@solana/kit');
    const rpc = kit.createSolanaRpc(base.http);
    const rpcSubscriptions = kit.createSolanaRpcSubscriptions(base.ws);
    const recipient = await kit.generateKeyPairSigner();
    const airdrop = kit.airdropFactory({ rpc, rpcSubscriptions });
    const signature = await airdrop({
      commitment: 'confirmed',
      recipientAddress: recipient.address,
      lamports: kit.lamports(1_500_000_000n),
    });
    assert.equal(typeof signature, 'string');

    const balance = await rpc.getBalance(recipient.address, { commitment: 'confirmed' }).send();
    assert.equal(balance.value, 1_500_000_000n);
    assert.ok(balance.context.slot > 0n);

    const info = await rpc.getAccountInfo(recipient.address, { encoding: 'base64' }).send();
    assert.equal(info.value.lamports, 1_500_000_000n);
    assert.equal(info.value.owner, '11111111111111111111111111111111');
    assert.deepEqual(info.value.data, ['', 'base64']);

    const missing = (await kit.generateKeyPairSigner()).address;
    const many = await rpc
      .getMultipleAccounts([recipient.address, missing], { encoding: 'base64' })
      .send();
    assert.equal(many.value.length, 2);
    assert.equal(many.value[0].lamports, 1_500_000_000n);
    assert.equal(many.value[1], null);

    const statuses = await rpc.getSignatureStatuses([signature]).send();
    assert.equal(statuses.value[0].err, null);
    const slot = await rpc.getSlot().send();
    assert.equal(typeof slot, 'bigint');
    const { value: latest } = await rpc.getLatestBlockhash().send();
    assert.equal(typeof latest.blockhash, 'string');
    assert.ok(latest.lastValidBlockHeight > 0n);
  });
});
