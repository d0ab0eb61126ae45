//! `SKILL.md` parsing: YAML front matter (Agent Skills keys and roster's keys) and the body.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::model::{Skill, SkillKind, Step};
use crate::flow::{FlowError, FlowTemplate, FlowTemplates};

/// Agent Skills limits on front matter values.
const NAME_MAX: usize = 64;
const DESCRIPTION_MAX: usize = 1024;
const COMPATIBILITY_MAX: usize = 500;

/// The text of one skill directory's `SKILL.md`, with the directory's path under the skills
/// root. Reading files is the caller's job; this crate does no I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillSource {
    /// The directory path under the skills root, segments joined by `/` (`ns/skill-a`).
    pub dir: String,
    /// The full text of `SKILL.md`.
    pub text: String,
}

impl SkillSource {
    /// A source from a directory path under the skills root and the text of its `SKILL.md`.
    pub fn new(dir: impl Into<String>, text: impl Into<String>) -> Self {
        SkillSource {
            dir: dir.into(),
            text: text.into(),
        }
    }
}

/// Why one `SKILL.md` could not be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SkillFileError {
    /// The file has no `---` delimited front matter block at its start.
    #[error("SKILL.md must start with YAML front matter between two `---` lines")]
    NoFrontMatter,
    /// The front matter is not YAML of the expected shape.
    #[error("front matter is not valid: {0}")]
    Yaml(String),
    /// The directory path cannot be turned into a skill id.
    #[error("directory path {dir:?} cannot name a skill: {why}")]
    InvalidPath {
        /// The directory path under the skills root.
        dir: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// `name` is absent.
    #[error("`name` is required and must equal the directory name {dir:?}")]
    MissingName {
        /// The directory name the name must equal.
        dir: String,
    },
    /// `name` breaks the Agent Skills naming rules.
    #[error("`name` {name:?} is not a valid skill name: {why}")]
    InvalidName {
        /// The name as written.
        name: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// `name` differs from the directory name.
    #[error(
        "`name` is {name:?} but the directory is {dir:?}; the Agent Skills spec requires them to be equal"
    )]
    NameMismatch {
        /// The name as written.
        name: String,
        /// The directory name.
        dir: String,
    },
    /// `description` is absent or blank.
    #[error("`description` is required and must not be empty")]
    MissingDescription,
    /// A value is longer than the Agent Skills spec allows.
    #[error("`{key}` is {len} characters long; the limit is {max}")]
    TooLong {
        /// The front matter key.
        key: &'static str,
        /// Its length in characters.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A flow-template key on a knowledge skill.
    #[error("`{key}` is only allowed with `kind: flow_template`")]
    NotAFlowTemplate {
        /// The key found.
        key: &'static str,
    },
    /// A flow template without steps.
    #[error("a flow_template needs at least one entry under `steps`")]
    NoSteps,
    /// A list entry (tag, include, tool, subscription) is blank.
    #[error("`{key}` has an empty entry")]
    EmptyEntry {
        /// The front matter key.
        key: &'static str,
    },
    /// The flow template's parameters or steps are not usable.
    #[error(transparent)]
    Flow(#[from] FlowError),
    /// Two sources produce the same id.
    #[error("another skill already has the id {id:?}")]
    DuplicateId {
        /// The id.
        id: String,
    },
}

/// A `SKILL.md` that was not loaded, with its directory and the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{dir}/SKILL.md: {error}")]
pub struct InvalidSkill {
    /// The directory path under the skills root.
    pub dir: String,
    /// Why it was skipped.
    pub error: SkillFileError,
}

/// What [`load`] made of a set of sources: the skills that loaded, their compiled flow
/// templates, and every source that did not load.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Skills that parsed and validated, in source order.
    pub skills: Vec<Skill>,
    /// The compiled flow templates of the `flow_template` skills among them.
    pub flows: FlowTemplates,
    /// Sources that were skipped, each with its reason.
    pub invalid: Vec<InvalidSkill>,
}

/// Parses and validates every source; a broken one is reported in
/// [`LoadReport::invalid`] and the others still load.
pub fn load(sources: impl IntoIterator<Item = SkillSource>) -> LoadReport {
    load_adjusted(sources, |_| {})
}

/// [`load`], with `adjust` given each skill once it parsed, before its flow template is
/// compiled: where a caller maps what a skill says to what it serves (a synced skill's
/// includes, tool references and visibility).
pub fn load_adjusted(
    sources: impl IntoIterator<Item = SkillSource>,
    mut adjust: impl FnMut(&mut Skill),
) -> LoadReport {
    let mut report = LoadReport::default();
    let mut ids = BTreeSet::new();
    for source in sources {
        let loaded = parse_skill(&source.dir, &source.text).and_then(|mut skill| {
            adjust(&mut skill);
            if ids.contains(&skill.id) {
                return Err(SkillFileError::DuplicateId { id: skill.id });
            }
            let flow = match skill.kind {
                SkillKind::FlowTemplate => Some(FlowTemplate::compile(&skill)?),
                SkillKind::Knowledge => None,
            };
            Ok((skill, flow))
        });
        match loaded {
            Ok((skill, flow)) => {
                ids.insert(skill.id.clone());
                if let Some(flow) = flow {
                    report.flows.insert(skill.id.clone(), flow);
                }
                report.skills.push(skill);
            }
            Err(error) => report.invalid.push(InvalidSkill {
                dir: source.dir,
                error,
            }),
        }
    }
    report
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
    #[serde(default)]
    metadata: Map<String, Value>,
    allowed_tools: Option<AllowedTools>,
    kind: Option<SkillKind>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    includes: Vec<String>,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    visibility: Vec<String>,
    parameters: Option<Value>,
    steps: Option<Vec<Step>>,
}

/// The spec writes `allowed-tools` space-delimited; a YAML list is accepted too.
#[derive(Deserialize)]
#[serde(untagged)]
enum AllowedTools {
    Text(String),
    List(Vec<String>),
}

/// The front matter of a `SKILL.md`, every key as written: what a host compares, field by
/// field, with the front matter a server's skill entry gave (SEP-2640).
pub fn front_matter(text: &str) -> Result<Map<String, Value>, SkillFileError> {
    let (yaml, _) = split_front_matter(text).ok_or(SkillFileError::NoFrontMatter)?;
    serde_saphyr::from_str(yaml).map_err(|e| SkillFileError::Yaml(e.to_string()))
}

/// Parses one `SKILL.md`. `dir` is its directory path under the skills root, `/`-separated;
/// the skill's id is that path and its `name` must equal the last segment.
///
/// This checks the file alone: a flow template's placeholders are checked by
/// [`FlowTemplate::compile`], which [`load`] runs too.
pub fn parse_skill(dir: &str, text: &str) -> Result<Skill, SkillFileError> {
    let dir_name = check_dir(dir)?;
    let (yaml, body) = split_front_matter(text).ok_or(SkillFileError::NoFrontMatter)?;
    let front: FrontMatter = if yaml.trim().is_empty() {
        return Err(SkillFileError::MissingName {
            dir: dir_name.to_owned(),
        });
    } else {
        serde_saphyr::from_str(yaml).map_err(|e| SkillFileError::Yaml(e.to_string()))?
    };

    let name = front.name.ok_or_else(|| SkillFileError::MissingName {
        dir: dir_name.to_owned(),
    })?;
    check_name(&name)?;
    if name != dir_name {
        return Err(SkillFileError::NameMismatch {
            name,
            dir: dir_name.to_owned(),
        });
    }
    let description = front.description.unwrap_or_default().trim().to_owned();
    if description.is_empty() {
        return Err(SkillFileError::MissingDescription);
    }
    check_len("description", &description, DESCRIPTION_MAX)?;
    if let Some(compatibility) = &front.compatibility {
        check_len("compatibility", compatibility, COMPATIBILITY_MAX)?;
    }
    for (key, entries) in [
        ("tags", &front.tags),
        ("includes", &front.includes),
        ("tools", &front.tools),
        ("visibility", &front.visibility),
    ] {
        if entries.iter().any(|e| e.trim().is_empty()) {
            return Err(SkillFileError::EmptyEntry { key });
        }
    }

    let kind = front.kind.unwrap_or(SkillKind::Knowledge);
    let steps = match (kind, front.steps) {
        (SkillKind::Knowledge, Some(_)) => {
            return Err(SkillFileError::NotAFlowTemplate { key: "steps" });
        }
        (SkillKind::Knowledge, None) => Vec::new(),
        (SkillKind::FlowTemplate, Some(steps)) if !steps.is_empty() => steps,
        (SkillKind::FlowTemplate, _) => return Err(SkillFileError::NoSteps),
    };
    if kind == SkillKind::Knowledge && front.parameters.is_some() {
        return Err(SkillFileError::NotAFlowTemplate { key: "parameters" });
    }
    if steps.iter().any(|s| s.tool.trim().is_empty()) {
        return Err(SkillFileError::EmptyEntry {
            key: "steps[].tool",
        });
    }

    let allowed_tools = match front.allowed_tools {
        None => Vec::new(),
        Some(AllowedTools::Text(text)) => text.split_whitespace().map(str::to_owned).collect(),
        Some(AllowedTools::List(list)) => list,
    };

    Ok(Skill {
        id: dir.to_owned(),
        name,
        description,
        kind,
        tags: front.tags,
        includes: front.includes,
        tools: front.tools,
        visibility: front.visibility,
        parameters: front.parameters,
        steps,
        content: body.trim_start_matches(['\r', '\n']).to_owned(),
        license: front.license,
        compatibility: front.compatibility,
        metadata: front.metadata,
        allowed_tools,
    })
}

/// Splits `---\n<yaml>\n---\n<body>`; `None` when the file does not open with front matter.
fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---")?;
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

fn check_dir(dir: &str) -> Result<&str, SkillFileError> {
    let invalid = |why| SkillFileError::InvalidPath {
        dir: dir.to_owned(),
        why,
    };
    if dir.is_empty() {
        return Err(invalid(
            "SKILL.md must sit in a directory under the skills root",
        ));
    }
    let mut segments = dir.split('/').peekable();
    while let Some(segment) = segments.next() {
        if segments.peek().is_none() {
            return Ok(segment);
        }
        if segment.is_empty() || segment.starts_with('.') {
            return Err(invalid("a namespace segment is empty or starts with `.`"));
        }
        if !segment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(invalid(
                "namespace segments may hold only ASCII letters, digits, `-`, `_` and `.`",
            ));
        }
    }
    Err(invalid("empty path"))
}

/// The Agent Skills name rules.
fn check_name(name: &str) -> Result<(), SkillFileError> {
    let invalid = |why| SkillFileError::InvalidName {
        name: name.to_owned(),
        why,
    };
    if name.is_empty() {
        return Err(invalid("it is empty"));
    }
    if name.chars().count() > NAME_MAX {
        return Err(invalid("it is longer than 64 characters"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(invalid(
            "only lowercase letters, digits and `-` are allowed",
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(invalid("it must not start or end with `-`"));
    }
    if name.contains("--") {
        return Err(invalid("it must not contain `--`"));
    }
    Ok(())
}

fn check_len(key: &'static str, value: &str, max: usize) -> Result<(), SkillFileError> {
    let len = value.chars().count();
    if len > max {
        Err(SkillFileError::TooLong { key, len, max })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: &str = "---\nname: pdf-tools\ndescription: Extract text from PDF files.\nlicense: MIT\nmetadata:\n  author: someone\n  version: \"1.0\"\nallowed-tools: Bash(pdftotext:*) Read\n---\n\n# PDF tools\n\nUse pdftotext.\n";

    #[test]
    fn a_plain_agent_skill_loads_as_knowledge() {
        let skill = parse_skill("docs/pdf-tools", PLAIN).expect("plain skill parses");
        assert_eq!(skill.id, "docs/pdf-tools");
        assert_eq!(skill.name, "pdf-tools");
        assert_eq!(skill.kind, SkillKind::Knowledge);
        assert_eq!(skill.content, "# PDF tools\n\nUse pdftotext.\n");
        assert_eq!(skill.license.as_deref(), Some("MIT"));
        assert_eq!(skill.metadata.get("author"), Some(&Value::from("someone")));
        assert_eq!(skill.allowed_tools, vec!["Bash(pdftotext:*)", "Read"]);
        assert!(skill.tags.is_empty() && skill.tools.is_empty() && skill.visibility.is_empty());
    }

    #[test]
    fn roster_keys_are_read() {
        let text = "---\nname: b\ndescription: d\nkind: flow_template\ntags: [x, y]\nincludes: [ns/a]\ntools: [s__t]\nvisibility: [pro]\nparameters:\n  type: object\n  properties:\n    n: {type: integer}\nsteps:\n  - tool: s__u\n    arguments: {count: \"{n}\", nested: {list: [1, \"{n}\"]}}\n---\nbody";
        let skill = parse_skill("ns/b", text).expect("parses");
        assert_eq!(skill.kind, SkillKind::FlowTemplate);
        assert_eq!(skill.tags, vec!["x", "y"]);
        assert_eq!(skill.includes, vec!["ns/a"]);
        assert_eq!(skill.visibility, vec!["pro"]);
        assert_eq!(skill.steps[0].tool, "s__u");
        assert_eq!(
            skill.steps[0].arguments["nested"]["list"][0],
            Value::from(1)
        );
        assert_eq!(skill.own_tool_references(), vec!["s__t", "s__u"]);
    }

    #[test]
    fn crlf_files_parse() {
        let text = "---\r\nname: a\r\ndescription: d\r\n---\r\nbody\r\n";
        assert_eq!(
            parse_skill("a", text).expect("crlf parses").content,
            "body\r\n"
        );
    }

    #[test]
    fn name_must_equal_the_directory_name() {
        let text = "---\nname: other\ndescription: d\n---\n";
        assert_eq!(
            parse_skill("ns/skill-a", text),
            Err(SkillFileError::NameMismatch {
                name: "other".into(),
                dir: "skill-a".into()
            })
        );
    }

    #[test]
    fn broken_files_say_why() {
        let cases = [
            ("no front matter", "", "must start with YAML front matter"),
            (
                "---\nname: a\ndescription: d\n",
                "a",
                "must start with YAML front matter",
            ),
            (
                "---\nname: [unclosed\n---\n",
                "a",
                "front matter is not valid",
            ),
            ("---\ndescription: d\n---\n", "a", "`name` is required"),
            (
                "---\nname: Bad_Name\ndescription: d\n---\n",
                "Bad_Name",
                "only lowercase",
            ),
            (
                "---\nname: a--b\ndescription: d\n---\n",
                "a--b",
                "must not contain `--`",
            ),
            ("---\nname: a\n---\n", "a", "`description` is required"),
            (
                "---\nname: a\ndescription: d\nsteps: [{tool: x}]\n---\n",
                "a",
                "only allowed with `kind: flow_template`",
            ),
            (
                "---\nname: a\ndescription: d\nkind: flow_template\n---\n",
                "a",
                "needs at least one entry",
            ),
            (
                "---\nname: a\ndescription: d\nkind: recipe\n---\n",
                "a",
                "front matter is not valid",
            ),
            (
                "---\nname: a\ndescription: d\ntags: [\"\"]\n---\n",
                "a",
                "`tags` has an empty entry",
            ),
        ];
        for (text, dir, expected) in cases {
            let dir = if dir.is_empty() { "a" } else { dir };
            let error = parse_skill(dir, text)
                .expect_err("must be rejected")
                .to_string();
            assert!(
                error.contains(expected),
                "{text:?}: {error:?} lacks {expected:?}"
            );
        }
    }

    #[test]
    fn load_reports_broken_sources_and_keeps_the_rest() {
        let report = load([
            SkillSource::new("ok", "---\nname: ok\ndescription: fine\n---\n"),
            SkillSource::new("ns/broken", "---\nname: nope\ndescription: d\n---\n"),
            SkillSource::new("ok2", "---\nname: ok2\ndescription: fine\n---\n"),
        ]);
        let ids: Vec<_> = report.skills.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, vec!["ok", "ok2"]);
        assert_eq!(report.invalid.len(), 1);
        assert_eq!(report.invalid[0].dir, "ns/broken");
        assert!(
            report.invalid[0]
                .to_string()
                .starts_with("ns/broken/SKILL.md: `name` is \"nope\"")
        );
    }

    #[test]
    fn a_flow_template_with_an_unknown_placeholder_does_not_load() {
        let report = load([SkillSource::new(
            "f",
            "---\nname: f\ndescription: d\nkind: flow_template\nparameters: {type: object, properties: {a: {type: string}}}\nsteps:\n  - tool: s__t\n    arguments: {x: \"{b}\"}\n---\n",
        )]);
        assert!(report.skills.is_empty());
        assert!(
            report.invalid[0].to_string().contains("{b}"),
            "{}",
            report.invalid[0]
        );
    }
}
