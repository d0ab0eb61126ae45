//! The catalogues in `locales/` are read by `rust_i18n::i18n!` when the crate compiles; this
//! tells cargo to compile it again when one of them changes.
fn main() {
    println!("cargo:rerun-if-changed=locales");
}
