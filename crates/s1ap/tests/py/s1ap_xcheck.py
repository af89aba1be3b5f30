#!/usr/bin/env python3
"""pycrate side of the S1AP cross-check (crates/s1ap/tests/pycrate_xcheck.rs).

  s1ap_xcheck.py decode   stdin: one hex S1AP PDU per line
                          stdout: JSON list, per PDU {"ok", "pdu", "reencoded"} or {"ok": false, "error"}
  s1ap_xcheck.py encode   stdout: JSON list of PDUs built here with set_val + to_aper:
                          {"name", "hex", "pdu"}

"pdu" is pycrate's value (get_val) in a JSON form the Rust test rebuilds from its own
typed messages: CHOICE / open type -> {"<alternative or type name>": value}, OCTET STRING
-> lowercase hex, BIT STRING -> {"bits": hex of the value, zero-padded, "len": n bits}.
"""
import json
import sys

try:
    from pycrate_asn1dir import S1AP
except ImportError as e:  # the Rust test turns this into a failure naming scripts/test.sh
    sys.stderr.write("pycrate is not installed (%s): scripts/test.sh installs pycrate==0.8.1\n" % e)
    sys.exit(3)

PDU = S1AP.S1AP_PDU_Descriptions.S1AP_PDU


def norm(v):
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, tuple) and len(v) == 2:
        if isinstance(v[0], str):
            return {v[0]: norm(v[1])}
        if isinstance(v[0], int) and isinstance(v[1], int):
            n = v[1]
            return {"bits": format(v[0], "x").zfill((n + 3) // 4), "len": n}
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, (int, str, bool)) or v is None:
        return v
    raise TypeError("unexpected value %r" % (v,))


def decode(lines):
    out = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        buf = bytes.fromhex(line)
        try:
            PDU.from_aper(buf)
            val = PDU.get_val()
            re = PDU.to_aper()
            out.append({"ok": True, "pdu": norm(val), "reencoded": re.hex()})
        except Exception as e:  # report, never stop: one bad PDU must not hide the rest
            out.append({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})
    return out


# ---------------------------------------------------------------- PDUs built by pycrate

PLMN = b"\x21\xf3\x54"  # MCC 123, MNC 45
PLMN3 = b"\x99\x99\x99"  # MCC 999, MNC 999


def ie(i, crit, ty, val):
    return {"id": i, "criticality": crit, "value": (ty, val)}


def init(code, crit, name, ies):
    return ("initiatingMessage", {"procedureCode": code, "criticality": crit,
                                  "value": (name, {"protocolIEs": ies})})


def succ(code, crit, name, ies):
    return ("successfulOutcome", {"procedureCode": code, "criticality": crit,
                                  "value": (name, {"protocolIEs": ies})})


def tai(plmn, tac):
    return {"pLMNidentity": plmn, "tAC": tac.to_bytes(2, "big")}


def ecgi(plmn, cell):
    return {"pLMNidentity": plmn, "cell-ID": (cell, 28)}


def addr(a):
    return (int.from_bytes(bytes(a), "big"), 32)


def teid(t):
    return t.to_bytes(4, "big")


def built():
    sec_key = bytes(range(0xa0, 0xc0))
    return [
        ("S1SetupRequest", init(17, "reject", "S1SetupRequest", [
            ie(59, "reject", "Global-ENB-ID", {"pLMNidentity": PLMN,
                                               "eNB-ID": ("homeENB-ID", (0xABCDEF1, 28))}),
            ie(60, "ignore", "ENBname", "pycrate-enb"),
            ie(64, "reject", "SupportedTAs", [
                {"tAC": b"\x12\x34", "broadcastPLMNs": [PLMN, PLMN3]},
                {"tAC": b"\xfe\xdc", "broadcastPLMNs": [PLMN3]},
            ]),
            ie(137, "ignore", "PagingDRX", "v64"),
        ])),
        ("InitialUEMessage", init(12, "ignore", "InitialUEMessage", [
            ie(8, "reject", "ENB-UE-S1AP-ID", 0xABCDE),
            ie(26, "reject", "NAS-PDU", bytes.fromhex("17deadbeef0507450bf6")),
            ie(67, "reject", "TAI", tai(PLMN, 0x7A7B)),
            ie(100, "ignore", "EUTRAN-CGI", ecgi(PLMN, 0xBEEF123)),
            ie(134, "ignore", "RRC-Establishment-Cause", "mo-Data"),
            ie(96, "reject", "S-TMSI", {"mMEC": b"\x5c", "m-TMSI": b"\xc0\xff\xee\x01"}),
            ie(75, "reject", "GUMMEI", {"pLMN-Identity": PLMN, "mME-Group-ID": b"\x80\x01",
                                        "mME-Code": b"\x5c"}),
        ])),
        ("UplinkNASTransport", init(13, "ignore", "UplinkNASTransport", [
            ie(0, "reject", "MME-UE-S1AP-ID", 0xFEDCBA98),
            ie(8, "reject", "ENB-UE-S1AP-ID", 0xFFFFFF),
            ie(26, "reject", "NAS-PDU", bytes.fromhex("27a1b2c3d40707430003520000")),
            ie(100, "ignore", "EUTRAN-CGI", ecgi(PLMN3, 0x0000001)),
            ie(67, "ignore", "TAI", tai(PLMN3, 0x0001)),
        ])),
        ("InitialContextSetupResponse", succ(9, "reject", "InitialContextSetupResponse", [
            ie(0, "ignore", "MME-UE-S1AP-ID", 77),
            ie(8, "ignore", "ENB-UE-S1AP-ID", 88),
            ie(51, "ignore", "E-RABSetupListCtxtSURes", [
                ie(50, "ignore", "E-RABSetupItemCtxtSURes", {
                    "e-RAB-ID": 5, "transportLayerAddress": addr([10, 20, 30, 40]),
                    "gTP-TEID": teid(0x11223344)}),
                ie(50, "ignore", "E-RABSetupItemCtxtSURes", {
                    "e-RAB-ID": 15, "transportLayerAddress": addr([192, 0, 2, 255]),
                    "gTP-TEID": teid(0xFFFFFFFE)}),
            ]),
            ie(48, "ignore", "E-RABList", [
                ie(35, "ignore", "E-RABItem", {"e-RAB-ID": 6, "cause": ("transport", "unspecified")}),
            ]),
        ])),
        ("UEContextReleaseRequest", init(18, "ignore", "UEContextReleaseRequest", [
            ie(0, "reject", "MME-UE-S1AP-ID", 4000000000),
            ie(8, "reject", "ENB-UE-S1AP-ID", 1),
            ie(2, "ignore", "Cause", ("radioNetwork", "radio-connection-with-ue-lost")),
        ])),
        ("UEContextReleaseComplete", succ(23, "reject", "UEContextReleaseComplete", [
            ie(0, "ignore", "MME-UE-S1AP-ID", 123456),
            ie(8, "ignore", "ENB-UE-S1AP-ID", 654321),
        ])),
        ("E-RABSetupResponse", succ(5, "reject", "E-RABSetupResponse", [
            ie(0, "ignore", "MME-UE-S1AP-ID", 9),
            ie(8, "ignore", "ENB-UE-S1AP-ID", 10),
            ie(28, "ignore", "E-RABSetupListBearerSURes", [
                ie(39, "ignore", "E-RABSetupItemBearerSURes", {
                    "e-RAB-ID": 7, "transportLayerAddress": addr([172, 31, 0, 7]),
                    "gTP-TEID": teid(0x0A0B0C0D)}),
            ]),
        ])),
        ("PathSwitchRequest", init(3, "reject", "PathSwitchRequest", [
            ie(8, "reject", "ENB-UE-S1AP-ID", 0x54321),
            ie(22, "reject", "E-RABToBeSwitchedDLList", [
                ie(23, "reject", "E-RABToBeSwitchedDLItem", {
                    "e-RAB-ID": 5, "transportLayerAddress": addr([198, 51, 100, 9]),
                    "gTP-TEID": teid(0xCAFEF00D)}),
            ]),
            ie(88, "reject", "MME-UE-S1AP-ID", 0x1234567),
            ie(100, "ignore", "EUTRAN-CGI", ecgi(PLMN, 0x1234567)),
            ie(67, "ignore", "TAI", tai(PLMN, 0x2222)),
            ie(107, "ignore", "UESecurityCapabilities", {
                "encryptionAlgorithms": (0xC000, 16), "integrityProtectionAlgorithms": (0x6000, 16)}),
        ])),
        ("HandoverRequired", init(0, "reject", "HandoverRequired", [
            ie(0, "reject", "MME-UE-S1AP-ID", 31337),
            ie(8, "reject", "ENB-UE-S1AP-ID", 4242),
            ie(1, "reject", "HandoverType", "intralte"),
            ie(2, "ignore", "Cause", ("radioNetwork", "handover-desirable-for-radio-reason")),
            ie(4, "reject", "TargetID", ("targeteNB-ID", {
                "global-ENB-ID": {"pLMNidentity": PLMN, "eNB-ID": ("macroENB-ID", (0xF00D5, 20))},
                "selected-TAI": tai(PLMN, 0x3333)})),
            ie(104, "reject", "Source-ToTarget-TransparentContainer", bytes.fromhex("0102030405060708090a")),
        ])),
        ("HandoverRequestAcknowledge", succ(1, "reject", "HandoverRequestAcknowledge", [
            ie(0, "ignore", "MME-UE-S1AP-ID", 500),
            ie(8, "ignore", "ENB-UE-S1AP-ID", 600),
            ie(18, "ignore", "E-RABAdmittedList", [
                ie(20, "ignore", "E-RABAdmittedItem", {
                    "e-RAB-ID": 5, "transportLayerAddress": addr([203, 0, 113, 5]),
                    "gTP-TEID": teid(0x01010101),
                    "dL-transportLayerAddress": addr([203, 0, 113, 6]),
                    "dL-gTP-TEID": teid(0x02020202)}),
            ]),
            ie(123, "reject", "Target-ToSource-TransparentContainer", bytes.fromhex("aabbccddeeff")),
        ])),
        ("HandoverNotify", init(2, "ignore", "HandoverNotify", [
            ie(0, "reject", "MME-UE-S1AP-ID", 700),
            ie(8, "reject", "ENB-UE-S1AP-ID", 800),
            ie(100, "ignore", "EUTRAN-CGI", ecgi(PLMN3, 0xFFFFFFF)),
            ie(67, "ignore", "TAI", tai(PLMN3, 0xFFFF)),
        ])),
        ("Reset", init(14, "reject", "Reset", [
            ie(2, "ignore", "Cause", ("misc", "om-intervention")),
            ie(92, "reject", "ResetType", ("partOfS1-Interface", [
                ie(91, "reject", "UE-associatedLogicalS1-ConnectionItem",
                   {"mME-UE-S1AP-ID": 11, "eNB-UE-S1AP-ID": 12}),
                ie(91, "reject", "UE-associatedLogicalS1-ConnectionItem", {"eNB-UE-S1AP-ID": 13}),
            ])),
        ])),
        ("UEContextModificationRequest", init(21, "reject", "UEContextModificationRequest", [
            ie(0, "reject", "MME-UE-S1AP-ID", 1000),
            ie(8, "reject", "ENB-UE-S1AP-ID", 2000),
            ie(73, "reject", "SecurityKey", (int.from_bytes(sec_key, "big"), 256)),
            ie(66, "ignore", "UEAggregateMaximumBitrate", {
                "uEaggregateMaximumBitRateDL": 10000000000, "uEaggregateMaximumBitRateUL": 1}),
        ])),
    ]


def encode():
    out = []
    for name, val in built():
        PDU.set_val(val)
        buf = PDU.to_aper()
        PDU.from_aper(buf)  # what a receiver sees, not what we typed
        out.append({"name": name, "hex": buf.hex(), "pdu": norm(PDU.get_val())})
    return out


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("decode", "encode"):
        sys.stderr.write(__doc__)
        return 2
    res = decode(sys.stdin.read().splitlines()) if sys.argv[1] == "decode" else encode()
    json.dump(res, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
