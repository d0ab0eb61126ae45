//! Includes resolution: a skill's flattened tool set.

use std::collections::BTreeSet;

use super::model::Skill;

/// Why a skill's includes could not be followed. Both variants name the include path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// Following `includes` came back to a skill already on the path.
    #[error("include cycle: {}", .path.join(" → "))]
    Cycle {
        /// The path from the skill being resolved, ending with the skill seen twice.
        path: Vec<String>,
    },
    /// An include names no loaded skill.
    #[error("missing include {:?} (path: {})", .path.last().map(String::as_str).unwrap_or(""), .path.join(" → "))]
    MissingInclude {
        /// The path from the skill being resolved, ending with the missing id.
        path: Vec<String>,
    },
}

/// A skill's flattened tool set: its own references (see [`Skill::own_tool_references`]) plus
/// those of everything it includes, transitively. `lookup` finds a skill by id.
pub fn flattened_tools<'a>(
    skill: &'a Skill,
    lookup: &impl Fn(&str) -> Option<&'a Skill>,
) -> Result<BTreeSet<String>, ResolveError> {
    let mut tools = BTreeSet::new();
    let mut path = vec![skill.id.clone()];
    let mut done = BTreeSet::new();
    visit(skill, lookup, &mut path, &mut done, &mut tools)?;
    Ok(tools)
}

fn visit<'a>(
    skill: &'a Skill,
    lookup: &impl Fn(&str) -> Option<&'a Skill>,
    path: &mut Vec<String>,
    done: &mut BTreeSet<&'a str>,
    tools: &mut BTreeSet<String>,
) -> Result<(), ResolveError> {
    tools.extend(skill.own_tool_references().into_iter().map(str::to_owned));
    for include in &skill.includes {
        if path.iter().any(|id| id == include) {
            path.push(include.clone());
            return Err(ResolveError::Cycle { path: path.clone() });
        }
        // A diamond (a → b, a → c, b → d, c → d) visits d once; it is not a cycle.
        if done.contains(include.as_str()) {
            continue;
        }
        path.push(include.clone());
        let Some(included) = lookup(include) else {
            return Err(ResolveError::MissingInclude { path: path.clone() });
        };
        visit(included, lookup, path, done, tools)?;
        path.pop();
        done.insert(included.id.as_str());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::skills::parse_skill;

    fn skill(id: &str, includes: &[&str], tools: &[&str]) -> Skill {
        let name = id.rsplit('/').next().unwrap_or(id);
        let text = format!(
            "---\nname: {name}\ndescription: d\nincludes: [{}]\ntools: [{}]\n---\n",
            includes.join(", "),
            tools.join(", ")
        );
        parse_skill(id, &text).expect("test skill parses")
    }

    fn set(skills: &[Skill]) -> BTreeMap<String, Skill> {
        skills.iter().map(|s| (s.id.clone(), s.clone())).collect()
    }

    fn flatten(all: &BTreeMap<String, Skill>, id: &str) -> Result<BTreeSet<String>, ResolveError> {
        flattened_tools(&all[id], &|id| all.get(id))
    }

    #[test]
    fn tools_are_flattened_transitively() {
        let all = set(&[
            skill("ns/a", &["ns/b", "ns/c"], &["s__a"]),
            skill("ns/b", &["ns/d"], &["s__b"]),
            skill("ns/c", &["ns/d"], &["s__c"]),
            skill("ns/d", &[], &["s__d", "s__a"]),
        ]);
        let tools: Vec<_> = flatten(&all, "ns/a")
            .expect("diamond resolves")
            .into_iter()
            .collect();
        assert_eq!(tools, vec!["s__a", "s__b", "s__c", "s__d"]);
    }

    #[test]
    fn a_cycle_names_its_path() {
        let all = set(&[
            skill("a", &["b"], &[]),
            skill("b", &["c"], &[]),
            skill("c", &["a"], &[]),
        ]);
        let error = flatten(&all, "a").expect_err("cycle");
        assert_eq!(
            error,
            ResolveError::Cycle {
                path: vec!["a".into(), "b".into(), "c".into(), "a".into()]
            }
        );
        assert_eq!(error.to_string(), "include cycle: a → b → c → a");
    }

    #[test]
    fn a_self_include_is_a_cycle() {
        let all = set(&[skill("a", &["a"], &[])]);
        assert_eq!(
            flatten(&all, "a").expect_err("cycle").to_string(),
            "include cycle: a → a"
        );
    }

    #[test]
    fn a_cycle_below_the_skill_is_reported_from_it() {
        let all = set(&[
            skill("top", &["b"], &[]),
            skill("b", &["c"], &[]),
            skill("c", &["b"], &[]),
        ]);
        assert_eq!(
            flatten(&all, "top").expect_err("cycle").to_string(),
            "include cycle: top → b → c → b"
        );
    }

    #[test]
    fn a_missing_include_names_its_path() {
        let all = set(&[skill("a", &["b"], &[]), skill("b", &["ns/gone"], &[])]);
        let error = flatten(&all, "a").expect_err("missing");
        assert_eq!(
            error,
            ResolveError::MissingInclude {
                path: vec!["a".into(), "b".into(), "ns/gone".into()]
            }
        );
        assert_eq!(
            error.to_string(),
            "missing include \"ns/gone\" (path: a → b → ns/gone)"
        );
    }
}
