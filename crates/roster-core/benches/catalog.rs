//! Catalog benches (written next).
fn main() {}
