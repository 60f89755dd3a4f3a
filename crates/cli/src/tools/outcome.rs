//! How a tool ended ([`Outcome`]), and the per-operand failures it reported on its way
//! ([`Failures`]): what every tool returns and `run` turns into an exit code.

/// How a tool that handles several operands ended: it reports each failure
/// itself and carries on with the rest, as `cat a b` or `rm a b` do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    AllOk,
    SomeFailed,
}

/// Collects per-operand failures for a tool that keeps going after one.
pub(crate) struct Failures {
    /// The tool's name for messages (`ls`, `cat`, …).
    tool: &'static str,
    failed: bool,
}

impl Failures {
    pub(crate) fn new(tool: &'static str) -> Self {
        Failures { tool, failed: false }
    }

    /// Print `eagernfs: TOOL: message` and remember that something failed.
    pub(crate) fn report(&mut self, e: &anyhow::Error) {
        eprintln!("eagernfs: {}: {e:#}", self.tool);
        self.failed = true;
    }

    pub(crate) fn outcome(&self) -> Outcome {
        if self.failed {
            Outcome::SomeFailed
        } else {
            Outcome::AllOk
        }
    }
}
