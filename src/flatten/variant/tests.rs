use std::collections::BTreeMap;

use parquet_variant::Variant;
use proptest::prelude::*;

use super::*;

/// A JSON value compared value for value: numbers by exact decimal value, objects as
/// maps (a Variant sorts its keys), arrays in order.
#[derive(Clone, Debug, PartialEq)]
enum Canon {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    List(Vec<Canon>),
    Obj(BTreeMap<String, Canon>),
}

/// A number literal's exact value ([`exact_value`]).
fn exact(literal: &str) -> String {
    exact_value(literal).expect("an exponent within i64")
}

/// The value of node `i` of `doc`: each key's last value; the earlier values of a repeated
/// key go to `dups` under `dup:<pointer>`.
fn from_doc(doc: &Doc<'_>, i: usize, at: &str, dups: &mut Vec<(String, String)>) -> Canon {
    match doc.kind(i) {
        Kind::Null => Canon::Null,
        Kind::Bool(b) => Canon::Bool(b),
        Kind::Num(_) => Canon::Num(exact(doc.raw(i))),
        Kind::Str { .. } => Canon::Str(doc.str(i).into_owned()),
        Kind::Array => Canon::List(
            doc.elements(i)
                .enumerate()
                .map(|(n, e)| from_doc(doc, e, &format!("{at}/{n}"), dups))
                .collect(),
        ),
        Kind::Object => {
            let members: Vec<(String, usize)> =
                doc.members(i).map(|(k, v)| (doc.str(k).into_owned(), v)).collect();
            let mut out = BTreeMap::new();
            for (n, (k, v)) in members.iter().enumerate() {
                let mut pointer = at.to_string();
                pointer.push('/');
                push_token(&mut pointer, k);
                if members[n + 1..].iter().any(|(later, _)| later == k) {
                    dups.push((format!("dup:{pointer}"), doc.raw(*v).to_string()));
                } else {
                    out.insert(k.clone(), from_doc(doc, *v, &pointer, dups));
                }
            }
            Canon::Obj(out)
        }
        Kind::Raw => {
            let sub = Doc::parse(doc.raw(i), usize::MAX).unwrap();
            from_doc(&sub, sub.root(), at, dups)
        }
    }
}

/// The value a Variant holds.
fn from_variant(v: &Variant<'_, '_>) -> Canon {
    match v {
        Variant::Null => Canon::Null,
        Variant::BooleanTrue => Canon::Bool(true),
        Variant::BooleanFalse => Canon::Bool(false),
        Variant::Int8(i) => Canon::Num(exact(&i.to_string())),
        Variant::Int16(i) => Canon::Num(exact(&i.to_string())),
        Variant::Int32(i) => Canon::Num(exact(&i.to_string())),
        Variant::Int64(i) => Canon::Num(exact(&i.to_string())),
        Variant::Decimal4(d) => Canon::Num(exact(&format!("{}e-{}", d.integer(), d.scale()))),
        Variant::Decimal8(d) => Canon::Num(exact(&format!("{}e-{}", d.integer(), d.scale()))),
        Variant::Decimal16(d) => Canon::Num(exact(&format!("{}e-{}", d.integer(), d.scale()))),
        Variant::Double(f) => Canon::Num(exact(&format!("{f:e}"))),
        Variant::String(s) => Canon::Str(s.to_string()),
        Variant::ShortString(s) => Canon::Str(s.as_str().to_string()),
        Variant::List(l) => Canon::List(l.iter().map(|e| from_variant(&e)).collect()),
        Variant::Object(o) => Canon::Obj(
            o.iter()
                .map(|(k, v)| (k.to_string(), from_variant(&v)))
                .collect(),
        ),
        other => panic!("bronze writes no {other:?}"),
    }
}

/// `tree` with the value at JSON pointer `pointer` replaced by the JSON text `raw`.
fn patch(tree: &mut Canon, pointer: &str, raw: &str) {
    let mut at = tree;
    for token in pointer.split('/').skip(1) {
        let key = token.replace("~1", "/").replace("~0", "~");
        at = match at {
            Canon::Obj(m) => m.get_mut(&key).expect("rescued pointer in the value"),
            Canon::List(l) => &mut l[key.parse::<usize>().unwrap()],
            other => panic!("pointer {pointer} goes through {other:?}"),
        };
    }
    assert_eq!(*at, Canon::Null, "a rescued value is null in the Variant");
    let doc = Doc::parse(raw, usize::MAX).unwrap();
    *at = from_doc(&doc, doc.root(), pointer, &mut Vec::new());
}

/// Encodes `text` and checks the Variant, with the rescued values put back, holds every
/// value of `text`, and that only repeated keys' earlier values are rescued beside.
fn round_trip(text: &str) -> Encoded {
    let doc = Doc::parse(text, 64).unwrap();
    let encoded = encode(&doc, doc.root(), "");
    let variant = Variant::try_new(&encoded.metadata, &encoded.value).expect("a valid Variant");
    let mut got = from_variant(&variant);
    let mut got_dups = Vec::new();
    for (pointer, raw) in &encoded.rescued {
        match pointer.strip_prefix("dup:") {
            Some(_) => got_dups.push((pointer.clone(), raw.clone())),
            None => patch(&mut got, pointer, raw),
        }
    }
    let mut dups = Vec::new();
    let want = from_doc(&doc, doc.root(), "", &mut dups);
    assert_eq!(got, want, "{text}");
    assert_eq!(got_dups, dups, "{text}");
    encoded
}

/// The Variant number `literal` is encoded as.
fn encoded_number(literal: &str) -> Option<Number> {
    let doc = Doc::parse(literal, 1).unwrap();
    let Kind::Num(class) = doc.kind(doc.root()) else {
        panic!("{literal} is no number")
    };
    number(literal, class)
}

#[test]
fn integers_take_the_narrowest_type_and_exact_decimals_their_scale() {
    use Number::*;
    assert_eq!(encoded_number("0"), Some(Int8(0)));
    assert_eq!(encoded_number("-128"), Some(Int8(-128)));
    assert_eq!(encoded_number("128"), Some(Int16(128)));
    assert_eq!(encoded_number("-32769"), Some(Int32(-32769)));
    assert_eq!(encoded_number("2147483648"), Some(Int64(2147483648)));
    assert_eq!(encoded_number("-9223372036854775808"), Some(Int64(i64::MIN)));
    let dec16 = |v: i128, s: u8| Some(Decimal16(VariantDecimal16::try_new(v, s).unwrap()));
    assert_eq!(encoded_number("9223372036854775808"), dec16(9223372036854775808, 0));
    let max38 = "9".repeat(38);
    assert_eq!(encoded_number(&max38), dec16(max38.parse().unwrap(), 0));
    assert_eq!(encoded_number(&"9".repeat(39)), None, "beyond decimal(38)");
    let dec4 = |v: i32, s: u8| Some(Decimal4(VariantDecimal4::try_new(v, s).unwrap()));
    assert_eq!(encoded_number("1.10"), dec4(110, 2), "the scale is kept");
    assert_eq!(encoded_number("-0.001"), dec4(-1, 3));
    assert_eq!(encoded_number("0.0"), dec4(0, 1));
    let dec8 = |v: i64, s: u8| Some(Decimal8(VariantDecimal8::try_new(v, s).unwrap()));
    assert_eq!(encoded_number("12345678.90"), dec8(1234567890, 2));
    assert_eq!(
        encoded_number("3.14159265358979323846"),
        dec16(314159265358979323846, 20)
    );
    assert_eq!(encoded_number("6.02e23"), Some(Double(6.02e23)), "as Spark reads it");
    assert_eq!(encoded_number("1.5E-3"), Some(Double(0.0015)));
    assert_eq!(
        encoded_number("1.2345678901234567890e5"),
        dec16(12345678901234567890, 14),
        "too precise for a double: exact"
    );
    assert_eq!(encoded_number("1e400"), None);
    assert_eq!(encoded_number("-1e400"), None);
    assert_eq!(encoded_number("1e-400"), None);
    assert_eq!(encoded_number(&format!("0.{}", "1".repeat(39))), None);
    // Doubles as JavaScript and Python print them: 17 digits, or beyond decimal(38).
    assert_eq!(
        encoded_number("1.7976931348623157e308"),
        Some(Double(f64::MAX))
    );
    let printed = 1.2345678901234567e-50_f64;
    assert_eq!(
        encoded_number(&format!("{printed:e}")),
        Some(Double(printed))
    );
    // 17 digits no double prints (its double prints `…566e-50`): kept exact, rescued.
    assert_eq!(encoded_number("1.2345678901234567e-50"), None);
    assert_eq!(
        encoded_number(&format!("0.{}1", "0".repeat(39))),
        Some(Double(1e-40))
    );
    assert_eq!(encoded_number(&format!("{}.0", "1".repeat(40))), None, "it rounds");
    // An exponent beyond i64 is no number bronze holds.
    assert_eq!(encoded_number("1.5e-9223372036854775807"), None);
    assert_eq!(encoded_number("1e-9223372036854775808"), None);
}

#[test]
fn numbers_no_variant_holds_are_rescued_under_their_pointer() {
    let e = round_trip(r#"{"a":{"x/y":[1,1e400]},"b":123456789012345678901234567890123456789012}"#);
    assert_eq!(
        e.rescued,
        vec![
            ("/a/x~1y/1".to_string(), "1e400".to_string()),
            (
                "/b".to_string(),
                "123456789012345678901234567890123456789012".to_string()
            ),
        ]
    );
}

#[test]
fn a_repeated_key_keeps_its_last_value_and_rescues_the_earlier_ones() {
    let e = round_trip(r#"{"k":1,"K":2,"k":{"a":3},"k":[4]}"#);
    assert_eq!(
        e.rescued,
        vec![
            ("dup:/k".to_string(), "1".to_string()),
            ("dup:/k".to_string(), r#"{"a":3}"#.to_string()),
        ]
    );
    let v = Variant::try_new(&e.metadata, &e.value).unwrap();
    let object = v.as_object().unwrap();
    assert_eq!(object.len(), 2, "unique keys, case kept");
}

#[test]
fn strings_empty_containers_and_nesting_survive() {
    round_trip(r#""""#);
    round_trip(r#"{}"#);
    round_trip(r#"[]"#);
    round_trip(r#"[{},[],{"":[]},null,true,false]"#);
    round_trip(r#"{"s":"tab\t quote\" slash\\ \u00e9 \ud83d\ude00 日本語","e":"\u0000"}"#);
    round_trip(&format!(r#"{{"long":"{}"}}"#, "x".repeat(100)));
    // Deeper than the parse's limit: parsed again from the raw text.
    let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    assert!(round_trip(&deep).rescued.is_empty());
}

#[test]
fn a_value_nested_deeper_than_the_limit_is_rescued_whole() {
    let deep = format!("{}1{}", "[".repeat(MAX_DEPTH + 5), "]".repeat(MAX_DEPTH + 5));
    let text = format!(r#"{{"d":{deep}}}"#);
    let e = round_trip(&text);
    assert_eq!(e.rescued.len(), 1);
    let (pointer, raw) = &e.rescued[0];
    // The container at depth MAX_DEPTH (the object is at 0): `/d` and its first elements.
    assert_eq!(pointer.matches('/').count(), MAX_DEPTH, "{pointer}");
    let left = MAX_DEPTH + 5 - (MAX_DEPTH - 1);
    assert_eq!(*raw, format!("{}1{}", "[".repeat(left), "]".repeat(left)));
}

/// Objects of more than 255 fields, arrays of more than 255 elements, strings past the
/// short form and values past 255 and 65,535 bytes take the wider headers, ids and
/// offsets; each round-trips.
#[test]
fn wide_and_long_values_take_the_wider_encodings() {
    let wide: Vec<String> = (0..300).map(|i| format!("\"k{i:03}\":{i}")).collect();
    let long: Vec<String> = (0..300).map(|i| format!("\"{}\"", "é".repeat(i % 40))).collect();
    let big = "x".repeat(70_000);
    let keys: Vec<String> = (0..3000).map(|i| format!("\"{}{i}\":[]", "k".repeat(30))).collect();
    // 3-byte ids (70,000 keys) and 4-byte offsets (a value past 16 MiB).
    let many: Vec<String> = (0..70_000).map(|i| format!("\"{i}\":{}", i % 3)).collect();
    let huge = "y".repeat(17 << 20);
    for text in [
        format!("{{{}}}", wide.join(",")),
        format!("[{}]", long.join(",")),
        format!("{{\"s\":\"{big}\",\"t\":[\"{big}\",1]}}"),
        format!("{{{}}}", keys.join(",")),
        format!("[{{{}}},{{\"a\":{{{}}}}}]", wide.join(","), keys.join(",")),
        format!("{{{}}}", many.join(",")),
        format!("[\"{huge}\",{{\"z\":1}}]"),
    ] {
        let encoded = round_trip(&text);
        assert!(encoded.value.len() > 255, "{}", encoded.value.len());
    }
}

/// A generated JSON value, as text.
fn json() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        (-1000i64..1000, 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        "-?[1-9][0-9]{18,45}",
        "-?(0|[1-9][0-9]{0,2})\\.[0-9]{1,40}",
        "-?[1-9](\\.[0-9]{1,20})?[eE][-+]?[0-9]{1,3}",
        Just("-0".to_string()),
        Just("0.000".to_string()),
    ];
    let key = prop_oneof![
        "[a-c]{0,2}",
        Just("A".to_string()),
        Just("x/y~z".to_string()),
        Just("naïve ✓".to_string()),
    ];
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        number,
        any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|m| {
                let members: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{}:{v}", serde_json::to_string(k).unwrap()))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Every JSON value round-trips through its Variant, value for value, with what no
    /// Variant holds in the rescued values.
    #[test]
    fn every_json_value_round_trips_through_its_variant(text in json()) {
        round_trip(&text);
    }

    /// One encoder over many values (a column's), each value repeated so the next one
    /// reuses its dictionary: every encoding is the one the value gets on its own.
    #[test]
    fn an_encoder_reused_over_values_encodes_each_as_on_its_own(
        texts in prop::collection::vec(json(), 1..6)
    ) {
        let mut encoder = Encoder::default();
        let mut out = Encodings::default();
        // Parsed to depth 2 as well: deeper containers are parsed again while encoded,
        // their keys looked up by name, the dictionary reused all the same.
        let docs: Vec<Doc<'_>> = texts
            .iter()
            .flat_map(|t| [Doc::parse(t, 64).unwrap(), Doc::parse(t, 2).unwrap()])
            .collect();
        let mut want = Vec::new();
        for doc in docs.iter().chain(&docs).chain(docs.iter().rev()) {
            let i = encoder.encode(&mut out, doc, doc.root(), "/p");
            let alone = encode(doc, doc.root(), "/p");
            let rescued = std::mem::take(&mut encoder.rescued);
            prop_assert_eq!(rescued, alone.rescued);
            want.push((i, alone.metadata, alone.value));
        }
        for (i, metadata, value) in want {
            let (m, v) = out.get(i as usize);
            prop_assert_eq!((m, v), (metadata.as_slice(), value.as_slice()));
        }
    }
}
