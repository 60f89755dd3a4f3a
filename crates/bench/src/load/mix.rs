//! The operation mix: which NFSv3 procedures a virtual client calls, and how often.
//!
//! The default is close to SPEC SFS 3.0's (SFS97_R1) NFSv3 mix, the workload Banks's call-rate
//! test and the published SFS results use: LOOKUP 27, READ 18, GETATTR 11, WRITE 9,
//! READDIRPLUS 9, ACCESS 7, READLINK 7, COMMIT 5, READDIR 2, CREATE 1, REMOVE 1, SETATTR 1,
//! FSSTAT 1 (percent). Weights are relative: `LOOKUP=3,GETATTR=1` means 75 % LOOKUP.

use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A procedure the load generator can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum LoadOp {
    /// LOOKUP of a file name in a file-set directory.
    Lookup,
    /// GETATTR of a file.
    Getattr,
    /// READ of one I/O-sized block at a random aligned offset of a file.
    Read,
    /// WRITE (UNSTABLE) of one block at a random aligned offset of a file.
    Write,
    /// ACCESS of a file (read, lookup, modify, extend, execute).
    Access,
    /// READDIRPLUS: the first page of a file-set directory.
    Readdirplus,
    /// READDIR: the first page of a file-set directory.
    Readdir,
    /// READLINK of the symbolic link in a file-set directory.
    Readlink,
    /// CREATE of a new file in the client's own directory.
    Create,
    /// REMOVE of a file the client created (a CREATE when it has none left).
    Remove,
    /// SETATTR of a file's mode (to the mode it already has).
    Setattr,
    /// FSSTAT of the export.
    Fsstat,
    /// COMMIT of a whole file.
    Commit,
}

impl LoadOp {
    /// Every operation, in report order.
    pub const ALL: [LoadOp; 13] = [
        LoadOp::Lookup,
        LoadOp::Read,
        LoadOp::Getattr,
        LoadOp::Write,
        LoadOp::Readdirplus,
        LoadOp::Access,
        LoadOp::Readlink,
        LoadOp::Commit,
        LoadOp::Readdir,
        LoadOp::Create,
        LoadOp::Remove,
        LoadOp::Setattr,
        LoadOp::Fsstat,
    ];

    /// The RFC 1813 procedure name (`LOOKUP`).
    pub fn name(self) -> &'static str {
        match self {
            LoadOp::Lookup => "LOOKUP",
            LoadOp::Getattr => "GETATTR",
            LoadOp::Read => "READ",
            LoadOp::Write => "WRITE",
            LoadOp::Access => "ACCESS",
            LoadOp::Readdirplus => "READDIRPLUS",
            LoadOp::Readdir => "READDIR",
            LoadOp::Readlink => "READLINK",
            LoadOp::Create => "CREATE",
            LoadOp::Remove => "REMOVE",
            LoadOp::Setattr => "SETATTR",
            LoadOp::Fsstat => "FSSTAT",
            LoadOp::Commit => "COMMIT",
        }
    }

    /// The operation named `name` (case-insensitive).
    pub fn parse(name: &str) -> Option<LoadOp> {
        LoadOp::ALL.into_iter().find(|op| op.name().eq_ignore_ascii_case(name.trim()))
    }
}

/// Relative weights of the operations; at least one is positive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpMix {
    /// Weight per operation; operations not listed are never called.
    pub weights: BTreeMap<LoadOp, u32>,
}

impl Default for OpMix {
    fn default() -> Self {
        Self::sfs3()
    }
}

impl OpMix {
    /// SPEC SFS 3.0's NFSv3 mix (see the module docs).
    pub fn sfs3() -> Self {
        let w = [
            (LoadOp::Lookup, 27),
            (LoadOp::Read, 18),
            (LoadOp::Getattr, 11),
            (LoadOp::Write, 9),
            (LoadOp::Readdirplus, 9),
            (LoadOp::Access, 7),
            (LoadOp::Readlink, 7),
            (LoadOp::Commit, 5),
            (LoadOp::Readdir, 2),
            (LoadOp::Create, 1),
            (LoadOp::Remove, 1),
            (LoadOp::Setattr, 1),
            (LoadOp::Fsstat, 1),
        ];
        Self { weights: w.into_iter().collect() }
    }

    /// Parses `LOOKUP=27,READ=18,...`; `sfs` alone is [`OpMix::sfs3`]. Operations left out get
    /// weight 0.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim().eq_ignore_ascii_case("sfs") {
            return Ok(Self::sfs3());
        }
        let mut weights = BTreeMap::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, weight) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: expected OP=WEIGHT, e.g. GETATTR=11"))?;
            let op = LoadOp::parse(name).ok_or_else(|| {
                let names: Vec<&str> = LoadOp::ALL.iter().map(|o| o.name()).collect();
                format!("unknown operation {name:?} (known: {})", names.join(" "))
            })?;
            let weight: u32 =
                weight.trim().parse().map_err(|_| format!("{item:?}: the weight must be a whole number"))?;
            if weight > 1_000_000 {
                return Err(format!("{item:?}: weights above 1000000 are not useful"));
            }
            weights.insert(op, weight);
        }
        let mix = Self { weights };
        mix.validate()?;
        Ok(mix)
    }

    /// Checks that some operation has a positive weight.
    pub fn validate(&self) -> Result<(), String> {
        if self.total() == 0 {
            return Err("the operation mix has no operation with a positive weight".into());
        }
        Ok(())
    }

    fn total(&self) -> u64 {
        self.weights.values().map(|&w| u64::from(w)).sum()
    }

    /// Draws an operation with probability proportional to its weight.
    pub fn pick(&self, rng: &mut impl Rng) -> LoadOp {
        let mut ticket = rng.gen_range(0..self.total().max(1));
        for (&op, &w) in &self.weights {
            if ticket < u64::from(w) {
                return op;
            }
            ticket -= u64::from(w);
        }
        // Unreachable for a validated mix; GETATTR is the harmless answer.
        LoadOp::Getattr
    }

    /// `LOOKUP=27,READ=18,...`, which [`OpMix::parse`] reads back.
    pub fn to_text(&self) -> String {
        let items: Vec<String> =
            self.weights.iter().filter(|(_, &w)| w > 0).map(|(op, w)| format!("{}={w}", op.name())).collect();
        items.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_sfs_mix_sums_to_99_and_round_trips() {
        let mix = OpMix::sfs3();
        assert_eq!(mix.total(), 99);
        assert_eq!(OpMix::parse(&mix.to_text()).unwrap(), mix);
        assert_eq!(OpMix::parse("sfs").unwrap(), mix);
    }

    #[test]
    fn picks_follow_the_weights() {
        let mix = OpMix::parse("getattr=3, LOOKUP=1").unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let n = 40_000;
        let getattrs = (0..n).filter(|_| mix.pick(&mut rng) == LoadOp::Getattr).count();
        // 30000 expected; 5 standard deviations (~87 each) either side.
        assert!((29_560..=30_440).contains(&getattrs), "{getattrs}");
    }

    #[test]
    fn bad_mixes_are_refused() {
        assert!(OpMix::parse("GETATTR").is_err());
        assert!(OpMix::parse("FROB=1").is_err());
        assert!(OpMix::parse("GETATTR=0").is_err());
        assert!(OpMix::parse("READ=x").is_err());
    }
}
