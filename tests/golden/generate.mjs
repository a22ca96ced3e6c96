// Writes the golden vectors that tests/solana/*_test.cc check the solana/ module against.
// Every transaction, PDA and on-curve answer here comes from @solana/web3.js and
// @magicblock-labs/ephemeral-rollups-sdk themselves; the few things those packages cannot
// build (the Undelegate instruction, which only validators send, and the delegation record
// and metadata accounts, which only the program writes) are built by hand following the
// delegation program's Rust sources, and are marked "hand_built".
//
// Usage: cd tests/golden && npm install && node generate.mjs > vectors.json
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

import {
  AddressLookupTableAccount,
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from "@solana/web3.js";
import * as sdk from "@magicblock-labs/ephemeral-rollups-sdk";

const require = createRequire(import.meta.url);
const bs58 = require("bs58").default ?? require("bs58");

function keypair(tag) {
  return Keypair.fromSeed(createHash("sha256").update(`switchyard-golden-${tag}`).digest());
}
function pubkey(tag) {
  return keypair(tag).publicKey;
}
function hashOf(tag) {
  return bs58.encode(createHash("sha256").update(`switchyard-golden-hash-${tag}`).digest());
}
const b64 = (bytes) => Buffer.from(bytes).toString("base64");

const payer = keypair("payer");
const second = keypair("second-signer");
const delegated = keypair("delegated-account");
const validator = keypair("validator");
const recipient = pubkey("recipient");
const ownerProgram = pubkey("owner-program");
const customProgram = pubkey("custom-program");
const blockhash = hashOf("blockhash");

// --- Transactions -------------------------------------------------------------------------

const DELEGATE_ARGS = {
  commitFrequencyMs: 30000,
  seeds: [Buffer.from("counter"), payer.publicKey.toBytes()],
};

function delegateInstruction(args) {
  return sdk.createDelegateInstruction(
    {
      payer: payer.publicKey,
      delegatedAccount: delegated.publicKey,
      ownerProgram,
      validator: args?.validator ?? undefined,
    },
    args,
  );
}

// Built by hand: the SDK has no Undelegate builder (validators send it). Accounts and data
// follow delegation-program src/instruction_builder/undelegate.rs.
function undelegateInstruction(rentReimbursement) {
  const account = delegated.publicKey;
  const keys = [
    [validator.publicKey, true, true],
    [account, false, true],
    [ownerProgram, false, false],
    [sdk.undelegateBufferPdaFromDelegatedAccount(account), false, true],
    [sdk.commitStatePdaFromDelegatedAccount(account), false, false],
    [sdk.commitRecordPdaFromDelegatedAccount(account), false, false],
    [sdk.delegationRecordPdaFromDelegatedAccount(account), false, true],
    [sdk.delegationMetadataPdaFromDelegatedAccount(account), false, true],
    [rentReimbursement, false, true],
    [sdk.feesVaultPda(), false, true],
    [sdk.validatorFeesVaultPdaFromValidator(validator.publicKey), false, true],
    [SystemProgram.programId, false, false],
  ].map(([pk, isSigner, isWritable]) => ({ pubkey: pk, isSigner, isWritable }));
  return new TransactionInstruction({
    programId: sdk.DELEGATION_PROGRAM_ID,
    keys,
    data: Buffer.from([3, 0, 0, 0, 0, 0, 0, 0]),
  });
}

function lookupTable(tag, addresses) {
  return new AddressLookupTableAccount({
    key: pubkey(`table-${tag}`),
    state: {
      deactivationSlot: BigInt("18446744073709551615"),
      lastExtendedSlot: 0,
      lastExtendedSlotStartIndex: 0,
      authority: payer.publicKey,
      addresses,
    },
  });
}

function describeDelegation(ix, expected) {
  return { program: ix.programId.toBase58(), ...expected };
}

function expectedDelegate(args, discriminatorValidator) {
  const account = delegated.publicKey;
  return {
    kind: "delegate",
    discriminator: 0,
    payer: payer.publicKey.toBase58(),
    delegated_account: account.toBase58(),
    owner_program: ownerProgram.toBase58(),
    buffer: sdk.delegateBufferPdaFromDelegatedAccountAndOwnerProgram(account, ownerProgram).toBase58(),
    delegation_record: sdk.delegationRecordPdaFromDelegatedAccount(account).toBase58(),
    delegation_metadata: sdk.delegationMetadataPdaFromDelegatedAccount(account).toBase58(),
    system_program: SystemProgram.programId.toBase58(),
    commit_frequency_ms: args?.commitFrequencyMs ?? 0xffffffff,
    seeds: (args?.seeds ?? []).map(b64),
    validator: discriminatorValidator,
  };
}

function expectedUndelegate(rentReimbursement) {
  const account = delegated.publicKey;
  return {
    kind: "undelegate",
    discriminator: 3,
    hand_built: true,
    validator: validator.publicKey.toBase58(),
    delegated_account: account.toBase58(),
    owner_program: ownerProgram.toBase58(),
    undelegate_buffer: sdk.undelegateBufferPdaFromDelegatedAccount(account).toBase58(),
    commit_state: sdk.commitStatePdaFromDelegatedAccount(account).toBase58(),
    commit_record: sdk.commitRecordPdaFromDelegatedAccount(account).toBase58(),
    delegation_record: sdk.delegationRecordPdaFromDelegatedAccount(account).toBase58(),
    delegation_metadata: sdk.delegationMetadataPdaFromDelegatedAccount(account).toBase58(),
    rent_reimbursement: rentReimbursement.toBase58(),
    fees_vault: sdk.feesVaultPda().toBase58(),
    validator_fees_vault: sdk.validatorFeesVaultPdaFromValidator(validator.publicKey).toBase58(),
    system_program: SystemProgram.programId.toBase58(),
  };
}

function describeMessage(message, tables) {
  const versioned = message.version !== undefined && message.version !== "legacy";
  const keys = versioned
    ? message.getAccountKeys({ addressLookupTableAccounts: tables })
    : message.getAccountKeys();
  const resolved = [];
  for (let i = 0; i < keys.length; ++i) {
    resolved.push({
      key: keys.get(i).toBase58(),
      signer: message.isAccountSigner(i),
      writable: message.isAccountWritable(i),
    });
  }
  return {
    header: {
      num_required_signatures: message.header.numRequiredSignatures,
      num_readonly_signed: message.header.numReadonlySignedAccounts,
      num_readonly_unsigned: message.header.numReadonlyUnsignedAccounts,
    },
    static_keys: message.staticAccountKeys.map((k) => k.toBase58()),
    recent_blockhash: message.recentBlockhash,
    instructions: message.compiledInstructions.map((ci) => ({
      program_id_index: ci.programIdIndex,
      accounts: Array.from(ci.accountKeyIndexes),
      data_base64: b64(ci.data),
    })),
    lookups: message.addressTableLookups.map((l) => ({
      table: l.accountKey.toBase58(),
      writable_indexes: Array.from(l.writableIndexes),
      readonly_indexes: Array.from(l.readonlyIndexes),
    })),
    resolved_keys: resolved,
  };
}

function vector(name, wire, message, signers, tables, delegation) {
  const signatures = signers.map((s) => bs58.encode(s));
  return {
    name,
    versioned: message.version !== undefined && message.version !== "legacy",
    version: typeof message.version === "number" ? message.version : null,
    wire_size: wire.length,
    base64: b64(wire),
    base58: bs58.encode(wire),
    id: signatures[0],
    signatures,
    message_base64: b64(message.serialize()),
    ...describeMessage(message, tables),
    tables: tables.map((t) => ({ key: t.key.toBase58(), addresses: t.state.addresses.map((a) => a.toBase58()) })),
    delegation: delegation ?? [],
  };
}

function legacy(name, instructions, signerKeys, delegation) {
  const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash });
  tx.add(...instructions);
  tx.sign(...signerKeys);
  const wire = tx.serialize();
  const message = VersionedTransaction.deserialize(wire).message;
  return vector(name, wire, message, tx.signatures.map((s) => s.signature), [], delegation);
}

function v0(name, instructions, signerKeys, tables, delegation) {
  const message = new TransactionMessage({
    payerKey: payer.publicKey,
    recentBlockhash: blockhash,
    instructions,
  }).compileToV0Message(tables);
  const tx = new VersionedTransaction(message);
  tx.sign(signerKeys);
  const wire = tx.serialize();
  return vector(name, wire, message, tx.signatures, tables, delegation);
}

const transfer = (from, to, lamports) =>
  SystemProgram.transfer({ fromPubkey: from, toPubkey: to, lamports });

const transactions = [];
transactions.push(legacy("legacy_transfer", [transfer(payer.publicKey, recipient, 1_000_000)], [payer]));
transactions.push(
  legacy(
    "legacy_two_signers",
    [transfer(payer.publicKey, recipient, 5), transfer(second.publicKey, recipient, 7)],
    [payer, second],
  ),
);
{
  const ix = delegateInstruction({ ...DELEGATE_ARGS, validator: validator.publicKey });
  transactions.push(
    legacy("legacy_delegate", [ix], [payer, delegated], [
      describeDelegation(ix, expectedDelegate(DELEGATE_ARGS, validator.publicKey.toBase58())),
    ]),
  );
}
{
  const ix = delegateInstruction(undefined);
  transactions.push(
    legacy("legacy_delegate_defaults", [ix], [payer, delegated], [
      describeDelegation(ix, expectedDelegate(undefined, "MAS1Dt9qreoRMQ14YQuhg8UTZMMzDdKhmkZMECCzk57")),
    ]),
  );
}
{
  const ix = undelegateInstruction(payer.publicKey);
  const tx = new Transaction({ feePayer: validator.publicKey, recentBlockhash: blockhash });
  tx.add(ix);
  tx.sign(validator);
  const wire = tx.serialize();
  const message = VersionedTransaction.deserialize(wire).message;
  transactions.push(
    vector("legacy_undelegate", wire, message, tx.signatures.map((s) => s.signature), [], [
      describeDelegation(ix, expectedUndelegate(payer.publicKey)),
    ]),
  );
}
{
  const escrow = sdk.escrowPdaFromEscrowAuthority(payer.publicKey);
  const ix = sdk.createTopUpEscrowInstruction(escrow, payer.publicKey, payer.publicKey, 1000);
  transactions.push(
    legacy("legacy_top_up_escrow", [ix], [payer], [
      describeDelegation(ix, { kind: "other", discriminator: 9 }),
    ]),
  );
}
transactions.push(v0("v0_transfer", [transfer(payer.publicKey, recipient, 42)], [payer], []));
{
  const looked = [0, 1, 2, 3].map((i) => pubkey(`looked-up-${i}`));
  const table = lookupTable("a", looked);
  const readonlyIx = new TransactionInstruction({
    programId: customProgram,
    keys: [
      { pubkey: looked[2], isSigner: false, isWritable: false },
      { pubkey: looked[1], isSigner: false, isWritable: true },
      { pubkey: looked[3], isSigner: false, isWritable: false },
    ],
    data: Buffer.from("switchyard"),
  });
  transactions.push(
    v0("v0_lookup", [transfer(payer.publicKey, looked[1], 9), readonlyIx], [payer], [table]),
  );
}
{
  const first = lookupTable("b", [0, 1, 2].map((i) => pubkey(`first-table-${i}`)));
  const secondTable = lookupTable("c", [0, 1, 2].map((i) => pubkey(`second-table-${i}`)));
  const ix = new TransactionInstruction({
    programId: customProgram,
    keys: [
      { pubkey: second.publicKey, isSigner: true, isWritable: false },
      { pubkey: first.state.addresses[0], isSigner: false, isWritable: false },
      { pubkey: secondTable.state.addresses[2], isSigner: false, isWritable: true },
      { pubkey: first.state.addresses[2], isSigner: false, isWritable: true },
      { pubkey: secondTable.state.addresses[1], isSigner: false, isWritable: false },
      { pubkey: recipient, isSigner: false, isWritable: true },
    ],
    data: Buffer.from([1, 2, 3]),
  });
  transactions.push(v0("v0_two_lookups", [ix], [payer, second], [first, secondTable]));
}
{
  const args = { ...DELEGATE_ARGS, validator: validator.publicKey };
  const ix = delegateInstruction(args);
  const account = delegated.publicKey;
  const table = lookupTable("delegate", [
    sdk.delegationRecordPdaFromDelegatedAccount(account),
    sdk.delegationMetadataPdaFromDelegatedAccount(account),
    sdk.delegateBufferPdaFromDelegatedAccountAndOwnerProgram(account, ownerProgram),
    SystemProgram.programId,
  ]);
  transactions.push(
    v0("v0_delegate_with_lookup", [ix], [payer, delegated], [table], [
      describeDelegation(ix, expectedDelegate(DELEGATE_ARGS, validator.publicKey.toBase58())),
    ]),
  );
}

// --- PDAs ---------------------------------------------------------------------------------

const knownAccounts = [
  delegated.publicKey,
  payer.publicKey,
  new PublicKey("8k2V7EzQtNg38Gi9HK5ZtQYp1YpGKNGrMcuGa737gZX4"),
  new PublicKey("11111111111111111111111111111111"),
];
const delegationPdas = knownAccounts.map((account) => ({
  account: account.toBase58(),
  owner_program: ownerProgram.toBase58(),
  delegation_record: sdk.delegationRecordPdaFromDelegatedAccount(account).toBase58(),
  delegation_metadata: sdk.delegationMetadataPdaFromDelegatedAccount(account).toBase58(),
  delegate_buffer: sdk
    .delegateBufferPdaFromDelegatedAccountAndOwnerProgram(account, ownerProgram)
    .toBase58(),
  undelegate_buffer: sdk.undelegateBufferPdaFromDelegatedAccount(account).toBase58(),
  commit_state: sdk.commitStatePdaFromDelegatedAccount(account).toBase58(),
  commit_record: sdk.commitRecordPdaFromDelegatedAccount(account).toBase58(),
}));

const seedSets = [
  [],
  [Buffer.from("")],
  [Buffer.from("delegation"), delegated.publicKey.toBytes()],
  [Buffer.from("a"), Buffer.from("b"), Buffer.from("c")],
  [Buffer.alloc(32, 0xff)],
  [Buffer.from("metadata"), payer.publicKey.toBytes(), recipient.toBytes()],
];
for (let i = 0; i < 24; ++i) seedSets.push([Buffer.from(`seed-${i}`)]);
const programs = [sdk.DELEGATION_PROGRAM_ID, SystemProgram.programId, ownerProgram];
const findProgramAddress = [];
seedSets.forEach((seeds, i) => {
  const program = programs[i % programs.length];
  const [address, bump] = PublicKey.findProgramAddressSync(seeds, program);
  findProgramAddress.push({ seeds: seeds.map(b64), program: program.toBase58(), address: address.toBase58(), bump });
});

// createProgramAddress for every bump of a few seed sets: which bumps land on the curve.
const createProgramAddress = [];
for (const [i, seeds] of [[Buffer.from("bumps")], [Buffer.from("delegation"), payer.publicKey.toBytes()]].entries()) {
  const program = programs[i];
  for (let bump = 255; bump >= 230; --bump) {
    let address = null;
    try {
      address = PublicKey.createProgramAddressSync([...seeds, Buffer.from([bump])], program).toBase58();
    } catch (e) {
      address = null;
    }
    createProgramAddress.push({ seeds: seeds.map(b64), bump, program: program.toBase58(), address });
  }
}

// --- The curve check ----------------------------------------------------------------------

const onCurve = [];
for (let i = 0; i < 96; ++i) {
  const bytes = createHash("sha256").update(`switchyard-on-curve-${i}`).digest();
  onCurve.push({ key: bs58.encode(bytes), on_curve: PublicKey.isOnCurve(bytes) });
}
for (const kp of [payer, second, delegated, validator]) {
  onCurve.push({ key: kp.publicKey.toBase58(), on_curve: PublicKey.isOnCurve(kp.publicKey.toBytes()) });
}

// --- Delegation-program accounts (hand built from the program's Rust layouts) -------------

function u64le(value) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(value));
  return b;
}
function u32le(value) {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value);
  return b;
}
const record = {
  authority: validator.publicKey.toBase58(),
  owner: ownerProgram.toBase58(),
  delegation_slot: "312345678",
  lamports: "1461600",
  commit_frequency_ms: "30000",
};
const recordBytes = Buffer.concat([
  u64le(100),
  validator.publicKey.toBuffer(),
  ownerProgram.toBuffer(),
  u64le(record.delegation_slot),
  u64le(record.lamports),
  u64le(record.commit_frequency_ms),
]);
const metadata = {
  last_commit_id: "7",
  undelegation_requester: 1,
  seeds: DELEGATE_ARGS.seeds.map(b64),
  rent_payer: payer.publicKey.toBase58(),
};
const metadataBytes = Buffer.concat([
  u64le(102),
  u64le(metadata.last_commit_id),
  Buffer.from([metadata.undelegation_requester]),
  u32le(DELEGATE_ARGS.seeds.length),
  ...DELEGATE_ARGS.seeds.flatMap((s) => [u32le(s.length), Buffer.from(s)]),
  payer.publicKey.toBuffer(),
]);

function packageVersion(name) {
  const url = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(url, "utf8")).version;
}

const output = {
  generator: "tests/golden/generate.mjs",
  packages: {
    "@solana/web3.js": packageVersion("@solana/web3.js"),
    "@magicblock-labs/ephemeral-rollups-sdk": packageVersion("@magicblock-labs/ephemeral-rollups-sdk"),
  },
  delegation_program_id: sdk.DELEGATION_PROGRAM_ID.toBase58(),
  transactions,
  delegation_pdas: delegationPdas,
  fees_vault: sdk.feesVaultPda().toBase58(),
  validator_fees_vault: { validator: validator.publicKey.toBase58(), address: sdk.validatorFeesVaultPdaFromValidator(validator.publicKey).toBase58() },
  find_program_address: findProgramAddress,
  create_program_address: createProgramAddress,
  on_curve: onCurve,
  delegation_record: { hand_built: true, ...record, base64: b64(recordBytes) },
  delegation_metadata: { hand_built: true, ...metadata, base64: b64(metadataBytes) },
};
process.stdout.write(JSON.stringify(output, null, 1) + "\n");
