//! `baton init`: a commented starter config.

use super::AnyError;

/// The starter config `baton init` writes.
const STARTER: &str = include_str!("starter.toml");

#[expect(clippy::print_stdout, reason = "init says what it wrote and what is next")]
pub(crate) fn run(out: &std::path::Path, force: bool) -> Result<(), AnyError> {
    if out.exists() && !force {
        return Err(format!("{} exists; pass --force to replace it", out.display()).into());
    }
    std::fs::write(out, STARTER).map_err(|err| format!("cannot write {}: {err}", out.display()))?;
    println!(
        "wrote {}: three providers (OpenAI, Anthropic, Gemini) and route \"chat\" trying them in order.",
        out.display()
    );
    println!(
        "Set OPENAI_API_KEY, ANTHROPIC_API_KEY and GEMINI_API_KEY (or remove the providers you do not use), then:"
    );
    println!("  baton check --config {0}\n  baton serve --config {0}", out.display());
    Ok(())
}
