// A wallet in the page: key from WIF, addresses, coins over an Electrum WebSocket, signing with
// libauth. Nothing here sends a key anywhere.
import {
  binToHex, hexToBin, decodePrivateKeyWif, secp256k1, hash160, hash256, sha256,
  encodeCashAddress, decodeTransaction, encodeTransaction, generateSigningSerializationBch,
} from "@bitauth/libauth";

export function keyFromWif(wif) {
  const decoded = decodePrivateKeyWif(wif.trim());
  if (typeof decoded === "string") throw new Error("not a valid WIF private key");
  const publicKey = secp256k1.derivePublicKeyCompressed(decoded.privateKey);
  if (typeof publicKey === "string") throw new Error(publicKey);
  const pkh = hash160(publicKey);
  const prefix = decoded.type === "mainnet" ? "bitcoincash" : "bchtest";
  const address = encodeCashAddress({ payload: pkh, prefix, type: "p2pkh" });
  const tokenAddress = encodeCashAddress({ payload: pkh, prefix, type: "p2pkhWithTokens" });
  const lockingBytecode = Uint8Array.from([0x76, 0xa9, 0x14, ...pkh, 0x88, 0xac]);
  return {
    privateKey: decoded.privateKey,
    publicKey,
    pkh: binToHex(pkh),
    address: typeof address === "string" ? address : address.address,
    tokenAddress: typeof tokenAddress === "string" ? tokenAddress : tokenAddress.address,
    lockingBytecode,
    // Electrum's scripthash: sha256 of the locking bytecode, byte-reversed.
    scripthash: binToHex(sha256.hash(lockingBytecode).reverse()),
  };
}

/** One Electrum Cash request over a fresh WebSocket (protocol 1.5: token data included). */
export async function electrum(url, method, params) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const timer = setTimeout(() => { ws.close(); reject(new Error("the Electrum server did not answer")); }, 10000);
    ws.onerror = () => { clearTimeout(timer); reject(new Error("the Electrum server cannot be reached")); };
    ws.onopen = () => {
      ws.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "server.version", params: ["ladle-explorer", "1.5"] }));
      ws.send(JSON.stringify({ jsonrpc: "2.0", id: 2, method, params }));
    };
    ws.onmessage = (event) => {
      const msg = JSON.parse(event.data);
      if (msg.id !== 2) return;
      clearTimeout(timer);
      ws.close();
      if (msg.error) reject(new Error(msg.error.message || JSON.stringify(msg.error)));
      else resolve(msg.result);
    };
  });
}

export async function listCoins(url, key) {
  return electrum(url, "blockchain.scripthash.listunspent", [key.scripthash, "include_tokens"]);
}

function sourceOutput(source) {
  const out = { lockingBytecode: hexToBin(source.locking_script_hex), valueSatoshis: BigInt(source.value) };
  if (source.token) {
    out.token = { amount: BigInt(source.token.amount), category: hexToBin(source.token.category) };
    if (source.token.nft) out.token.nft = { capability: source.token.nft.capability, commitment: hexToBin(source.token.nft.commitment) };
  }
  return out;
}

const SIGHASH_ALL_FORKID = 0x41;

/** Sign the inputs `tx.build` says are ours (P2PKH, Schnorr, SIGHASH_ALL|FORKID). */
export function signBuild(build, key) {
  const transaction = decodeTransaction(hexToBin(build.unsigned_tx_hex));
  if (typeof transaction === "string") throw new Error(`the router's transaction does not decode: ${transaction}`);
  const sourceOutputs = build.source_outputs.map(sourceOutput);
  for (const index of build.inputs_to_sign) {
    const spent = sourceOutputs[index];
    if (binToHex(spent.lockingBytecode) !== binToHex(key.lockingBytecode)) {
      throw new Error(`input ${index} is not this wallet's coin; refusing to sign`);
    }
    const serialization = generateSigningSerializationBch(
      { inputIndex: index, sourceOutputs, transaction },
      { coveredBytecode: spent.lockingBytecode, signingSerializationType: Uint8Array.of(SIGHASH_ALL_FORKID) },
    );
    const signature = secp256k1.signMessageHashSchnorr(key.privateKey, hash256(serialization));
    if (typeof signature === "string") throw new Error(signature);
    transaction.inputs[index].unlockingBytecode = Uint8Array.from([
      65, ...signature, SIGHASH_ALL_FORKID, 33, ...key.publicKey,
    ]);
  }
  return binToHex(encodeTransaction(transaction));
}
