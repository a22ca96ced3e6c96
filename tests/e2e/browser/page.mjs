// The page browser.test.mjs loads in Chromium: @solana/web3.js (bundled by esbuild) talking to
// Switchyard from another origin. The test calls window.switchyardPage's functions and asserts
// what they return.
import { Connection, Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';

const connections = [];
const notifications = [];

function connect(http, ws) {
  const conn = new Connection(http, { commitment: 'confirmed', wsEndpoint: ws });
  connections.push(conn);
  return conn;
}

async function rpc(url, method, params) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = await response.json();
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return { result: body.result, delegationSlot: response.headers.get('X-Delegation-Slot') };
}

window.switchyardPage = {
  // The account as web3.js reads it through Switchyard, and the X-Delegation-Slot header the
  // page could read from the same kind of answer (exposed by CORS).
  async read(http, key) {
    const info = await connect(http).getAccountInfo(new PublicKey(key));
    const { delegationSlot } = await rpc(http, 'getSlot', []);
    return info && { lamports: info.lamports, owner: info.owner.toBase58(), delegationSlot };
  },

  // Subscribes to `key` over Switchyard's pubsub; notifications collect in notified().
  subscribe(http, ws, key) {
    connect(http, ws).onAccountChange(new PublicKey(key), (info, context) => {
      notifications.push({ key, lamports: info.lamports, slot: context.slot });
    }, { commitment: 'confirmed' });
  },
  notified() {
    return notifications;
  },

  // A transfer signed in the page with the blockhash Switchyard gives for its accounts (their
  // ER's), sent through Switchyard and confirmed by polling; resolves to the signature.
  async transfer(http, secretKey, to, lamports) {
    const from = Keypair.fromSecretKey(Uint8Array.from(secretKey));
    const toKey = new PublicKey(to);
    const { result: { blockhash } } =
      await rpc(http, 'getBlockhashForAccounts', [[from.publicKey.toBase58(), to]]);
    const tx = new Transaction().add(
      SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: toKey, lamports }));
    tx.recentBlockhash = blockhash;
    tx.feePayer = from.publicKey;
    tx.sign(from);
    const conn = connect(http);
    const signature = await conn.sendRawTransaction(tx.serialize());
    const deadline = Date.now() + 20000;
    while (Date.now() < deadline) {
      const { value } = await conn.getSignatureStatuses([signature]);
      if (value[0]?.confirmationStatus === 'confirmed' || value[0]?.confirmationStatus === 'finalized') {
        if (value[0].err) throw new Error(`transaction failed: ${JSON.stringify(value[0].err)}`);
        return signature;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`transaction ${signature} not confirmed`);
  },

  // Whether web3.js can call `http` from this page: 'ok', or the error it got.
  async tryCall(http) {
    try {
      await new Connection(http, 'confirmed').getSlot();
      return 'ok';
    } catch (error) {
      return `error: ${error.message}`;
    }
  },
  // Whether a WebSocket to `ws` opens from this page: 'open' or 'error'.
  tryWebSocket(ws) {
    return new Promise((resolve) => {
      const socket = new WebSocket(ws);
      socket.onopen = () => {
        socket.close();
        resolve('open');
      };
      socket.onerror = () => resolve('error');
    });
  },

  close() {
    for (const conn of connections.splice(0)) {
      try {
        conn._rpcWebSocket.setAutoReconnect(false);
        conn._rpcWebSocket.close();
      } catch {
        // never opened
      }
    }
  },
};
console.log('switchyard page ready');
