//! JSON values as Parquet Variant values (`metadata` and `value` bytes), built straight
//! from bronze's parse ([`Doc`]), never through JSON text again.
//!
//! What a Variant holds, value for value:
//! - `null`, `true`, `false`, strings (escapes decoded), objects and arrays, empty ones
//!   included. Keys keep their case.
//! - An integer that fits `i64`: the narrowest of int8, int16, int32 and int64.
//! - An integer beyond `i64`, or a literal with a fraction and no exponent, whose digits
//!   and scale fit decimal(38): the narrowest of decimal4, decimal8 and decimal16 (`1.10`
//!   keeps its scale, 2).
//! - A literal with an exponent: double when an `f64` holds it exactly enough to print it
//!   back (`6.02e23`), as Spark's `parse_json` reads it; else a decimal when one holds it
//!   exactly (`1.2345678901234567890e5`).
//! - Beyond decimal(38), a double when the literal is the double's own shortest form
//!   (`1.7976931348623157e308`, `1e-40` written out: what JavaScript and Python print).
//! - A number that fits none of them (`1e400`, 40 significant digits of an integer):
//!   Variant null in place, and its literal in `_rescued_data` under its pointer.
//! - `-0` and `-0.0` are zero: an integer or a decimal has no negative zero.
//! - A key repeated in one object: the last value is kept (as `json.loads` does), the
//!   earlier ones rescued under `dup:<pointer>`, so each object's keys stay unique as the
//!   Variant spec requires.
//! - A value nested deeper than [`MAX_DEPTH`] is rescued whole (Variant null in place).

use parquet_variant::{
    ListBuilder, ObjectBuilder, ObjectFieldBuilder, Variant, VariantBuilder, VariantBuilderExt,
    VariantDecimal4, VariantDecimal8, VariantDecimal16,
};

use std::borrow::Cow;
use std::collections::BTreeSet;

use crate::json::{Doc, Kind, NumClass};

/// Objects and arrays nested deeper than this are rescued whole: the builder recurses,
/// and a topic task's stack is bounded.
pub const MAX_DEPTH: usize = 256;

/// A JSON value as a Variant, and what no Variant value holds exactly.
#[derive(Debug, Default)]
pub struct Encoded {
    /// The Variant's metadata (its dictionary of keys).
    pub metadata: Vec<u8>,
    /// The Variant's value.
    pub value: Vec<u8>,
    /// `(pointer, JSON text)` of each value kept out of the Variant: numbers beyond every
    /// Variant number type, earlier values of a repeated key (`dup:<pointer>`), values
    /// nested too deep.
    pub rescued: Vec<(String, String)>,
}

/// Encodes node `node` of `doc`, found at JSON pointer `at` (the prefix of every rescued
/// pointer).
pub fn encode(doc: &Doc<'_>, node: usize, at: &str) -> Encoded {
    let mut walk = Walk {
        pointer: at.to_string(),
        rescued: Vec::new(),
    };
    // A sorted dictionary: readers find a key by binary search, and an empty key is a
    // valid first entry (an unsorted dictionary with one fails arrow-rs's validation).
    let keys = keys(doc, node);
    let mut builder = VariantBuilder::new().with_field_names(keys.iter().map(|k| k.as_ref()));
    walk.put(&mut builder, doc, node, 0);
    let (metadata, value) = builder.finish();
    Encoded {
        metadata,
        value,
        rescued: walk.rescued,
    }
}

/// Every key of the objects in value `node` of `doc`, sorted (the Variant's dictionary).
fn keys<'a>(doc: &Doc<'a>, node: usize) -> BTreeSet<Cow<'a, str>> {
    let mut keys = BTreeSet::new();
    keys_into(doc, node, 0, &mut keys);
    keys
}

/// Adds the keys of value `node` (at `depth`) to `keys`, down to [`MAX_DEPTH`] as the
/// walk goes.
fn keys_into<'a>(doc: &Doc<'a>, node: usize, depth: usize, keys: &mut BTreeSet<Cow<'a, str>>) {
    let mut todo = vec![(node, depth)];
    while let Some((i, depth)) = todo.pop() {
        match doc.kind(i) {
            _ if depth >= MAX_DEPTH => {}
            Kind::Object => {
                for (k, v) in doc.members(i) {
                    keys.insert(doc.str(k));
                    todo.push((v, depth + 1));
                }
            }
            Kind::Array => todo.extend(doc.elements(i).map(|e| (e, depth + 1))),
            // Past the parse's depth limit: the walk parses it again, and so does this.
            Kind::Raw => {
                if let Ok(sub) = Doc::parse(doc.raw(i), MAX_DEPTH - depth) {
                    let mut inner = BTreeSet::new();
                    keys_into(&sub, sub.root(), depth, &mut inner);
                    keys.extend(inner.into_iter().map(|k| Cow::Owned(k.into_owned())));
                }
            }
            _ => {}
        }
    }
}

/// Rescued key `key` of a value found at pointer `at`, from the document's root:
/// `/x` → `<at>/x`, `dup:/x` → `dup:<at>/x`.
pub fn under(at: &str, key: &str) -> String {
    match key.strip_prefix("dup:") {
        Some(rest) => format!("dup:{at}{rest}"),
        None => format!("{at}{key}"),
    }
}

/// One encoding: where it is in the value, and what it rescued.
struct Walk {
    /// The pointer of the value being encoded.
    pointer: String,
    rescued: Vec<(String, String)>,
}

impl Walk {
    /// Appends value `i` of `doc` to `b`.
    fn put<B: VariantBuilderExt>(&mut self, b: &mut B, doc: &Doc<'_>, i: usize, depth: usize) {
        match doc.kind(i) {
            Kind::Null => b.append_value(Variant::Null),
            Kind::Bool(v) => b.append_value(v),
            Kind::Str { .. } => b.append_value(&*doc.str(i)),
            Kind::Num(class) => match number(doc.raw(i), class) {
                Some(n) => n.append(b),
                None => self.rescue(b, doc.raw(i)),
            },
            Kind::Array | Kind::Object if depth >= MAX_DEPTH => self.rescue(b, doc.raw(i)),
            Kind::Array => {
                // A nested builder is refused only where a value is already written,
                // which the walk never does; the value is then rescued, never lost.
                let built = match b.try_new_list() {
                    Ok(mut list) => {
                        self.list(&mut list, doc, i, depth);
                        list.finish();
                        true
                    }
                    Err(_) => false,
                };
                if !built {
                    self.rescue(b, doc.raw(i));
                }
            }
            Kind::Object => {
                let built = match b.try_new_object() {
                    Ok(mut object) => {
                        self.object(&mut object, doc, i, depth);
                        object.finish();
                        true
                    }
                    Err(_) => false,
                };
                if !built {
                    self.rescue(b, doc.raw(i));
                }
            }
            // A container past the parse's depth limit: parsed again from its text.
            Kind::Raw => match Doc::parse(doc.raw(i), MAX_DEPTH.saturating_sub(depth)) {
                Ok(sub) if sub.kind(sub.root()) != Kind::Raw => {
                    self.put(b, &sub, sub.root(), depth)
                }
                _ => self.rescue(b, doc.raw(i)),
            },
        }
    }

    /// Appends the elements of array `i`, each at its index.
    fn list<S>(&mut self, list: &mut ListBuilder<'_, S>, doc: &Doc<'_>, i: usize, depth: usize)
    where
        S: parquet_variant::BuilderSpecificState,
    {
        let len = self.pointer.len();
        for (n, e) in doc.elements(i).enumerate() {
            self.pointer.push('/');
            self.pointer.push_str(&n.to_string());
            self.put(list, doc, e, depth + 1);
            self.pointer.truncate(len);
        }
    }

    /// Inserts the members of object `i`: each key's last value; earlier values of a
    /// repeated key are rescued under `dup:<pointer>`.
    fn object<S>(&mut self, object: &mut ObjectBuilder<'_, S>, doc: &Doc<'_>, i: usize, depth: usize)
    where
        S: parquet_variant::BuilderSpecificState,
    {
        let members: Vec<(std::borrow::Cow<'_, str>, usize)> =
            doc.members(i).map(|(k, v)| (doc.str(k), v)).collect();
        let last = last_of_each_key(&members);
        let len = self.pointer.len();
        for (n, (key, v)) in members.iter().enumerate() {
            self.pointer.push('/');
            push_token(&mut self.pointer, key);
            if last(n, key) != n {
                self.rescued
                    .push((format!("dup:{}", self.pointer), doc.raw(*v).to_string()));
            } else {
                let mut field = ObjectFieldBuilder::new(key, object);
                self.put(&mut field, doc, *v, depth + 1);
            }
            self.pointer.truncate(len);
        }
    }

    /// Variant null in place of `text`, which is rescued under the current pointer.
    fn rescue<B: VariantBuilderExt>(&mut self, b: &mut B, text: &str) {
        b.append_value(Variant::Null);
        self.rescued.push((self.pointer.clone(), text.to_string()));
    }
}

/// For each member `(n, key)` of `members`, the index of `key`'s last occurrence: a few
/// members are compared pairwise, more through a map (wide objects stay linear).
fn last_of_each_key<'m>(
    members: &'m [(Cow<'_, str>, usize)],
) -> impl Fn(usize, &str) -> usize + 'm {
    let index: Option<std::collections::HashMap<&str, usize>> = (members.len() > 16)
        .then(|| members.iter().enumerate().map(|(n, (k, _))| (k.as_ref(), n)).collect());
    move |n, key| match &index {
        Some(index) => index.get(key).copied().unwrap_or(n),
        None => members[n..]
            .iter()
            .rposition(|(k, _)| k == key)
            .map_or(n, |p| n + p),
    }
}

/// Appends `key` to a JSON pointer as one token (`~` as `~0`, `/` as `~1`, RFC 6901).
fn push_token(pointer: &mut String, key: &str) {
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// A JSON number as the Variant number that holds it exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Number {
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Decimal4(VariantDecimal4),
    Decimal8(VariantDecimal8),
    Decimal16(VariantDecimal16),
    Double(f64),
}

impl Number {
    fn append<B: VariantBuilderExt>(self, b: &mut B) {
        match self {
            Number::Int8(v) => b.append_value(v),
            Number::Int16(v) => b.append_value(v),
            Number::Int32(v) => b.append_value(v),
            Number::Int64(v) => b.append_value(v),
            Number::Decimal4(v) => b.append_value(v),
            Number::Decimal8(v) => b.append_value(v),
            Number::Decimal16(v) => b.append_value(v),
            Number::Double(v) => b.append_value(v),
        }
    }
}

/// The Variant number of literal `raw` (of class `class`), or `None` when no Variant
/// number holds it exactly.
fn number(raw: &str, class: NumClass) -> Option<Number> {
    if class == NumClass::Int {
        let v: i64 = raw.parse().ok()?;
        return Some(narrowest_int(v));
    }
    let exponent = raw.contains(['e', 'E']);
    if exponent && class == NumClass::Float {
        return raw.parse::<f64>().ok().map(Number::Double);
    }
    decimal(raw).or_else(|| exact_double(raw).map(Number::Double))
}

/// The `f64` of literal `raw` when it holds its exact value (its shortest form prints the
/// same digits: `1.7976931348623157e308`, `1e-40`); `None` when it rounds or overflows.
fn exact_double(raw: &str) -> Option<f64> {
    let f: f64 = raw.parse().ok().filter(|f: &f64| f.is_finite())?;
    (exact_value(&format!("{f:e}"))? == exact_value(raw)?).then_some(f)
}

/// A number literal's exact value as `<sign><digits>e<exponent>`, its digits without
/// leading or trailing zeros (`0` for zero); `None` when the exponent is beyond `i64`.
pub(crate) fn exact_value(literal: &str) -> Option<String> {
    let (sign, body) = match literal.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", literal),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], body[at + 1..].parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    if trimmed.is_empty() {
        return Some("0".into());
    }
    let exp = exponent
        .checked_sub(fraction.len() as i64)?
        .checked_add((digits.len() - trimmed.len()) as i64)?;
    Some(format!("{sign}{trimmed}e{exp}"))
}

/// The narrowest integer type holding `v`.
fn narrowest_int(v: i64) -> Number {
    if let Ok(v) = i8::try_from(v) {
        Number::Int8(v)
    } else if let Ok(v) = i16::try_from(v) {
        Number::Int16(v)
    } else if let Ok(v) = i32::try_from(v) {
        Number::Int32(v)
    } else {
        Number::Int64(v)
    }
}

/// Most digits a decimal16 holds, and its largest scale.
const MAX_PRECISION: usize = 38;

/// Literal `raw` as an exact decimal of at most 38 digits and scale at most 38: a
/// fraction's digits are its scale (`1.10` → 110, scale 2); an exponent moves the point
/// (`1.5e3` → 1500, scale 0; `15e-4` → 15, scale 4); `None` when no decimal(38)
/// holds it.
fn decimal(raw: &str) -> Option<Number> {
    let (negative, body) = match raw.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, raw),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], body[at + 1..].parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = format!("{whole}{fraction}");
    let mut scale = (fraction.len() as i64).checked_sub(exponent)?;
    if scale < 0 {
        // A whole number: the exponent's zeros are digits.
        let zeros = usize::try_from(-scale).ok().filter(|z| *z <= MAX_PRECISION)?;
        digits.extend(std::iter::repeat_n('0', zeros));
        scale = 0;
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > MAX_PRECISION || scale > MAX_PRECISION as i64 {
        return None;
    }
    let unscaled: i128 = if significant.is_empty() {
        0
    } else {
        significant.parse().ok()?
    };
    let unscaled = if negative { -unscaled } else { unscaled };
    let scale = u8::try_from(scale).ok()?;
    let precision = significant.len().max(scale as usize).max(1);
    // A decimal's precision bounds its unscaled digits; the scale may exceed them
    // (`0.001` is 1 at scale 3), up to the type's largest precision.
    if precision <= 9 {
        let v = VariantDecimal4::try_new(i32::try_from(unscaled).ok()?, scale).ok()?;
        Some(Number::Decimal4(v))
    } else if precision <= 18 {
        let v = VariantDecimal8::try_new(i64::try_from(unscaled).ok()?, scale).ok()?;
        Some(Number::Decimal8(v))
    } else {
        VariantDecimal16::try_new(unscaled, scale)
            .ok()
            .map(Number::Decimal16)
    }
}

#[cfg(test)]
mod tests;
