//! 128-EEA1/2/3 and 128-EIA1/2/3 against 3GPP test data: TS 33.401 Annex C
//! (EEA2/EIA2), the UEA2/UIA2 design conformance data (TS 35.217, used for
//! EEA1/EIA1) and TS 35.223 (EEA3/EIA3). Transcribed from srsRAN's
//! lib/security unit test (an implementation independent of ours), with
//! set numbers as in those documents. Extra byte-aligned checks from
//! Open5GS tests/unit/security-test.c exercise the whole-byte API.

mod common;
use common::{a, h};
use pepc_security::{eea_apply, eea_apply_bits, eia_mac, eia_mac_bits, Eea, Eia, Key128};

struct Enc {
    name: &'static str,
    alg: Eea,
    key: &'static str,
    count: u32,
    bearer: u8,
    dir: u8,
    bits: u64,
    pt: &'static str,
    ct: &'static str,
}

struct Mac {
    name: &'static str,
    alg: Eia,
    key: &'static str,
    count: u32,
    bearer: u8,
    dir: u8,
    bits: u64,
    msg: &'static str,
    mac: &'static str,
}

// Inputs shared by the EEA1 and EEA2 sets of the same number.
const K1: &str = "d3c5d592327fb11c4035c6680af8c6d1";
const PT1: &str = "981ba6824c1bfb1ab485472029b71d808ce33e2cc3c0b5fc1f3de8a6dc66b1f0";
const K2: &str = "2bd6459f82c440e0952c49104805ff48";
const PT2: &str = "7ec61272743bf1614726446a6c38ced166f6ca76eb5430044286346cef130f92922b03450d3a9975e5bd2ea0eb55ad8e1b199e3ec4316020e9a1b285e762795359b7bdfd39bef4b2484583d5afe082aee638bf5fd5a606193901a08f4ab41aab9b134880";
const K4: &str = "aa1f95aea533bcb32eb63bf52d8f831a";
const PT4: &str = "fb1b96c5c8badfb2e8e8edfde78e57f2ad81e74103fc430a534dcc37afcec70e1517bb06f27219dae49022ddc47a068de4c9496a951a6b09edbdc864c7adbd740ac50c022f3082bafd22d78197c5d508b977bca13f32e652e74ba728576077ce628c535e87dc6077ba07d29068590c8cb5f1088e082cfa0ec961302d69cf3d44";

const ENC: &[Enc] = &[
    Enc { name: "EEA1 set 1", alg: Eea::Eea1, key: K1, count: 0x398a59b4, bearer: 0x15, dir: 1, bits: 253, pt: PT1,
        ct: "5d5bfe75eb04f68ce0a12377ea00b37d47c6a0ba06309155086a859c4341b378" },
    Enc { name: "EEA1 set 2", alg: Eea::Eea1, key: K2, count: 0xc675a64b, bearer: 0x0c, dir: 1, bits: 798, pt: PT2,
        ct: "3f67850714b8da69efb727ed7a6c0c50714ad736c4f5600006e3525be807c467c677ff864af45fba09c27cde38f87a1f84d59ab255408f2c7b82f9ead41a1fe65eabebfbc1f3a4c56c9a26fcf7b3d66d0220ee4775bc58170a2b12f3431d11b344d6e36c" },
    Enc { name: "EEA1 set 4 (long)", alg: Eea::Eea1, key: K4, count: 0x72d8c671, bearer: 0x10, dir: 1, bits: 1022, pt: PT4,
        ct: "ffcfc2fead6c094e96c589d0f6779b6784246c3c4d1cea203db3901f40ad4fd7138bc6d77e8320cb102f497fdd44a269a96ecb28617700e332eb2f736b34f4f2693094e22ff94f9be4723da40c40dfd3931cc1ac9723f6b4a9913e96b6db7abcace415177c1d0115c5f09b5fdea0b3adb8f9da6e9f9a04c543397b9d43f87330" },
    Enc { name: "EEA2 set 1", alg: Eea::Eea2, key: K1, count: 0x398a59b4, bearer: 0x15, dir: 1, bits: 253, pt: PT1,
        ct: "e9fed8a63d155304d71df20bf3e82214b20ed7dad2f233dc3c22d7bdeeed8e78" },
    Enc { name: "EEA2 set 2", alg: Eea::Eea2, key: K2, count: 0xc675a64b, bearer: 0x0c, dir: 1, bits: 798, pt: PT2,
        ct: "5961605353c64bdca15b195e288553a910632506d6200aa790c4c806c99904cf2445cc50bb1cf168a49673734e081b57e324ce5259c0e78d4cd97b870976503c0943f2cb5ae8f052c7b7d392239587b8956086bcab18836042e2e6ce42432a17105c53d0" },
    Enc { name: "EEA2 set 4 (long)", alg: Eea::Eea2, key: K4, count: 0x72d8c671, bearer: 0x10, dir: 1, bits: 1022, pt: PT4,
        ct: "dfb440acb3773549efc04628aeb8d8156275230bdc690d94b00d8d95f28c4b56307f60f4ca55eba661ebba72ac808fa8c49e26788ed04a5d606cb418de74878b9a22f8ef29590bc4eb57c9faf7c41524a885b8979c423f2f8f8e0592a9879201be7ff9777a162ab810feb324ba74c4c156e04d39097209653ac33e5a5f2d8864" },
    Enc { name: "EEA3 set 1", alg: Eea::Eea3, key: "173d14ba5003731d7a60049470f00a29", count: 0x66035492, bearer: 0x0f, dir: 0, bits: 193,
        pt: "6cf65340735552ab0c9752fa6f9025fe0bd675d9005875b200",
        ct: "a6c85fc66afb8533aafc2518dfe784940ee1e4b030238cc800" },
    Enc { name: "EEA3 set 2", alg: Eea::Eea3, key: "e5bd3ea0eb55ade866c6ac58bd54302a", count: 0x00056823, bearer: 0x18, dir: 1, bits: 800,
        pt: "14a8ef693d678507bbe7270a7f67ff5006c3525b9807e467c4e56000ba338f5d429559036751822246c80d3b38f07f4be2d8ff5805f5132229bde93bbbdcaf382bf1ee972fbf9977bada8945847a2a6c9ad34a667554e04d1f7fa2c33241bd8f01ba220d",
        ct: "131d43e0dea1be5c5a1bfd971d852cbf712d7b4f57961fea3208afa8bca433f456ad09c7417e58bc69cf8866d1353f74865e80781d202dfb3ecff7fcbc3b190fe82a204ed0e350fc0f6f2613b2f2bca6df5a473a57a4a00d985ebad880d6f23864a07b01" },
    Enc { name: "EEA3 set 3 (long)", alg: Eea::Eea3, key: "d4552a8fd6e61cc81a2009141a29c10b", count: 0x76452ec1, bearer: 0x02, dir: 1, bits: 1570,
        pt: "38f07f4be2d8ff5805f5132229bde93bbbdcaf382bf1ee972fbf9977bada8945847a2a6c9ad34a667554e04d1f7fa2c33241bd8f01ba220d3ca4ec41e074595f54ae2b454fd971432043601965cca85c2417ed6cbec3bada84fc8a579aea7837b0271177242a64dc0a9de71a8edee86ca3d47d033d6bf539804eca86c584a9052de46ad3fced65543bd90207372b27afb79234f5ff43ea870820e2c2b78a8aae61cce52a0515e348d196664a3456b182a07c406e4a20791271cfeda165d535ec5ea2d4df40",
        ct: "8383b0229fcc0b9d2295ec41c977e9c2bb72e220378141f9c8318f3a270dfbcdee6411c2b3044f176dc6e00f8960f97afacd131ad6a3b49b16b7babcf2a509ebb16a75dcab14ff275dbeeea1a2b155f9d52c26452d0187c310a4ee55beaa78ab4024615ba9f5d5adc7728f73560671f013e5e550085d3291df7d5fecedded559641b6c2f585233bc71e9602bd2305855bbd25ffa7f17ecbc042daae38c1f57ad8e8ebd37346f71befdbb7432e0e0bb2cfc09bcd96570cb0c0c39df5e29294e82703a637f80" },
    // Open5GS security-test.c test5: SNOW 3G f8, 800 bits, byte aligned.
    Enc { name: "EEA1 open5gs 800-bit", alg: Eea::Eea1, key: "2bd6459f82c5b300952c49104881ff48", count: 0x72a4f20f, bearer: 0x0c, dir: 1, bits: 800, pt: PT2,
        ct: "8ceba62943dced3a0990b06ea1b0a2c4fb3cedc71b369f42ba64c1eb6665e72aa1c9bb0deaa20fe86058b8baee2c2e7f0becce48b52932a53c9d5f931a3a7c532259af4325e2a65e3084ad5f6a513b7bddc1b65f0aa0d97a053db55a88c4c4f9605e4143" },
];

const M_768: &str = "35c68716633c66fb750c266865d53c11ea05b1e9fa49c8398d48e1efa5909d3947902837f5ae96d5a05bc8d61ca8dbef1b13a4b4abfe4fb1006045b674bb54729304c382be53a5af05556176f6eaa2ef1d05e4b083181ee674cda5a485f74d7a";
const M_EIA3_3: &str = "983b41d47d780c9e1ad11d7eb70391b1de0b35da2dc62f83e7b78d6306ca0ea07e941b7be91348f9fcb170e2217fecd97f9f68adb16e5d7d21e569d280ed775cebde3f4093c5388100000000";

const MAC: &[Mac] = &[
    Mac { name: "EIA1 set 1", alg: Eia::Eia1, key: "2bd6459f82c5b300952c49104881ff48", count: 0x38a6f056, bearer: 0x1f, dir: 0, bits: 88,
        msg: "33323462633938613734790000000000", mac: "731f1165" },
    Mac { name: "EIA1 set 2", alg: Eia::Eia1, key: "7e5e94431e11d73828d739cc6ced4573", count: 0x36af6144, bearer: 0x18, dir: 1, bits: 254,
        msg: "b3d3c9170a4e1632f60f861013d22d84b726b6a278d802d1eeaf1321ba5929dc", mac: "e3259f6f" },
    Mac { name: "EIA1 set 4 (long)", alg: Eia::Eia1, key: "83fd23a244a74cf358da3019f1722635", count: 0x36af6144, bearer: 0x0f, dir: 1, bits: 768,
        msg: M_768, mac: "bba74492" },
    Mac { name: "EIA2 set 1", alg: Eia::Eia2, key: "2bd6459f82c5b300952c49104881ff48", count: 0x38a6f056, bearer: 0x18, dir: 0, bits: 58,
        msg: "3332346263393840", mac: "118c6eb8" },
    Mac { name: "EIA2 set 2", alg: Eia::Eia2, key: "d3c5d592327fb11c4035c6680af8c6d1", count: 0x398a59b4, bearer: 0x1a, dir: 1, bits: 64,
        msg: "484583d5afe082ae", mac: "b93787e6" },
    Mac { name: "EIA2 set 5 (long)", alg: Eia::Eia2, key: "83fd23a244a74cf358da3019f1722635", count: 0x36af6144, bearer: 0x0f, dir: 1, bits: 768,
        msg: M_768, mac: "e657e182" },
    Mac { name: "EIA3 set 1", alg: Eia::Eia3, key: "00000000000000000000000000000000", count: 0, bearer: 0, dir: 0, bits: 1,
        msg: "00000000", mac: "c8a9595e" },
    Mac { name: "EIA3 set 2", alg: Eia::Eia3, key: "47054125561eb2dda94059da05097850", count: 0x561eb2dd, bearer: 0x14, dir: 0, bits: 90,
        msg: "000000000000000000000000", mac: "6719a088" },
    Mac { name: "EIA3 set 3", alg: Eia::Eia3, key: "c9e6cec4607c72db000aefa88385ab0a", count: 0xa94059da, bearer: 0x0a, dir: 1, bits: 577,
        msg: M_EIA3_3, mac: "fae8ff0b" },
    // Open5GS security-test.c test8: the same inputs over 584 bits (73 bytes).
    Mac { name: "EIA3 open5gs 584-bit", alg: Eia::Eia3, key: "c9e6cec4607c72db000aefa88385ab0a", count: 0xa94059da, bearer: 0x0a, dir: 1, bits: 584,
        msg: M_EIA3_3, mac: "24a842b3" },
    Mac { name: "EIA3 set 4 (long)", alg: Eia::Eia3, key: "c8a48262d0c2e2bac4b96ef77e80ca59", count: 0x05097850, bearer: 0x10, dir: 1, bits: 2079,
        msg: "b546430bf87b4f1ee834704cd6951c36e26f108cf731788f48dc34f1678c05221c8fa7ff2f39f477e7e49ef60a4ec2c3de24312a96aa26e1cfba57563838b297f47e8510c779fd6654b143386fa639d31edbd6c06e47d159d94362f26aeeedee0e4f49d9bf8412995415bfad56ee82d1ca7463abf085b082b09904d6d990d43cf2e062f40839d93248b1eb92cdfed5300bc148280430b6d0caa094b6ec8911ab7dc36824b824dc0af6682b0935fde7b492a14dc2f43648038da2cf79170d2d50133fd49416cb6e33bea90b8bf4559b03732a01ea290e6d074f79bb83c10e580015cc1a85b36b5501046e9c4bdcae5135690b8666bd54b7a703ea7b6f220a5469a568027e",
        mac: "004ac4d6" },
];

#[test]
fn eea_test_sets() {
    for v in ENC {
        let key = Key128::from_hex(v.key).unwrap();
        let pt = h(v.pt);
        let ct = h(v.ct);
        assert_eq!(
            pt.len() as u64,
            v.bits.div_ceil(8),
            "{}: plaintext length",
            v.name
        );
        assert_eq!(pt.len(), ct.len(), "{}", v.name);
        let mut buf = pt.clone();
        eea_apply_bits(v.alg, &key, v.count, v.bearer, v.dir, &mut buf, v.bits).unwrap();
        assert_eq!(hex::encode(&buf), v.ct, "{} encrypt", v.name);
        eea_apply_bits(v.alg, &key, v.count, v.bearer, v.dir, &mut buf, v.bits).unwrap();
        assert_eq!(buf, pt, "{} decrypt", v.name);
        if v.bits % 8 == 0 {
            let mut whole = pt.clone();
            eea_apply(v.alg, &key, v.count, v.bearer, v.dir, &mut whole);
            assert_eq!(whole, ct, "{} whole-byte API", v.name);
        }
    }
}

#[test]
fn eia_test_sets() {
    for v in MAC {
        let key = Key128::from_hex(v.key).unwrap();
        let msg = h(v.msg);
        assert!(
            msg.len() as u64 >= v.bits.div_ceil(8),
            "{}: message length",
            v.name
        );
        let mac = eia_mac_bits(v.alg, &key, v.count, v.bearer, v.dir, &msg, v.bits).unwrap();
        assert_eq!(hex::encode(mac), v.mac, "{}", v.name);
        if v.bits % 8 == 0 {
            let n = (v.bits / 8) as usize;
            let whole = eia_mac(v.alg, &key, v.count, v.bearer, v.dir, &msg[..n]);
            assert_eq!(hex::encode(whole), v.mac, "{} whole-byte API", v.name);
        }
        // Any change of COUNT or DIRECTION changes the MAC.
        let other = eia_mac_bits(v.alg, &key, v.count ^ 1, v.bearer, v.dir, &msg, v.bits).unwrap();
        assert_ne!(other, mac, "{}: COUNT not bound", v.name);
        let other = eia_mac_bits(v.alg, &key, v.count, v.bearer, v.dir ^ 1, &msg, v.bits).unwrap();
        assert_ne!(other, mac, "{}: DIRECTION not bound", v.name);
    }
}

#[test]
fn null_algorithms_and_errors() {
    let key = Key128::new(a("00112233445566778899aabbccddeeff"));
    assert_eq!(eia_mac(Eia::Eia0, &key, 7, 0, 1, b"hello"), [0; 4]);
    let mut data = *b"plain";
    eea_apply(Eea::Eea0, &key, 7, 0, 1, &mut data);
    assert_eq!(&data, b"plain");
    assert_eq!(Eia::try_from(2u8), Ok(Eia::Eia2));
    assert_eq!(Eea::try_from(3u8), Ok(Eea::Eea3));
    assert!(Eia::try_from(4u8).is_err());
    assert!(Eea::try_from(7u8).is_err());
    assert_eq!(u8::from(Eia::Eia3), 3);
    let mut short = [0u8; 2];
    assert!(eea_apply_bits(Eea::Eea2, &key, 0, 0, 0, &mut short, 17).is_err());
    assert!(eia_mac_bits(Eia::Eia1, &key, 0, 0, 0, &short, 17).is_err());
    // Empty messages are fine (no panic) for every algorithm.
    for alg in [Eia::Eia1, Eia::Eia2, Eia::Eia3] {
        let _ = eia_mac(alg, &key, 0, 0, 0, &[]);
    }
    for alg in [Eea::Eea1, Eea::Eea2, Eea::Eea3] {
        eea_apply(alg, &key, 0, 0, 0, &mut []);
    }
}
