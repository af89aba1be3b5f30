#!/usr/bin/env python3
"""pycrate side of the NAS cross-check (crates/nas/tests/pycrate_xcheck.rs).

  nas_xcheck.py decode   stdin: one "<ul|dl> <hex NAS PDU>" per line
                         stdout: JSON list, per PDU {"ok", "msg", "fields", "reencoded"}
                         or {"ok": false, "error"}
  nas_xcheck.py encode   stdout: JSON list of NAS messages built here with pycrate:
                         {"name", "dir", "hex", "msg", "fields"}

"msg" is pycrate's message class name; "fields" flattens the parsed message: one key
per leaf element, dotted by element names below the message ("EPSID.EPSID.Type"),
absent optional IEs left out. Keys ending in "#" hold what pycrate's IE decode()
returns (e.g. an identity as [type, digits], a TAI as ["MCCMNC", tac]); keys ending in
"$" the octets of a structured element. Octets are lowercase hex.
"""
import json
import logging
import sys

logging.disable(logging.WARNING)  # pycrate warns that CryptoMobile (NAS crypto) is absent

try:
    # the LTE-only entry points: same EPS parsers, half the import time of pycrate_mobile.NAS
    from pycrate_mobile.NASLTE import parse_NASLTE_MO as parse_NAS_MO, parse_NASLTE_MT as parse_NAS_MT
    from pycrate_mobile import TS24301_EMM as EMM
    from pycrate_mobile import TS24301_ESM as ESM
    from pycrate_core.elt import Envelope, Array, Sequence, Alt, Atom
except ImportError as e:  # the Rust test turns this into a failure naming scripts/test.sh
    sys.stderr.write("pycrate is not installed (%s): scripts/test.sh installs pycrate==0.8.1\n" % e)
    sys.exit(3)


def norm(v):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    return v


def flat(e, pre, out):
    if e.get_trans():
        return
    p = pre + "." + e._name if pre else e._name
    if not isinstance(e, Atom):
        out[p + "$"] = e.to_bytes().hex()
        dec = getattr(e, "decode", None)
        if callable(dec):
            try:
                out[p + "#"] = norm(dec())
            except Exception as ex:
                out[p + "#"] = "decode() failed: %s" % ex
    if isinstance(e, Envelope):
        for c in e:
            flat(c, p, out)
    elif isinstance(e, (Array, Sequence)):
        for i, c in enumerate(e):
            flat(c, "%s[%d]" % (p, i), out)
    elif isinstance(e, Alt):
        flat(e.get_alt(), p, out)
    else:
        out[p] = norm(e.get_val())


def fields(msg):
    out = {}
    for c in msg:
        flat(c, "", out)
    return out


def decode(lines):
    res = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        d, h = line.split()
        buf = bytes.fromhex(h)
        try:
            msg, err = (parse_NAS_MO if d == "ul" else parse_NAS_MT)(buf)
            if msg is None or err:
                res.append({"ok": False, "error": "pycrate parse error code %s" % err})
                continue
            res.append({"ok": True, "msg": msg._name, "fields": fields(msg),
                        "reencoded": msg.to_bytes().hex()})
        except Exception as e:  # report, never stop: one bad PDU must not hide the rest
            res.append({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})
    return res


# ---------------------------------------------------------------- messages built by pycrate

def built():
    """(name, direction, pycrate message) with distinctive values, set through pycrate's
    own element names; the Rust side decodes the octets."""
    out = []
    guti = ("12345", 0xABCD, 0x7E, 0xDEADBEEF)  # MCC 123, MNC 45

    m = EMM.EMMAttachRequest()
    m.set_val({
        "NAS_KSI": {"V": {"TSC": 0, "Value": 3}},
        "EPSAttachType": {"V": 2},
        "EPSID": {"V": {"type": 1, "ident": "208930123456789"}},
        "UENetCap": {"V": {"EEA0": 1, "EEA1_128": 1, "EEA2_128": 0, "EEA3_128": 1,
                           "EIA0": 0, "EIA1_128": 1, "EIA2_128": 1, "EIA3_128": 0, "UEA0": 1}},
        "ESMContainer": {"V": bytes.fromhex("022ad031d1")},
    })
    m["OldTAI"].set_trans(False)
    m["OldTAI"].set_val({"V": {"PLMN": "12345", "TAC": 0x7A7B}})
    out.append(("AttachRequest", "ul", m))

    m = EMM.EMMAttachComplete()
    m.set_val({"ESMContainer": {"V": bytes.fromhex("6200c2")}})
    out.append(("AttachComplete", "ul", m))

    m = EMM.EMMAuthenticationResponse()
    m.set_val({"RES": {"V": bytes.fromhex("f00dcafe12345678")}})
    out.append(("AuthenticationResponse", "ul", m))

    m = EMM.EMMAuthenticationFailure()
    m["AUTS"].set_trans(False)
    m.set_val({"EMMCause": {"V": 21}, "AUTS": {"V": bytes(range(0x30, 0x3e))}})
    out.append(("AuthenticationFailure", "ul", m))

    m = EMM.EMMSecurityModeComplete()
    m["IMEISV"].set_trans(False)
    m.set_val({"IMEISV": {"V": {"type": 3, "ident": "4567890123456701"}}})
    out.append(("SecurityModeComplete", "ul", m))

    m = EMM.EMMIdentityResponse()
    m.set_val({"ID": {"V": {"type": 1, "ident": "999012345678901"}}})
    out.append(("IdentityResponse", "ul", m))

    m = EMM.EMMDetachRequestMO()
    m.set_val({"EPSDetachType": {"V": {"SwitchOff": 0, "Type": 3}},
               "NAS_KSI": {"V": {"TSC": 0, "Value": 5}},
               "EPSID": {"V": {"type": 6, "ident": guti}}})
    out.append(("DetachRequestUe", "ul", m))

    m = EMM.EMMTrackingAreaUpdateRequest()
    m.set_val({"EPSUpdateType": {"V": {"Active": 1, "Value": 3}},
               "NAS_KSI": {"V": {"TSC": 0, "Value": 2}},
               "OldGUTI": {"V": {"type": 6, "ident": ("00101", 0x0102, 0x03, 0x04050607)}}})
    m["EPSBearerCtxtStat"].set_trans(False)
    m["EPSBearerCtxtStat"].set_val({"V": {"EBI_5": 1, "EBI_15": 1}})
    out.append(("TauRequest", "ul", m))

    m = ESM.ESMPDNConnectivityRequest()
    m.set_val({"ESMHeader": {"PTI": 0x2a}, "PDNType": {"V": 3}, "RequestType": {"V": 1}})
    m["APN"].set_trans(False)
    m["APN"].set_val({"V": b"\x08internet\x04pepc"})
    out.append(("PdnConnectivityRequest", "ul", m))

    m = ESM.ESMInformationResponse()
    m.set_val({"ESMHeader": {"PTI": 0x2b}})
    m["APN"].set_trans(False)
    m["APN"].set_val({"V": b"\x03ims"})
    out.append(("EsmInformationResponse", "ul", m))

    m = ESM.ESMActDefaultEPSBearerCtxtAccept()
    m.set_val({"ESMHeader": {"EPSBearerId": 6, "PTI": 0}})
    out.append(("ActivateDefaultBearerAccept", "ul", m))

    m = EMM.EMMDetachAccept()
    out.append(("DetachAccept", "ul", m))

    # Downlink: what a network built on pycrate would send to a UE of ours.
    m = EMM.EMMAuthenticationRequest()
    m.set_val({"NAS_KSI": {"V": {"TSC": 0, "Value": 6}}, "RAND": {"V": bytes(range(0x40, 0x50))},
               "AUTN": {"V": {"SQNxAK": bytes.fromhex("0a0b0c0d0e0f"), "AMF": b"\x80\x00",
                              "MAC": bytes.fromhex("1122334455667788")}}})
    out.append(("AuthenticationRequest", "dl", m))

    m = EMM.EMMSecurityModeCommand()
    m.set_val({"NASSecAlgo": {"V": {"CiphAlgo": 1, "IntegAlgo": 2}}, "NAS_KSI": {"V": {"TSC": 0, "Value": 1}},
               "UESecCap": {"V": {"EEA0": 1, "EEA1_128": 1, "EIA1_128": 1, "EIA2_128": 1}}})
    out.append(("SecurityModeCommand", "dl", m))

    m = EMM.EMMAttachAccept()
    m.set_val({"EPSAttachResult": {"V": 2}, "T3412": {"V": {"Unit": 1, "Value": 30}},
               # a type 1 partial list: 3 consecutive TACs from 0x0100
               "TAIList": {"V": [{"Type": 1, "PTAI": {"PLMN": "12345", "TAC1": 0x100, "Num": 2}}]},
               "ESMContainer": {"V": bytes.fromhex("6200c2")}})
    m["GUTI"].set_trans(False)
    m["GUTI"].set_val({"V": {"type": 6, "ident": guti}})
    out.append(("AttachAccept", "dl", m))

    m = ESM.ESMActDefaultEPSBearerCtxtRequest()
    m.set_val({"ESMHeader": {"EPSBearerId": 5, "PTI": 9}, "EPSQoS": {"V": {"QCI": 7}},
               "APN": {"V": b"\x03ims"}, "PDNAddr": {"V": {"Type": 1, "Addr": bytes([100, 64, 0, 1])}}})
    m["APN_AMBR"].set_trans(False)
    m["APN_AMBR"].set_val({"V": {"DL": 0x80, "UL": 0x40}})
    out.append(("ActivateDefaultBearerRequest", "dl", m))
    return out


def encode():
    res = []
    for name, d, m in built():
        buf = m.to_bytes()
        back, err = (parse_NAS_MO if d == "ul" else parse_NAS_MT)(buf)
        if back is None or err:
            raise SystemExit("pycrate cannot parse its own %s: %s (err %s)" % (name, buf.hex(), err))
        res.append({"name": name, "dir": d, "hex": buf.hex(), "msg": back._name,
                    "fields": fields(back)})
    return res


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("decode", "encode"):
        sys.stderr.write(__doc__)
        return 2
    res = decode(sys.stdin.read().splitlines()) if sys.argv[1] == "decode" else encode()
    json.dump(res, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
