//! Rebuilds the crate when a catalogue changes: `rust_i18n::i18n!` reads `locales/` while
//! compiling, and cargo does not otherwise know the crate depends on those files.

fn main() {
    println!("cargo:rerun-if-changed=locales");
}
