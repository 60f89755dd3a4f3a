//! exports(5) configuration (being written).
