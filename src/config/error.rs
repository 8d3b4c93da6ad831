//! What a config that cannot be used says: where, and why.

use thiserror::Error;

/// A config that cannot be used, with where and why.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read config: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file was read but something in it is wrong.
    #[error("{path}:{line}: {key}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// The 1-based line of the offending value.
        line: usize,
        /// The offending key, as a dotted path.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// Several mistakes, each with its place, reported together.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Many(Vec<ConfigError>),
}
