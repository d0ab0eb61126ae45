//! roster's benchmark harness: the echo server every target fronts, the load generator's
//! client and measurements, and the report `bench/run` writes. See `bench/run`.

pub mod client;
pub mod echo;
pub mod isolation;
pub mod measure;
pub mod raw;
pub mod report;
pub mod stats;
