//! Thrift's binary protocol (strict messages), unframed over TCP: what a Hive Metastore
//! speaks by default. Values are a tree keyed by field id, so a struct a server returns
//! (a `Table` with fields this client never names, from any Hive version) goes back to it
//! unchanged after the one field bronze replaces.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BOOL: u8 = 2;
const BYTE: u8 = 3;
const DOUBLE: u8 = 4;
const I16: u8 = 6;
const I32: u8 = 8;
const I64: u8 = 10;
const STRING: u8 = 11;
const STRUCT: u8 = 12;
const MAP: u8 = 13;
const SET: u8 = 14;
const LIST: u8 = 15;

/// Message types.
const CALL: i32 = 1;
const REPLY: i32 = 2;
const EXCEPTION: i32 = 3;
const VERSION_1: i32 = 0x8001_0000_u32 as i32;

/// Replies larger than this are refused (a metastore's `Table` is a few KiB).
const MAX_REPLY: usize = 4 << 20;
/// Values a reply may hold (each is a few dozen bytes in memory).
const MAX_VALUES: usize = 1 << 20;
/// Containers nested deeper than this are refused.
const MAX_DEPTH: usize = 64;

/// One Thrift value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Bool(bool),
    Byte(i8),
    Double(f64),
    I16(i16),
    I32(i32),
    I64(i64),
    /// `string` and `binary`.
    Bytes(Vec<u8>),
    Struct(Struct),
    Map {
        key: u8,
        value: u8,
        entries: Vec<(Value, Value)>,
    },
    /// A `set` (`set: true`) or a `list`.
    List {
        element: u8,
        items: Vec<Value>,
        set: bool,
    },
}

/// A struct's fields by id, in the order they were read or set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Struct(pub Vec<(i16, Value)>);

impl Value {
    /// A `string`.
    pub fn string(s: &str) -> Value {
        Value::Bytes(s.as_bytes().to_vec())
    }

    /// A `list<string>`.
    pub fn strings<'a>(items: impl IntoIterator<Item = &'a str>) -> Value {
        Value::List {
            element: STRING,
            items: items.into_iter().map(Value::string).collect(),
            set: false,
        }
    }

    /// A `list<struct>`.
    pub fn structs(items: Vec<Struct>) -> Value {
        Value::List {
            element: STRUCT,
            items: items.into_iter().map(Value::Struct).collect(),
            set: false,
        }
    }

    /// A `map<string,string>`.
    pub fn string_map<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Value {
        Value::Map {
            key: STRING,
            value: STRING,
            entries: entries
                .into_iter()
                .map(|(k, v)| (Value::string(k), Value::string(v)))
                .collect(),
        }
    }

    /// The text of a `string` (lossy on invalid UTF-8).
    pub fn as_str(&self) -> Option<std::borrow::Cow<'_, str>> {
        match self {
            Value::Bytes(b) => Some(String::from_utf8_lossy(b)),
            _ => None,
        }
    }

    /// A `map<string,string>`'s value at `key`.
    pub fn map_get(&self, key: &str) -> Option<std::borrow::Cow<'_, str>> {
        match self {
            Value::Map { entries, .. } => entries
                .iter()
                .find(|(k, _)| k.as_str().as_deref() == Some(key))
                .and_then(|(_, v)| v.as_str()),
            _ => None,
        }
    }

    /// A list's items.
    pub fn items(&self) -> &[Value] {
        match self {
            Value::List { items, .. } => items,
            _ => &[],
        }
    }

    fn type_code(&self) -> u8 {
        match self {
            Value::Bool(_) => BOOL,
            Value::Byte(_) => BYTE,
            Value::Double(_) => DOUBLE,
            Value::I16(_) => I16,
            Value::I32(_) => I32,
            Value::I64(_) => I64,
            Value::Bytes(_) => STRING,
            Value::Struct(_) => STRUCT,
            Value::Map { .. } => MAP,
            Value::List { set: true, .. } => SET,
            Value::List { .. } => LIST,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Value::Bool(b) => out.push(u8::from(*b)),
            Value::Byte(b) => out.extend(b.to_be_bytes()),
            Value::Double(d) => out.extend(d.to_be_bytes()),
            Value::I16(i) => out.extend(i.to_be_bytes()),
            Value::I32(i) => out.extend(i.to_be_bytes()),
            Value::I64(i) => out.extend(i.to_be_bytes()),
            Value::Bytes(b) => write_bytes(out, b),
            Value::Struct(s) => s.write(out),
            Value::Map {
                key,
                value,
                entries,
            } => {
                out.extend([*key, *value]);
                out.extend(len_i32(entries.len()).to_be_bytes());
                for (k, v) in entries {
                    k.write(out);
                    v.write(out);
                }
            }
            Value::List { element, items, .. } => {
                out.push(*element);
                out.extend(len_i32(items.len()).to_be_bytes());
                for item in items {
                    item.write(out);
                }
            }
        }
    }
}

impl Struct {
    /// The field `id`.
    pub fn get(&self, id: i16) -> Option<&Value> {
        self.0.iter().find(|(i, _)| *i == id).map(|(_, v)| v)
    }

    /// The struct at field `id`.
    pub fn get_struct(&self, id: i16) -> Option<&Struct> {
        match self.get(id)? {
            Value::Struct(s) => Some(s),
            _ => None,
        }
    }

    /// The struct at field `id`, to change.
    pub fn get_struct_mut(&mut self, id: i16) -> Option<&mut Struct> {
        match self.0.iter_mut().find(|(i, _)| *i == id)? {
            (_, Value::Struct(s)) => Some(s),
            _ => None,
        }
    }

    /// The text of the `string` at field `id`.
    pub fn get_str(&self, id: i16) -> Option<std::borrow::Cow<'_, str>> {
        self.get(id)?.as_str()
    }

    /// Field `id` set to `value` (replaced when present).
    pub fn set(&mut self, id: i16, value: Value) {
        match self.0.iter_mut().find(|(i, _)| *i == id) {
            Some(field) => field.1 = value,
            None => self.0.push((id, value)),
        }
    }

    /// This struct with field `id` set to `value`.
    pub fn with(mut self, id: i16, value: Value) -> Struct {
        self.set(id, value);
        self
    }

    fn write(&self, out: &mut Vec<u8>) {
        for (id, value) in &self.0 {
            out.push(value.type_code());
            out.extend(id.to_be_bytes());
            value.write(out);
        }
        out.push(0);
    }
}

fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend(len_i32(b.len()).to_be_bytes());
    out.extend(b);
}

/// Why bytes did not parse: more are needed, or they are not Thrift.
#[derive(Debug, PartialEq)]
enum Parse {
    Incomplete,
    Malformed(String),
}

/// A reader over received bytes.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    /// Values read so far.
    values: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Parse> {
        let end = self.at.checked_add(n).ok_or(Parse::Incomplete)?;
        let b = self.buf.get(self.at..end).ok_or(Parse::Incomplete)?;
        self.at = end;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Parse> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, Parse> {
        Ok(self.array::<1>()?[0])
    }

    fn i32(&mut self) -> Result<i32, Parse> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// A length or count: negative ones are malformed.
    fn len(&mut self) -> Result<usize, Parse> {
        let n = self.i32()?;
        usize::try_from(n).map_err(|_| Parse::Malformed(format!("negative length {n}")))
    }

    fn bytes(&mut self) -> Result<Vec<u8>, Parse> {
        let n = self.len()?;
        Ok(self.take(n)?.to_vec())
    }

    fn value(&mut self, t: u8, depth: usize) -> Result<Value, Parse> {
        if depth > MAX_DEPTH {
            return Err(Parse::Malformed(format!("nested deeper than {MAX_DEPTH}")));
        }
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(Parse::Malformed(format!("more than {MAX_VALUES} values")));
        }
        Ok(match t {
            BOOL => Value::Bool(self.u8()? != 0),
            BYTE => Value::Byte(i8::from_be_bytes(self.array()?)),
            DOUBLE => Value::Double(f64::from_be_bytes(self.array()?)),
            I16 => Value::I16(i16::from_be_bytes(self.array()?)),
            I32 => Value::I32(self.i32()?),
            I64 => Value::I64(i64::from_be_bytes(self.array()?)),
            STRING => Value::Bytes(self.bytes()?),
            STRUCT => Value::Struct(self.strukt(depth + 1)?),
            MAP => {
                let (key, value) = (self.u8()?, self.u8()?);
                let n = self.len()?;
                let mut entries = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    entries.push((self.value(key, depth + 1)?, self.value(value, depth + 1)?));
                }
                Value::Map {
                    key,
                    value,
                    entries,
                }
            }
            SET | LIST => {
                let element = self.u8()?;
                let n = self.len()?;
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(self.value(element, depth + 1)?);
                }
                Value::List {
                    element,
                    items,
                    set: t == SET,
                }
            }
            other => return Err(Parse::Malformed(format!("unknown type code {other}"))),
        })
    }

    fn strukt(&mut self, depth: usize) -> Result<Struct, Parse> {
        let mut fields = Vec::new();
        loop {
            let t = self.u8()?;
            if t == 0 {
                return Ok(Struct(fields));
            }
            let id = i16::from_be_bytes(self.array()?);
            fields.push((id, self.value(t, depth)?));
        }
    }
}

/// A reply: its message type, method name and sequence id, then its struct.
#[derive(Debug, PartialEq)]
struct Reply {
    kind: i32,
    name: String,
    seqid: i32,
    body: Struct,
}

/// The reply in `buf`.
fn parse_reply(buf: &[u8]) -> Result<Reply, Parse> {
    let mut r = Reader {
        buf,
        at: 0,
        values: 0,
    };
    let first = r.i32()?;
    let (kind, name) = if first < 0 {
        if first & !0xff != VERSION_1 {
            return Err(Parse::Malformed(format!("bad version {first:#x}")));
        }
        (first & 0xff, r.bytes()?)
    } else {
        let name = r.take(first as usize)?.to_vec();
        (i32::from(r.u8()?), name)
    };
    let seqid = r.i32()?;
    let body = r.strukt(0)?;
    Ok(Reply {
        kind,
        name: String::from_utf8_lossy(&name).into_owned(),
        seqid,
        body,
    })
}

/// A call's bytes: the message header, then its arguments.
fn call_bytes(method: &str, seqid: i32, args: &Struct) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend((VERSION_1 | CALL).to_be_bytes());
    write_bytes(&mut out, method.as_bytes());
    out.extend(seqid.to_be_bytes());
    args.write(&mut out);
    out
}

/// Why a call has no reply: the connection failed (worth another attempt on a new one),
/// or the server answered with an exception of its own (`TApplicationException`: an
/// unknown method, an internal error).
#[derive(Debug)]
pub enum CallError {
    Transport(String),
    Application(String),
}

/// An open connection to a Thrift service.
pub struct Connection {
    stream: TcpStream,
    seqid: i32,
    timeout: Duration,
}

impl Connection {
    /// Connects to `address` (`host:port`), each step bounded by `timeout`.
    pub async fn open(address: &str, timeout: Duration) -> Result<Connection, String> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| format!("no connection to {address} within {timeout:?}"))?
            .map_err(|e| format!("cannot connect to {address}: {e}"))?;
        Ok(Connection {
            stream,
            seqid: 0,
            timeout,
        })
    }

    /// Calls `method` with `args`; the reply's result struct (field 0 the value, other
    /// fields the declared exceptions), or why there is none.
    pub async fn call(&mut self, method: &str, args: &Struct) -> Result<Struct, CallError> {
        let timeout = self.timeout;
        tokio::time::timeout(timeout, self.exchange(method, args))
            .await
            .map_err(|_| CallError::Transport(format!("{method}: no reply within {timeout:?}")))?
    }

    async fn exchange(&mut self, method: &str, args: &Struct) -> Result<Struct, CallError> {
        let failed = CallError::Transport;
        self.seqid = self.seqid.wrapping_add(1);
        let request = call_bytes(method, self.seqid, args);
        self.stream
            .write_all(&request)
            .await
            .map_err(|e| failed(format!("{method}: cannot send: {e}")))?;
        let mut buf = Vec::new();
        let mut chunk = vec![0; 64 << 10];
        loop {
            let n = self
                .stream
                .read(&mut chunk)
                .await
                .map_err(|e| failed(format!("{method}: cannot read the reply: {e}")))?;
            if n == 0 {
                return Err(failed(format!(
                    "{method}: the server closed the connection"
                )));
            }
            buf.extend_from_slice(&chunk[..n]);
            match parse_reply(&buf) {
                Ok(reply) => return self.answer(method, reply),
                Err(Parse::Incomplete) if buf.len() < MAX_REPLY => {}
                Err(Parse::Incomplete) => {
                    return Err(failed(format!(
                        "{method}: a reply larger than {MAX_REPLY} bytes"
                    )));
                }
                Err(Parse::Malformed(why)) => {
                    return Err(failed(format!(
                        "{method}: not a Thrift binary reply ({why})"
                    )));
                }
            }
        }
    }

    fn answer(&self, method: &str, reply: Reply) -> Result<Struct, CallError> {
        let Reply {
            kind,
            name,
            seqid,
            body,
        } = reply;
        if name != method || seqid != self.seqid {
            return Err(CallError::Transport(format!(
                "{method}: the reply is to {name:?} (sequence {seqid}, sent {})",
                self.seqid
            )));
        }
        match kind {
            REPLY => Ok(body),
            EXCEPTION => Err(CallError::Application(format!(
                "{method}: the server failed: {}",
                body.get_str(1).unwrap_or_default()
            ))),
            other => Err(CallError::Transport(format!(
                "{method}: a message of type {other} in reply"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Struct {
        Struct::default()
            .with(1, Value::string("events"))
            .with(4, Value::I32(-7))
            .with(
                7,
                Value::Struct(Struct::default().with(
                    1,
                    Value::structs(vec![
                        Struct::default()
                            .with(1, Value::string("col"))
                            .with(2, Value::string("array<string>")),
                    ]),
                )),
            )
            .with(9, Value::string_map([("EXTERNAL", "TRUE"), ("é", "ü")]))
            .with(14, Value::Bool(true))
            .with(19, Value::I64(1 << 40))
            .with(20, Value::Double(0.5))
            .with(21, Value::I16(-2))
            .with(22, Value::Byte(-1))
            .with(
                23,
                Value::List {
                    element: LIST,
                    items: vec![Value::strings(["a", "b"]), Value::strings([])],
                    set: true,
                },
            )
    }

    #[test]
    fn a_reply_with_fields_of_every_type_reads_back_as_sent() {
        let body = Struct::default().with(0, Value::Struct(sample()));
        let mut msg = Vec::new();
        msg.extend((VERSION_1 | REPLY).to_be_bytes());
        write_bytes(&mut msg, b"get_table");
        msg.extend(5_i32.to_be_bytes());
        body.write(&mut msg);
        let reply = parse_reply(&msg).unwrap();
        assert_eq!(
            (reply.kind, reply.name.as_str(), reply.seqid),
            (REPLY, "get_table", 5)
        );
        assert_eq!(reply.body, body);
        let table = reply.body.get_struct(0).unwrap();
        assert_eq!(table.get(9).unwrap().map_get("é").as_deref(), Some("ü"));
        // Every cut short of the whole message is incomplete, never an error or a panic.
        for cut in 0..msg.len() {
            assert_eq!(
                parse_reply(&msg[..cut]),
                Err(Parse::Incomplete),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn a_call_is_a_strict_message_with_its_arguments() {
        let args = Struct::default()
            .with(1, Value::string("bronze"))
            .with(2, Value::string("quote"));
        let bytes = call_bytes("get_table", 1, &args);
        let mut want = vec![0x80, 0x01, 0x00, 0x01, 0, 0, 0, 9];
        want.extend(b"get_table");
        want.extend([0, 0, 0, 1]);
        want.extend([11, 0, 1, 0, 0, 0, 6]);
        want.extend(b"bronze");
        want.extend([11, 0, 2, 0, 0, 0, 5]);
        want.extend(b"quote");
        want.push(0);
        assert_eq!(bytes, want);
    }

    #[test]
    fn hostile_bytes_are_refused_without_a_panic() {
        let mut deep = (VERSION_1 | REPLY).to_be_bytes().to_vec();
        write_bytes(&mut deep, b"x");
        deep.extend(1_i32.to_be_bytes());
        for _ in 0..100 {
            deep.extend([STRUCT, 0, 1]);
        }
        assert!(matches!(parse_reply(&deep), Err(Parse::Malformed(_))));
        let mut negative = (VERSION_1 | REPLY).to_be_bytes().to_vec();
        negative.extend((-5_i32).to_be_bytes());
        assert!(matches!(parse_reply(&negative), Err(Parse::Malformed(_))));
        let mut unknown = (VERSION_1 | REPLY).to_be_bytes().to_vec();
        write_bytes(&mut unknown, b"x");
        unknown.extend(1_i32.to_be_bytes());
        unknown.extend([99, 0, 1]);
        assert!(matches!(parse_reply(&unknown), Err(Parse::Malformed(_))));
        // A huge count waits for bytes that never come: incomplete, not an allocation.
        let mut huge = (VERSION_1 | REPLY).to_be_bytes().to_vec();
        write_bytes(&mut huge, b"x");
        huge.extend(1_i32.to_be_bytes());
        huge.extend([LIST, 0, 1, STRING]);
        huge.extend(i32::MAX.to_be_bytes());
        assert_eq!(parse_reply(&huge), Err(Parse::Incomplete));
    }
}
