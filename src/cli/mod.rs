//! The subcommands, one module each; `main` parses the command line and
//! hands each its arguments.

pub(crate) mod check;
pub(crate) mod demo;
pub(crate) mod drill;
pub(crate) mod init;
pub(crate) mod keys;
pub(crate) mod mock;
pub(crate) mod serve;

/// What a subcommand fails with: printed as one line before baton exits non-zero.
pub(crate) type AnyError = Box<dyn std::error::Error>;
