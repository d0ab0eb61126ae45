//! Flow-template substitution: a template whose step arguments hold the fuzzed text, resolved
//! with fuzzed parameters. Never panics; text without braces comes back unchanged; resolving
//! twice gives the same steps.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roster_core::flow::FlowTemplate;
use roster_core::skills::parse_skill;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (template, params) = text.split_once('\u{0}').unwrap_or((&text, ""));
    // JSON text is YAML too: the argument string lands in the step as it is.
    let arg = serde_json::to_string(template).expect("a string encodes");
    let skill_md = format!(
        "---\nname: flow\ndescription: fuzz\nkind: flow_template\nparameters:\n  type: object\n  \
         properties:\n    a: {{}}\n    b: {{}}\n    n: {{type: integer}}\nsteps:\n  - tool: t\n    \
         arguments: {{\"x\": {arg}, \"y\": \"{{a}}\", \"z\": [\"{{b}}\", \"n={{n}}\"]}}\n---\n"
    );
    let Ok(skill) = parse_skill("fuzz/flow", &skill_md) else {
        return;
    };
    let Ok(flow) = FlowTemplate::compile(&skill) else {
        return;
    };
    let params: Value = serde_json::from_str(params)
        .unwrap_or_else(|_| json!({"a": params, "b": [1, "two"], "n": 3}));
    let first = flow.resolve(&params);
    if let Ok(steps) = &first {
        if !template.contains(['{', '}']) {
            assert_eq!(steps[0].arguments["x"], Value::String(template.to_owned()));
        }
    }
    assert_eq!(
        format!("{first:?}"),
        format!("{:?}", flow.resolve(&params)),
        "resolving is deterministic"
    );
});
