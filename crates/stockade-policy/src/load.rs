//! Loading presets, work units and trusted connections from TOML or JSON bytes.
//!
//! The caller reads the file; these functions only parse. The format comes from the file
//! name's extension (`.toml` or `.json`). Unknown fields are refused, and every error names the
//! file and the field path (for example `permissions.network.destinations[1]`).

use std::fmt;

use serde::de::DeserializeOwned;

use crate::{AgentPreset, TrustedModelConnections, WorkUnit};

/// Largest input accepted, in bytes.
pub const MAX_INPUT_BYTES: usize = 1 << 20;

/// The input format, chosen by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.toml`
    Toml,
    /// `.json`
    Json,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Toml => "toml",
            Format::Json => "json",
        })
    }
}

/// Why a file could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The extension is neither `.toml` nor `.json`.
    #[error("{file}: unknown format; the file name must end in .toml or .json")]
    UnknownFormat {
        /// The file name.
        file: String,
    },
    /// The input is larger than [`MAX_INPUT_BYTES`].
    #[error("{file}: {len} bytes is larger than the 1 MiB limit")]
    TooLarge {
        /// The file name.
        file: String,
        /// The input length.
        len: usize,
    },
    /// The input is not UTF-8.
    #[error("{file}: not valid utf-8 at byte {offset}")]
    NotUtf8 {
        /// The file name.
        file: String,
        /// Where decoding failed.
        offset: usize,
    },
    /// The input does not parse or does not fit the schema.
    #[error("{file}{}: {field}: {message}", location.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
    Invalid {
        /// The file name.
        file: String,
        /// The format.
        format: Format,
        /// The field path (`.` for the document root).
        field: String,
        /// Line and column (1-based), when the parser knows them.
        location: Option<(usize, usize)>,
        /// What is wrong.
        message: String,
    },
}

/// Parses an [`AgentPreset`] from TOML or JSON (by `file_name`'s extension).
pub fn load_preset(bytes: &[u8], file_name: &str) -> Result<AgentPreset, LoadError> {
    load(bytes, file_name)
}

/// Parses a [`WorkUnit`] from TOML or JSON (by `file_name`'s extension).
pub fn load_work_unit(bytes: &[u8], file_name: &str) -> Result<WorkUnit, LoadError> {
    load(bytes, file_name)
}

/// Parses [`TrustedModelConnections`] from TOML or JSON (by `file_name`'s extension).
pub fn load_trusted_connections(
    bytes: &[u8],
    file_name: &str,
) -> Result<TrustedModelConnections, LoadError> {
    load(bytes, file_name)
}

/// The format a file name's extension selects.
pub fn format_of(file_name: &str) -> Option<Format> {
    let ext = file_name.rsplit_once('.')?.1;
    if ext.eq_ignore_ascii_case("toml") {
        Some(Format::Toml)
    } else if ext.eq_ignore_ascii_case("json") {
        Some(Format::Json)
    } else {
        None
    }
}

/// Escapes control characters (terminal escapes, newlines) so that error text quoting untrusted
/// input cannot rewrite the operator's terminal.
pub(crate) fn printable(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, col)
}

fn field(path: &serde_path_to_error::Path) -> String {
    let s = printable(&path.to_string());
    if s.is_empty() { ".".to_owned() } else { s }
}

fn load<T: DeserializeOwned>(bytes: &[u8], file_name: &str) -> Result<T, LoadError> {
    let file = printable(file_name);
    let Some(format) = format_of(file_name) else {
        return Err(LoadError::UnknownFormat { file });
    };
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(LoadError::TooLarge {
            file,
            len: bytes.len(),
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| LoadError::NotUtf8 {
        file: file.clone(),
        offset: e.valid_up_to(),
    })?;
    match format {
        Format::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let value =
                serde_path_to_error::deserialize(&mut de).map_err(|e| LoadError::Invalid {
                    file: file.clone(),
                    format,
                    field: field(e.path()),
                    location: Some((e.inner().line(), e.inner().column())).filter(|(l, _)| *l > 0),
                    message: printable(&strip_json_position(&e.inner().to_string())),
                })?;
            de.end().map_err(|e| LoadError::Invalid {
                file,
                format,
                field: ".".to_owned(),
                location: Some((e.line(), e.column())),
                message: printable(&strip_json_position(&e.to_string())),
            })?;
            Ok(value)
        }
        Format::Toml => {
            let de = toml::Deserializer::parse(text).map_err(|e| LoadError::Invalid {
                file: file.clone(),
                format,
                field: ".".to_owned(),
                location: e.span().map(|s| line_col(text, s.start)),
                message: printable(e.message()),
            })?;
            serde_path_to_error::deserialize(de).map_err(|e| LoadError::Invalid {
                file,
                format,
                field: field(e.path()),
                location: e.inner().span().map(|s| line_col(text, s.start)),
                message: printable(e.inner().message()),
            })
        }
    }
}

/// serde_json appends " at line L column C"; the location is reported separately.
fn strip_json_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}
