//! One cell on its way between the backends, in the PostgreSQL column's kind, and the
//! per-table checksum both sides compute the same way from these cells.

use sha2::{Digest, Sha256};

use super::TransferError;

/// What a column holds, from the PostgreSQL column's `data_type` (the typed side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Text,
    /// Bytes: a SQLite BLOB column, PostgreSQL `bytea`.
    Bytes,
}

impl Kind {
    /// The kind of a PostgreSQL `information_schema.columns.data_type`, or `None` when the
    /// transfer cannot carry it without loss.
    pub fn of_pg_type(data_type: &str) -> Option<Self> {
        match data_type {
            "bigint" | "integer" | "smallint" => Some(Self::Int),
            "double precision" | "real" => Some(Self::Float),
            "text" | "character varying" | "character" | "json" | "jsonb" => Some(Self::Text),
            "bytea" => Some(Self::Bytes),
            _ => None,
        }
    }
}

/// A cell. SQLite's dynamic values are coerced into the column's [`Kind`] when read, so both
/// sides hand over (and checksum) the same thing.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
}

impl Value {
    /// The key as shown in errors and notes.
    pub fn shown(&self) -> String {
        match self {
            Self::Null => "NULL".into(),
            Self::Int(i) => i.to_string(),
            Self::Float(f) => f.to_string(),
            Self::Text(t) => format!("{t:?}"),
            Self::Bytes(b) => format!("x'{}'", hex::encode(b)),
        }
    }
}

/// Where a cell came from, for an error that lets the operator find it.
pub struct Cell<'a> {
    pub table: &'a str,
    pub row: &'a str,
    pub column: &'a str,
}

impl Cell<'_> {
    pub fn error(&self, reason: impl Into<String>) -> TransferError {
        TransferError::Data {
            table: self.table.to_owned(),
            row: self.row.to_owned(),
            column: self.column.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Integers up to 2^53 convert to a double and back exactly.
const EXACT_FLOAT_INT: i64 = 1 << 53;

/// Coerces a SQLite value into `kind` without loss, or explains why it cannot.
pub fn coerce(
    value: rusqlite::types::ValueRef<'_>,
    kind: Kind,
    at: &Cell<'_>,
) -> Result<Value, TransferError> {
    use rusqlite::types::ValueRef as V;
    Ok(match (value, kind) {
        (V::Null, _) => Value::Null,
        (V::Integer(i), Kind::Int) => Value::Int(i),
        (V::Integer(i), Kind::Float) if i.abs() <= EXACT_FLOAT_INT => Value::Float(i as f64),
        (V::Real(f), Kind::Float) => Value::Float(f),
        (V::Real(f), Kind::Int) if f.fract() == 0.0 && f.abs() <= EXACT_FLOAT_INT as f64 => {
            Value::Int(f as i64)
        }
        (V::Text(bytes), Kind::Text) => {
            let text =
                std::str::from_utf8(bytes).map_err(|_| at.error("the text is not valid UTF-8"))?;
            Value::Text(text.to_owned())
        }
        (V::Blob(bytes), Kind::Bytes) => Value::Bytes(bytes.to_vec()),
        (V::Blob(_), _) => {
            return Err(at.error("a BLOB cannot be carried into a text or number column"));
        }
        (other, kind) => {
            return Err(at.error(format!(
                "the SQLite value {other:?} does not fit the PostgreSQL column's {kind:?} type without loss"
            )));
        }
    })
}

/// SHA-256 over a canonical encoding of a table's rows in key order: per cell a tag byte, then
/// the integer or the float's bits big-endian, or the text's (or bytes') length and bytes.
#[derive(Default)]
pub struct Checksum {
    hasher: Sha256,
    rows: u64,
}

impl Checksum {
    pub fn add_row(&mut self, row: &[Value]) {
        for value in row {
            match value {
                Value::Null => self.hasher.update([0u8]),
                Value::Int(i) => {
                    self.hasher.update([1u8]);
                    self.hasher.update(i.to_be_bytes());
                }
                Value::Float(f) => {
                    self.hasher.update([2u8]);
                    self.hasher.update(f.to_bits().to_be_bytes());
                }
                Value::Text(t) => {
                    self.hasher.update([3u8]);
                    self.hasher.update((t.len() as u64).to_be_bytes());
                    self.hasher.update(t.as_bytes());
                }
                Value::Bytes(b) => {
                    self.hasher.update([4u8]);
                    self.hasher.update((b.len() as u64).to_be_bytes());
                    self.hasher.update(b);
                }
            }
        }
        self.rows += 1;
    }

    /// The row count and the hex digest.
    pub fn finish(self) -> (u64, String) {
        (self.rows, hex::encode(self.hasher.finalize()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::types::ValueRef;

    fn at() -> Cell<'static> {
        Cell {
            table: "messages",
            row: "id=7",
            column: "content",
        }
    }

    #[test]
    fn sqlite_values_coerce_without_loss_or_are_refused() {
        assert_eq!(
            coerce(ValueRef::Integer(3), Kind::Float, &at()).unwrap(),
            Value::Float(3.0)
        );
        assert_eq!(
            coerce(ValueRef::Real(4.0), Kind::Int, &at()).unwrap(),
            Value::Int(4)
        );
        assert!(coerce(ValueRef::Real(4.5), Kind::Int, &at()).is_err());
        assert!(coerce(ValueRef::Integer(1 << 60), Kind::Float, &at()).is_err());
        assert!(coerce(ValueRef::Text(b"12"), Kind::Int, &at()).is_err());
        let blob = coerce(ValueRef::Blob(b"ab"), Kind::Text, &at())
            .unwrap_err()
            .to_string();
        assert!(
            blob.contains("messages") && blob.contains("id=7") && blob.contains("content"),
            "{blob}"
        );
        let bad = coerce(ValueRef::Text(b"a\xffb"), Kind::Text, &at())
            .unwrap_err()
            .to_string();
        assert!(bad.contains("UTF-8"), "{bad}");
        // U+0000 is carried (PostgreSQL gets it escaped, see pg_text).
        assert_eq!(
            coerce(ValueRef::Text(b"\0json:[]"), Kind::Text, &at()).unwrap(),
            Value::Text("\0json:[]".into())
        );
    }

    #[test]
    fn the_checksum_tells_null_from_empty_and_floats_by_their_bits() {
        let digest = |rows: &[Vec<Value>]| {
            let mut sum = Checksum::default();
            rows.iter().for_each(|r| sum.add_row(r));
            sum.finish().1
        };
        let null = digest(&[vec![Value::Null]]);
        let empty = digest(&[vec![Value::Text(String::new())]]);
        assert_ne!(null, empty);
        assert_ne!(
            digest(&[vec![Value::Float(0.1 + 0.2)]]),
            digest(&[vec![Value::Float(0.3)]])
        );
        // Cell boundaries are part of the encoding.
        assert_ne!(
            digest(&[vec![Value::Text("ab".into()), Value::Text("c".into())]]),
            digest(&[vec![Value::Text("a".into()), Value::Text("bc".into())]])
        );
    }
}
