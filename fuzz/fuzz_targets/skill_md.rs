//! SKILL.md parsing (front matter, kinds, flow templates compiled at load): any text is a skill
//! or an error, never a panic; a parsed skill keeps the id it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roster_core::skills::{SkillSource, load, parse_skill};

fuzz_target!(|text: &str| {
    if let Ok(skill) = parse_skill("fuzz/skill", text) {
        assert_eq!(skill.id, "fuzz/skill");
    }
    // The loader (includes, resolution) over the same text twice, under two ids whose last
    // segment is the `name` a seed carries.
    let report = load([
        SkillSource::new("fuzz/skill", text),
        SkillSource::new("other/skill", text),
    ]);
    assert!(report.invalid.len() <= 2);
});
