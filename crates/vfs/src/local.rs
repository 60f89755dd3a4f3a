//! A local directory backend (being written).
