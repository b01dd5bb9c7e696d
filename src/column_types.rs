//! Column types a user asks for: hints by payload path (`--column-type`,
//! `[flatten.column_types]`), type detection (`--detect-types`), and the parsing of a
//! value into each type.
//!
//! A hint is `[TOPIC:]POINTER=TYPE`: POINTER is the RFC 6901 JSON pointer of the value in
//! the payload (`/order/placed_at`, as field metadata `bronze.path` records it), with `*`
//! for the elements of an array (`/currentprice/*/ts` is the `ts` column of the
//! `currentprice` child table; `/tags/*` its `value` column when the elements are
//! scalars). TYPE is one of [`ColumnType`]'s texts.
//!
//! What a conversion keeps ([`ColumnType`]): a value that does not convert exactly is
//! null in its column and kept in `_rescued_data` under its pointer, so no value is lost;
//! a timestamp is kept as its instant in UTC: its offset (`+02:00`) and the way its text
//! was written (`T` or space, fraction digits) are normalised away, not rescued.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The type a hinted column is written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// `string`: strings as they are; any other value as its JSON text.
    String,
    /// `boolean`: JSON booleans.
    Boolean,
    /// `int64`: JSON integers within int64.
    Int64,
    /// `float64`: JSON numbers a float64 holds (integers up to 2^53).
    Float64,
    /// `decimal(P,S)`: numbers, or strings holding a number, with at most `S` fractional
    /// digits (after dropping trailing zeros) and `P` digits in all; P ≤ 38, S ≤ P.
    Decimal(u8, i8),
    /// `date`: `YYYY-MM-DD` strings.
    Date,
    /// `timestamp`: RFC 3339 strings with `Z` or an offset, converted to UTC, at most
    /// microsecond precision (a tz-aware timestamp, UTC, microseconds).
    Timestamp,
    /// `json`: every value as its JSON text (`bronze.json` column).
    Json,
}

/// The types [`ColumnType`] reads, as an error message lists them.
pub const TYPES: &str = "string, boolean, int64, float64, decimal(P,S), date, timestamp, json";

/// Largest decimal precision (Delta's and Arrow's `Decimal128`).
pub const MAX_PRECISION: u8 = 38;

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::String => f.write_str("string"),
            ColumnType::Boolean => f.write_str("boolean"),
            ColumnType::Int64 => f.write_str("int64"),
            ColumnType::Float64 => f.write_str("float64"),
            ColumnType::Decimal(p, s) => write!(f, "decimal({p},{s})"),
            ColumnType::Date => f.write_str("date"),
            ColumnType::Timestamp => f.write_str("timestamp"),
            ColumnType::Json => f.write_str("json"),
        }
    }
}

impl FromStr for ColumnType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        Ok(match t.as_str() {
            "string" => ColumnType::String,
            "boolean" => ColumnType::Boolean,
            "int64" => ColumnType::Int64,
            "float64" => ColumnType::Float64,
            "date" => ColumnType::Date,
            "timestamp" => ColumnType::Timestamp,
            "json" => ColumnType::Json,
            _ => return decimal_type(&t, s),
        })
    }
}

/// `decimal(P,S)`, or the error naming `given`.
fn decimal_type(t: &str, given: &str) -> Result<ColumnType, String> {
    let unknown = || format!("unknown type {given:?}; the types are {TYPES}");
    let inner = t
        .strip_prefix("decimal(")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(unknown)?;
    let (p, s) = inner.split_once(',').ok_or_else(unknown)?;
    let (p, s) = match (p.trim().parse::<u8>(), s.trim().parse::<u8>()) {
        (Ok(p), Ok(s)) => (p, s),
        _ => {
            return Err(format!(
                "{given:?}: precision and scale are whole numbers, as in decimal(18,2)"
            ));
        }
    };
    if p == 0 || p > MAX_PRECISION {
        return Err(format!("{given:?}: the precision is 1 to {MAX_PRECISION}"));
    }
    if s > p {
        return Err(format!("{given:?}: the scale is at most the precision"));
    }
    Ok(ColumnType::Decimal(p, s as i8))
}

impl Serialize for ColumnType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ColumnType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The type of a column as a hint names it (`string`, `json`, `decimal(18,2)`), or
/// Arrow's name for a type no hint names (`timestamp_ntz` for a timestamp without a time
/// zone).
pub fn type_text(dt: &arrow::datatypes::DataType, json: bool) -> String {
    use arrow::datatypes::DataType;
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 if json => "json".into(),
        DataType::Utf8 | DataType::LargeUtf8 => "string".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Int64 => "int64".into(),
        DataType::Float64 => "float64".into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp".into(),
        DataType::Timestamp(_, None) => "timestamp_ntz".into(),
        other => other.to_string(),
    }
}

/// A type `--detect-types` finds in string columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DetectType {
    /// Every value an RFC 3339 timestamp with `Z` or an offset: a `timestamp` column.
    Timestamp,
    /// Every value a calendar date (`2026-01-15`): a `date` column.
    Date,
}

/// A hint as given: `[TOPIC:]POINTER`, split into the topic (when given) and the pointer.
/// A pointer starts with `/` (or is empty, the whole payload), so the topic is what comes
/// before the first `:/`.
pub fn split_key(key: &str) -> (Option<&str>, &str) {
    if key.is_empty() || key.starts_with('/') {
        return (None, key);
    }
    match key.find(":/") {
        Some(i) => (Some(&key[..i]), &key[i + 1..]),
        None => (None, key),
    }
}

/// Refuses a pointer that is not an RFC 6901 JSON pointer (`/a/b`, `~0` for `~`, `~1`
/// for `/`), saying why.
pub fn check_pointer(pointer: &str) -> Result<(), String> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(format!(
            "{pointer:?} is not a JSON pointer: it starts with `/` (`/order/placed_at`, `/prices/*/ts` for an array's elements)"
        ));
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(format!(
                "{pointer:?} is not a JSON pointer: `~` is written `~0` and `/` in a key `~1`"
            ));
        }
    }
    Ok(())
}

/// Parses `[TOPIC:]POINTER=TYPE` (`--column-type`): the key as `[flatten.column_types]`
/// takes it, and the type.
pub fn parse_hint(s: &str) -> Result<(String, ColumnType), String> {
    let (key, ty) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("{s:?} is not [TOPIC:]POINTER=TYPE (e.g. /amount=decimal(18,2))"))?;
    let (topic, pointer) = split_key(key);
    if topic == Some("") {
        return Err(format!("{s:?}: the topic before `:` is empty"));
    }
    check_pointer(pointer).map_err(|e| format!("{s:?}: {e}"))?;
    let ty = ty.parse().map_err(|e| format!("{s:?}: {e}"))?;
    Ok((key.to_string(), ty))
}

/// Microseconds since the Unix epoch of an RFC 3339 timestamp with `Z` or an offset (`T`
/// or a space between date and time); `None` for anything else, or a value with digits
/// below the microsecond.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    // Cheap shape checks first: detection tries every string of a column.
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    // Digits below the nanosecond would be dropped by the parser: refused here.
    let fraction = s[19..]
        .strip_prefix('.')
        .map_or(0, |f| f.bytes().take_while(u8::is_ascii_digit).count());
    if fraction > 9 {
        return None;
    }
    let t = chrono::DateTime::parse_from_rfc3339(s).ok()?;
    if t.timestamp_subsec_nanos() % 1000 != 0 {
        return None;
    }
    Some(t.timestamp_micros())
}

/// The canonical text of a timestamp: RFC 3339 in UTC with `Z`, fractional seconds in
/// 0, 3 or 6 digits.
pub fn timestamp_text(micros: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

/// Days since the Unix epoch of a `YYYY-MM-DD` date; `None` for anything else.
pub fn parse_date(s: &str) -> Option<i32> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10
        || b[4] != b'-'
        || b[7] != b'-'
        || !digits(0..4)
        || !digits(5..7)
        || !digits(8..10)
    {
        return None;
    }
    let d = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from(d.signed_duration_since(epoch).num_days()).ok()
}

/// The text of a date (days since the epoch): `YYYY-MM-DD`.
pub fn date_text(days: i32) -> Option<String> {
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    let d = epoch.checked_add_signed(chrono::TimeDelta::try_days(i64::from(days))?)?;
    Some(d.format("%Y-%m-%d").to_string())
}

/// The unscaled value of a number literal (`12.5`, `-3`, `1.25e2`) in `decimal(p,s)`;
/// `None` when it has more than `s` fractional digits (after trailing zeros), more than
/// `p` digits in all, or is not a number.
pub fn parse_decimal(text: &str, p: u8, s: i8) -> Option<i128> {
    let t = text.trim();
    let (neg, t) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i32>().ok()?),
        None => (t, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|c| c.is_ascii_digit())
        || !frac.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    // digits × 10^(exp - frac.len()), as digits with `scale` fractional ones.
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    let mut scale = i64::try_from(frac.len()).ok()? - i64::from(exp);
    let mut digits = digits.to_string();
    while scale > i64::from(s) {
        // Only zeros may be dropped.
        if digits.is_empty() {
            scale = i64::from(s);
            break;
        }
        if !digits.ends_with('0') {
            return None;
        }
        digits.pop();
        scale -= 1;
    }
    let pad = usize::try_from(i64::from(s) - scale).ok()?;
    if digits.len() + pad > usize::from(p) {
        return if digits.is_empty() { Some(0) } else { None };
    }
    digits.extend(std::iter::repeat_n('0', pad));
    let v: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

/// The text of an unscaled decimal with scale `s` (`1250`, 2 → `12.50`).
pub fn decimal_text(v: i128, s: i8) -> String {
    let digits = v.unsigned_abs().to_string();
    let s = usize::try_from(s).unwrap_or(0);
    let sign = if v < 0 { "-" } else { "" };
    if s == 0 {
        return format!("{sign}{digits}");
    }
    let digits = format!("{digits:0>width$}", width = s + 1);
    let (int, frac) = digits.split_at(digits.len() - s);
    format!("{sign}{int}.{frac}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_read_and_print_the_same_text() {
        for t in [
            "string",
            "boolean",
            "int64",
            "float64",
            "decimal(18,2)",
            "decimal(38,0)",
            "date",
            "timestamp",
            "json",
        ] {
            assert_eq!(t.parse::<ColumnType>().unwrap().to_string(), t);
        }
        assert_eq!("Decimal( 10 , 3 )".parse(), Ok(ColumnType::Decimal(10, 3)));
        for (bad, says) in [
            (
                "datetime",
                "unknown type \"datetime\"; the types are string, boolean",
            ),
            ("decimal(40,2)", "the precision is 1 to 38"),
            ("decimal(0,0)", "the precision is 1 to 38"),
            ("decimal(4,5)", "the scale is at most the precision"),
            ("decimal(4,-1)", "whole numbers"),
            ("decimal(18)", "unknown type"),
        ] {
            let err = bad.parse::<ColumnType>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn hints_name_their_topic_pointer_and_type() {
        assert_eq!(
            parse_hint("/amount=decimal(18,2)"),
            Ok(("/amount".to_string(), ColumnType::Decimal(18, 2)))
        );
        assert_eq!(
            parse_hint("market.trade:/ts=timestamp"),
            Ok(("market.trade:/ts".to_string(), ColumnType::Timestamp))
        );
        assert_eq!(split_key("market.trade:/ts"), (Some("market.trade"), "/ts"));
        assert_eq!(split_key("/a:/b"), (None, "/a:/b"));
        assert_eq!(split_key(""), (None, ""));
        for (bad, says) in [
            ("amount=int64", "\"amount\" is not a JSON pointer"),
            ("/amount", "is not [TOPIC:]POINTER=TYPE"),
            ("/a~2=int64", "`~` is written `~0`"),
            (":/a=int64", "the topic before `:` is empty"),
            (
                "/a=decimal(40,2)",
                "\"/a=decimal(40,2)\": \"decimal(40,2)\": the precision",
            ),
        ] {
            let err = parse_hint(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn timestamps_parse_to_utc_microseconds_and_refuse_the_rest() {
        let at = |s| parse_timestamp(s);
        assert_eq!(at("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(at("1970-01-01T02:00:00+02:00"), Some(0));
        assert_eq!(at("1970-01-01 00:00:01.5z"), Some(1_500_000));
        assert_eq!(at("1970-01-01T00:00:00.000001Z"), Some(1));
        assert_eq!(at("1970-01-01T00:00:00.000001000Z"), Some(1));
        for bad in [
            "n/a",
            "2026-01-15",
            "2026-01-15T10:00:00",
            "2026-01-15T10:00:00.0000001Z",
            "2026-01-15T10:00:00.1234567890123Z",
            "2026-02-30T10:00:00Z",
        ] {
            assert_eq!(at(bad), None, "{bad}");
        }
        assert_eq!(
            timestamp_text(at("2026-01-15T12:30:00.25+02:00").unwrap()).unwrap(),
            "2026-01-15T10:30:00.250Z"
        );
    }

    #[test]
    fn dates_parse_to_days_and_print_back() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(
            date_text(parse_date("2026-01-15").unwrap()).unwrap(),
            "2026-01-15"
        );
        for bad in ["2026-1-15", "2026-02-30", "2026-01-15T00:00:00Z", "today"] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn decimals_keep_every_digit_or_refuse() {
        let d = |t| parse_decimal(t, 18, 2);
        assert_eq!(d("12.5"), Some(1250));
        assert_eq!(d("-0.01"), Some(-1));
        assert_eq!(d("7"), Some(700));
        assert_eq!(d("1.2500"), Some(125));
        assert_eq!(d("1.25e2"), Some(12500));
        assert_eq!(d("125e-2"), Some(125));
        assert_eq!(d("0.000"), Some(0));
        assert_eq!(d("0e999"), Some(0));
        for bad in [
            "1.255", "1e999", "1e-3", "n/a", "", "-", ".", "1.2.3", "0x10",
        ] {
            assert_eq!(d(bad), None, "{bad}");
        }
        assert_eq!(
            parse_decimal("9999999999999999.99", 18, 2),
            Some(999_999_999_999_999_999)
        );
        assert_eq!(parse_decimal("99999999999999999.99", 18, 2), None);
        assert_eq!(decimal_text(1250, 2), "12.50");
        assert_eq!(decimal_text(-1, 2), "-0.01");
        assert_eq!(decimal_text(7, 0), "7");
    }
}
