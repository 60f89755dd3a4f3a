//! An in-memory backend (being written).
