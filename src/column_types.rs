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
//! null in its column and kept in `_rescued_data` under its pointer, so no value is lost.
//! A value that converts is not rescued, and these are normalised away:
//! - a timestamp is kept as its instant in UTC: its offset (`+02:00`, `-00:00`) and the
//!   way its text was written (`T`, `t` or space, `Z` or `z`, fraction digits) are gone;
//! - a decimal is kept as its value: a string holding one becomes that number, and the
//!   literal's form (an exponent, trailing zeros, the sign of a zero: `-0` and `-0.00`
//!   are `0.00`, a decimal having no negative zero) is gone;
//! - `string` writes a number or boolean as its literal and an empty object or array
//!   (or one below the depth limit) as its JSON text: `42` and `"42"` read the same;
//! - `int64` and `float64` keep a number's value, not its literal (`1.50` is `1.5`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The type a hinted column is written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// `string`: strings as they are; a number or boolean as its literal, an empty
    /// object or array (or one below the depth limit) as its JSON text.
    String,
    /// `boolean`: JSON booleans.
    Boolean,
    /// `int64`: JSON integers within int64.
    Int64,
    /// `float64`: JSON numbers a float64 holds (integers up to 2^53).
    Float64,
    /// `decimal(P,S)`: numbers, or strings holding a JSON number (nothing around it: not
    /// ` 5`, `+5`, `.5` nor `5.`), with at most `S` fractional digits (after dropping
    /// trailing zeros) and `P` digits in all; P ≤ 38, S ≤ P.
    Decimal(u8, i8),
    /// `date`: `YYYY-MM-DD` strings, 0001-01-01 to 9999-12-31.
    Date,
    /// `timestamp`: RFC 3339 strings with `Z` or an offset, converted to UTC, at most
    /// microsecond precision (a tz-aware timestamp, UTC, microseconds), within
    /// 0001-01-01T00:00:00Z ..= 9999-12-31T23:59:59.999999Z once in UTC; a leap second
    /// (`:60`) is not taken.
    Timestamp,
    /// `json`: every value as its JSON text (`bronze.json` column).
    Json,
    /// `variant`: every value kept whole as a Parquet Variant (Delta's `variant` type, the
    /// `variantType` table feature): objects and arrays are not flattened, numbers keep
    /// their exact value (`crate::flatten` documents the encoding).
    Variant,
}

/// The types [`ColumnType`] reads, as an error message lists them.
pub const TYPES: &str =
    "string, boolean, int64, float64, decimal(P,S), date, timestamp, json, variant";

/// Largest decimal precision (Delta's and Arrow's `Decimal128`).
pub const MAX_PRECISION: u8 = 38;

impl ColumnType {
    /// Whether a hint's text could name this type: a decimal's precision 1 to
    /// [`MAX_PRECISION`] and its scale 0 to the precision (a type built in code may not be).
    pub fn is_valid(self) -> bool {
        match self {
            ColumnType::Decimal(p, s) => {
                (1..=MAX_PRECISION).contains(&p) && u8::try_from(s).is_ok_and(|s| s <= p)
            }
            _ => true,
        }
    }
}

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
            ColumnType::Variant => f.write_str("variant"),
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
            "variant" => ColumnType::Variant,
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
        other if is_variant(other) => "variant".into(),
        other => other.to_string(),
    }
}

/// Whether `t` is a Delta `variant` column as Arrow holds it: a struct of `metadata` and
/// `value`, both binary and never null (what the Delta kernel reads and bronze writes).
pub fn is_variant(t: &arrow::datatypes::DataType) -> bool {
    match t {
        arrow::datatypes::DataType::Struct(fields) => {
            fields.len() == 2
                && fields.iter().zip(["metadata", "value"]).all(|(f, name)| {
                    f.name() == name
                        && f.data_type() == &arrow::datatypes::DataType::Binary
                        && !f.is_nullable()
                })
        }
        _ => false,
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

/// Microseconds since the Unix epoch of 0001-01-01T00:00:00Z, the first instant a
/// `timestamp` column takes.
pub const MIN_TIMESTAMP_MICROS: i64 = -62_135_596_800_000_000;
/// Microseconds since the Unix epoch of 9999-12-31T23:59:59.999999Z, the last instant a
/// `timestamp` column takes.
pub const MAX_TIMESTAMP_MICROS: i64 = 253_402_300_799_999_999;
/// Days since the Unix epoch of 0001-01-01, the first day a `date` column takes.
pub const MIN_DATE_DAYS: i32 = -719_162;
/// Days since the Unix epoch of 9999-12-31, the last day a `date` column takes.
pub const MAX_DATE_DAYS: i32 = 2_932_896;

/// Whether the bytes of `b` at `range` are all ASCII digits (false when `b` is shorter).
fn digits_at(b: &[u8], range: std::ops::Range<usize>) -> bool {
    b.get(range)
        .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
}

/// Whether `b` starts with `YYYY-MM-DD[T ]HH:MM:SS` in ASCII digits (false when shorter).
fn date_time_shaped(b: &[u8]) -> bool {
    digits_at(b, 0..4)
        && b.get(4) == Some(&b'-')
        && digits_at(b, 5..7)
        && b.get(7) == Some(&b'-')
        && digits_at(b, 8..10)
        && matches!(b.get(10), Some(b'T' | b't' | b' '))
        && digits_at(b, 11..13)
        && b.get(13) == Some(&b':')
        && digits_at(b, 14..16)
        && b.get(16) == Some(&b':')
        && digits_at(b, 17..19)
}

/// Microseconds since the Unix epoch of an RFC 3339 timestamp with `Z` or an offset (`T`
/// or a space between date and time); `None` for anything else: a value with digits
/// below the microsecond, a leap second (`:60`, which would silently become the next
/// minute's `:00`), or an instant outside 0001-01-01T00:00:00Z ..=
/// 9999-12-31T23:59:59.999999Z once in UTC.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    // Cheap shape checks first (detection tries every string of a column), on bytes:
    // the first 19 are ASCII once they pass, so slicing after them is on a char boundary.
    let b = s.as_bytes();
    let shaped = b.len() >= 20 && date_time_shaped(b);
    if !shaped || b[17] >= b'6' {
        // `:60` is a leap second, refused; above is no second at all.
        return None;
    }
    // Digits below the nanosecond would be dropped by the parser: refused here.
    let fraction = s
        .get(19..)?
        .strip_prefix('.')
        .map_or(0, |f| f.bytes().take_while(u8::is_ascii_digit).count());
    if fraction > 9 {
        return None;
    }
    let t = chrono::DateTime::parse_from_rfc3339(s).ok()?;
    if t.timestamp_subsec_nanos() % 1000 != 0 {
        return None;
    }
    Some(t.timestamp_micros()).filter(|m| (MIN_TIMESTAMP_MICROS..=MAX_TIMESTAMP_MICROS).contains(m))
}

/// Microseconds since the Unix epoch of a date and time without a zone
/// (`2026-05-06T07:08:09`, `T` or a space, up to six fractional digits), as a
/// `timestamp_ntz` column holds it; `None` for anything else: a value with a zone (which
/// would have to be dropped or applied, a guess either way), a leap second, a time outside
/// years 1 to 9999.
pub fn parse_local_timestamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let shaped = b.len() >= 19 && date_time_shaped(b);
    if !shaped || b[17] >= b'6' {
        return None;
    }
    let fraction = match &s[19..] {
        "" => "",
        f => f
            .strip_prefix('.')
            .filter(|d| (1..=6).contains(&d.len()) && d.bytes().all(|c| c.is_ascii_digit()))?,
    };
    let t = chrono::NaiveDateTime::parse_from_str(
        &s[..19].replace(['t', ' '], "T"),
        "%Y-%m-%dT%H:%M:%S",
    )
    .ok()?;
    let micros = t.and_utc().timestamp_micros() + format!("{fraction:0<6}").parse::<i64>().ok()?;
    Some(micros).filter(|m| (MIN_TIMESTAMP_MICROS..=MAX_TIMESTAMP_MICROS).contains(m))
}

/// The text of a `timestamp_ntz` value: a date and time without a zone, fractional
/// seconds in 0, 3 or 6 digits (what [`parse_local_timestamp`] reads back).
pub fn local_timestamp_text(micros: i64) -> Option<String> {
    let zoned = timestamp_text(micros)?;
    Some(zoned.trim_end_matches('Z').to_string())
}

/// The canonical text of a timestamp: RFC 3339 in UTC with `Z`, fractional seconds in
/// 0, 3 or 6 digits.
pub fn timestamp_text(micros: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

/// Days since the Unix epoch of a `YYYY-MM-DD` date from 0001-01-01 to 9999-12-31;
/// `None` for anything else.
pub fn parse_date(s: &str) -> Option<i32> {
    let b = s.as_bytes();
    if b.len() != 10
        || b[4] != b'-'
        || b[7] != b'-'
        || !digits_at(b, 0..4)
        || !digits_at(b, 5..7)
        || !digits_at(b, 8..10)
    {
        return None;
    }
    let d = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from(d.signed_duration_since(epoch).num_days())
        .ok()
        .filter(|d| (MIN_DATE_DAYS..=MAX_DATE_DAYS).contains(d))
}

/// The text of a date (days since the epoch): `YYYY-MM-DD`.
pub fn date_text(days: i32) -> Option<String> {
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    let d = epoch.checked_add_signed(chrono::TimeDelta::try_days(i64::from(days))?)?;
    Some(d.format("%Y-%m-%d").to_string())
}

/// A JSON number literal split into its parts ([`json_number`]).
struct JsonNumber<'a> {
    negative: bool,
    /// The integer digits.
    int: &'a str,
    /// The fraction digits.
    frac: &'a str,
    exp: i32,
}

/// A JSON number literal (`-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`, nothing around it)
/// split into its sign, integer digits, fraction digits and exponent; `None` for any
/// other text, or an exponent beyond `i32`.
fn json_number(text: &str) -> Option<JsonNumber<'_>> {
    let (neg, t) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let b = t.as_bytes();
    let int_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if int_len == 0 || (int_len > 1 && b[0] == b'0') {
        return None;
    }
    // Each split is after ASCII digits only: on a char boundary.
    let (int, rest) = t.split_at(int_len);
    let (frac, rest) = match rest.strip_prefix('.') {
        Some(r) => {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 {
                return None;
            }
            r.split_at(n)
        }
        None => ("", rest),
    };
    let exp = match rest.strip_prefix(['e', 'E']) {
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            e.parse::<i32>().ok()?
        }
        None if rest.is_empty() => 0,
        None => return None,
    };
    Some(JsonNumber {
        negative: neg,
        int,
        frac,
        exp,
    })
}

/// The unscaled value of a JSON number literal (`12.5`, `-3`, `1.25e2`) in
/// `decimal(p,s)`; `None` when it has more than `s` fractional digits (after trailing
/// zeros), more than `p` digits in all, or is not a JSON number (`+5`, `.5`, `5.`,
/// ` 5`). A negative zero (`-0`, `-0.00`) is zero: a decimal has no sign of zero.
pub fn parse_decimal(text: &str, p: u8, s: i8) -> Option<i128> {
    let JsonNumber {
        negative: neg,
        int,
        frac,
        exp,
    } = json_number(text)?;
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
    fn local_timestamps_take_no_zone_and_print_back() {
        for text in [
            "2026-05-06T07:08:09",
            "0001-01-01T00:00:00",
            "9999-12-31T23:59:59.999999",
            "1969-12-31T23:59:59.5",
        ] {
            let micros = parse_local_timestamp(text).unwrap_or_else(|| panic!("{text}"));
            let back = local_timestamp_text(micros).unwrap();
            assert_eq!(
                parse_local_timestamp(&back),
                Some(micros),
                "{text} -> {back}"
            );
        }
        assert_eq!(
            parse_local_timestamp("1970-01-01 00:00:01.25"),
            Some(1_250_000)
        );
        for refused in [
            "2026-05-06T07:08:09Z",
            "2026-05-06T07:08:09+02:00",
            "2026-05-06T07:08:60",
            "2026-02-30T00:00:00",
            "2026-05-06T07:08:09.1234567",
            "2026-05-06T07:08:09.",
            "2026-05-06",
            "2026-05-06T07:08:0é",
        ] {
            assert_eq!(parse_local_timestamp(refused), None, "{refused}");
        }
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

    #[test]
    fn leap_seconds_and_instants_outside_years_1_to_9999_are_refused() {
        let at = |s| parse_timestamp(s);
        for bad in [
            "2016-12-31T23:59:60Z",
            "2016-12-31T23:59:60.5Z",
            "2016-12-31 23:59:60+00:00",
            "0000-01-01T00:00:00Z",
            "0001-01-01T00:30:00+01:00",
            "9999-12-31T23:59:59-01:00",
        ] {
            assert_eq!(at(bad), None, "{bad}");
        }
        assert_eq!(at("0001-01-01T00:00:00Z"), Some(MIN_TIMESTAMP_MICROS));
        assert_eq!(at("0001-01-01T01:00:00+01:00"), Some(MIN_TIMESTAMP_MICROS));
        assert_eq!(
            at("9999-12-31T23:59:59.999999Z"),
            Some(MAX_TIMESTAMP_MICROS)
        );
        assert_eq!(
            at("9999-12-31T22:59:59.999999-01:00"),
            Some(MAX_TIMESTAMP_MICROS)
        );
        assert_eq!(
            timestamp_text(MIN_TIMESTAMP_MICROS).unwrap(),
            "0001-01-01T00:00:00Z"
        );
        assert_eq!(
            timestamp_text(MAX_TIMESTAMP_MICROS).unwrap(),
            "9999-12-31T23:59:59.999999Z"
        );
        assert_eq!(parse_date("0000-12-31"), None);
        assert_eq!(parse_date("0001-01-01"), Some(MIN_DATE_DAYS));
        assert_eq!(parse_date("9999-12-31"), Some(MAX_DATE_DAYS));
    }

    #[test]
    fn non_ascii_next_to_the_fixed_width_fields_is_refused_not_a_panic() {
        assert_eq!(parse_timestamp("2026-01-15 日本語です"), None);
        assert_eq!(parse_timestamp("2026-01-15T10:00:0日Z"), None);
        for base in ["2026-01-15T10:00:00.123456+02:00", "2026-01-15", "-12.50e1"] {
            for c in ['é', '日', '€', '😀'] {
                for i in 0..=base.len() {
                    // `c` inserted before byte `i`, and put in place of the byte at `i`.
                    let inserted = format!("{}{c}{}", &base[..i], &base[i..]);
                    let replaced = format!("{}{c}{}", &base[..i], base.get(i + 1..).unwrap_or(""));
                    for s in [inserted, replaced] {
                        assert_eq!(parse_timestamp(&s), None, "{s}");
                        assert_eq!(parse_date(&s), None, "{s}");
                        assert_eq!(parse_decimal(&s, 38, 6), None, "{s}");
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Whatever the text, the parsers answer and never panic; what they take
        /// prints back as a value they take again.
        #[test]
        fn parsers_never_panic(
            s in "[0-9\\-:.tTzZeE+ 日é😀]{0,40}",
            any in ".{0,40}",
        ) {
            for s in [s.as_str(), any.as_str()] {
                if let Some(m) = parse_timestamp(s) {
                    let text = timestamp_text(m).unwrap();
                    proptest::prop_assert_eq!(parse_timestamp(&text), Some(m));
                }
                if let Some(d) = parse_date(s) {
                    proptest::prop_assert_eq!(parse_date(&date_text(d).unwrap()), Some(d));
                }
                for (p, sc) in [(38, 0), (18, 2), (38, 38), (1, 0)] {
                    if let Some(v) = parse_decimal(s, p, sc) {
                        proptest::prop_assert_eq!(parse_decimal(&decimal_text(v, sc), p, sc), Some(v));
                    }
                }
            }
        }
    }

    #[test]
    fn decimals_take_json_number_syntax_only() {
        let d = |t| parse_decimal(t, 18, 2);
        assert_eq!(d("1.5e3"), Some(150_000));
        assert_eq!(d("15E-1"), Some(150));
        assert_eq!(d("1e+2"), Some(10_000));
        assert_eq!(d("-0.5"), Some(-50));
        assert_eq!(d("-0"), Some(0));
        assert_eq!(d("-0.00"), Some(0));
        assert_eq!(d("-0e5"), Some(0));
        for bad in [
            " 5",
            "5 ",
            "+5",
            ".5",
            "5.",
            "-.5",
            "01",
            "-01",
            "1e",
            "1e+",
            "1e-",
            "--1",
            "1.5e3.0",
            "0x1",
            "1_000",
            "5e2147483648",
            "Infinity",
            "NaN",
            "１",
        ] {
            assert_eq!(d(bad), None, "{bad:?}");
        }
    }
}
