// libauth as an independent transaction verifier, as a long-lived process.
//
// Protocol: JSON lines over stdin/stdout.
//   request  {"id": n, "tx": "<hex>", "source_outputs": "<CompactSize count ‖ outputs hex>",
//             "vm": 2025 | 2026, "standard": true | false}
//   reply    {"id": n, "valid": true} | {"id": n, "valid": false, "error": "<why>"}
// A malformed request gets {"id": n | null, "valid": false, "error": "invalid request: …"};
// nothing a client sends may crash the process. The first line written is
// {"ready": true, "libauth": "<version>"} once the VMs exist, or {"ready": false, "error": …}
// if libauth cannot be loaded, so the client can fail closed instead of guessing.
//
// `@bitauth/libauth` is resolved from this file's location (the repository's node_modules).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';

const write = (obj) => {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
};

let libauth;
try {
  libauth = await import('@bitauth/libauth');
} catch (err) {
  write({ ready: false, error: `cannot load @bitauth/libauth: ${err?.message ?? err}` });
  process.exit(3);
}

const libauthVersion = (() => {
  try {
    const require = createRequire(import.meta.url);
    const pkgPath = require.resolve('@bitauth/libauth/package.json');
    return JSON.parse(readFileSync(pkgPath, 'utf8')).version;
  } catch {
    return 'unknown';
  }
})();

const {
  createVirtualMachineBch2025,
  createVirtualMachineBch2026,
  decodeTransaction,
  decodeTransactionOutputs,
  hexToBin,
  isHex,
} = libauth;

// Each VM is built once: creating one costs far more than verifying a transaction.
const vms = {
  2025: { true: createVirtualMachineBch2025(true), false: createVirtualMachineBch2025(false) },
  2026: { true: createVirtualMachineBch2026(true), false: createVirtualMachineBch2026(false) },
};

const describe = (err) => (err instanceof Error ? err.message : String(err));

const handle = (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (err) {
    return { id: null, valid: false, error: `invalid request: not JSON (${describe(err)})` };
  }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) {
    return { id: null, valid: false, error: 'invalid request: not a JSON object' };
  }
  const okId = typeof req.id === 'number' || typeof req.id === 'string';
  const id = okId ? req.id : null;
  const bad = (why) => ({ id, valid: false, error: `invalid request: ${why}` });
  if (!okId) return bad('"id" must be a number or a string');
  if (typeof req.tx !== 'string' || !isHex(req.tx)) return bad('"tx" must be a hex string');
  if (typeof req.source_outputs !== 'string' || !isHex(req.source_outputs)) {
    return bad('"source_outputs" must be a hex string');
  }
  if (req.vm !== 2025 && req.vm !== 2026) return bad('"vm" must be 2025 or 2026');
  if (typeof req.standard !== 'boolean') return bad('"standard" must be true or false');

  const transaction = decodeTransaction(hexToBin(req.tx));
  if (typeof transaction === 'string') return { id, valid: false, error: transaction };
  const sourceOutputs = decodeTransactionOutputs(hexToBin(req.source_outputs));
  if (typeof sourceOutputs === 'string') {
    return { id, valid: false, error: `source outputs: ${sourceOutputs}` };
  }
  const result = vms[req.vm][req.standard].verify({ sourceOutputs, transaction });
  return result === true ? { id, valid: true } : { id, valid: false, error: String(result) };
};

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  let reply;
  try {
    reply = handle(line);
  } catch (err) {
    // Fail closed: anything libauth throws makes the transaction invalid, never the helper dead.
    let id = null;
    try {
      const parsed = JSON.parse(line);
      if (typeof parsed?.id === 'number' || typeof parsed?.id === 'string') id = parsed.id;
    } catch {
      // keep id = null
    }
    reply = { id, valid: false, error: `verifier exception: ${describe(err)}` };
  }
  write(reply);
});
rl.on('close', () => process.exit(0));
process.stdout.on('error', () => process.exit(0));

write({ ready: true, libauth: libauthVersion });
