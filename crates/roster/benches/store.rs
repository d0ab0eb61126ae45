//! Store benches (written next).
fn main() {}
