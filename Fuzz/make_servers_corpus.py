#!/usr/bin/env python3
"""Writes the seed inputs of the FuzzServers target into Fuzz/corpus/servers/seed-*.

An input's first byte picks the port ('0' backend, '1' push service HTTP/1.1, '2' push service
h2c); the rest is sent as it is. The fuzz process fixes the admin token and the login-token
secret (Fuzz/Sources/FuzzServers/FuzzedServers.swift), so these inputs can carry valid ones, and
'@ID@' stands for a registration of user "fuzz" that the harness keeps (the backend's ids are
random). Findings are kept beside these as finding-*; rerunning this script leaves them alone.
"""
import base64, hashlib, hmac, json, os, struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "servers")
ADMIN = "fuzz-admin-token-0123456789abcdef"
SECRET = b"fuzz-token-secret-0123456789abcdef"
HEX = "a1" * 32
BASIC = "Basic " + base64.b64encode(b"fuzz:fuzz").decode()
OTHER = "Basic " + base64.b64encode(b"user1:user1").decode()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(sub, exp):
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64url(json.dumps({"sub": sub, "iat": 1700000000, "exp": exp}).encode())
    signature = hmac.new(SECRET, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{b64url(signature)}"


BEARER = "Bearer " + jwt("fuzz", 4102444800)
EXPIRED = "Bearer " + jwt("fuzz", 1700000001)


def http(method, path, headers=(), body=b"", length=True):
    if isinstance(body, str):
        body = body.encode()
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"] + list(headers)
    if length and body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def ws_frame(text, opcode=0x1):
    payload = text.encode()
    assert len(payload) < 126
    return bytes([0x80 | opcode, 0x80 | len(payload), 0, 0, 0, 0]) + payload


def upgrade(path):
    return http("GET", path, ["Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13",
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="])


def h2_frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    name, value = name.encode(), value.encode()
    assert len(name) < 127 and len(value) < 127
    return bytes([0x00, len(name)]) + name + bytes([len(value)]) + value


def h2(path, headers, body):
    block = bytes([0x83, 0x86])  # :method POST, :scheme http
    block += bytes([0x04, len(path)]) + path.encode()  # :path, name from the static table
    block += bytes([0x01, 9]) + b"127.0.0.1"  # :authority
    for name, value in headers:
        block += hpack_literal(name, value)
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(0x4, 0, 0, b"")
    return preface + h2_frame(0x1, 0x4, 1, block) + h2_frame(0x0, 0x1, 1, body.encode())


def h2_block(path, headers, method=0x83):
    block = bytes([method, 0x86, 0x04, len(path)]) + path.encode() + bytes([0x01, 9]) + b"127.0.0.1"
    for name, value in headers:
        block += hpack_literal(name, value)
    return block


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(0x4, 0, 0, b"")


def h2_split(path, headers, body):
    block = h2_block(path, headers)
    return (PREFACE + h2_frame(0x1, 0x8, 1, bytes([2]) + block[:7] + b"\0\0")
            + h2_frame(0x9, 0, 1, block[7:15]) + h2_frame(0x9, 0x4, 1, block[15:])
            + h2_frame(0x0, 0x9, 1, bytes([3]) + body.encode() + b"\0\0\0"))


def h2_mixed():
    push = [("authorization", "bearer p"), ("apns-topic", "t")]
    return (PREFACE + h2_frame(0x1, 0x4, 1, h2_block(f"/3/device/{HEX}", push)) + h2_frame(0x0, 0x1, 1, ALERT.encode())
            + h2_frame(0x1, 0x5, 3, h2_block("/health", [], method=0x82))
            + h2_frame(0x1, 0x4, 5, h2_block(f"/3/device/{HEX}", push)) + h2_frame(0x0, 0, 5, ALERT.encode())
            + h2_frame(0x1, 0x5, 5, hpack_literal("x-trailer", "1"))
            + h2_frame(0x8, 0, 1, struct.pack(">I", 1024)) + h2_frame(0x3, 0, 1, struct.pack(">I", 8))
            + h2_frame(0x6, 0, 0, b"12345678") + h2_frame(0x8, 0, 0, struct.pack(">I", 65536)))


def h2_table_shrink():
    push = [("authorization", "bearer p"), ("apns-topic", "t")]
    return (PREFACE + h2_frame(0x4, 0, 0, struct.pack(">HI", 1, 0))
            + h2_frame(0x1, 0x4, 1, bytes([0x20]) + h2_block(f"/3/device/{HEX}", push)) + h2_frame(0x0, 0x1, 1, ALERT.encode()))


APNS = ["authorization: bearer provider", "apns-topic: com.pushfleet.app", "apns-push-type: alert",
        "apns-priority: 10", "apns-id: 123e4567-e89b-12d3-a456-426614174000", "Content-Type: application/json"]
ALERT = '{"aps":{"alert":"From a: hi"}}'
FCM = ["authorization: bearer provider", "Content-Type: application/json"]
WNS = ["authorization: bearer provider", "X-WNS-Type: wns/raw", "Content-Type: application/octet-stream"]
ADMIN_AUTH = [f"Authorization: Bearer {ADMIN}", "Content-Type: application/json"]
JSON = ["Content-Type: application/json"]

seeds = {
    # The backend.
    "backend-health": b"0" + http("GET", "/health"),
    "backend-stats": b"0" + http("GET", "/stats"),
    "backend-login": b"0" + http("POST", "/api/login", [f"Authorization: {BASIC}"]),
    "backend-login-bearer": b"0" + http("POST", "/api/login", [f"Authorization: {BEARER}"]),
    "backend-login-expired": b"0" + http("POST", "/api/login", [f"Authorization: {EXPIRED}"]),
    "backend-login-wrong-password": b"0" + http("POST", "/api/login", ["Authorization: Basic " + base64.b64encode(b"fuzz:nope").decode()]),
    "backend-login-no-auth": b"0" + http("POST", "/api/login"),
    "backend-login-bad-basic": b"0" + http("POST", "/api/login", ["Authorization: Basic !!!"]),
    "backend-login-bad-bearer": b"0" + http("POST", "/api/login", ["Authorization: Bearer a.b.c"]),
    "backend-register": b"0" + http("POST", f"/api/register?handle={HEX}", [f"Authorization: {BASIC}"]),
    "backend-register-no-handle": b"0" + http("POST", "/api/register", [f"Authorization: {BEARER}"]),
    "backend-register-bad-handle": b"0" + http("POST", "/api/register?handle=a%20b%00", [f"Authorization: {BASIC}"]),
    "backend-put": b"0" + http("PUT", "/api/register/@ID@", [f"Authorization: {BASIC}"] + JSON,
                               json.dumps({"Platform": "apns", "Handle": HEX, "Tags": ["fuzz-tag", "username:fuzz"]})),
    "backend-put-fcm": b"0" + http("PUT", "/api/register/@ID@", [f"Authorization: {BASIC}"] + JSON,
                                   '{"Platform":"gcm","Handle":"fcm-token:abc","Tags":[]}'),
    "backend-put-other-user": b"0" + http("PUT", "/api/register/@ID@", [f"Authorization: {OTHER}"] + JSON,
                                          '{"Platform":"wns","Handle":"chan1"}'),
    "backend-put-foreign-tag": b"0" + http("PUT", "/api/register/@ID@", [f"Authorization: {BASIC}"] + JSON,
                                           '{"Platform":"apns","Handle":"%s","Tags":["username:user1"]}' % HEX),
    "backend-put-unknown-id": b"0" + http("PUT", "/api/register/nope", [f"Authorization: {BASIC}"] + JSON,
                                          '{"Platform":"mpns","Handle":"h"}'),
    "backend-put-bad-platform": b"0" + http("PUT", "/api/register/@ID@", [f"Authorization: {BASIC}"] + JSON,
                                            '{"Platform":"blackberry","Handle":"h","Tags":["' + "t" * 121 + '"]}'),
    "backend-put-bad-json": b"0" + http("PUT", "/api/register/@ID@", [f"Authorization: {BASIC}"] + JSON, '{"Platform":'),
    "backend-put-many-tags": b"0" + http("PUT", "/api/register/@ID@", [f"Authorization: {BASIC}"] + JSON,
                                         json.dumps({"Platform": "fcm", "Handle": "x", "Tags": [f"t{i}" for i in range(61)]})),
    "backend-delete": b"0" + http("DELETE", "/api/register/@ID@", [f"Authorization: {BASIC}"]),
    "backend-delete-other": b"0" + http("DELETE", "/api/register/@ID@", [f"Authorization: {OTHER}"]),
    "backend-send-apns": b"0" + http("POST", "/api/notifications?pns=apns&to_tag=fuzz", [f"Authorization: {OTHER}"] + JSON, '"hello"'),
    "backend-send-fcm": b"0" + http("POST", "/api/notifications?pns=gcm&to_tag=fuzz", [f"Authorization: {BEARER}"] + JSON, '"h\\u0001\\"<&>"'),
    "backend-send-wns": b"0" + http("POST", "/api/notifications?pns=wns&to_tag=fuzz", [f"Authorization: {BASIC}"] + JSON, '"<toast>&\'"'),
    "backend-send-nobody": b"0" + http("POST", "/api/notifications?pns=apns&to_tag=nobody", [f"Authorization: {BASIC}"] + JSON, '"x"'),
    "backend-send-bad-pns": b"0" + http("POST", "/api/notifications?pns=mpns&to_tag=fuzz", [f"Authorization: {BASIC}"] + JSON, '"x"'),
    "backend-send-no-tag": b"0" + http("POST", "/api/notifications?pns=apns", [f"Authorization: {BASIC}"] + JSON, '"x"'),
    "backend-send-bad-tag": b"0" + http("POST", "/api/notifications?pns=apns&to_tag=a%20b", [f"Authorization: {BASIC}"] + JSON, '"x"'),
    "backend-send-not-string": b"0" + http("POST", "/api/notifications?pns=fcm&to_tag=fuzz", [f"Authorization: {BASIC}"] + JSON, '{"m":1}'),
    "backend-send-long": b"0" + http("POST", "/api/notifications?pns=apns&to_tag=fuzz", [f"Authorization: {BASIC}"] + JSON,
                                     '"' + "\\u0001" * 700 + '"'),
    "backend-secure": b"0" + http("POST", "/api/notifications/secure?to_tag=fuzz", [f"Authorization: {OTHER}"] + JSON, '"secret"'),
    "backend-secure-self": b"0" + http("POST", "/api/notifications/secure", [f"Authorization: {BASIC}"] + JSON, '"secret"'),
    "backend-rich": b"0" + http("POST", "/api/notifications/rich?to_tag=fuzz", [f"Authorization: {BASIC}"] + JSON, '"look"'),
    "backend-rich-image": b"0" + http("POST", "/api/notifications/rich?to_tag=fuzz", [f"Authorization: {BASIC}"] + JSON,
                                      json.dumps({"message": "m", "image": base64.b64encode(b"\x89PNG....").decode(), "contentType": "image/gif"})),
    "backend-rich-bad-image": b"0" + http("POST", "/api/notifications/rich?to_tag=fuzz", [f"Authorization: {BASIC}"] + JSON,
                                          '{"message":"m","image":"%%%","contentType":"text/html"}'),
    "backend-fetch": b"0" + http("GET", "/api/notifications/00000000-0000-0000-0000-000000000000", [f"Authorization: {BASIC}"]),
    "backend-fetch-no-auth": b"0" + http("GET", "/api/notifications/x"),
    "backend-unknown-path": b"0" + http("GET", "/api/nothing/here?x=%zz", [f"Authorization: {BASIC}"]),
    "backend-pipelined": b"0" + http("GET", "/health") + http("POST", "/api/register", [f"Authorization: {BASIC}"])
    + http("POST", "/api/notifications/secure?to_tag=fuzz", [f"Authorization: {BASIC}"] + JSON, '"p"'),
    "backend-chunked": b"0" + http("POST", "/api/notifications?pns=apns&to_tag=fuzz",
                                   [f"Authorization: {BASIC}", "Transfer-Encoding: chunked"] + JSON, length=False)
    + b"3\r\n\"hi\r\n1\r\n\"\r\n0\r\n\r\n",
    "backend-cut-body": b"0" + http("PUT", "/api/register/@ID@", [f"Authorization: {BASIC}", "Content-Length: 100"] + JSON, length=False) + b'{"Platform"',
    "backend-http10": b"0GET /health HTTP/1.0\r\n\r\n",
    "backend-http99": b"0GET /health HTTP/9.9\r\n\r\n",
    "backend-nul-header": b"0GET /health HTTP/1.1\r\nX-A: a\x00b\r\n\r\n",
    "backend-folded-header": b"0GET /health HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n",
    "backend-two-lengths": b"0POST /api/login HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    "backend-length-and-chunked": b"0POST /api/login HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "backend-expect-continue": b"0" + http("POST", "/api/notifications/secure", [f"Authorization: {BASIC}", "Expect: 100-continue"] + JSON, '"x"'),
    "backend-head": b"0" + http("HEAD", "/health"),
    "backend-options": b"0" + http("OPTIONS", "*"),
    "backend-garbage": b"0\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    # The push service over HTTP/1.1.
    "push-health": b"1" + http("GET", "/health"),
    "push-apns": b"1" + http("POST", f"/3/device/{HEX}", APNS + ["apns-expiration: 0", "apns-collapse-id: c"], ALERT),
    "push-apns-far-expiration": b"1" + http("POST", f"/3/device/{HEX}", APNS + ["apns-expiration: 10000000000"], ALERT),
    "push-apns-bad-token": b"1" + http("POST", "/3/device/xyz", APNS, ALERT),
    "push-apns-no-topic": b"1" + http("POST", f"/3/device/{HEX}", ["authorization: bearer p"], ALERT),
    "push-apns-no-auth": b"1" + http("POST", f"/3/device/{HEX}", ["apns-topic: t"], ALERT),
    "push-apns-bad-headers": b"1" + http("POST", f"/3/device/{HEX}", ["authorization: bearer p", "apns-topic: t", "apns-priority: 7",
                                                                      "apns-push-type: fax", "apns-id: nope", "apns-expiration: -1",
                                                                      "apns-collapse-id: " + "c" * 65], ALERT),
    "push-apns-not-json": b"1" + http("POST", f"/3/device/{HEX}", APNS, "[1,2]"),
    "push-apns-empty": b"1" + http("POST", f"/3/device/{HEX}", APNS + ["Content-Length: 0"], length=False),
    "push-apns-too-large": b"1" + http("POST", f"/3/device/{HEX}", APNS, '{"a":"' + "x" * 4100 + '"}'),
    "push-fcm": b"1" + http("POST", "/v1/projects/pushfleet/messages:send", FCM,
                            '{"message":{"token":"fcm-token:1","data":{"k":"v"},"android":{"ttl":"3.5s"}}}'),
    "push-fcm-long-ttl": b"1" + http("POST", "/v1/projects/p/messages:send", FCM,
                                     '{"message":{"token":"t","notification":{"title":"x"},"android":{"ttl":"100000d"}}}'),
    "push-fcm-validate-only": b"1" + http("POST", "/v1/projects/p/messages:send", FCM, '{"validate_only":true,"message":{"token":"t"}}'),
    "push-fcm-bad": b"1" + http("POST", "/v1/projects/p/messages:send", FCM, '{"message":{"token":"t","data":{"k":1}}}'),
    "push-fcm-no-token": b"1" + http("POST", "/v1/projects/p/messages:send", FCM, '{"message":{"topic":"news"}}'),
    "push-fcm-no-auth": b"1" + http("POST", "/v1/projects/p/messages:send", JSON, '{}'),
    "push-wns": b"1" + http("POST", "/wns/chan-1", WNS + ["X-WNS-Cache-Policy: cache", "X-WNS-TTL: 60"], "raw-id"),
    "push-wns-far-ttl": b"1" + http("POST", "/wns/chan-1", WNS + ["X-WNS-Cache-Policy: cache", "X-WNS-TTL: 10000000000"], b"\xff\xfe"),
    "push-wns-toast": b"1" + http("POST", "/wns/chan%2D2", ["authorization: bearer p", "X-WNS-Type: wns/toast"], "<toast/>"),
    "push-wns-bad": b"1" + http("POST", "/wns/bad*chan", ["authorization: bearer p", "X-WNS-Type: wns/fax"], ""),
    "push-admin-stats": b"1" + http("GET", "/admin/stats", ADMIN_AUTH),
    "push-admin-faults": b"1" + http("GET", "/admin/faults", ADMIN_AUTH),
    "push-admin-set-faults": b"1" + http("PUT", "/admin/faults", ADMIN_AUTH,
                                         '{"drop":0.5,"throttle":0.1,"latency":{"kind":"uniform","minMs":1,"maxMs":2},"unregisteredTokens":["t"],"unregisteredRatio":0.2,"seed":9}')
    + http("POST", f"/3/device/{HEX}", APNS, ALERT),
    "push-admin-huge-latency": b"1" + http("PUT", "/admin/faults", ADMIN_AUTH, '{"latency":{"kind":"fixed","ms":1e13}}')
    + http("POST", f"/3/device/{HEX}", APNS, ALERT),
    "push-admin-normal-latency": b"1" + http("PUT", "/admin/faults", ADMIN_AUTH, '{"latency":{"kind":"normal","meanMs":1,"stddevMs":1}}'),
    "push-admin-bad-faults": b"1" + http("PUT", "/admin/faults", ADMIN_AUTH, '{"drop":2,"seed":-1,"latency":{"kind":"wobbly"}}'),
    "push-admin-disconnect": b"1" + http("POST", "/admin/disconnect", ADMIN_AUTH, '{"ratio":0.5,"tokens":["%s"]}' % HEX),
    "push-admin-no-token": b"1" + http("GET", "/admin/stats"),
    "push-admin-wrong-token": b"1" + http("PUT", "/admin/faults", ["Authorization: Bearer wrong"], "{}"),
    "push-device-upgrade": b"1" + upgrade(f"/device?platform=apns&token={HEX}")
    + ws_frame('{"op":"subscribe","devices":[{"platform":"apns","token":"%s"}]}' % HEX),
    "push-device-bad-token": b"1" + upgrade("/device?platform=apns&token=zz"),
    "push-device-plain-get": b"1" + http("GET", f"/device?platform=fcm&token=t"),
    "push-gateway": b"1" + upgrade("/gateway") + ws_frame('{"op":"subscribe","devices":[{"platform":"wns","token":"chan-1"}]}')
    + ws_frame('{"op":"unregister","devices":[{"platform":"wns","token":"chan-1"}]}') + ws_frame("not json") + ws_frame("", opcode=0x8),
    "push-gateway-binary": b"1" + upgrade("/gateway") + ws_frame('{"op":"unsubscribe"}', opcode=0x2) + ws_frame("ping", opcode=0x9),
    "push-http99": b"1GET /health HTTP/9.9\r\n\r\n",
    "push-folded": b"1POST /3/device/x HTTP/1.1\r\nauthorization: bearer\r\n p\r\n\r\n",
    "push-two-lengths": b"1POST /wns/c HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
    "push-big-header": b"1GET /health HTTP/1.1\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n",
    # The push service's h2c port.
    "h2-apns": b"2" + h2(f"/3/device/{HEX}", [("authorization", "bearer p"), ("apns-topic", "t"), ("apns-expiration", "10000000000")], ALERT),
    "h2-fcm": b"2" + h2("/v1/projects/p/messages:send", [("authorization", "bearer p")], '{"message":{"token":"t"}}'),
    "h2-preface-only": b"2PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    # What the connection's front reads before NIO's handler: a block split by CONTINUATION with
    # padding, streams answered there beside the router's, late frames, a shrunk HPACK table.
    "h2-front-continuation": b"2" + h2_split(f"/3/device/{HEX}", [("authorization", "bearer p"), ("apns-topic", "t")], ALERT),
    "h2-front-mixed": b"2" + h2_mixed(),
    "h2-front-table-shrink": b"2" + h2_table_shrink(),
    "h2-http1": b"2" + http("GET", "/health"),
}

os.makedirs(OUT, exist_ok=True)
for name in os.listdir(OUT):
    if name.startswith("seed-"):
        os.remove(os.path.join(OUT, name))
for name, data in seeds.items():
    with open(os.path.join(OUT, "seed-" + name), "wb") as f:
        f.write(data)
print(f"{len(seeds)} seeds in {OUT}")
