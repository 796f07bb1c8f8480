// APNs through Node's own http2 client, as node-apn and apns2 use it: an ES256 provider token,
// then COUNT pushes on one connection, all in flight at once. Trusts the mock's CA through
// NODE_EXTRA_CA_CERTS; reaches it through the hosts entry. Exits 1 unless every push got 200.
const http2 = require('http2'), crypto = require('crypto'), fs = require('fs');
const [keyPath, keyId, team, topic, token, count] = process.argv.slice(2);
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
const signed = b64({ alg: 'ES256', kid: keyId }) + '.' + b64({ iss: team, iat: Math.floor(Date.now() / 1000) });
const signature = crypto.sign('sha256', Buffer.from(signed), { key: fs.readFileSync(keyPath), dsaEncoding: 'ieee-p1363' });
const jwt = signed + '.' + signature.toString('base64url');
const client = http2.connect('https://api.sandbox.push.apple.com');
client.on('error', (e) => { console.error('node: session error', e.message); process.exit(1); });
let pending = Number(count), ok = 0;
for (let i = 0; i < Number(count); i++) {
  const req = client.request({ ':method': 'POST', ':path': `/3/device/${token}`, authorization: `bearer ${jwt}`,
    'apns-topic': topic, 'apns-push-type': 'alert', 'apns-priority': '10', 'content-type': 'application/json' });
  let status, body = '';
  req.on('response', (h) => { status = h[':status']; });
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    if (status === 200) ok++; else console.error(`node: ${status} ${body}`);
    if (--pending === 0) { console.log(`node ${process.version} http2: ${ok}/${count} accepted`); client.close(); process.exitCode = ok === Number(count) ? 0 : 1; }
  });
  req.end(JSON.stringify({ aps: { alert: `runtime probe node ${i}` } }));
}
