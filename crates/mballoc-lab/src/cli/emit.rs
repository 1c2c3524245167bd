//! Writing results to stdout without panicking when the reader goes away (`mballoc … | head`):
//! `println!` panics on a closed pipe, [`out`] reports it as [`CliError::BrokenPipe`], which
//! `main` turns into a quiet exit.

use std::io::Write as _;

use super::error::CliError;

/// Writes `text` to stdout as is.
pub fn out(text: &str) -> Result<(), CliError> {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())
        .and_then(|()| o.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => CliError::BrokenPipe,
            _ => CliError::Other(format!("cannot write to stdout: {e}")),
        })
}

/// Writes `text` and a newline to stdout.
pub fn outln(text: &str) -> Result<(), CliError> {
    out(&format!("{text}\n"))
}
