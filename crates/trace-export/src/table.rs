//! One Parquet table being written: its columns (name, type, unit, meaning), Arrow builders
//! filled a row at a time and flushed as a record batch every [`BATCH_ROWS`] rows, so memory
//! stays bounded whatever the trace's size; the file is written under a temporary name and
//! renamed when complete.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::ExportError;

/// Rows buffered before a record batch is written.
pub const BATCH_ROWS: usize = 64 * 1024;

/// A column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// UTF-8 text.
    Text,
    /// Unsigned 64-bit integer (`UINT64`).
    U64,
    /// Unsigned 32-bit integer (`UINT32`).
    U32,
    /// Signed 64-bit integer (`INT64`).
    I64,
    /// 64-bit float (`DOUBLE`).
    F64,
    /// Boolean.
    Bool,
}

impl Kind {
    /// The Arrow type.
    pub fn data_type(self) -> DataType {
        match self {
            Self::Text => DataType::Utf8,
            Self::U64 => DataType::UInt64,
            Self::U32 => DataType::UInt32,
            Self::I64 => DataType::Int64,
            Self::F64 => DataType::Float64,
            Self::Bool => DataType::Boolean,
        }
    }

    /// The name in the schema documentation.
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "string",
            Self::U64 => "uint64",
            Self::U32 => "uint32",
            Self::I64 => "int64",
            Self::F64 => "double",
            Self::Bool => "boolean",
        }
    }
}

/// One column of a table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Name.
    pub name: &'static str,
    /// Type.
    pub kind: Kind,
    /// May be null (unobserved is null, never 0).
    pub nullable: bool,
    /// Unit (`ns`, `bytes`, or `-`).
    pub unit: &'static str,
    /// What it means.
    pub meaning: &'static str,
}

/// A table's name and columns.
#[derive(Debug, Clone, Copy)]
pub struct TableDef {
    /// File stem (`spans` → `spans.parquet`).
    pub name: &'static str,
    /// One row per …
    pub row: &'static str,
    /// Columns, in order.
    pub columns: &'static [Column],
}

/// A cell value.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    /// Null.
    Null,
    /// Text.
    Text(&'a str),
    /// Unsigned.
    U64(u64),
    /// Unsigned 32-bit.
    U32(u32),
    /// Signed.
    I64(i64),
    /// Float.
    F64(f64),
    /// Boolean.
    Bool(bool),
}

impl<'a> From<Option<&'a str>> for Value<'a> {
    fn from(v: Option<&'a str>) -> Self {
        v.map_or(Value::Null, Value::Text)
    }
}

impl From<Option<u64>> for Value<'_> {
    fn from(v: Option<u64>) -> Self {
        v.map_or(Value::Null, Value::U64)
    }
}

impl From<Option<u32>> for Value<'_> {
    fn from(v: Option<u32>) -> Self {
        v.map_or(Value::Null, Value::U32)
    }
}

impl From<Option<f64>> for Value<'_> {
    fn from(v: Option<f64>) -> Self {
        v.map_or(Value::Null, Value::F64)
    }
}

enum Builder {
    Text(StringBuilder),
    U64(UInt64Builder),
    U32(UInt32Builder),
    I64(Int64Builder),
    F64(Float64Builder),
    Bool(BooleanBuilder),
}

impl Builder {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Text => Self::Text(StringBuilder::with_capacity(BATCH_ROWS, BATCH_ROWS * 16)),
            Kind::U64 => Self::U64(UInt64Builder::with_capacity(BATCH_ROWS)),
            Kind::U32 => Self::U32(UInt32Builder::with_capacity(BATCH_ROWS)),
            Kind::I64 => Self::I64(Int64Builder::with_capacity(BATCH_ROWS)),
            Kind::F64 => Self::F64(Float64Builder::with_capacity(BATCH_ROWS)),
            Kind::Bool => Self::Bool(BooleanBuilder::with_capacity(BATCH_ROWS)),
        }
    }

    /// Appends `v`; false when its type is not the column's.
    fn push(&mut self, v: Value<'_>) -> bool {
        match (self, v) {
            (Self::Text(b), Value::Text(s)) => b.append_value(s),
            (Self::Text(b), Value::Null) => b.append_null(),
            (Self::U64(b), Value::U64(x)) => b.append_value(x),
            (Self::U64(b), Value::Null) => b.append_null(),
            (Self::U32(b), Value::U32(x)) => b.append_value(x),
            (Self::U32(b), Value::Null) => b.append_null(),
            (Self::I64(b), Value::I64(x)) => b.append_value(x),
            (Self::I64(b), Value::Null) => b.append_null(),
            (Self::F64(b), Value::F64(x)) => b.append_value(x),
            (Self::F64(b), Value::Null) => b.append_null(),
            (Self::Bool(b), Value::Bool(x)) => b.append_value(x),
            (Self::Bool(b), Value::Null) => b.append_null(),
            _ => return false,
        }
        true
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Text(b) => Arc::new(b.finish()),
            Self::U64(b) => Arc::new(b.finish()),
            Self::U32(b) => Arc::new(b.finish()),
            Self::I64(b) => Arc::new(b.finish()),
            Self::F64(b) => Arc::new(b.finish()),
            Self::Bool(b) => Arc::new(b.finish()),
        }
    }
}

/// A table being written.
pub struct TableWriter {
    def: TableDef,
    schema: SchemaRef,
    builders: Vec<Builder>,
    buffered: usize,
    rows: u64,
    writer: Option<ArrowWriter<File>>,
    tmp: PathBuf,
    path: PathBuf,
}

impl TableWriter {
    /// Creates `dir/<name>.parquet` (under a temporary name until [`TableWriter::finish`]).
    ///
    /// # Errors
    /// I/O and Parquet errors naming the file.
    pub fn create(dir: &Path, def: TableDef) -> Result<Self, ExportError> {
        let path = dir.join(format!("{}.parquet", def.name));
        let tmp = dir.join(format!(".{}.parquet.tmp", def.name));
        let schema: SchemaRef = Arc::new(Schema::new(
            def.columns
                .iter()
                .map(|c| Field::new(c.name, c.kind.data_type(), c.nullable))
                .collect::<Vec<_>>(),
        ));
        let file = File::create(&tmp).map_err(|source| ExportError::Io {
            path: tmp.clone(),
            source,
        })?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| {
            ExportError::Parquet {
                path: tmp.clone(),
                message: e.to_string(),
            }
        })?;
        Ok(Self {
            builders: def.columns.iter().map(|c| Builder::new(c.kind)).collect(),
            def,
            schema,
            buffered: 0,
            rows: 0,
            writer: Some(writer),
            tmp,
            path,
        })
    }

    /// Appends one row (`values` in column order).
    ///
    /// # Errors
    /// A wrong number of values or a value of the wrong type (a bug: named with the table and
    /// column); Parquet errors when a batch is flushed.
    pub fn push(&mut self, values: &[Value<'_>]) -> Result<(), ExportError> {
        if values.len() != self.builders.len() {
            return Err(ExportError::Row {
                table: self.def.name,
                column: "-",
            });
        }
        for ((b, v), c) in self.builders.iter_mut().zip(values).zip(self.def.columns) {
            let null_in_required = matches!(v, Value::Null) && !c.nullable;
            if null_in_required || !b.push(*v) {
                return Err(ExportError::Row {
                    table: self.def.name,
                    column: c.name,
                });
            }
        }
        self.buffered += 1;
        self.rows += 1;
        if self.buffered >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ExportError> {
        if self.buffered == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        self.buffered = 0;
        let batch = RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| {
            ExportError::Parquet {
                path: self.tmp.clone(),
                message: e.to_string(),
            }
        })?;
        if let Some(w) = self.writer.as_mut() {
            w.write(&batch).map_err(|e| ExportError::Parquet {
                path: self.tmp.clone(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Writes the rest, closes the file and renames it into place; returns the rows written.
    ///
    /// # Errors
    /// Parquet and I/O errors naming the file.
    pub fn finish(mut self) -> Result<(PathBuf, u64), ExportError> {
        self.flush()?;
        if let Some(w) = self.writer.take() {
            w.close().map_err(|e| ExportError::Parquet {
                path: self.tmp.clone(),
                message: e.to_string(),
            })?;
        }
        std::fs::rename(&self.tmp, &self.path).map_err(|source| ExportError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok((self.path.clone(), self.rows))
    }

    /// Removes the temporary file (after a failure).
    pub fn abandon(mut self) {
        self.writer.take();
        let _ = std::fs::remove_file(&self.tmp);
    }
}
