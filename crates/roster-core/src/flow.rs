//! Flow templates: parameter validation (JSON Schema 2020-12) and `{param}` substitution.
//!
//! A template is compiled once when its skill loads: the `parameters` schema becomes a cached
//! validator, and every string in the steps' arguments is split into literal text and
//! placeholders, so a placeholder naming no parameter is a load-time error and resolving is a
//! walk over a prepared tree. Nothing here runs a step: roster hands the resolved steps back.
//!
//! Substitution rules:
//! - `{name}` is replaced by parameter `name`; when it is the whole string the parameter's JSON
//!   value is used as is (a number stays a number), inside longer text its text form is spliced.
//! - `{{` and `}}` stand for literal braces; any other lone brace is a load-time error.
//! - A whole-string placeholder of an optional parameter given no value and no default drops its
//!   key (or array element); inside longer text such a parameter is an error.
//! - Object keys are taken literally.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::skills::{Skill, SkillError};

/// Why a flow template's `parameters` or `steps` cannot be used; found when the skill loads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// `parameters` is not a JSON Schema object.
    #[error("`parameters` must be a JSON Schema object (`type: object` with `properties`)")]
    ParametersNotAnObject,
    /// The `parameters` schema does not compile (remote `$ref`s are not fetched).
    #[error("`parameters` is not a usable JSON Schema 2020-12 (remote $ref is not fetched): {0}")]
    InvalidSchema(String),
    /// A placeholder names no declared parameter.
    #[error(
        "step {step} ({tool}) uses placeholder {{{name}}}, which is not declared under `parameters.properties`; declare it, or write {{{{ and }}}} for literal braces"
    )]
    UnknownPlaceholder {
        /// 1-based step number.
        step: usize,
        /// The step's tool.
        tool: String,
        /// The placeholder's name.
        name: String,
    },
    /// A brace that is neither a placeholder nor an escape.
    #[error(
        "step {step} ({tool}): {text:?} has an unmatched or malformed brace; placeholders are {{name}} (letters, digits, `_`, `-`), literal braces are {{{{ and }}}}"
    )]
    MalformedPlaceholder {
        /// 1-based step number.
        step: usize,
        /// The step's tool.
        tool: String,
        /// The string holding the brace.
        text: String,
    },
}

/// One step with its placeholders substituted, ready for the caller to run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedStep {
    /// The exposed name of the tool to call.
    pub tool: String,
    /// The call's arguments.
    pub arguments: Map<String, Value>,
    /// What the step is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Param(String),
}

/// A prepared argument value.
#[derive(Debug, Clone)]
enum Node {
    /// Holds no placeholder (escapes already applied).
    Literal(Value),
    /// The whole string is one placeholder.
    Whole(String),
    /// Text with placeholders spliced in.
    Text(Vec<Piece>),
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
}

#[derive(Debug, Clone)]
struct StepTemplate {
    tool: String,
    arguments: Vec<(String, Node)>,
    description: Option<String>,
}

/// A compiled flow template: its cached parameter validator and prepared steps.
#[derive(Debug, Clone)]
pub struct FlowTemplate {
    id: String,
    schema: Value,
    validator: jsonschema::Validator,
    steps: Vec<StepTemplate>,
}

impl FlowTemplate {
    /// Compiles a flow template skill's `parameters` and `steps`.
    pub fn compile(skill: &Skill) -> Result<Self, FlowError> {
        let schema = skill
            .parameters
            .clone()
            .unwrap_or_else(|| serde_json::json!({"type": "object"}));
        if !schema.is_object() {
            return Err(FlowError::ParametersNotAnObject);
        }
        let declared: BTreeSet<&str> = match schema.get("properties") {
            None => BTreeSet::new(),
            Some(Value::Object(properties)) => properties.keys().map(String::as_str).collect(),
            Some(_) => return Err(FlowError::ParametersNotAnObject),
        };
        let validator = jsonschema::draft202012::options()
            .build(&schema)
            .map_err(|e| FlowError::InvalidSchema(e.to_string()))?;
        let mut steps = Vec::with_capacity(skill.steps.len());
        for (at, step) in skill.steps.iter().enumerate() {
            let context = StepContext {
                step: at + 1,
                tool: &step.tool,
                declared: &declared,
            };
            let arguments = step
                .arguments
                .iter()
                .map(|(key, value)| Ok((key.clone(), context.node(value)?)))
                .collect::<Result<_, FlowError>>()?;
            steps.push(StepTemplate {
                tool: step.tool.clone(),
                arguments,
                description: step.description.clone(),
            });
        }
        Ok(FlowTemplate {
            id: skill.id.clone(),
            schema,
            validator,
            steps,
        })
    }

    /// Validates `params` (a JSON object; `null` counts as `{}`) against the schema after
    /// applying its `default`s, then returns every step with its placeholders substituted.
    /// Either every step resolves or none is returned.
    pub fn resolve(&self, params: &Value) -> Result<Vec<ResolvedStep>, SkillError> {
        let mut params = match params {
            Value::Null => Value::Object(Map::new()),
            Value::Object(_) => params.clone(),
            _ => {
                return Err(SkillError::InvalidParameters {
                    id: self.id.clone(),
                    problems: vec!["parameters must be a JSON object".into()],
                });
            }
        };
        apply_defaults(&self.schema, &mut params);
        let Value::Object(given) = &params else {
            unreachable!("params was made an object above")
        };

        let missing: Vec<String> = match self.schema.get("required") {
            Some(Value::Array(required)) => required
                .iter()
                .filter_map(Value::as_str)
                .filter(|name| !given.contains_key(*name))
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        if !missing.is_empty() {
            return Err(SkillError::MissingParameters {
                id: self.id.clone(),
                names: missing,
            });
        }
        let problems: Vec<String> = self
            .validator
            .iter_errors(&params)
            .map(|error| {
                let at = error.instance_path().to_string();
                if at.is_empty() {
                    error.to_string()
                } else {
                    format!("{at}: {error}")
                }
            })
            .collect();
        if !problems.is_empty() {
            return Err(SkillError::InvalidParameters {
                id: self.id.clone(),
                problems,
            });
        }

        let mut unset = BTreeSet::new();
        let steps: Vec<ResolvedStep> = self
            .steps
            .iter()
            .map(|step| ResolvedStep {
                tool: step.tool.clone(),
                arguments: substitute_object(&step.arguments, given, &mut unset),
                description: step.description.clone(),
            })
            .collect();
        if !unset.is_empty() {
            return Err(SkillError::UnsetParameters {
                id: self.id.clone(),
                names: unset.into_iter().collect(),
            });
        }
        Ok(steps)
    }
}

/// The compiled flow templates of a catalog, by skill id.
#[derive(Debug, Clone, Default)]
pub struct FlowTemplates {
    by_id: HashMap<String, FlowTemplate>,
}

impl FlowTemplates {
    /// Adds (or replaces) the compiled template of skill `id`.
    pub fn insert(&mut self, id: String, template: FlowTemplate) {
        self.by_id.insert(id, template);
    }

    /// The compiled template of skill `id`.
    pub fn get(&self, id: &str) -> Option<&FlowTemplate> {
        self.by_id.get(id)
    }

    /// How many templates there are.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Resolves skill `skill_id`'s steps with `params` (see [`FlowTemplate::resolve`]). An id
    /// with no template is [`SkillError::SkillNotFound`].
    pub fn resolve(&self, skill_id: &str, params: &Value) -> Result<Vec<ResolvedStep>, SkillError> {
        self.get(skill_id)
            .ok_or_else(|| SkillError::SkillNotFound {
                id: skill_id.to_owned(),
            })?
            .resolve(params)
    }
}

struct StepContext<'a> {
    step: usize,
    tool: &'a str,
    declared: &'a BTreeSet<&'a str>,
}

impl StepContext<'_> {
    fn node(&self, value: &Value) -> Result<Node, FlowError> {
        Ok(match value {
            Value::String(text) => {
                let pieces = parse_pieces(text).ok_or_else(|| FlowError::MalformedPlaceholder {
                    step: self.step,
                    tool: self.tool.to_owned(),
                    text: text.clone(),
                })?;
                for piece in &pieces {
                    if let Piece::Param(name) = piece
                        && !self.declared.contains(name.as_str())
                    {
                        return Err(FlowError::UnknownPlaceholder {
                            step: self.step,
                            tool: self.tool.to_owned(),
                            name: name.clone(),
                        });
                    }
                }
                match pieces.as_slice() {
                    [] => Node::Literal(Value::String(String::new())),
                    [Piece::Param(name)] => Node::Whole(name.clone()),
                    [Piece::Text(text)] => Node::Literal(Value::String(text.clone())),
                    _ => Node::Text(pieces),
                }
            }
            Value::Object(map) => {
                let children: Vec<(String, Node)> = map
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.node(v)?)))
                    .collect::<Result<_, FlowError>>()?;
                if children.iter().all(|(_, n)| matches!(n, Node::Literal(_))) {
                    Node::Literal(Value::Object(
                        children.into_iter().map(|(k, n)| (k, literal(n))).collect(),
                    ))
                } else {
                    Node::Object(children)
                }
            }
            Value::Array(items) => {
                let children: Vec<Node> = items
                    .iter()
                    .map(|v| self.node(v))
                    .collect::<Result<_, FlowError>>()?;
                if children.iter().all(|n| matches!(n, Node::Literal(_))) {
                    Node::Literal(Value::Array(children.into_iter().map(literal).collect()))
                } else {
                    Node::Array(children)
                }
            }
            other => Node::Literal(other.clone()),
        })
    }
}

fn literal(node: Node) -> Value {
    match node {
        Node::Literal(value) => value,
        _ => Value::Null,
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Splits a string into literal text and placeholders; `None` on a malformed brace.
fn parse_pieces(text: &str) -> Option<Vec<Piece>> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|&(_, c)| c) == Some('{') => {
                chars.next();
                literal.push('{');
            }
            '}' if chars.peek().map(|&(_, c)| c) == Some('}') => {
                chars.next();
                literal.push('}');
            }
            '{' => {
                let rest = &text[at + 1..];
                let end = rest.find('}')?;
                let name = &rest[..end];
                if name.is_empty() || !name.chars().all(is_name_char) {
                    return None;
                }
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Param(name.to_owned()));
                for _ in 0..=name.chars().count() {
                    chars.next();
                }
            }
            '}' => return None,
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Text(literal));
    }
    Some(pieces)
}

/// Fills in schema `default`s for absent properties, descending into given objects.
fn apply_defaults(schema: &Value, instance: &mut Value) {
    let (Some(Value::Object(properties)), Value::Object(map)) =
        (schema.get("properties"), instance)
    else {
        return;
    };
    for (name, property) in properties {
        match map.get_mut(name) {
            Some(value) => apply_defaults(property, value),
            None => {
                if let Some(default) = property.get("default") {
                    map.insert(name.clone(), default.clone());
                }
            }
        }
    }
}

fn substitute_object(
    entries: &[(String, Node)],
    params: &Map<String, Value>,
    unset: &mut BTreeSet<String>,
) -> Map<String, Value> {
    entries
        .iter()
        .filter_map(|(key, node)| substitute(node, params, unset).map(|value| (key.clone(), value)))
        .collect()
}

/// The node's value; `None` when it is a whole-string placeholder with no value (dropped).
fn substitute(
    node: &Node,
    params: &Map<String, Value>,
    unset: &mut BTreeSet<String>,
) -> Option<Value> {
    match node {
        Node::Literal(value) => Some(value.clone()),
        Node::Whole(name) => params.get(name).cloned(),
        Node::Text(pieces) => {
            let mut out = String::new();
            for piece in pieces {
                match piece {
                    Piece::Text(text) => out.push_str(text),
                    Piece::Param(name) => match params.get(name) {
                        Some(Value::String(text)) => out.push_str(text),
                        Some(other) => out.push_str(&other.to_string()),
                        None => {
                            unset.insert(name.clone());
                        }
                    },
                }
            }
            Some(Value::String(out))
        }
        Node::Object(entries) => Some(Value::Object(substitute_object(entries, params, unset))),
        Node::Array(items) => Some(Value::Array(
            items
                .iter()
                .filter_map(|n| substitute(n, params, unset))
                .collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::skills::parse_skill;

    fn flow(parameters: Value, steps: Value) -> Result<FlowTemplate, FlowError> {
        let front = json!({
            "name": "f", "description": "d", "kind": "flow_template",
            "parameters": parameters, "steps": steps,
        });
        // JSON is YAML, so the front matter can be written as JSON.
        let skill =
            parse_skill("ns/f", &format!("---\n{front}\n---\n")).expect("test skill parses");
        FlowTemplate::compile(&skill)
    }

    fn notes() -> FlowTemplate {
        flow(
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "minLength": 1},
                    "body": {"type": "string", "default": "(empty)"},
                    "count": {"type": "integer", "minimum": 0},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "opts": {"type": "object", "properties": {"loud": {"type": "boolean", "default": false}}},
                },
                "required": ["title", "count"],
            }),
            json!([
                {"tool": "demo__notes_write", "arguments": {
                    "title": "{title}", "body": "{body} ({count} words)",
                    "meta": {"count": "{count}", "tags": "{tags}", "list": ["{count}", "x{{y}}", "{tags}"], "opts": "{opts}"},
                }},
                {"tool": "demo__notes_read", "arguments": {"title": "{title}", "raw": "{{title}}", "n": 3}},
            ]),
        )
        .expect("notes template compiles")
    }

    #[test]
    fn placeholders_are_substituted_in_nested_arguments_keeping_types() {
        let steps = notes()
            .resolve(&json!({"title": "t", "count": 7, "tags": ["a"], "opts": {}}))
            .expect("valid");
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].tool, "demo__notes_write");
        assert_eq!(
            Value::Object(steps[0].arguments.clone()),
            json!({
                "title": "t", "body": "(empty) (7 words)",
                "meta": {"count": 7, "tags": ["a"], "list": [7, "x{y}", ["a"]], "opts": {"loud": false}},
            })
        );
        assert_eq!(
            Value::Object(steps[1].arguments.clone()),
            json!({"title": "t", "raw": "{title}", "n": 3})
        );
    }

    #[test]
    fn an_optional_parameter_without_value_drops_its_whole_string_use() {
        let steps = notes()
            .resolve(&json!({"title": "t", "count": 1}))
            .expect("valid");
        let meta = &steps[0].arguments["meta"];
        assert_eq!(meta.get("tags"), None);
        assert_eq!(meta["list"], json!([1, "x{y}"]));
        assert_eq!(meta.get("opts"), None);
    }

    #[test]
    fn every_missing_required_parameter_is_named_once() {
        let error = notes().resolve(&json!({})).expect_err("missing");
        assert_eq!(
            error,
            SkillError::MissingParameters {
                id: "ns/f".into(),
                names: vec!["title".into(), "count".into()]
            }
        );
        assert_eq!(
            error.to_string(),
            "skill \"ns/f\": missing required parameter(s): title, count"
        );
        assert!(matches!(
            notes().resolve(&Value::Null),
            Err(SkillError::MissingParameters { .. })
        ));
    }

    #[test]
    fn invalid_parameters_are_rejected_with_their_location() {
        let error = notes()
            .resolve(&json!({"title": "", "count": "seven"}))
            .expect_err("invalid");
        let SkillError::InvalidParameters { problems, .. } = &error else {
            panic!("{error:?}")
        };
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("/count:") && p.contains("integer")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.starts_with("/title:")),
            "{problems:?}"
        );
        assert!(matches!(
            notes().resolve(&json!([1])),
            Err(SkillError::InvalidParameters { .. })
        ));
    }

    #[test]
    fn defaults_satisfy_required_parameters() {
        let template = flow(
            json!({"type": "object", "properties": {"n": {"type": "number", "default": 2.5}}, "required": ["n"]}),
            json!([{"tool": "demo__add", "arguments": {"a": "{n}", "b": 1}}]),
        )
        .expect("compiles");
        let steps = template.resolve(&json!({})).expect("default fills n");
        assert_eq!(steps[0].arguments["a"], json!(2.5));
        assert_eq!(
            template.resolve(&json!({"n": 4})).expect("given")[0].arguments["a"],
            json!(4)
        );
    }

    #[test]
    fn a_parameter_used_in_text_needs_a_value() {
        let template = flow(
            json!({"type": "object", "properties": {"who": {"type": "string"}, "x": {"type": "string"}}}),
            json!([{"tool": "demo__echo", "arguments": {"text": "hi {who} and {x}"}}]),
        )
        .expect("compiles");
        let error = template.resolve(&json!({})).expect_err("unset");
        assert_eq!(
            error.to_string(),
            "skill \"ns/f\": parameter(s) used inside text need a value (none given, no default): who, x"
        );
    }

    #[test]
    fn an_unknown_placeholder_is_a_load_time_error() {
        let error = flow(
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            json!([{"tool": "demo__echo", "arguments": {"text": "{a}"}}, {"tool": "demo__echo", "arguments": {"deep": ["{b}"]}}]),
        )
        .expect_err("unknown placeholder");
        assert_eq!(
            error,
            FlowError::UnknownPlaceholder {
                step: 2,
                tool: "demo__echo".into(),
                name: "b".into()
            }
        );
    }

    #[test]
    fn malformed_braces_are_load_time_errors() {
        for text in ["{", "}", "a { b", "{}", "{a b}", "x}y", "{a"] {
            let error = flow(
                json!({"type": "object", "properties": {"a": {"type": "string"}}}),
                json!([{"tool": "demo__echo", "arguments": {"text": text}}]),
            )
            .expect_err(text);
            assert!(
                matches!(error, FlowError::MalformedPlaceholder { .. }),
                "{text}: {error:?}"
            );
        }
    }

    #[test]
    fn a_bad_schema_or_remote_ref_is_a_load_time_error() {
        let bad = flow(json!({"type": 5}), json!([{"tool": "t"}])).expect_err("bad schema");
        assert!(matches!(bad, FlowError::InvalidSchema(_)), "{bad:?}");
        let remote = flow(
            json!({"$ref": "https://example.com/schema.json"}),
            json!([{"tool": "t"}]),
        )
        .expect_err("remote ref is not fetched");
        assert!(matches!(remote, FlowError::InvalidSchema(_)), "{remote:?}");
        let not_object = flow(json!(["x"]), json!([{"tool": "t"}])).expect_err("not an object");
        assert_eq!(not_object, FlowError::ParametersNotAnObject);
    }

    #[test]
    fn escapes_alone_are_literal() {
        assert_eq!(parse_pieces("{{a}}"), Some(vec![Piece::Text("{a}".into())]));
        assert_eq!(
            parse_pieces("é{a}}}"),
            Some(vec![
                Piece::Text("é".into()),
                Piece::Param("a".into()),
                Piece::Text("}".into())
            ])
        );
    }

    fn param_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e9f64..1e9).prop_map(Value::from),
            "[a-z ]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map("[a-z]{1,3}", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// An argument tree using parameters `p0..p{n}`: whole placeholders, text with placeholders
    /// and escapes, and literals, nested in objects and arrays.
    fn argument(n: usize) -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            (0..n).prop_map(|i| Value::from(format!("{{p{i}}}"))),
            ((0..n), "[a-z ]{0,4}")
                .prop_map(|(i, t)| Value::from(format!("{t}{{p{i}}}-{{{{{t}}}}}"))),
            any::<i32>().prop_map(Value::from),
            "[a-z]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Checks `resolved` against `template`: whole placeholders became the parameter's value
    /// (type kept), text placeholders were spliced, and no placeholder survived.
    fn check(template: &Value, resolved: &Value, params: &[Value]) {
        match (template, resolved) {
            (Value::String(t), _)
                if t.starts_with("{p") && t.ends_with('}') && !t.contains('-') =>
            {
                let i: usize = t[2..t.len() - 1].parse().expect("generated index");
                assert_eq!(
                    resolved, &params[i],
                    "whole placeholder keeps the JSON value"
                );
            }
            (Value::String(t), Value::String(r)) => {
                let mut expected = t.replace("{{", "\u{1}").replace("}}", "\u{2}");
                for (i, p) in params.iter().enumerate() {
                    let text = match p {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    expected = expected.replace(&format!("{{p{i}}}"), &text);
                }
                assert_eq!(r, &expected.replace('\u{1}', "{").replace('\u{2}', "}"));
            }
            (Value::Array(t), Value::Array(r)) => {
                assert_eq!(t.len(), r.len());
                t.iter().zip(r).for_each(|(t, r)| check(t, r, params));
            }
            (Value::Object(t), Value::Object(r)) => {
                assert_eq!(t.len(), r.len());
                t.iter().for_each(|(k, t)| check(t, &r[k], params));
            }
            _ => assert_eq!(template, resolved),
        }
    }

    fn has_placeholder(value: &Value, n: usize) -> bool {
        match value {
            Value::String(s) => (0..n).any(|i| s.contains(&format!("{{p{i}}}"))),
            Value::Array(items) => items.iter().any(|v| has_placeholder(v, n)),
            Value::Object(map) => map.values().any(|v| has_placeholder(v, n)),
            _ => false,
        }
    }

    proptest! {
        #[test]
        fn valid_input_leaves_no_placeholder_and_keeps_types(
            (params, args) in prop::collection::vec(param_value(), 1..5)
                .prop_flat_map(|params| { let n = params.len(); (Just(params), prop::collection::btree_map("[a-z]{1,3}", argument(n), 0..5)) })
        ) {
            let properties: Map<String, Value> = (0..params.len()).map(|i| (format!("p{i}"), json!({}))).collect();
            let required: Vec<String> = (0..params.len()).map(|i| format!("p{i}")).collect();
            let args = Value::Object(args.into_iter().collect());
            let template = flow(
                json!({"type": "object", "properties": properties, "required": required}),
                json!([{"tool": "demo__echo", "arguments": args.clone()}]),
            ).expect("generated template compiles");
            let given: Map<String, Value> = params.iter().enumerate().map(|(i, v)| (format!("p{i}"), v.clone())).collect();
            let steps = template.resolve(&Value::Object(given)).expect("valid input resolves");
            let resolved = Value::Object(steps[0].arguments.clone());
            prop_assert!(!has_placeholder(&resolved, params.len()));
            check(&args, &resolved, &params);
        }

        #[test]
        fn missing_input_is_all_or_nothing(n in 1usize..5, given in prop::collection::vec(any::<bool>(), 5)) {
            let properties: Map<String, Value> = (0..n).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
            let required: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
            let args: Map<String, Value> = (0..n).map(|i| (format!("a{i}"), Value::from(format!("{{p{i}}}")))).collect();
            let template = flow(
                json!({"type": "object", "properties": properties, "required": required}),
                json!([{"tool": "demo__add", "arguments": args}]),
            ).expect("compiles");
            let params: Map<String, Value> = (0..n).filter(|&i| given[i]).map(|i| (format!("p{i}"), json!(i))).collect();
            let expected_missing: Vec<String> = (0..n).filter(|&i| !given[i]).map(|i| format!("p{i}")).collect();
            match template.resolve(&Value::Object(params)) {
                Ok(steps) => {
                    prop_assert!(expected_missing.is_empty());
                    for i in 0..n { prop_assert_eq!(&steps[0].arguments[&format!("a{i}")], &json!(i)); }
                }
                Err(SkillError::MissingParameters { names, .. }) => prop_assert_eq!(names, expected_missing),
                Err(other) => prop_assert!(false, "unexpected {other:?}"),
            }
        }
    }
}
