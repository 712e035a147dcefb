// Opens a Web Push request as the browser would, with implementations the
// project did not write: npm's http_ece decrypts the aes128gcm body with
// the subscription's private key and auth secret (RFC 8291), and npm's jws
// verifies the VAPID JWT (RFC 8292) against the key the request names.
// stdin: {"body": base64, "authorization": "vapid t=..., k=...",
//         "priv": JWK of the subscription's key, "auth": base64url}
// stdout: {"plaintext": "...", "vapid": {claims}} or {"error": "..."}
import { createRequire } from 'node:module';
import crypto from 'node:crypto';
import { readFileSync } from 'node:fs';

const require = createRequire(process.env.WEB_MODULES + '/');
const ece = require('http_ece');
const jws = require('jws');

const input = JSON.parse(readFileSync(0, 'utf8'));
try {
  const ecdh = crypto.createECDH('prime256v1');
  ecdh.setPrivateKey(Buffer.from(input.priv.d, 'base64url'));
  const plaintext = ece.decrypt(Buffer.from(input.body, 'base64'), {
    version: 'aes128gcm',
    privateKey: ecdh,
    authSecret: input.auth,
  });
  const m = /^vapid t=([^,]+), k=(.+)$/.exec(input.authorization);
  if (!m) throw new Error('no VAPID authorization: ' + input.authorization);
  const raw = Buffer.from(m[2], 'base64url');
  const pub = crypto.createPublicKey({
    key: { kty: 'EC', crv: 'P-256', x: raw.subarray(1, 33).toString('base64url'), y: raw.subarray(33, 65).toString('base64url') },
    format: 'jwk',
  });
  if (!jws.verify(m[1], 'ES256', pub.export({ type: 'spki', format: 'pem' }))) throw new Error('VAPID signature does not verify');
  const payload = jws.decode(m[1]).payload;
  const claims = typeof payload === 'string' ? JSON.parse(payload) : payload;
  process.stdout.write(JSON.stringify({ plaintext: plaintext.toString('utf8'), vapid: claims, k: m[2] }));
} catch (e) {
  process.stdout.write(JSON.stringify({ error: String(e && e.message || e) }));
}
