//! How the catalog is made: the local skills keep their ids, each server's skills join them
//! under `SERVER/PATH` with their includes and tool names mapped to what roster serves.

use std::collections::{BTreeMap, HashMap, HashSet};

use roster_core::SkillSource;
use roster_core::catalog::Catalog;
use roster_core::skills::load_adjusted;

use super::roots::Served;
use crate::servers::SyncedSkill;

/// One synced skill as served: the server it comes from, and what that server gave.
#[derive(Debug, Clone)]
pub(crate) struct SyncedServed {
    pub(crate) server: String,
    pub(crate) skill: SyncedSkill,
}

/// What the catalog is made of besides the local roots: each server's skills, in config
/// order, and how a server's own tool names read in roster (`None`: as written).
#[derive(Default)]
pub(super) struct Synced {
    pub(super) by_server: BTreeMap<String, Vec<SyncedSkill>>,
    pub(super) order: Vec<String>,
}

/// The catalog of the local skills and the synced ones, with the synced ones by id.
pub(super) struct Composed {
    pub(super) catalog: Catalog,
    pub(super) synced: BTreeMap<String, SyncedServed>,
    pub(super) problems: Vec<(String, String)>,
    /// Each server's tool names its skills use, with the names roster served for them.
    pub(super) names: Names,
}

/// The name roster serves a server's tool under, by the server and the tool's own name.
type ExposedName<'a> = dyn Fn(&str, &str) -> String + 'a;

/// Per server, the tool names its skills use (its own names) and what they were mapped to.
pub(super) type Names = BTreeMap<String, BTreeMap<String, String>>;

/// Makes the catalog: the local skills keep their ids; a server's skill is `SERVER/PATH`, or
/// `SERVER/SERVER/PATH` when a skill before it (local first, then servers in config order)
/// holds that id. A synced skill's includes name its server's other skills, its tool
/// references its server's tools by their own names (`exposed(server, name)` gives the name
/// roster serves), and it is seen by whom its entry or the server's config says when its
/// `SKILL.md` says nothing.
pub(super) fn compose(
    served: &[Served],
    synced: &Synced,
    exposed: Option<&ExposedName<'_>>,
) -> Composed {
    let mut sources: Vec<SkillSource> = served
        .iter()
        .flat_map(|s| s.sources.iter().cloned())
        .collect();
    let mut taken: HashSet<String> = sources.iter().map(|s| s.dir.clone()).collect();
    let mut by_id: BTreeMap<String, SyncedServed> = BTreeMap::new();
    // Per server: its path → the id roster serves it under.
    let mut ids: HashMap<&str, HashMap<&str, String>> = HashMap::new();
    let mut problems = Vec::new();
    let mut names = Names::new();
    let servers = synced
        .order
        .iter()
        .filter_map(|server| Some((server, synced.by_server.get(server)?)));
    for (server, skills) in servers {
        for skill in skills {
            let id = [
                format!("{server}/{}", skill.path),
                format!("{server}/{server}/{}", skill.path),
            ]
            .into_iter()
            .find(|id| !taken.contains(id));
            let Some(id) = id else {
                problems.push((
                    server.clone(),
                    format!(
                        "skill {} of server `{server}` is left out: its ids are taken",
                        skill.path
                    ),
                ));
                continue;
            };
            if id != format!("{server}/{}", skill.path) {
                tracing::warn!(
                    %server,
                    skill = %skill.path,
                    "a skill before it holds {server}/{}; served as {id}",
                    skill.path
                );
            }
            taken.insert(id.clone());
            ids.entry(server.as_str())
                .or_default()
                .insert(skill.path.as_str(), id.clone());
            sources.push(SkillSource::new(id.clone(), skill.text.clone()));
            by_id.insert(
                id,
                SyncedServed {
                    server: server.clone(),
                    skill: skill.clone(),
                },
            );
        }
    }
    let report = load_adjusted(sources, |skill| {
        let Some(origin) = by_id.get(&skill.id) else {
            return;
        };
        let server = origin.server.as_str();
        if skill.visibility.is_empty() {
            skill.visibility = origin.skill.visibility.clone();
        }
        let own = ids.get(server);
        for include in &mut skill.includes {
            if let Some(id) = own.and_then(|own| own.get(include.as_str())) {
                *include = id.clone();
            }
        }
        if let Some(exposed) = exposed {
            let used = names.entry(server.to_owned()).or_default();
            let tools = skill.tools.iter_mut();
            for tool in tools.chain(skill.steps.iter_mut().map(|step| &mut step.tool)) {
                let mapped = exposed(server, tool);
                used.insert(std::mem::replace(tool, mapped.clone()), mapped);
            }
        }
    });
    for invalid in &report.invalid {
        if let Some(origin) = by_id.remove(&invalid.dir) {
            let text = format!(
                "skill {} of server `{}` is left out: {}",
                origin.skill.path, origin.server, invalid.error
            );
            problems.push((origin.server, text));
        }
    }
    Composed {
        catalog: Catalog::from_report(report),
        synced: by_id,
        problems,
        names,
    }
}

/// The name roster serves `server`'s tool `name` under: its exposed name when it is listed, the
/// name as it is when roster serves a tool by that name, else the name it would be exposed
/// under.
pub(super) fn exposed_name(
    registry: &roster_core::ToolRegistry,
    server: &str,
    name: &str,
) -> String {
    if let Some(exposed) = registry.exposed_name(server, name) {
        exposed.to_owned()
    } else if registry.route(name).is_some() {
        name.to_owned()
    } else {
        registry.first_candidate(server, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::Skills;
    use rmcp::model::Skill as SkillFile;
    use roster_core::catalog::Subscriptions;

    fn write(path: &std::path::Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn synced(path: &str, text: &str, visibility: &[&str]) -> SyncedSkill {
        use rmcp::model::{SkillFrontmatter, SkillResources};
        let name = path.rsplit('/').next().unwrap_or(path);
        SyncedSkill {
            path: path.to_owned(),
            entry: SkillFile::new(
                format!("skill://{path}/SKILL.md"),
                SkillFrontmatter::new(name, "d"),
                SkillResources::Dynamic,
            ),
            files: Vec::new(),
            text: text.to_owned(),
            loaded: true,
            visibility: visibility.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    #[test]
    fn synced_skills_are_namespaced_a_clash_is_prefixed_again_and_names_are_mapped() {
        let dir = tempfile::tempdir().expect("temp dir");
        write(
            &dir.path().join("docs/pdf/forms/SKILL.md"),
            "---\nname: forms\ndescription: Local.\n---\nbody\n",
        );
        let (local, problems) = Skills::load(&[dir.path().to_owned()], 1 << 20);
        assert!(problems.is_empty(), "{problems:?}");
        let served = crate::sync::lock(&local.served).clone();
        let mut from_servers = Synced {
            order: vec!["docs".to_owned()],
            ..Synced::default()
        };
        from_servers.by_server.insert(
            "docs".to_owned(),
            vec![
                synced_skill_with_includes(),
                synced(
                    "pdf/forms",
                    "---\nname: forms\ndescription: Synced.\n---\nb\n",
                    &[],
                ),
                synced(
                    "pro/only",
                    "---\nname: only\ndescription: P.\nvisibility: [pro]\n---\nb\n",
                    &["team"],
                ),
                synced(
                    "team/only",
                    "---\nname: only\ndescription: T.\n---\nb\n",
                    &["team"],
                ),
                synced("broken", "no front matter", &[]),
            ],
        );
        let exposed = |server: &str, name: &str| format!("{server}__{name}");
        let composed = compose(&served, &from_servers, Some(&exposed));
        let everyone = Subscriptions::default();
        let catalog = &composed.catalog;
        let description = |subs: &Subscriptions, id: &str| {
            catalog
                .get(subs, id)
                .map(|d| d.skill.description.clone())
                .ok()
        };
        assert_eq!(
            description(&everyone, "docs/pdf/forms").as_deref(),
            Some("Local.")
        );
        assert_eq!(
            description(&everyone, "docs/docs/pdf/forms").as_deref(),
            Some("Synced.")
        );
        // Its own visibility wins; without one, the server's.
        let team: Subscriptions = ["team".to_owned()].into_iter().collect();
        let pro: Subscriptions = ["pro".to_owned()].into_iter().collect();
        assert!(description(&team, "docs/pro/only").is_none());
        assert!(description(&pro, "docs/pro/only").is_some());
        assert!(description(&everyone, "docs/team/only").is_none());
        assert!(description(&team, "docs/team/only").is_some());
        // Includes name the server's skills; tools its tools.
        let flow = catalog.get(&everyone, "docs/ops/shout").expect("the flow");
        assert_eq!(flow.skill.includes, vec!["docs/docs/pdf/forms"]);
        assert_eq!(flow.skill.steps[0].tool, "docs__echo");
        assert_eq!(flow.skill.tools, vec!["docs__add"]);
        assert!(
            composed
                .problems
                .iter()
                .any(|(s, p)| s == "docs" && p.contains("broken") && p.contains("`docs`")),
            "{:?}",
            composed.problems
        );
        assert!(!composed.synced.contains_key("docs/broken"));
        assert_eq!(
            composed.synced["docs/docs/pdf/forms"].skill.path,
            "pdf/forms"
        );
    }

    fn synced_skill_with_includes() -> SyncedSkill {
        synced(
            "ops/shout",
            "---\nname: shout\ndescription: S.\nkind: flow_template\nincludes: [pdf/forms]\n\
             tools: [add]\nparameters:\n  type: object\n  properties:\n    t: {type: string}\n\
             steps:\n  - tool: echo\n    arguments: {text: \"{t}\"}\n---\nb\n",
            &[],
        )
    }
}
