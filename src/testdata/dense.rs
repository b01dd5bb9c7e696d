//! The field-dense profile ([`super::Profile::Dense`]): payloads with no padding, about
//! 27 non-null leaves per message at about the padded profile's line size, most of them
//! short strings with non-ASCII text (é, ü, ß, CJK, Cyrillic, emoji), plus integers,
//! floats, booleans, nulls, timestamps as strings, objects nested 2-4 levels, arrays of
//! objects in most topics and arrays of scalars. The topic families and child tables are
//! the padded profile's (`currentprice` shared by seven topics, `levels__orders`,
//! `holdings__lots`, `items_<k>`), so the two profiles load into the same table shapes.

use std::fmt::Write as _;

use super::{Rng, SYMBOLS, currentprice};

/// Company names: Latin with diacritics, CJK, Cyrillic, an emoji.
const NAMES: [&str; 12] = [
    "Müller & Söhne GmbH",
    "Société Générale",
    "Großhandel Weiß AG",
    "東京海上ホールディングス",
    "Газпром нефть",
    "Ørsted A/S",
    "Nestlé S.A.",
    "トヨタ自動車株式会社",
    "Škoda Auto a.s.",
    "Çelebi Holding",
    "🚀 Rocket Lab",
    "Zürcher Kantonalbank",
];
const CITIES: [&str; 8] = [
    "München",
    "Zürich",
    "São Paulo",
    "Kraków",
    "東京",
    "Москва",
    "İstanbul",
    "Reykjavík",
];
const NOTES: [&str; 8] = [
    "größer als erwartet 📈",
    "下落傾向が続く",
    "без изменений",
    "prix révisé ✅",
    "señal débil",
    "naïve café déjà vu",
    "上場廃止の可能性",
    "κέρδη ↑ 3 %",
];
const PEOPLE: [&str; 8] = [
    "José Álvarez",
    "Zoë Brontë",
    "Łukasz Żółw",
    "山田太郎",
    "Анна Иванова",
    "Søren Kierkegaard",
    "François Dupré",
    "Ngozi Okonjo-Iweala",
];

fn pick<'a>(rng: &mut Rng, from: &[&'a str]) -> &'a str {
    from[rng.below(from.len() as u64) as usize]
}

/// `"2026-04-05T10:mm:ss.mmmZ"`: a timestamp as a string, as feeds send them.
fn ts(rng: &mut Rng) -> String {
    let ms = rng.below(3_600_000);
    format!(
        "2026-04-05T10:{:02}:{:02}.{:03}Z",
        ms / 60_000,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// The payload of one message of topic `t`, field-dense.
pub(super) fn payload(t: usize, n: u64, rng: &mut Rng) -> String {
    let mut p = String::with_capacity(900);
    let sym = SYMBOLS[rng.below(SYMBOLS.len() as u64) as usize];
    // 12 leaves common to every topic, 4 levels deep at most.
    let _ = write!(
        p,
        "{{\"symbol\":\"{sym}\",\"seq\":{n},\"event_time\":\"{}\",\"instrument\":{{\"isin\":\"DE{:010}\",\"venue\":\"XETR\",\"issuer\":{{\"name\":\"{}\",\"address\":{{\"city\":\"{}\",\"postcode\":\"{:05}\"}}}}}},\"active\":{},\"halted\":null,\"flags\":[\"{}\",\"{}\"],\"comment\":\"{}\"",
        ts(rng),
        rng.below(10_000_000_000),
        pick(rng, &NAMES),
        pick(rng, &CITIES),
        rng.below(100_000),
        rng.below(4) != 0,
        if rng.below(2) == 0 {
            "réel"
        } else {
            "simulé"
        },
        if rng.below(2) == 0 { "T+2" } else { "T+1" },
        pick(rng, &NOTES),
    );
    if t % 6 < 2 && t < 20 {
        p.push(',');
        currentprice(rng, &mut p);
    }
    family(t, n, sym, rng, &mut p);
    if t % 6 >= 4 || t >= 20 {
        let k = t % 9;
        let _ = write!(p, ",\"items_{k}\":[");
        for i in 0..1 + rng.below(3) {
            if i > 0 {
                p.push(',');
            }
            let _ = write!(
                p,
                "{{\"code\":\"c{}\",\"label\":\"{}\",\"weight\":{:.4}}}",
                rng.below(100),
                pick(rng, &NOTES),
                rng.price() / 1000.0
            );
        }
        p.push(']');
    }
    p.push('}');
    p
}

/// The leaves of `t`'s family (about 15 more).
fn family(t: usize, n: u64, sym: &str, rng: &mut Rng, p: &mut String) {
    match t % 6 {
        0 => {
            let _ = write!(
                p,
                ",\"bid\":{:.2},\"ask\":{:.2},\"bid_size\":{},\"ask_size\":{},\"quote_time\":\"{}\",\"market_maker\":{{\"name\":\"{}\",\"mpid\":\"M{:04}\"}},\"indicative\":{}",
                rng.price(),
                rng.price(),
                rng.below(10_000),
                rng.below(10_000),
                ts(rng),
                pick(rng, &NAMES),
                rng.below(10_000),
                rng.below(5) == 0
            );
        }
        1 => {
            let _ = write!(
                p,
                ",\"px\":{:.4},\"qty\":{},\"side\":\"{}\",\"trade_id\":\"T{n:012}\",\"counterparty\":{{\"name\":\"{}\",\"lei\":\"529900{:014}\",\"trader\":\"{}\"}},\"fees\":[{:.2},{:.2}],\"trade_time\":\"{}\"",
                rng.price(),
                1 + rng.below(1000),
                if rng.below(2) == 0 {
                    "achat"
                } else {
                    "verkauf"
                },
                pick(rng, &NAMES),
                rng.below(100_000_000_000_000),
                pick(rng, &PEOPLE),
                rng.price() / 100.0,
                rng.price() / 100.0,
                ts(rng)
            );
        }
        2 => orderbook(rng, p),
        3 => holdings(rng, p),
        4 => {
            let _ = write!(
                p,
                ",\"ref\":{{\"name\":\"{}\",\"class\":{{\"l1\":\"Aktie\",\"l2\":\"株式\",\"l3\":{{\"code\":{},\"label\":\"обыкновенные\"}}}},\"listed\":\"{}\",\"tags\":[\"{}\",\"{}\",\"{}\"],\"lot\":{},\"tick\":{:.4}}}",
                pick(rng, &NAMES),
                rng.below(100),
                ts(rng),
                pick(rng, &CITIES),
                pick(rng, &CITIES),
                sym,
                1 + rng.below(100),
                rng.price() / 10_000.0
            );
        }
        _ => {
            let _ = write!(
                p,
                ",\"headline\":\"{} — {}\",\"lang\":\"{}\",\"tickers\":[\"{sym}\",\"{}\"],\"authors\":[{{\"name\":\"{}\",\"desk\":\"{}\"}}],\"sentiment\":{:.3},\"published\":\"{}\"",
                pick(rng, &NAMES),
                pick(rng, &NOTES),
                if rng.below(2) == 0 { "de" } else { "ja" },
                SYMBOLS[(n % 8) as usize],
                pick(rng, &PEOPLE),
                pick(rng, &CITIES),
                rng.price() / 5000.0 - 1.0,
                ts(rng)
            );
        }
    }
}

fn orderbook(rng: &mut Rng, p: &mut String) {
    p.push_str(",\"levels\":[");
    for l in 0..2 + rng.below(2) {
        if l > 0 {
            p.push(',');
        }
        let _ = write!(
            p,
            "{{\"px\":{:.2},\"qty\":{},\"orders\":[",
            rng.price(),
            rng.below(500)
        );
        for o in 0..1 + rng.below(2) {
            if o > 0 {
                p.push(',');
            }
            let _ = write!(
                p,
                "{{\"order_id\":\"o{}\",\"qty\":{},\"trader\":\"{}\",\"entered\":\"{}\"}}",
                rng.below(1_000_000),
                1 + rng.below(50),
                pick(rng, &PEOPLE),
                ts(rng)
            );
        }
        p.push_str("]}");
    }
    p.push(']');
}

fn holdings(rng: &mut Rng, p: &mut String) {
    p.push_str(",\"holdings\":[");
    for h in 0..1 + rng.below(2) {
        if h > 0 {
            p.push(',');
        }
        let _ = write!(
            p,
            "{{\"account\":\"A{}\",\"owner\":\"{}\",\"city\":\"{}\",\"lots\":[",
            rng.below(1000),
            pick(rng, &PEOPLE),
            pick(rng, &CITIES)
        );
        for l in 0..1 + rng.below(3) {
            if l > 0 {
                p.push(',');
            }
            let _ = write!(
                p,
                "{{\"qty\":{},\"cost\":{:.2},\"acquired\":\"{}\",\"pledged\":{}}}",
                1 + rng.below(100),
                rng.price(),
                ts(rng),
                rng.below(3) == 0
            );
        }
        p.push_str("]}");
    }
    p.push(']');
}
