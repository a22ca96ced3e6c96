// End-to-end in a real browser (issue 15 item 2): headless Chromium (Debian's, driven by
// puppeteer-core) loads a page that this test serves on its own port, another origin than
// Switchyard's. The page, @solana/web3.js bundled for the browser with esbuild, reads an account
// delegated to a localnet ER through Switchyard, sends a transfer that lands on the ER, and gets
// the accountSubscribe notification of it over Switchyard's pubsub. A second Switchyard with
// `cors_origins = []` shows that the page depends on CORS: its calls fail there.
//
// Env: SWITCHYARD_LOCALNET_BIN, SWITCHYARD_BIN, CHROMIUM_BIN (default /usr/bin/chromium); run
// through run_e2e.sh --browser.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import puppeteer from 'puppeteer-core';
import web3 from '@solana/web3.js';
import sdk from '@magicblock-labs/ephemeral-rollups-sdk';
import { processSet, rawCall, sleep, stop, waitFor } from './processes.mjs';

const { Connection, Keypair, LAMPORTS_PER_SOL, SystemProgram, Transaction,
  sendAndConfirmTransaction } = web3;

const LOCALNET_BIN = process.env.SWITCHYARD_LOCALNET_BIN;
const SWITCHYARD_BIN = process.env.SWITCHYARD_BIN;
const CHROMIUM_BIN = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';
assert.ok(LOCALNET_BIN, 'set SWITCHYARD_LOCALNET_BIN to the switchyard-localnet binary');
assert.ok(SWITCHYARD_BIN, 'set SWITCHYARD_BIN to the switchyard binary');
assert.ok(fs.existsSync(CHROMIUM_BIN), `no Chromium at ${CHROMIUM_BIN} (scripts/setup installs it)`);

const here = path.dirname(fileURLToPath(import.meta.url));
const { dir: workDir, children, spawnLogged, logTail, ready } =
  processSet('switchyard-browser-e2e-');

async function startLocalnet(name, args) {
  const file = path.join(workDir, `${name}.ready`);
  const child = spawnLogged(LOCALNET_BIN,
    ['--port', '0', '--threads', '1', '--ready-file', file, ...args], name);
  const info = await ready(child, file);
  return { child, http: `http://127.0.0.1:${info.http}` };
}

// `cors` is the [api] cors_origins line, or none for the default (any origin).
async function startSwitchyard(name, base, er, identity, cors) {
  const dir = path.join(workDir, name);
  fs.mkdirSync(dir);
  const config = path.join(dir, 'switchyard.toml');
  fs.writeFileSync(config, [
    '[storage]', `data_dir = "${path.join(dir, 'data')}"`, 'sync = false',
    '[api]', 'listen = "127.0.0.1:0"', 'threads = 1', ...(cors ? [cors] : []),
    '[admin]', 'listen = "127.0.0.1:0"', 'probe_interval_ms = 200', 'refresh_interval_ms = 200',
    '[upstreams.base]', `endpoints = [{url = "${base.http}"}]`,
    '[upstreams.er]', `endpoints = [{url = "${er.http}"}]`,
    '[[ers]]', `identity = "${identity.toBase58()}"`, 'upstream = "er"',
    '[routing]', 'default_er = "er"',
    '[ingest]', `base_url = "${base.http}"`,
    '',
  ].join('\n'));
  const file = path.join(dir, 'serve.ready');
  const child = spawnLogged(SWITCHYARD_BIN, ['serve', '--config', config, '--ready-file', file],
    name);
  const info = await ready(child, file);
  return {
    child,
    name,
    http: `http://127.0.0.1:${info.api}`,
    ws: `ws://127.0.0.1:${info.pubsub}`,
    admin: `http://127.0.0.1:${info.admin}`,
  };
}

async function metric(admin, series) {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(' ')[1]) : NaN;
}

// The page and its bundle, served on a port of its own: the page's origin.
async function servePage() {
  const bundle = await esbuild.build({
    entryPoints: [path.join(here, 'browser', 'page.mjs')],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    target: 'es2020',
    define: { 'process.env.NODE_ENV': '"production"', global: 'globalThis' },
    logLevel: 'error',
  });
  const script = bundle.outputFiles[0].contents;
  const html = '<!doctype html><html><head><title>switchyard</title>' +
    '<script src="/page.js"></script></head><body></body></html>';
  const server = http.createServer((request, response) => {
    if (request.url === '/page.js') {
      response.writeHead(200, { 'Content-Type': 'text/javascript' });
      response.end(script);
    } else {
      response.writeHead(200, { 'Content-Type': 'text/html' });
      response.end(html);
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}/` };
}

describe('a browser page on another origin uses Switchyard through @solana/web3.js', () => {
  const identity = Keypair.generate().publicKey;
  const funder = Keypair.generate();
  const alice = Keypair.generate();
  const bob = Keypair.generate();
  const AMOUNT = 5_000_000;
  let base;
  let er;
  let sy;
  let closed; // cors_origins = []
  let site;
  let browser;
  let page;
  const pageErrors = [];

  before(async () => {
    const started = Date.now();
    [base, site, browser] = await Promise.all([
      startLocalnet('base', ['--slot-ms', '40', '--fund',
        `${funder.publicKey.toBase58()}=${20 * LAMPORTS_PER_SOL}`]),
      servePage(),
      puppeteer.launch({
        executablePath: CHROMIUM_BIN,
        headless: true,
        // root in CI containers has no user namespaces for Chromium's sandbox
        args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
      }),
    ]);
    er = await startLocalnet('er', ['--er', '--identity', identity.toBase58(), '--base', base.http,
      '--slot-ms', '20']);
    [sy, closed] = await Promise.all([
      startSwitchyard('switchyard', base, er, identity),
      startSwitchyard('switchyard-cors-off', base, er, identity, 'cors_origins = []'),
    ]);

    // alice and bob: created and delegated to the ER on base, seen by Switchyard's ingest; then
    // a transfer on the ER itself, so that the ER's balances differ from base's.
    const baseConn = new Connection(base.http, 'confirmed');
    for (const account of [alice, bob]) {
      const create = SystemProgram.createAccount({
        fromPubkey: funder.publicKey, newAccountPubkey: account.publicKey, lamports: AMOUNT,
        space: 0, programId: SystemProgram.programId,
      });
      const delegate = sdk.createDelegateInstruction({
        payer: funder.publicKey, delegatedAccount: account.publicKey,
        ownerProgram: SystemProgram.programId, validator: identity,
      }, { commitFrequencyMs: 30000 });
      await sendAndConfirmTransaction(baseConn, new Transaction().add(create, delegate),
        [funder, account]);
    }
    for (const account of [alice, bob]) {
      await waitFor('ingest of the delegation', async () =>
        (await rawCall(sy.http, 'getDelegationStatus', [account.publicKey.toBase58()])).isDelegated);
    }
    const erConn = new Connection(er.http, 'confirmed');
    await sendAndConfirmTransaction(erConn, new Transaction().add(SystemProgram.transfer({
      fromPubkey: bob.publicKey, toPubkey: alice.publicKey, lamports: 1234,
    })), [bob]);

    page = await browser.newPage();
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });
    await page.goto(site.url);
    await page.waitForFunction(() => window.switchyardPage !== undefined, { timeout: 10000 });
    console.log(`# setup took ${Date.now() - started} ms`);
  });

  after(async () => {
    if (page) await page.evaluate(() => window.switchyardPage?.close()).catch(() => {});
    await browser?.close();
    site?.server.close();
    const codes = await Promise.all([stop(sy?.child), stop(closed?.child)]);
    await stop(er?.child);
    await stop(base?.child);
    await Promise.all(children.map((child) => stop(child)));
    if (sy) assert.equal(codes[0], 0, `switchyard exit ${codes[0]}:\n${logTail('switchyard')}`);
  });

  test('the page and Switchyard are on different origins', () => {
    assert.notEqual(new URL(site.url).origin, new URL(sy.http).origin);
  });

  test('the page reads the delegated account from its ER, with X-Delegation-Slot', async () => {
    const onEr = await rawCall(er.http, 'getBalance', [alice.publicKey.toBase58()]);
    const onBase = await rawCall(base.http, 'getBalance', [alice.publicKey.toBase58()]);
    assert.equal(onEr.value, AMOUNT + 1234);
    assert.equal(onBase.value, AMOUNT);
    const read = await page.evaluate((http, key) => window.switchyardPage.read(http, key),
      sy.http, alice.publicKey.toBase58());
    assert.equal(read.lamports, AMOUNT + 1234, 'the ER\'s value, not base\'s');
    assert.equal(read.owner, SystemProgram.programId.toBase58());
    assert.match(read.delegationSlot ?? '', /^\d+$/, 'X-Delegation-Slot readable by the page');
  });

  test('a transfer sent by the page lands on the ER, and its accountSubscribe notification arrives', async () => {
    await page.evaluate((http, ws, key) => window.switchyardPage.subscribe(http, ws, key),
      sy.http, sy.ws, bob.publicKey.toBase58());
    await waitFor('the page\'s subscription', async () =>
      (await metric(sy.admin, 'switchyard_pubsub_client_subscriptions{method="account"}')) === 1);
    const bobBefore = (await rawCall(er.http, 'getBalance', [bob.publicKey.toBase58()])).value;
    const signature = await page.evaluate(
      (http, secret, to) => window.switchyardPage.transfer(http, secret, to, 777),
      sy.http, Array.from(alice.secretKey), bob.publicKey.toBase58());

    const erStatus = await rawCall(er.http, 'getSignatureStatuses', [[signature]]);
    assert.equal(erStatus.value[0]?.err, null, 'confirmed on the ER');
    const baseStatus = await rawCall(base.http, 'getSignatureStatuses',
      [[signature], { searchTransactionHistory: true }]);
    assert.equal(baseStatus.value[0], null, 'not on base');
    assert.equal((await rawCall(er.http, 'getBalance', [bob.publicKey.toBase58()])).value,
      bobBefore + 777);

    const seen = await waitFor('the notification in the page', async () => {
      const notified = await page.evaluate(() => window.switchyardPage.notified());
      return notified.find((n) => n.lamports === bobBefore + 777) && notified;
    });
    console.log(`# the page saw ${JSON.stringify(seen)}`);
    assert.ok(seen.every((n) => n.key === bob.publicKey.toBase58()));
  });

  test('with cors_origins = [] the page cannot call Switchyard nor open its WebSocket', async () => {
    // The same Switchyard answers a client that is not a browser.
    assert.equal(typeof await rawCall(closed.http, 'getSlot'), 'number');
    const call = await page.evaluate((http) => window.switchyardPage.tryCall(http), closed.http);
    assert.match(call, /^error: .*fetch/i, call);
    assert.equal(await page.evaluate((ws) => window.switchyardPage.tryWebSocket(ws), closed.ws),
      'error');
    assert.ok(await metric(closed.admin, 'switchyard_api_cors_origins_refused_total') >= 1);
    // The open one answers the same page.
    assert.equal(await page.evaluate((http) => window.switchyardPage.tryCall(http), sy.http), 'ok');
    assert.equal(await page.evaluate((ws) => window.switchyardPage.tryWebSocket(ws), sy.ws),
      'open');
  });

  test('the page logged no errors but the refused calls', () => {
    const unexpected = pageErrors.filter((e) => !e.includes(closed.http.replace('http://', '')) &&
      !e.includes(closed.ws) && !/CORS|Failed to fetch|net::ERR_FAILED|WebSocket/.test(e));
    assert.deepEqual(unexpected, []);
  });
});
