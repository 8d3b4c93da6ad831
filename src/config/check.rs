//! The context every check reads a value in: the config's text (for line
//! numbers), its label (for errors), the `${VAR}` lookup and the directory
//! relative paths start from; and the checks every section shares.

use std::time::Duration;

use toml::Spanned;

use super::error::ConfigError;

/// What the checks of every section read a raw value against.
pub(super) struct Checker<'a> {
    pub text: &'a str,
    pub label: &'a str,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The config file's directory, when it came from a file.
    pub dir: Option<&'a std::path::Path>,
    /// Secrets whose `${VAR}` is not set are left unset instead of refused:
    /// for commands that touch only the store (`baton keys`), which must
    /// not need the providers' keys.
    pub secrets_optional: bool,
}

impl Checker<'_> {
    /// The 1-based line of byte `offset` of the text.
    pub fn line(&self, offset: usize) -> usize {
        self.text.get(..offset).map_or(1, |before| before.matches('\n').count() + 1)
    }

    /// An error about `at`, under `key`, placed at its line.
    pub(super) fn error<T>(&self, at: &Spanned<T>, key: String, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.label.to_owned(),
            line: self.line(at.span().start),
            key,
            message: message.into(),
        }
    }

    /// [`Checker::expand`], or nothing when a variable is missing (that is
    /// an error reported elsewhere).
    pub fn expand_quietly(&self, value: &Spanned<String>) -> Option<String> {
        self.expand(value, "").ok()
    }

    /// A secret's value, [`Checker::expand`]ed; `None` when a variable in
    /// it is missing and secrets are optional.
    pub(super) fn secret(&self, value: &Spanned<String>, key: &str) -> Result<Option<String>, ConfigError> {
        match self.expand(value, key) {
            Ok(secret) => Ok(Some(secret)),
            Err(_) if self.secrets_optional => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Replaces every `${VAR}` with the variable's value, and `${VAR:-default}`
    /// with it or, when it is unset or empty, with `default`.
    pub(super) fn expand(&self, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        let mut out = String::new();
        let mut rest = value.get_ref().as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').ok_or_else(|| self.error(value, key.to_owned(), "unclosed `${` in value"))?;
            let (name, default) = match after[..end].split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (&after[..end], None),
            };
            let resolved = (self.env)(name)
                .filter(|value| default.is_none() || !value.is_empty())
                .or_else(|| default.map(str::to_owned))
                .ok_or_else(|| self.error(value, key.to_owned(), format!("environment variable {name} is not set")))?;
            out.push_str(&resolved);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// A positive size, or `default` when not written.
    pub(super) fn size(&self, value: Option<&Spanned<u64>>, key: &str, default: usize) -> Result<usize, ConfigError> {
        match value {
            Some(n) => usize::try_from(*n.get_ref())
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| self.error(n, key.to_owned(), "must be a positive whole number")),
            None => Ok(default),
        }
    }

    /// A duration of at least 1 ms, or `default` when not written.
    pub(super) fn millis(
        &self,
        value: Option<&Spanned<u64>>,
        key: &str,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        match value {
            Some(ms) if *ms.get_ref() == 0 => Err(self.error(ms, key.to_owned(), "must be at least 1 ms")),
            Some(ms) => Ok(Duration::from_millis(*ms.get_ref())),
            None => Ok(default),
        }
    }
}
