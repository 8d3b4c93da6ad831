//! What a config that cannot be used says: where, and why.

use thiserror::Error;

/// A config that cannot be used, with where and why.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read; a missing one says how to make it.
    #[error("{path}: cannot read config: {source}{}", starter_hint(path, source))]
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

/// For a config file that does not exist: the command that writes a
/// commented starter there.
fn starter_hint(path: &str, source: &std::io::Error) -> String {
    if source.kind() == std::io::ErrorKind::NotFound {
        format!(" (`baton init --out {path}` writes a commented starter)")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_config_says_how_to_make_one_and_another_read_error_does_not() {
        let missing = crate::config::load(std::path::Path::new("/nonexistent/baton.toml")).err().map(|e| e.to_string());
        let said = missing.unwrap_or_default();
        assert!(
            said.contains("cannot read config") && said.contains("`baton init --out /nonexistent/baton.toml`"),
            "{said}"
        );
        let folder = crate::config::load(std::path::Path::new("/")).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(folder.contains("cannot read config") && !folder.contains("baton init"), "{folder}");
    }
}
