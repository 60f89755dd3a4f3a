//! The caching file layer (being written).
