#!/usr/bin/env python3
"""Diameter on an independent codec (pycrate_diameter, pinned with pycrate==0.8.1 in
scripts/test.sh) for pepc-diameter's tests:

  diam.py decode            hex messages on stdin (one a line) -> JSON trees, one a line
  diam.py encode            JSON message specs on stdin (one a line) -> hex, one a line
  diam.py hss PORT LOG ...  a test HSS serving S6a over TCP on 127.0.0.1:PORT
  diam.py pcrf PORT LOG NAME MODE  a test PCRF serving Gx over TCP on 127.0.0.1:PORT
  diam.py milenage          self-test of the HSS's Milenage against TS 35.208 set 1

The HSS's modes: normal (vectors of a hash, for codec tests), milenage (real
Milenage vectors and KASME for pepc's test UEs: K and OPc of pepc_mme::sim, SQN
per subscriber, AUTS checked), bench (milenage for every IMSI: no subscriber of
the failure tests), mute, silent, reset. On stdin it takes commands:
"clr IMSI", "clr-reattach IMSI", "idr IMSI": a CLR (SUBSCRIPTION_WITHDRAWAL) or an
IDR to the MME connection that last sent a ULR for IMSI.

The PCRF's modes: normal (a CCA-I installs rule "video", QCI 2 with a GBR, for the
flow from 198.51.100.7:5060 to the UE's port 4000, and grants 2000 octets under
monitoring key "mk1"; each usage report is granted 2000 more), reject (CCA-I with
Experimental-Result DIAMETER_ERROR_INITIAL_PARAMETERS), silent, reset. On stdin:
"rar-install IMSI NAME PORT" (a rule of QCI 2 for the UE's port PORT),
"rar-remove IMSI NAME": a RAR to the session of IMSI's last CCR-I.

A JSON tree: {"R":1,"P":1,"E":0,"T":0,"cmd":318,"app":16777251,"hbh":..,"e2e":..,
"avps":[{"code":263,"vendor":0,"M":1,"value":...}, ...]} where a value is an int, a
string, {"hex": "..."} for octets, {"addr": [family, "hex"]} or a list (Grouped).
Decoding is strict: every length and padding is checked against what pycrate parsed,
and pycrate's re-encoding must give the input bytes back.
"""
import json
import os
import socket
import struct
import sys
import threading
import time

from pycrate_diameter.Diameter import DiameterIdentity
from pycrate_diameter.Diameter3GPP import Diameter3GPP, FMT_LUT_TS29230
from pycrate_core.elt import Sequence

V3GPP = 10415
S6A = 16777251
GX = 16777238


class Strict(Exception):
    pass


def _value(data):
    if isinstance(data, Sequence):
        return [_avp(a) for a in data]
    v = data.get_val()
    if isinstance(data, DiameterIdentity):
        return v.decode()
    if isinstance(v, bytes):
        return {"hex": v.hex()}
    if isinstance(v, list):  # Address
        return {"addr": [v[0], v[1].hex()]}
    return v


def _avp(a):
    hdr = a[0].get_val()
    code, vbit, mbit, pbit, _res, length = hdr[:6]
    vendor = hdr[6] if vbit else 0
    data = a[1].to_bytes()
    pad = a[2].to_bytes() if len(a._content) > 2 else b""
    hl = 12 if vbit else 8
    if length != hl + len(data):
        raise Strict(f"AVP {code}: length {length} but {hl}+{len(data)} bytes parsed")
    if pad != b"\x00" * ((-len(data)) % 4):
        raise Strict(f"AVP {code}: padding {pad.hex()} after {len(data)} data bytes")
    if isinstance(a[1], Sequence):
        inner = sum(len(x.to_bytes()) for x in a[1])
        if inner != len(data):
            raise Strict(f"grouped AVP {code}: members take {inner} of {len(data)} bytes")
    return {"code": code, "vendor": vendor, "M": mbit, "P": pbit, "value": _value(a[1])}


def decode(raw):
    m = Diameter3GPP()
    m.from_bytes(raw)
    h = m[0].get_val()
    if h[1] != len(raw):
        raise Strict(f"header length {h[1]} but {len(raw)} bytes")
    if m.to_bytes() != raw:
        raise Strict("pycrate did not consume the message as it is")
    avps = [_avp(a) for a in m[1]]
    if 20 + sum(len(a.to_bytes()) for a in m[1]) != len(raw):
        raise Strict("AVPs do not fill the message")
    return {"R": h[2], "P": h[3], "E": h[4], "T": h[5], "cmd": h[7], "app": h[8],
            "hbh": h[9], "e2e": h[10], "avps": avps}


def _spec_avp(s):
    code = s["code"]
    vendor = s.get("vendor", 0)
    hdr = {"Code": code, "M": s.get("M", 1)}
    if vendor:
        hdr.update({"V": 1, "VendorID": vendor})
    v = s["value"]
    if isinstance(v, list):
        data = [_spec_avp(x) for x in v]
    elif isinstance(v, dict) and "hex" in v:
        data = bytes.fromhex(v["hex"])
    elif isinstance(v, dict) and "addr" in v:
        data = {"AddressType": v["addr"][0], "Value": bytes.fromhex(v["addr"][1])}
    elif isinstance(v, int) and code not in FMT_LUT_TS29230:
        data = struct.pack(">I", v)
    elif isinstance(v, str) and str not in getattr(FMT_LUT_TS29230.get(code), "TYPES", ()):
        data = v.encode()  # DiameterIdentity and untyped AVPs take bytes
    else:
        data = v
    return {"AVPHdr": hdr, "AVPData": data}


def encode(spec):
    hdr = {k: spec.get(k, 0) for k in ("R", "P", "E", "T")}
    hdr.update({"Cmd": spec["cmd"], "AppID": spec["app"], "HHID": spec.get("hbh", 0),
                "EEID": spec.get("e2e", 0)})
    m = Diameter3GPP(val={"DiameterHdr": hdr, "AVPs": [_spec_avp(a) for a in spec["avps"]]})
    return m.to_bytes()


def find(avps, code, vendor=0):
    for a in avps:
        if a["code"] == code and a["vendor"] == vendor:
            return a["value"]
    return None


# ----------------------------------------------------------------------- Milenage

def _aes(k, x):
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    e = Cipher(algorithms.AES(k), modes.ECB()).encryptor()
    return e.update(x) + e.finalize()


def _xor(a, b):
    return bytes(x ^ y for x, y in zip(a, b))


def _rot(x, r):
    n = int.from_bytes(x, "big")
    r %= 128
    n = ((n << r) | (n >> (128 - r))) & ((1 << 128) - 1)
    return n.to_bytes(16, "big")


def milenage(k, opc, rand, sqn, amf):
    """TS 35.206: (MAC-A, MAC-S, RES, CK, IK, AK, AK*)."""
    temp = _aes(k, _xor(rand, opc))
    in1 = sqn + amf + sqn + amf
    out1 = _xor(_aes(k, _xor(temp, _rot(_xor(in1, opc), 64))), opc)

    def f(r, c):
        cc = bytes(15) + bytes([c])
        return _xor(_aes(k, _xor(_rot(_xor(temp, opc), r), cc)), opc)
    out2, out3, out4, out5 = f(0, 1), f(32, 2), f(64, 4), f(96, 8)
    return out1[:8], out1[8:], out2[8:], out3, out4, out2[:6], out5[:6]


def kasme(ck, ik, plmn, sqn_ak):
    """TS 33.401 A.2."""
    import hashlib
    import hmac
    s = b"\x10" + plmn + b"\x00\x03" + sqn_ak + b"\x00\x06"
    return hmac.new(ck + ik, s, hashlib.sha256).digest()


# pepc_mme::sim's test keys (Open5GS test keys): test material, never real.
TEST_K = bytes.fromhex("465B5CE8B199B49FAA5F0A2EE238A6BC")
TEST_OPC = bytes.fromhex("E8ED289DEBA952E4283B54E88E6183CA")


def milenage_selftest():
    k = bytes.fromhex("465b5ce8b199b49faa5f0a2ee238a6bc")
    opc = bytes.fromhex("cd63cb71954a9f4e48a5994e37a02baf")
    rand = bytes.fromhex("23553cbe9637a89d218ae64dae47bf35")
    got = milenage(k, opc, rand, bytes.fromhex("ff9bb4d0b607"), bytes.fromhex("b9b9"))
    want = ["4a9ffac354dfafb3", "01cfaf9ec4e871e9", "a54211d5e3ba50bf",
            "b40ba9a3c58b2a05bbf0d987b21bf8cb", "f769bcd751044604127672711c6d3441",
            "aa689c648370", "451e8beca43b"]
    assert [g.hex() for g in got] == want, [g.hex() for g in got]
    print("ok")


# ---------------------------------------------------------------------------- HSS

def A(code, value, vendor=0, M=1):
    return {"code": code, "vendor": vendor, "M": M, "value": value}


def G(code, members, vendor=V3GPP):
    return A(code, members, vendor)


def subscription(msisdn, apn, qci, arp, ul, dl):
    tb = bytes(int((msisdn + "f")[i + 1], 16) << 4 | int(msisdn[i])
               for i in range(0, len(msisdn), 2))
    return G(1400, [
        A(701, {"hex": tb.hex()}, V3GPP),
        A(1424, 0, V3GPP),  # SERVICE_GRANTED
        G(1435, [A(516, ul, V3GPP), A(515, dl, V3GPP)]),
        G(1429, [
            A(1423, 1, V3GPP),
            A(1428, 0, V3GPP),
            G(1430, [
                A(1423, 2, V3GPP),
                A(1456, 0, V3GPP),
                A(493, "ims", 0),
                G(1431, [A(1028, 5, V3GPP), G(1034, [A(1046, 1, V3GPP)])]),
            ]),
            G(1430, [
                A(1423, 1, V3GPP),
                A(1456, 2, V3GPP),
                A(493, apn, 0),
                G(1431, [A(1028, qci, V3GPP), G(1034, [A(1046, arp, V3GPP),
                                                      A(1047, 1, V3GPP), A(1048, 0, V3GPP)])]),
                G(1435, [A(516, ul, V3GPP), A(515, dl, V3GPP)]),
            ]),
        ]),
    ])


class Hss:
    """Answers CER/DWR/DPR/AIR/ULR/PUR; modes for the failure tests. Logs every
    request it receives, and what it answered, as JSON lines to LOG."""

    def __init__(self, port, log, name, mode, after_ulr):
        self.port, self.name, self.mode, self.after_ulr = port, name, mode, after_ulr
        self.log = open(log, "a", buffering=1)
        self.lock = threading.Lock()
        self.tx_lock = threading.Lock()
        self.counter = 0
        self.sqn = {}       # milenage mode: the next SQN per subscriber
        self.ulr_of = {}    # IMSI -> (connection, ULR) for the stdin commands

    def tx(self, c, data):
        # The connection threads and the command thread write whole messages.
        with self.tx_lock:
            c.sendall(data)

    def milenage_vector(self, user, plmn, resync):
        """A real vector for pepc's test UE; with resync (RAND||AUTS), the SQN is
        taken from a verified AUTS first. None if the AUTS does not verify."""
        with self.lock:
            if resync:
                rand, auts = resync[:16], resync[16:]
                ak_s = milenage(TEST_K, TEST_OPC, rand, bytes(6), bytes(2))[6]
                sqn_ms = _xor(auts[:6], ak_s)
                mac_s = milenage(TEST_K, TEST_OPC, rand, sqn_ms, bytes(2))[1]
                if mac_s != auts[6:]:
                    return None
                self.sqn[user] = int.from_bytes(sqn_ms, "big") + 32
            sqn = self.sqn.get(user, 32)
            self.sqn[user] = sqn + 32
        rand = os.urandom(16)
        sqn_b = sqn.to_bytes(6, "big")
        amf = bytes.fromhex("8000")
        mac_a, _, res, ck, ik, ak, _ = milenage(TEST_K, TEST_OPC, rand, sqn_b, amf)
        sqn_ak = _xor(sqn_b, ak)
        return {"rand": rand.hex(), "xres": res.hex(), "autn": (sqn_ak + amf + mac_a).hex(),
                "kasme": kasme(ck, ik, plmn, sqn_ak).hex()}

    def commands(self):
        """stdin: "clr IMSI", "clr-reattach IMSI", "idr IMSI"."""
        for line in sys.stdin:
            parts = line.split()
            if len(parts) != 2:
                continue
            what, user = parts
            with self.lock:
                got = self.ulr_of.get(user)
            if got is None:
                self.note(event="command", what=what, user=user, error="no ULR seen")
                continue
            self.note(event="command", what=what, user=user)
            self.push(got[0], got[1], what, user)

    def note(self, **kw):
        kw["hss"] = self.name
        with self.lock:
            self.log.write(json.dumps(kw) + "\n")

    def answer(self, req, avps, E=0):
        head = [A(263, find(req["avps"], 263))] if find(req["avps"], 263) is not None else []
        return encode({"R": 0, "P": req["P"], "E": E, "cmd": req["cmd"], "app": req["app"],
                       "hbh": req["hbh"], "e2e": req["e2e"],
                       "avps": head + avps + [A(264, self.name + ".test"), A(296, "test")]})

    def vector(self, imsi, resync):
        with self.lock:
            self.counter += 1
            n = self.counter
        seed = (imsi + (resync or "") + str(n)).encode()
        import hashlib
        h = hashlib.sha512(seed).digest()
        return {"rand": h[:16].hex(), "xres": h[16:24].hex(), "autn": h[24:40].hex(),
                "kasme": h[32:64].hex()}

    def serve(self):
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(16)
        print("ready", flush=True)
        while True:
            c, _ = srv.accept()
            threading.Thread(target=self.conn, args=(c,), daemon=True).start()

    def fast(self, raw):
        """A subclass's answer built without pycrate (None: the normal path)."""
        return None

    def conn(self, c):
        buf = b""
        while True:
            try:
                d = c.recv(65536)
            except OSError:
                return
            if not d:
                return
            buf += d
            out = []
            while len(buf) >= 20:
                n = int.from_bytes(buf[1:4], "big")
                if len(buf) < n:
                    break
                raw, buf = buf[:n], buf[n:]
                a = self.fast(raw)
                if a is not None:
                    out.append(a)
                    continue
                if out:
                    self.tx(c, b"".join(out))
                    out = []
                try:
                    m = decode(raw)
                except Exception as e:  # noqa: BLE001 - logged for the test to see
                    self.note(event="undecodable", error=str(e), hex=raw.hex())
                    continue
                if not self.handle(c, m):
                    return
            if out:
                self.tx(c, b"".join(out))

    def handle(self, c, m):
        avps = m["avps"]
        user = find(avps, 1)
        if not m["R"]:
            self.note(event="answer", cmd=m["cmd"], result=find(avps, 268),
                      exp=find(find(avps, 297) or [], 298),
                      failed=[a["code"] for a in (find(avps, 279) or [])])
            return True
        self.note(event="request", cmd=m["cmd"], user=user, T=m["T"],
                  resync=(find(find(avps, 1408, V3GPP) or [], 1411, V3GPP) or {}).get("hex"),
                  dest_realm=find(avps, 283), session=find(avps, 263))
        if self.mode == "mute" and m["cmd"] != 257:
            return True
        if m["cmd"] == 257:
            self.tx(c, self.answer(m, [A(268, 2001), A(257, {"addr": [1, "7f000001"]}),
                                      A(266, 0), A(269, "pycrate-hss", M=0),
                                      A(265, V3GPP),
                                      A(260, [A(266, V3GPP), A(258, S6A)])]))
        elif m["cmd"] == 280:
            self.tx(c, self.answer(m, [A(268, 2001)]))
        elif m["cmd"] == 282:
            self.tx(c, self.answer(m, [A(268, 2001)]))
            c.close()
            return False
        elif self.mode == "silent":
            pass
        elif self.mode == "reset":
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
            return False
        elif user is None or not user.startswith("00101"):
            self.tx(c, self.answer(m, [A(297, [A(266, V3GPP), A(298, 5001)]),
                                      A(277, 1)]))
        elif user.endswith("99") and self.mode != "bench":
            self.tx(c, self.answer(m, [A(297, [A(266, V3GPP), A(298, 5420)]), A(277, 1)]))
        elif user.endswith("98") and self.mode != "bench":
            self.tx(c, self.answer(m, [A(297, [A(266, V3GPP), A(298, 5004)]), A(277, 1)]))
        elif m["cmd"] == 318:
            resync = (find(find(avps, 1408, V3GPP) or [], 1411, V3GPP) or {}).get("hex")
            if self.mode in ("milenage", "bench"):
                plmn = bytes.fromhex((find(avps, 1407, V3GPP) or {}).get("hex", "00f110"))
                v = self.milenage_vector(user, plmn, bytes.fromhex(resync) if resync else None)
                if v is None:
                    self.note(event="resync refused", user=user)
                    self.tx(c, self.answer(m, [A(297, [A(266, V3GPP), A(298, 4181)]),
                                               A(277, 1)]))
                    return True
                self.note(event="vector", user=user)  # no key material in the log
            else:
                v = self.vector(user, resync)
                self.note(event="vector", user=user, **v)
            self.tx(c, self.answer(m, [A(268, 2001), A(277, 1), G(1413, [G(1414, [
                A(1419, 1, V3GPP), A(1447, {"hex": v["rand"]}, V3GPP),
                A(1448, {"hex": v["xres"]}, V3GPP), A(1449, {"hex": v["autn"]}, V3GPP),
                A(1450, {"hex": v["kasme"]}, V3GPP)])])]))
        elif m["cmd"] == 316:
            self.tx(c, self.answer(m, [A(268, 2001), A(277, 1), A(1406, 1, V3GPP),
                                      subscription("46" + user[-9:], "internet", 9, 8,
                                                   50000000, 100000000)]))
            with self.lock:
                self.ulr_of[user] = (c, m)
            for what in self.after_ulr:
                self.push(c, m, what, user)
        elif m["cmd"] == 321:
            self.tx(c, self.answer(m, [A(268, 2001), A(277, 1), A(1442, 0, V3GPP)]))
        else:
            self.tx(c, self.answer(m, [A(268, 3001)], E=1))
        return True

    def push(self, c, req, what, user):
        """An HSS-initiated request to the MME that sent `req`."""
        origin = find(req["avps"], 264)
        realm = find(req["avps"], 296)
        base = [A(263, f"{self.name}.test;push;{what}"),
                A(260, [A(266, V3GPP), A(258, S6A)]), A(277, 1),
                A(264, self.name + ".test"), A(296, "test"), A(293, origin), A(283, realm),
                A(1, user)]
        if what == "clr":
            avps = base + [A(1420, 2, V3GPP)]  # SUBSCRIPTION_WITHDRAWAL
            cmd = 317
        elif what == "clr-reattach":
            avps = base + [A(1420, 2, V3GPP), A(1638, 2, V3GPP)]  # Reattach-Required
            cmd = 317
        elif what == "idr":
            avps = base + [subscription("46" + user[-9:], "fast", 6, 2, 1000, 2000)]
            cmd = 319
        else:  # an IDR with an unknown AVP marked mandatory
            avps = base + [A(99999, {"hex": "0102"}, V3GPP, M=1)]
            cmd = 319
        self.tx(c, encode({"R": 1, "P": 1, "cmd": cmd, "app": S6A, "hbh": 0x5000 + cmd,
                          "e2e": 0x6000 + cmd, "avps": avps}))


def num(v):
    """An Unsigned32/64 pycrate may show as octets (AVPs of RFC 4006 it has no type for)."""
    if isinstance(v, dict) and "hex" in v:
        return int(v["hex"], 16)
    return v


def _put(code, data, vendor=0, m=1):
    """One AVP by hand (RFC 6733 §4.1): the bench HSS's fast answers."""
    flags = (0x80 if vendor else 0) | (0x40 if m else 0)
    hl = 12 if vendor else 8
    hdr = struct.pack(">IB", code, flags) + (hl + len(data)).to_bytes(3, "big")
    if vendor:
        hdr += struct.pack(">I", vendor)
    return hdr + data + b"\x00" * ((-len(data)) % 4)


def _top(body):
    """Top-level AVPs of a message body: {(vendor, code): data} (first of each)."""
    out, i = {}, 0
    while i + 8 <= len(body):
        code, flags = struct.unpack(">IB", body[i:i + 5])
        n = int.from_bytes(body[i + 5:i + 8], "big")
        vendor, hl = (struct.unpack(">I", body[i + 8:i + 12])[0], 12) if flags & 0x80 else (0, 8)
        out.setdefault((vendor, code), body[i + hl:i + n])
        i += (n + 3) & ~3
    return out


class BenchHss(Hss):
    """The HSS of `pepc bench attach --hss diameter`: AIR (real Milenage vectors)
    and ULR answered from hand-packed bytes (the subscription data encoded by
    pycrate once), so that a Python HSS keeps up with the proxy; CER/DWR/DPR and
    anything else as the test HSS does. Logs nothing per request."""

    def __init__(self, *a):
        super().__init__(*a)
        sub = subscription("46000000001", "internet", 9, 8, 50000000, 100000000)
        self.sub_bytes = encode({"R": 0, "cmd": 316, "app": S6A, "avps": [sub]})[20:]
        self.origin = _put(264, (self.name + ".test").encode()) + _put(296, b"test")
        self.state = _put(277, struct.pack(">I", 1))
        self.ok = _put(268, struct.pack(">I", 2001))
        # DIAMETER_AUTHENTICATION_DATA_UNAVAILABLE: an AUTS that does not verify.
        self.refused = _put(297, _put(266, struct.pack(">I", V3GPP))
                            + _put(298, struct.pack(">I", 4181)))

    def fast(self, raw):
        flags = raw[4]
        cmd = int.from_bytes(raw[5:8], "big")
        if not flags & 0x80 or cmd not in (316, 318):
            return None
        a = _top(raw[20:])
        user = a.get((0, 1), b"").decode()
        body = _put(263, a.get((0, 263), b"")) + self.origin + self.state
        if cmd == 316:
            body += self.ok + _put(1406, struct.pack(">I", 1), V3GPP) + self.sub_bytes
        else:
            plmn = a.get((V3GPP, 1407), bytes.fromhex("00f110"))
            rs = _top(a.get((V3GPP, 1408), b"")).get((V3GPP, 1411))
            v = self.milenage_vector(user, plmn, rs)
            if v is None:
                body += self.refused
            else:
                vec = (_put(1419, struct.pack(">I", 1), V3GPP)
                       + _put(1447, bytes.fromhex(v["rand"]), V3GPP)
                       + _put(1448, bytes.fromhex(v["xres"]), V3GPP)
                       + _put(1449, bytes.fromhex(v["autn"]), V3GPP)
                       + _put(1450, bytes.fromhex(v["kasme"]), V3GPP))
                body += self.ok + _put(1413, _put(1414, vec, V3GPP), V3GPP)
        return (bytes([1]) + (20 + len(body)).to_bytes(3, "big") + bytes([flags & 0x40])
                + raw[5:20] + body)


class Pcrf(Hss):
    """Answers CER/DWR/DPR/CCR on Gx; RARs on command. Logs like the HSS."""

    def __init__(self, port, log, name, mode):
        super().__init__(port, log, name, mode, [])
        self.session_of = {}  # IMSI -> (connection, CCR-I) of its last session

    def commands(self):
        for line in sys.stdin:
            parts = line.split()
            if len(parts) < 3:
                continue
            what, user, rule = parts[:3]
            with self.lock:
                got = self.session_of.get(user)
            if got is None:
                self.note(event="command", what=what, user=user, error="no session")
                continue
            self.note(event="command", what=what, user=user, rule=rule)
            port = int(parts[3]) if len(parts) > 3 else 4000
            self.rar(got[0], got[1], what, rule, port)

    def rule(self, name, port):
        return G(1003, [
            A(1005, {"hex": name.encode().hex()}, V3GPP),
            G(1058, [A(507, f"permit out 17 from 198.51.100.7 5060 to assigned {port}", V3GPP),
                     A(1080, 3, V3GPP)]),
            G(1016, [A(1028, 2, V3GPP),
                     A(516, 256000, V3GPP), A(515, 256000, V3GPP),
                     A(1026, 128000, V3GPP), A(1025, 128000, V3GPP),
                     G(1034, [A(1046, 3, V3GPP), A(1047, 1, V3GPP), A(1048, 0, V3GPP)])]),
            A(1010, 20, V3GPP),
            A(432, 200),
        ])

    def grant(self, octets):
        return G(1067, [A(1066, {"hex": b"mk1".hex()}, V3GPP),
                        A(431, [A(421, octets)]),
                        A(1068, 0, V3GPP)])

    def handle(self, c, m):
        avps = m["avps"]
        if not m["R"]:
            self.note(event="answer", cmd=m["cmd"], result=num(find(avps, 268)))
            return True
        sub = find(avps, 443) or []
        user = find(sub, 444)
        kind = num(find(avps, 416))
        usage = []
        for a in avps:
            if a["code"] == 1067 and a["vendor"] == V3GPP:
                used = find(a["value"], 446) or []
                usage.append({"key": bytes.fromhex(find(a["value"], 1066, V3GPP)["hex"]).decode(),
                              "total": num(find(used, 421)), "in": num(find(used, 412)),
                              "out": num(find(used, 414))})
        self.note(event="request", cmd=m["cmd"], user=user, cc_type=kind,
                  cc_number=num(find(avps, 415)), session=find(avps, 263), usage=usage,
                  apn=find(avps, 30), ip=(find(avps, 8) or {}).get("hex"),
                  trigger=find(avps, 1006, V3GPP), dest_realm=find(avps, 283))
        if self.mode == "mute" and m["cmd"] != 257:
            return True
        if m["cmd"] == 257:
            self.tx(c, self.answer(m, [A(268, 2001), A(257, {"addr": [1, "7f000001"]}),
                                      A(266, 0), A(269, "pycrate-pcrf", M=0),
                                      A(265, V3GPP), A(258, GX),
                                      A(260, [A(266, V3GPP), A(258, GX)])]))
        elif m["cmd"] == 280:
            self.tx(c, self.answer(m, [A(268, 2001)]))
        elif m["cmd"] == 282:
            self.tx(c, self.answer(m, [A(268, 2001)]))
            c.close()
            return False
        elif self.mode == "silent":
            pass
        elif self.mode == "reset":
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
            return False
        elif m["cmd"] == 272:
            head = [A(258, GX), A(416, kind), A(415, find(avps, 415))]
            if kind == 1 and self.mode == "reject":
                self.tx(c, self.answer(m, head + [A(297, [A(266, V3GPP), A(298, 5140)])]))
            elif kind == 1:
                with self.lock:
                    self.session_of[user] = (c, m)
                self.tx(c, self.answer(m, [A(268, 2001)] + head + [
                    A(1023, 1, V3GPP),  # UE_NW
                    G(1001, [self.rule("video", 4000)]),
                    self.grant(2000),
                ]))
            elif kind == 2:
                self.tx(c, self.answer(m, [A(268, 2001)] + head + [self.grant(2000)]))
            else:
                self.tx(c, self.answer(m, [A(268, 2001)] + head))
        else:
            self.tx(c, self.answer(m, [A(268, 3001)], E=1))
        return True

    def rar(self, c, req, what, name, port):
        origin = find(req["avps"], 264)
        realm = find(req["avps"], 296)
        base = [A(263, find(req["avps"], 263)), A(258, GX),
                A(264, self.name + ".test"), A(296, "test"), A(293, origin), A(283, realm),
                A(285, 0)]
        if what == "rar-install":
            avps = base + [G(1001, [self.rule(name, port)])]
        elif what == "rar-remove":
            avps = base + [G(1002, [A(1005, {"hex": name.encode().hex()}, V3GPP)])]
        else:  # a RAR for a session we never had
            avps = [A(263, "nobody;1;2")] + base[1:]
        self.tx(c, encode({"R": 1, "P": 1, "cmd": 258, "app": GX, "hbh": 0x7000,
                          "e2e": 0x7001, "avps": avps}))


def main():
    what = sys.argv[1]
    if what == "decode":
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                print(json.dumps(decode(bytes.fromhex(line))), flush=True)
            except Exception as e:  # noqa: BLE001 - the test reads the reason
                print(json.dumps({"error": str(e)}), flush=True)
    elif what == "encode":
        for line in sys.stdin:
            if line.strip():
                print(encode(json.loads(line)).hex(), flush=True)
    elif what == "hss":
        port, log, name, mode = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
        after = [x for x in (sys.argv[6] if len(sys.argv) > 6 else "").split(",") if x]
        # Bounded: a test HSS never outlives its test by long, even if killed badly; a
        # benchmark's (which kills it when done) may run for long.
        threading.Timer(3600 if mode == "bench" else 120, lambda: os._exit(0)).start()
        hss = (BenchHss if mode == "bench" else Hss)(port, log, name, mode, after)
        threading.Thread(target=hss.commands, daemon=True).start()
        hss.serve()
    elif what == "pcrf":
        port, log, name, mode = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
        threading.Timer(120, lambda: os._exit(0)).start()
        pcrf = Pcrf(port, log, name, mode)
        threading.Thread(target=pcrf.commands, daemon=True).start()
        pcrf.serve()
    elif what == "milenage":
        milenage_selftest()


if __name__ == "__main__":
    main()
