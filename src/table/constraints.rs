//! CHECK constraints (`delta.constraints.<name>`) evaluated on the rows bronze writes, as
//! Spark's Delta checks them: a row violates a constraint when its expression is false
//! *or null*, and a write with such a row fails. The expressions users put on bronze's
//! tables are understood: column references (nested `a.b`, `` `quoted` ``, any case),
//! literals (numbers, strings, `DATE'…'`, `TIMESTAMP'…'`, booleans, `NULL`), comparisons
//! (`= == <> != < <= > >= <=>`), `IS [NOT] NULL`, `[NOT] IN (…)`, `[NOT] BETWEEN … AND
//! …`, `[NOT] LIKE`, `AND`/`OR`/`NOT`, `+ - * / %`, `CAST(… AS …)` and the functions
//! `length`, `lower`, `upper`, `trim`, `abs` and `coalesce`. A constraint outside them is
//! refused by name before a batch writes anything ([`super::writable`]), never guessed.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray, StructArray,
};
use arrow::compute::kernels::{boolean, cmp, numeric};
use arrow::datatypes::{DataType, TimeUnit};
use arrow::error::ArrowError;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
enum Expr {
    /// A column, by its path of (case-insensitive) names.
    Column(Vec<String>),
    Literal(Literal),
    Not(Box<Expr>),
    Negate(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Compare(Box<Expr>, Cmp, Box<Expr>),
    Arithmetic(Box<Expr>, Arith, Box<Expr>),
    IsNull(Box<Expr>, bool),
    In(Box<Expr>, Vec<Expr>, bool),
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    Like(Box<Expr>, Box<Expr>, bool),
    Cast(Box<Expr>, DataType),
    Call(Function, Vec<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    /// A number with a fraction or exponent, as written.
    Number(String),
    Text(String),
    Date(String),
    Timestamp(String),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cmp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    /// `<=>`: equal, nulls equal to each other.
    NullSafeEq,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Function {
    Length,
    Lower,
    Upper,
    Trim,
    Abs,
    Coalesce,
}

/// One of a table's CHECK constraints, parsed.
#[derive(Clone, Debug)]
pub(crate) struct Constraint {
    pub(crate) name: String,
    pub(crate) text: String,
    expr: Expr,
}

/// A constraint bronze does not evaluate: its name, its text and what in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unsupported {
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) why: String,
}

/// The CHECK constraints of a table's properties, parsed; the first (by name) bronze
/// does not evaluate, if any.
pub(crate) fn of_properties<'a>(
    properties: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<Vec<Constraint>, Unsupported> {
    let mut found: Vec<(&String, &String)> = properties
        .into_iter()
        .filter(|(k, _)| k.starts_with("delta.constraints."))
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|(k, text)| {
            let name = k["delta.constraints.".len()..].to_string();
            match parse(text) {
                Ok(expr) => Ok(Constraint {
                    name,
                    text: text.clone(),
                    expr,
                }),
                Err(why) => Err(Unsupported {
                    name,
                    text: text.clone(),
                    why,
                }),
            }
        })
        .collect()
}

/// The first of `constraints` some row of `batch` violates: its name and text, how many
/// rows violate it and the first such row's index.
pub(crate) fn violation(
    constraints: &[Constraint],
    batch: &RecordBatch,
) -> Result<Option<Violation>, ArrowError> {
    for c in constraints {
        let value = eval(&c.expr, batch)?;
        let holds = value
            .as_boolean_opt()
            .ok_or_else(|| {
                ArrowError::InvalidArgumentError(format!(
                    "CHECK constraint `{}` ({}) is not a condition: it gives {}",
                    c.name,
                    c.text,
                    value.data_type()
                ))
            })?
            .clone();
        // False or null: a violation.
        let failing: Vec<usize> = (0..holds.len())
            .filter(|&i| holds.is_null(i) || !holds.value(i))
            .collect();
        if let Some(&first) = failing.first() {
            return Ok(Some(Violation {
                name: c.name.clone(),
                text: c.text.clone(),
                rows: failing.len(),
                first,
            }));
        }
    }
    Ok(None)
}

/// Rows of a batch that violate a CHECK constraint ([`violation`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Violation {
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) rows: usize,
    pub(crate) first: usize,
}

// Parsing.

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Text(String),
    Number(String),
    Symbol(&'static str),
}

/// The tokens of a constraint's text; `Err` names what bronze does not read.
fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut l = Lexer {
        chars: text.chars().collect(),
        at: 0,
    };
    let mut out = Vec::new();
    while let Some(&c) = l.chars.get(l.at) {
        if c.is_whitespace() {
            l.at += 1;
        } else if c == '\'' || c == '"' || c == '`' {
            let s = l.quoted(c)?;
            out.push(if c == '`' {
                Token::Quoted(s)
            } else {
                Token::Text(s)
            });
        } else if c.is_ascii_digit()
            || (c == '.' && l.chars.get(l.at + 1).is_some_and(char::is_ascii_digit))
        {
            out.push(Token::Number(l.number()));
        } else if c.is_alphabetic() || c == '_' {
            out.push(Token::Word(l.word()));
        } else {
            out.push(Token::Symbol(l.symbol(c)?));
        }
    }
    Ok(out)
}

/// A constraint's text being read into [`tokens`]: its characters, and where the next
/// token starts.
struct Lexer {
    chars: Vec<char>,
    at: usize,
}

impl Lexer {
    /// The text between quote `c` here and the one that closes it (a doubled quote is
    /// one; in a string, `\` escapes the next character).
    fn quoted(&mut self, c: char) -> Result<String, String> {
        let mut s = String::new();
        self.at += 1;
        loop {
            let Some(&d) = self.chars.get(self.at) else {
                return Err(format!("an unterminated {c}…{c}"));
            };
            self.at += 1;
            if d == c {
                if self.chars.get(self.at) == Some(&c) {
                    s.push(c);
                    self.at += 1;
                    continue;
                }
                break;
            }
            if d == '\\' && c != '`' {
                let Some(&e) = self.chars.get(self.at) else {
                    return Err("a string ending in \\".to_string());
                };
                self.at += 1;
                s.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    other => other,
                });
                continue;
            }
            s.push(d);
        }
        Ok(s)
    }

    /// The number literal here (with its exponent and Spark's suffix).
    fn number(&mut self) -> String {
        let chars = &self.chars;
        let start = self.at;
        let mut i = start;
        while i < chars.len()
            && (chars[i].is_ascii_alphanumeric()
                || chars[i] == '.'
                || ((chars[i] == '-' || chars[i] == '+') && matches!(chars[i - 1], 'e' | 'E')))
        {
            i += 1;
        }
        self.at = i;
        chars[start..i].iter().collect()
    }

    /// The word here.
    fn word(&mut self) -> String {
        let chars = &self.chars;
        let start = self.at;
        let mut i = start;
        while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
            i += 1;
        }
        self.at = i;
        chars[start..i].iter().collect()
    }

    /// The symbol here, starting with `c`.
    fn symbol(&mut self, c: char) -> Result<&'static str, String> {
        const SYMBOLS: [&str; 19] = [
            "<=>", "<>", "!=", "<=", ">=", "==", "=", "<", ">", "(", ")", ",", ".", "+", "-", "*",
            "/", "%", "!",
        ];
        let rest: String = self.chars[self.at..self.chars.len().min(self.at + 3)]
            .iter()
            .collect();
        let Some(s) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) else {
            return Err(format!("`{c}`"));
        };
        self.at += s.chars().count();
        Ok(s)
    }
}

/// `text` parsed, or what in it bronze does not evaluate.
fn parse(text: &str) -> Result<Expr, String> {
    let mut p = Parser {
        tokens: tokens(text)?,
        at: 0,
    };
    let e = p.or()?;
    match p.peek() {
        None => Ok(e),
        Some(t) => Err(format!("{} where the expression should end", shown(t))),
    }
}

fn shown(t: &Token) -> String {
    match t {
        Token::Word(w) | Token::Number(w) => format!("`{w}`"),
        Token::Quoted(q) => format!("`{q}`"),
        Token::Text(s) => format!("'{s}'"),
        Token::Symbol(s) => format!("`{s}`"),
    }
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word))
    }

    fn eat_keyword(&mut self, word: &str) -> bool {
        let found = self.keyword(word);
        if found {
            self.at += 1;
        }
        found
    }

    fn eat(&mut self, symbol: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Symbol(s)) if *s == symbol);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect(&mut self, symbol: &str) -> Result<(), String> {
        if self.eat(symbol) {
            return Ok(());
        }
        Err(match self.peek() {
            Some(t) => format!("{} where `{symbol}` was expected", shown(t)),
            None => format!("an end where `{symbol}` was expected"),
        })
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut e = self.and()?;
        while self.eat_keyword("OR") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.not()?;
        while self.eat_keyword("AND") {
            e = Expr::And(Box::new(e), Box::new(self.not()?));
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, String> {
        if self.eat_keyword("NOT") || self.eat("!") {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.predicate()
    }

    fn predicate(&mut self) -> Result<Expr, String> {
        let left = self.additive()?;
        for (symbol, cmp) in [
            ("<=>", Cmp::NullSafeEq),
            ("=", Cmp::Eq),
            ("==", Cmp::Eq),
            ("<>", Cmp::NotEq),
            ("!=", Cmp::NotEq),
            ("<=", Cmp::LtEq),
            (">=", Cmp::GtEq),
            ("<", Cmp::Lt),
            (">", Cmp::Gt),
        ] {
            if self.eat(symbol) {
                let right = self.additive()?;
                return Ok(Expr::Compare(Box::new(left), cmp, Box::new(right)));
            }
        }
        if self.eat_keyword("IS") {
            let negated = self.eat_keyword("NOT");
            if !self.eat_keyword("NULL") {
                return Err("IS without NULL (IS TRUE, IS DISTINCT FROM)".to_string());
            }
            return Ok(Expr::IsNull(Box::new(left), negated));
        }
        let negated = self.eat_keyword("NOT");
        if self.eat_keyword("IN") {
            self.expect("(")?;
            let mut list = vec![self.or()?];
            while self.eat(",") {
                list.push(self.or()?);
            }
            self.expect(")")?;
            return Ok(Expr::In(Box::new(left), list, negated));
        }
        if self.eat_keyword("BETWEEN") {
            let low = self.additive()?;
            if !self.eat_keyword("AND") {
                return Err("BETWEEN without AND".to_string());
            }
            let high = self.additive()?;
            return Ok(Expr::Between(
                Box::new(left),
                Box::new(low),
                Box::new(high),
                negated,
            ));
        }
        if self.eat_keyword("LIKE") {
            let pattern = self.additive()?;
            if self.keyword("ESCAPE") {
                return Err("LIKE … ESCAPE".to_string());
            }
            return Ok(Expr::Like(Box::new(left), Box::new(pattern), negated));
        }
        if negated {
            return Err("NOT without IN, BETWEEN or LIKE after it".to_string());
        }
        Ok(left)
    }

    fn additive(&mut self) -> Result<Expr, String> {
        let mut e = self.multiplicative()?;
        loop {
            let op = if self.eat("+") {
                Arith::Add
            } else if self.eat("-") {
                Arith::Sub
            } else {
                return Ok(e);
            };
            e = Expr::Arithmetic(Box::new(e), op, Box::new(self.multiplicative()?));
        }
    }

    fn multiplicative(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        loop {
            let op = if self.eat("*") {
                Arith::Mul
            } else if self.eat("/") {
                Arith::Div
            } else if self.eat("%") {
                Arith::Rem
            } else {
                return Ok(e);
            };
            e = Expr::Arithmetic(Box::new(e), op, Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("-") {
            return Ok(match self.unary()? {
                Expr::Literal(Literal::Int(i)) => Expr::Literal(Literal::Int(-i)),
                Expr::Literal(Literal::Number(n)) => {
                    Expr::Literal(Literal::Number(format!("-{n}")))
                }
                e => Expr::Negate(Box::new(e)),
            });
        }
        if self.eat("+") {
            return self.unary();
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let Some(token) = self.peek().cloned() else {
            return Err("an expression that ends too early".to_string());
        };
        self.at += 1;
        match token {
            Token::Symbol("(") => {
                let e = self.or()?;
                self.expect(")")?;
                Ok(e)
            }
            Token::Symbol(s) => Err(format!("`{s}`")),
            Token::Number(n) => Ok(Expr::Literal(number(&n)?)),
            Token::Text(s) => Ok(Expr::Literal(Literal::Text(s))),
            Token::Quoted(q) => self.column(q),
            Token::Word(w) => self.word(w),
        }
    }

    /// A column path that starts with `first`.
    fn column(&mut self, first: String) -> Result<Expr, String> {
        let mut path = vec![first];
        while self.eat(".") {
            match self.peek().cloned() {
                Some(Token::Word(w) | Token::Quoted(w)) => {
                    self.at += 1;
                    path.push(w);
                }
                _ => return Err("a `.` not followed by a field name".to_string()),
            }
        }
        Ok(Expr::Column(path))
    }

    fn word(&mut self, w: String) -> Result<Expr, String> {
        let upper = w.to_ascii_uppercase();
        match upper.as_str() {
            "NULL" => return Ok(Expr::Literal(Literal::Null)),
            "TRUE" => return Ok(Expr::Literal(Literal::Bool(true))),
            "FALSE" => return Ok(Expr::Literal(Literal::Bool(false))),
            "DATE" | "TIMESTAMP" => {
                if let Some(Token::Text(s)) = self.peek().cloned() {
                    self.at += 1;
                    return Ok(Expr::Literal(if upper == "DATE" {
                        Literal::Date(s)
                    } else {
                        Literal::Timestamp(s)
                    }));
                }
            }
            "CAST" => return self.cast(),
            _ => {}
        }
        if self.eat("(") {
            return self.call(&w);
        }
        if matches!(
            upper.as_str(),
            "CASE"
                | "EXISTS"
                | "SELECT"
                | "INTERVAL"
                | "RLIKE"
                | "REGEXP"
                | "CURRENT_DATE"
                | "CURRENT_TIMESTAMP"
        ) {
            return Err(format!("`{w}`"));
        }
        self.column(w)
    }

    /// `CAST(<expr> AS <type>)`, after its `CAST`.
    fn cast(&mut self) -> Result<Expr, String> {
        self.expect("(")?;
        let e = self.or()?;
        if !self.eat_keyword("AS") {
            return Err("CAST without AS".to_string());
        }
        let to = self.type_name()?;
        self.expect(")")?;
        Ok(Expr::Cast(Box::new(e), to))
    }

    /// A call of function `w`, after its `(`: its arguments, checked against its arity.
    fn call(&mut self, w: &str) -> Result<Expr, String> {
        let function = match w.to_ascii_uppercase().as_str() {
            "LENGTH" | "CHAR_LENGTH" | "CHARACTER_LENGTH" => Function::Length,
            "LOWER" | "LCASE" => Function::Lower,
            "UPPER" | "UCASE" => Function::Upper,
            "TRIM" => Function::Trim,
            "ABS" => Function::Abs,
            "COALESCE" | "NVL" | "IFNULL" => Function::Coalesce,
            _ => return Err(format!("the function `{w}`")),
        };
        let mut args = Vec::new();
        if !self.eat(")") {
            args.push(self.or()?);
            while self.eat(",") {
                args.push(self.or()?);
            }
            self.expect(")")?;
        }
        let arity_ok = match function {
            Function::Coalesce => !args.is_empty(),
            _ => args.len() == 1,
        };
        if !arity_ok {
            return Err(format!("`{w}` with {} arguments", args.len()));
        }
        Ok(Expr::Call(function, args))
    }

    fn type_name(&mut self) -> Result<DataType, String> {
        let Some(Token::Word(w)) = self.peek().cloned() else {
            return Err("CAST to something that is not a type name".to_string());
        };
        self.at += 1;
        Ok(match w.to_ascii_uppercase().as_str() {
            "BOOLEAN" => DataType::Boolean,
            "TINYINT" | "BYTE" => DataType::Int8,
            "SMALLINT" | "SHORT" => DataType::Int16,
            "INT" | "INTEGER" => DataType::Int32,
            "BIGINT" | "LONG" => DataType::Int64,
            "FLOAT" | "REAL" => DataType::Float32,
            "DOUBLE" => DataType::Float64,
            "STRING" => DataType::Utf8,
            "DATE" => DataType::Date32,
            "TIMESTAMP" => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            "TIMESTAMP_NTZ" => DataType::Timestamp(TimeUnit::Microsecond, None),
            "DECIMAL" | "DEC" | "NUMERIC" => {
                let (mut p, mut s) = (10u8, 0i8);
                if self.eat("(") {
                    p = self.small_number()? as u8;
                    if self.eat(",") {
                        s = self.small_number()? as i8;
                    }
                    self.expect(")")?;
                }
                DataType::Decimal128(p, s)
            }
            _ => return Err(format!("CAST to `{w}`")),
        })
    }

    fn small_number(&mut self) -> Result<u32, String> {
        match self.peek().cloned() {
            Some(Token::Number(n)) => {
                self.at += 1;
                n.parse::<u32>()
                    .ok()
                    .filter(|v| *v <= 38)
                    .ok_or_else(|| format!("the precision or scale `{n}`"))
            }
            _ => Err("a decimal type without its precision".to_string()),
        }
    }
}

/// A number literal: an integer, or a decimal or floating number as written; Spark's
/// suffixes (`10L`, `1.5D`, `2BD`) are taken off.
fn number(text: &str) -> Result<Literal, String> {
    let t = text.to_ascii_uppercase();
    let t = t
        .strip_suffix("BD")
        .or_else(|| t.strip_suffix('L'))
        .or_else(|| t.strip_suffix('D'))
        .or_else(|| t.strip_suffix('S'))
        .or_else(|| t.strip_suffix('Y'))
        .unwrap_or(&t);
    if let Ok(i) = t.parse::<i64>() {
        return Ok(Literal::Int(i));
    }
    if t.parse::<f64>().is_ok() {
        return Ok(Literal::Number(t.to_string()));
    }
    Err(format!("the number `{text}`"))
}

// Evaluation.

fn eval(e: &Expr, batch: &RecordBatch) -> Result<ArrayRef, ArrowError> {
    let n = batch.num_rows();
    match e {
        Expr::Column(path) => column(batch, path),
        Expr::Literal(l) => literal(l, n),
        Expr::Not(x) => Ok(Arc::new(boolean::not(&as_bool(eval(x, batch)?)?)?)),
        Expr::Negate(x) => Ok(numeric::neg(&eval(x, batch)?)?),
        Expr::And(a, b) => Ok(Arc::new(boolean::and_kleene(
            &as_bool(eval(a, batch)?)?,
            &as_bool(eval(b, batch)?)?,
        )?)),
        Expr::Or(a, b) => Ok(Arc::new(boolean::or_kleene(
            &as_bool(eval(a, batch)?)?,
            &as_bool(eval(b, batch)?)?,
        )?)),
        Expr::Compare(a, op, b) => compare(eval(a, batch)?, *op, eval(b, batch)?),
        Expr::Arithmetic(a, op, b) => arithmetic(eval(a, batch)?, *op, eval(b, batch)?),
        Expr::IsNull(x, negated) => {
            let v = eval(x, batch)?;
            Ok(Arc::new(if *negated {
                arrow::compute::is_not_null(&v)?
            } else {
                arrow::compute::is_null(&v)?
            }))
        }
        Expr::In(x, list, negated) => {
            let any = is_in(x, list, batch)?;
            Ok(Arc::new(if *negated { boolean::not(&any)? } else { any }))
        }
        Expr::Between(x, low, high, negated) => {
            let within = between(x, low, high, batch)?;
            Ok(Arc::new(if *negated {
                boolean::not(&within)?
            } else {
                within
            }))
        }
        Expr::Like(x, pattern, negated) => {
            let v = to_text(eval(x, batch)?)?;
            let p = to_text(eval(pattern, batch)?)?;
            let matched = if *negated {
                arrow::compute::nlike(&v, &p)?
            } else {
                arrow::compute::like(&v, &p)?
            };
            Ok(Arc::new(matched))
        }
        Expr::Cast(x, to) => cast(&eval(x, batch)?, to),
        Expr::Call(f, args) => {
            let values = args
                .iter()
                .map(|a| eval(a, batch))
                .collect::<Result<Vec<_>, _>>()?;
            call(*f, values)
        }
    }
}

/// Whether `x` is one of `list`, row by row (SQL's `IN`: null when it is none of them
/// and one of them is null).
fn is_in(x: &Expr, list: &[Expr], batch: &RecordBatch) -> Result<BooleanArray, ArrowError> {
    let v = eval(x, batch)?;
    let mut any: Option<BooleanArray> = None;
    for item in list {
        let eq = as_bool(compare(Arc::clone(&v), Cmp::Eq, eval(item, batch)?)?)?;
        any = Some(match any {
            Some(a) => boolean::or_kleene(&a, &eq)?,
            None => eq,
        });
    }
    Ok(any.unwrap_or_else(|| BooleanArray::from(vec![false; batch.num_rows()])))
}

/// Whether `x` is between `low` and `high` (both included), row by row.
fn between(
    x: &Expr,
    low: &Expr,
    high: &Expr,
    batch: &RecordBatch,
) -> Result<BooleanArray, ArrowError> {
    let v = eval(x, batch)?;
    let above = as_bool(compare(Arc::clone(&v), Cmp::GtEq, eval(low, batch)?)?)?;
    let below = as_bool(compare(v, Cmp::LtEq, eval(high, batch)?)?)?;
    boolean::and_kleene(&above, &below)
}

fn as_bool(a: ArrayRef) -> Result<BooleanArray, ArrowError> {
    match a.data_type() {
        DataType::Boolean => Ok(a.as_boolean().clone()),
        DataType::Null => Ok(BooleanArray::new_null(a.len())),
        other => Err(ArrowError::InvalidArgumentError(format!(
            "{other} where a condition was expected"
        ))),
    }
}

fn to_text(a: ArrayRef) -> Result<ArrayRef, ArrowError> {
    cast(&a, &DataType::Utf8)
}

fn cast(a: &ArrayRef, to: &DataType) -> Result<ArrayRef, ArrowError> {
    if a.data_type() == to {
        return Ok(Arc::clone(a));
    }
    let strict = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow::compute::cast_with_options(a, to, &strict)
}

/// The column at `path` (names matched whatever their case), through structs.
fn column(batch: &RecordBatch, path: &[String]) -> Result<ArrayRef, ArrowError> {
    let missing = || {
        ArrowError::InvalidArgumentError(format!(
            "the constraint names the column `{}`, which the rows do not have",
            path.join(".")
        ))
    };
    let find = |fields: &arrow::datatypes::Fields, name: &str| {
        fields.iter().position(|f| f.name() == name).or_else(|| {
            fields
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(name))
        })
    };
    let (first, rest) = path.split_first().ok_or_else(missing)?;
    let i = find(batch.schema().fields(), first).ok_or_else(missing)?;
    let mut array = Arc::clone(batch.column(i));
    for name in rest {
        let s: &StructArray = array.as_struct_opt().ok_or_else(missing)?;
        let i = find(s.fields(), name).ok_or_else(missing)?;
        // A null struct makes its fields null.
        let child = s.column(i);
        array = match s.nulls() {
            Some(nulls) => {
                let both = arrow::buffer::NullBuffer::union(Some(nulls), child.nulls());
                arrow::array::make_array(child.to_data().into_builder().nulls(both).build()?)
            }
            None => Arc::clone(child),
        };
    }
    Ok(array)
}

fn literal(l: &Literal, n: usize) -> Result<ArrayRef, ArrowError> {
    let text = |s: &str| -> ArrayRef { Arc::new(StringArray::from(vec![s; n])) };
    Ok(match l {
        Literal::Null => arrow::array::new_null_array(&DataType::Null, n),
        Literal::Bool(b) => Arc::new(BooleanArray::from(vec![*b; n])),
        Literal::Int(i) => Arc::new(Int64Array::from(vec![*i; n])),
        Literal::Number(s) => {
            let t = text(s);
            match decimal_of(s) {
                Some(ty) => cast(&t, &ty)?,
                None => cast(&t, &DataType::Float64)?,
            }
        }
        Literal::Text(s) => text(s),
        Literal::Date(s) => cast(&text(s), &DataType::Date32)?,
        Literal::Timestamp(s) => cast(
            &text(s),
            &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        )?,
    })
}

/// The decimal type of a literal written with a fraction and no exponent (`0.125`:
/// `decimal(4,3)`), as Spark types it.
fn decimal_of(s: &str) -> Option<DataType> {
    if s.contains(['e', 'E']) {
        return None;
    }
    let digits = s.trim_start_matches('-');
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let scale = frac.len();
    let precision = (int.trim_start_matches('0').len() + scale).max(1);
    (precision <= 38).then(|| DataType::Decimal128(precision.max(scale) as u8, scale as i8))
}

fn numeric_rank(t: &DataType) -> Option<u8> {
    Some(match t {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => 1,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => 1,
        DataType::Decimal128(..) => 2,
        DataType::Float16 | DataType::Float32 | DataType::Float64 => 3,
        _ => return None,
    })
}

/// The type `a` and `b` are compared or computed in, as Spark coerces them: integers as
/// `bigint`, any decimal as a decimal holding both, any floating number as `double`; a
/// string against a date, timestamp or number is read as that type.
fn common_type(a: &DataType, b: &DataType) -> DataType {
    use DataType as T;
    if a == b {
        return a.clone();
    }
    match (a, b, numeric_rank(a), numeric_rank(b)) {
        (T::Null, other, ..) | (other, T::Null, ..) => other.clone(),
        (_, _, Some(3), Some(_)) | (_, _, Some(_), Some(3)) => T::Float64,
        (T::Decimal128(p1, s1), T::Decimal128(p2, s2), ..) => {
            let scale = (*s1).max(*s2);
            let int = (*p1 as i8 - *s1).max(*p2 as i8 - *s2);
            T::Decimal128(((int + scale) as u8).min(38), scale)
        }
        (T::Decimal128(p, s), _, _, Some(1)) | (_, T::Decimal128(p, s), Some(1), _) => {
            T::Decimal128((*p).max(19 + *s as u8).min(38), *s)
        }
        (_, _, Some(1), Some(1)) => T::Int64,
        (T::Utf8 | T::LargeUtf8 | T::Utf8View, other, ..)
        | (other, T::Utf8 | T::LargeUtf8 | T::Utf8View, ..) => other.clone(),
        (T::Date32, T::Timestamp(..), ..) => b.clone(),
        (T::Timestamp(..), T::Date32, ..) => a.clone(),
        _ => a.clone(),
    }
}

fn coerced(a: ArrayRef, b: ArrayRef) -> Result<(ArrayRef, ArrayRef), ArrowError> {
    let to = common_type(a.data_type(), b.data_type());
    let to = match to {
        DataType::Null => DataType::Boolean,
        DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::Dictionary(_, v) => *v,
        t => t,
    };
    Ok((cast(&a, &to)?, cast(&b, &to)?))
}

fn compare(a: ArrayRef, op: Cmp, b: ArrayRef) -> Result<ArrayRef, ArrowError> {
    let (a, b) = coerced(a, b)?;
    let result = match op {
        Cmp::Eq => cmp::eq(&a, &b)?,
        Cmp::NotEq => cmp::neq(&a, &b)?,
        Cmp::Lt => cmp::lt(&a, &b)?,
        Cmp::LtEq => cmp::lt_eq(&a, &b)?,
        Cmp::Gt => cmp::gt(&a, &b)?,
        Cmp::GtEq => cmp::gt_eq(&a, &b)?,
        Cmp::NullSafeEq => cmp::not_distinct(&a, &b)?,
    };
    Ok(Arc::new(result))
}

fn arithmetic(a: ArrayRef, op: Arith, b: ArrayRef) -> Result<ArrayRef, ArrowError> {
    let (a, b) = coerced(a, b)?;
    // Spark's ANSI mode (its default): an overflow or a division by zero fails the
    // write, as an error here does.
    match op {
        Arith::Add => numeric::add(&a, &b),
        Arith::Sub => numeric::sub(&a, &b),
        Arith::Mul => numeric::mul(&a, &b),
        Arith::Div => {
            // `/` is a fractional division in Spark: integers divide as doubles.
            if numeric_rank(a.data_type()) == Some(1) {
                let (a, b) = (cast(&a, &DataType::Float64)?, cast(&b, &DataType::Float64)?);
                numeric::div(&a, &b)
            } else {
                numeric::div(&a, &b)
            }
        }
        Arith::Rem => numeric::rem(&a, &b),
    }
}

fn call(f: Function, mut args: Vec<ArrayRef>) -> Result<ArrayRef, ArrowError> {
    let map_text = |a: ArrayRef, g: &dyn Fn(&str) -> String| -> Result<ArrayRef, ArrowError> {
        let a = to_text(a)?;
        let s = a.as_string::<i32>();
        Ok(Arc::new(
            s.iter().map(|v| v.map(g)).collect::<StringArray>(),
        ))
    };
    let first = args.remove(0);
    match f {
        // Characters, not bytes, as Spark counts them.
        Function::Length => {
            let a = to_text(first)?;
            let s = a.as_string::<i32>();
            Ok(Arc::new(
                s.iter()
                    .map(|v| v.map(|v| v.chars().count() as i64))
                    .collect::<Int64Array>(),
            ))
        }
        Function::Lower => map_text(first, &|v| v.to_lowercase()),
        Function::Upper => map_text(first, &|v| v.to_uppercase()),
        Function::Trim => map_text(first, &|v| v.trim_matches(' ').to_string()),
        Function::Abs => {
            let zero = cast(
                &(Arc::new(Int64Array::from(vec![0; first.len()])) as ArrayRef),
                first.data_type(),
            )?;
            let negative = cmp::lt(&first, &zero)?;
            let negated = numeric::neg(&first)?;
            arrow::compute::kernels::zip::zip(&negative, &negated, &first)
        }
        Function::Coalesce => {
            let mut out = first;
            for next in args {
                let (a, b) = coerced(out, next)?;
                let present = arrow::compute::is_not_null(&a)?;
                out = arrow::compute::kernels::zip::zip(&present, &a, &b)?;
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Decimal128Array;
    use arrow::datatypes::{Field, Fields, Schema};

    fn batch() -> RecordBatch {
        let inner = Fields::from(vec![Field::new("Code", DataType::Utf8, true)]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("amt", DataType::Decimal128(18, 2), true),
            Field::new("name", DataType::Utf8, true),
            Field::new("_batch_id", DataType::Utf8, false),
            Field::new("s", DataType::Struct(inner.clone()), true),
            Field::new("day", DataType::Date32, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), Some(5), None])),
                Arc::new(
                    Decimal128Array::from(vec![Some(1050), Some(-1), Some(0)])
                        .with_precision_and_scale(18, 2)
                        .unwrap(),
                ),
                Arc::new(StringArray::from(vec![Some("zoé"), Some("ab_c"), None])),
                Arc::new(StringArray::from(vec!["b1", "b1", "b2"])),
                Arc::new(StructArray::new(
                    inner,
                    vec![Arc::new(StringArray::from(vec![
                        Some("EUR"),
                        Some("usd"),
                        None,
                    ]))],
                    None,
                )),
                Arc::new(arrow::array::Date32Array::from(vec![
                    Some(20_000),
                    Some(0),
                    None,
                ])),
            ],
        )
        .unwrap()
    }

    /// Per row: Some(true) holds, Some(false) fails, None null.
    fn holds(text: &str) -> Vec<Option<bool>> {
        let e = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let v = eval(&e, &batch()).unwrap_or_else(|e| panic!("{text}: {e}"));
        as_bool(v).unwrap().iter().collect()
    }

    #[test]
    fn the_expressions_users_write_evaluate_as_spark_does() {
        let (t, f, n) = (Some(true), Some(false), None);
        assert_eq!(holds("_batch_id IS NOT NULL"), [t, t, t]);
        assert_eq!(holds("n > 0"), [t, t, n]);
        assert_eq!(holds("n >= 2 OR n IS NULL"), [f, t, t]);
        assert_eq!(holds("amt >= 0"), [t, f, t]);
        assert_eq!(holds("amt > 10.4"), [t, f, f]);
        assert_eq!(holds("amt BETWEEN -0.01 AND 10.50"), [t, t, t]);
        assert_eq!(holds("n NOT BETWEEN 2 AND 4"), [t, t, n]);
        assert_eq!(holds("n IN (1, 2, 3)"), [t, f, n]);
        assert_eq!(holds("name NOT IN ('x', 'zoé')"), [f, t, n]);
        assert_eq!(holds("name LIKE 'ab\\\\_%'"), [f, t, n]);
        assert_eq!(holds("name LIKE 'z%'"), [t, f, n]);
        assert_eq!(holds("NOT (name LIKE 'z%')"), [f, t, n]);
        assert_eq!(holds("s.code IN ('EUR', 'USD')"), [t, f, n]);
        assert_eq!(holds("upper(`s`.`Code`) = 'USD'"), [f, t, n]);
        assert_eq!(holds("length(name) = 3"), [t, f, n]);
        assert_eq!(holds("n * 2 + 1 < 10 AND n % 2 = 1"), [t, f, n]);
        assert_eq!(holds("n / 2 = 0.5"), [t, f, n]);
        assert_eq!(holds("CAST(n AS STRING) = '5'"), [f, t, n]);
        assert_eq!(holds("CAST(amt AS INT) >= 0"), [t, t, t]);
        assert_eq!(holds("day > DATE'2000-01-01'"), [t, f, n]);
        assert_eq!(holds("day >= '1970-01-01'"), [t, t, n]);
        assert_eq!(holds("coalesce(n, 0) >= 0"), [t, t, t]);
        assert_eq!(holds("n <=> NULL"), [f, f, t]);
        assert_eq!(holds("abs(amt) < 1"), [f, t, t]);
        assert_eq!(holds("-n < 0"), [t, t, n]);
    }

    #[test]
    fn a_violation_is_false_or_null_and_names_the_constraint() {
        let props = [
            (
                "delta.constraints.positive".to_string(),
                "n > 0".to_string(),
            ),
            (
                "delta.constraints.batch".to_string(),
                "_batch_id IS NOT NULL".to_string(),
            ),
        ];
        let constraints = of_properties(props.iter().map(|(k, v)| (k, v))).unwrap();
        assert_eq!(constraints[0].name, "batch");
        let v = violation(&constraints, &batch()).unwrap().unwrap();
        assert_eq!(
            (v.name.as_str(), v.text.as_str(), v.rows, v.first),
            ("positive", "n > 0", 1, 2)
        );
    }

    #[test]
    fn expressions_outside_the_subset_are_refused_by_what_they_use() {
        for (text, says) in [
            ("my_udf(n) > 0", "the function `my_udf`"),
            ("n IN (SELECT 1)", "`SELECT`"),
            ("CASE WHEN n > 0 THEN true END", "`CASE`"),
            ("name RLIKE '^a'", "`RLIKE`"),
            (
                "ts > current_timestamp()",
                "the function `current_timestamp`",
            ),
            ("name LIKE 'a%' ESCAPE '!'", "ESCAPE"),
            ("n > ", "ends too early"),
        ] {
            let why = parse(text).unwrap_err();
            assert!(why.contains(says), "{text}: {why}");
        }
        let props = [("delta.constraints.odd".to_string(), "udf(x)".to_string())];
        let refused = of_properties(props.iter().map(|(k, v)| (k, v))).unwrap_err();
        assert_eq!(
            (refused.name.as_str(), refused.text.as_str()),
            ("odd", "udf(x)")
        );
    }
}
